// Package reconcile is settlement reconciliation: the PSP's settlement
// report (what it actually paid out, with its fees) matched line by line
// against what paystate holds. The sweeper compares states; this compares
// money.
//
// ReadStripe, ReadMollie, ReadPayPal and ReadGeneric read the settlement
// files (CSV, by a header map, never column positions; a malformed file
// is refused whole, with the line number), Stripe fetches the balance transactions from Stripe's API,
// and Engine.Run matches the lines in one storage transaction:
//
//   - a charge by the payment's provider reference, a refund by the
//     refund's, a dispute by its id; a matched line posts its fee and
//     payout once (finalize.PostSettlement), keyed by the PSP's
//     balance-transaction id, so a report imported twice changes nothing;
//   - amount_mismatch: the PSP settled another amount or currency (or a
//     refund that did not succeed here); listed, nothing posted;
//   - missing_locally: money moved at the PSP for nothing paystate knows:
//     listed and put on the review queue (reason unreconciled) through
//     finalize.QueueReview;
//   - missing_at_psp: a payment of the provider captured here (created)
//     longer ago than SettleWithin that no report has settled: listed.
//
// The run and its unmatched items are stored (pay.ReconRun) and listed by
// GET /v1/reconciliation/runs.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// RunPrefix is the prefix of a reconciliation run's id.
const RunPrefix = "rr_"

// DefaultSettleWithin is reconcile.settle_within's default: a payment
// captured longer ago and in no report is missing_at_psp.
const DefaultSettleWithin = 7 * 24 * time.Hour

// DefaultBatch is how many lines of a report one transaction matches
// and posts.
const DefaultBatch = 500

// Engine matches settlement reports against a store.
type Engine struct {
	Store store.Store
	// SettleWithin is how long a captured payment may wait for its
	// settlement; 0 means DefaultSettleWithin.
	SettleWithin time.Duration
	// Now is the clock of run ids; default time.Now. The run's time is
	// the transaction's.
	Now func() time.Time
	// Batch is how many lines one transaction matches and posts; 0
	// means DefaultBatch.
	Batch int
	// Progress, when set, is called after each committed transaction
	// with the lines done so far and the report's total.
	Progress func(done, total int)
}

// Lines is a settlement report read line by line: it calls fn with each
// line in order and stops at fn's first error, or at the first fault of
// the report (with its line number). Import reads it twice.
type Lines func(fn func(pay.SettlementLine) error) error

// SliceLines is a report held in memory.
func SliceLines(lines []pay.SettlementLine) Lines {
	return func(fn func(pay.SettlementLine) error) error {
		for _, l := range lines {
			if err := fn(l); err != nil {
				return err
			}
		}
		return nil
	}
}

// ErrInterrupted is Import's error when its context ended between two
// transactions: what was posted stays posted, and importing the report
// again finishes it (its posted lines post nothing).
var ErrInterrupted = errors.New("interrupted")

// Run matches lines of provider's report, read from source (a name for
// the run: "import:stripe:FILE"), stores the run and returns it (Import
// of lines held in memory).
func (e *Engine) Run(ctx context.Context, provider, source string, lines []pay.SettlementLine) (pay.ReconRun, error) {
	return e.Import(ctx, provider, source, SliceLines(lines))
}

// Import matches provider's report lines, read from source, stores the
// run and returns it. It reads the report twice: first whole, to refuse
// a malformed report or one with two lines of one id and other figures
// (CheckLines) before anything is posted; then again, matching and
// posting Batch lines per transaction, so that its memory does not grow
// with the report. A line posts once whatever runs at the same time
// (finalize.PostSettlement claims its id). When ctx ends, Import stops
// between two transactions and returns ErrInterrupted (with ctx's
// cause): the lines of committed transactions stay posted, and no run is
// stored.
func (e *Engine) Import(ctx context.Context, provider, source string, lines Lines) (pay.ReconRun, error) {
	if provider == "" {
		return pay.ReconRun{}, pay.Invalidf("provider", "provider is required")
	}
	now := defaults.Clock(e.Now)
	within := defaults.Or(e.SettleWithin, DefaultSettleWithin)
	size := defaults.Or(e.Batch, DefaultBatch)
	// The check reads the whole report; ctx may end it between lines.
	total, err := CheckLines(func(fn func(pay.SettlementLine) error) error {
		return lines(func(l pay.SettlementLine) error {
			if ctx.Err() != nil {
				return fmt.Errorf("%w while the report was read, before anything was posted: %w", ErrInterrupted, context.Cause(ctx))
			}
			return fn(l)
		})
	})
	if err != nil {
		return pay.ReconRun{}, err
	}
	if e.Progress != nil {
		e.Progress(0, total)
	}
	run := pay.ReconRun{ID: ids.New(RunPrefix, now()), Provider: provider, Source: source}
	m := &matcher{provider: provider, run: &run, notPosted: map[uint64]struct{}{}, seed: maphash.MakeSeed()}
	// The Updates run without ctx's cancellation: the import stops
	// between transactions, never inside one.
	bg := context.WithoutCancel(ctx)
	batch := make([]pay.SettlementLine, 0, size)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w after %d of %d lines (what was posted stays posted; import the report again to finish it): %w",
				ErrInterrupted, run.Lines, total, context.Cause(ctx))
		}
		var res batchResult
		err := finalize.WriteTx(bg, e.Store, func(tx finalize.Tx) error {
			res = batchResult{}
			return m.batch(tx, batch, &res)
		})
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		m.merge(res)
		run.Lines += len(batch)
		batch = batch[:0]
		if e.Progress != nil {
			e.Progress(run.Lines, total)
		}
		return nil
	}
	err = lines(func(l pay.SettlementLine) error {
		batch = append(batch, l)
		if len(batch) < size {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return run, err
	}

	// Payments captured long ago that no report settled, then the run.
	var (
		missing  []pay.ReconItem
		nMissing int
	)
	err = finalize.ReadTx(bg, e.Store, func(tx finalize.Tx) (err error) {
		missing, nMissing, err = m.missingAtPSP(tx, tx.Now().Add(-within), pay.MaxReconItems-len(run.Items))
		return err
	})
	if err != nil {
		return run, fmt.Errorf("reconcile: %w", err)
	}
	run.MissingAtPSP += nMissing
	run.Items = append(run.Items, missing...)
	err = finalize.WriteTx(bg, e.Store, func(tx finalize.Tx) error {
		run.CreatedAt = tx.Now()
		return tx.PutReconRun(run)
	})
	if err != nil {
		return run, fmt.Errorf("reconcile: %w", err)
	}
	return run, nil
}

// matcher is the state of one import between its transactions: the run
// so far and the payments named by lines that posted nothing (hashed:
// missing_at_psp leaves them out; a posted line's payment has a
// settlement).
type matcher struct {
	provider  string
	run       *pay.ReconRun
	notPosted map[uint64]struct{}
	seed      maphash.Seed
}

// batchResult is what one transaction of lines did: merged into the run
// once it committed (a transaction may run more than once).
type batchResult struct {
	matched, posted int
	items           []pay.ReconItem
	notPosted       []string
}

// add counts an unmatched item in the run and keeps it, up to
// pay.MaxReconItems.
func (m *matcher) add(it pay.ReconItem) {
	switch it.Kind {
	case pay.ReconAmountMismatch, pay.ReconChangedSincePosted:
		m.run.Mismatched++
	case pay.ReconMissingLocally:
		m.run.MissingLocally++
	case pay.ReconMissingAtPSP:
		m.run.MissingAtPSP++
	}
	if len(m.run.Items) < pay.MaxReconItems {
		m.run.Items = append(m.run.Items, it)
	}
}

// merge adds a committed batch to the run.
func (m *matcher) merge(res batchResult) {
	m.run.Matched += res.matched
	m.run.Posted += res.posted
	for _, it := range res.items {
		m.add(it)
	}
	for _, id := range res.notPosted {
		m.notPosted[maphash.String(m.seed, id)] = struct{}{}
	}
}

// batch matches lines inside tx: it may run more than once (group
// commit, a retried transaction) and has no effect outside tx and res.
func (m *matcher) batch(tx finalize.Tx, lines []pay.SettlementLine, res *batchResult) error {
	for _, l := range lines {
		if err := m.line(tx, l, res); err != nil {
			return fmt.Errorf("line %d (balance transaction %q): %w", l.Line, l.ID, err)
		}
	}
	return nil
}

// line matches and posts one line.
func (m *matcher) line(tx finalize.Tx, l pay.SettlementLine, res *batchResult) error {
	item := pay.ReconItem{Line: l.Line, LineID: l.ID, ProviderRef: l.ProviderRef, Amount: l.Amount, Currency: l.Currency}
	// Posted before with other figures: whatever it is about now.
	if prev, err := tx.Settlement(m.provider, l.ID); err == nil && prev.Differs(l) {
		return m.changed(tx, prev, l, item, res)
	} else if err != nil && pay.ErrorCode(err) != pay.ENOTFOUND {
		return err
	}
	paymentID, expected, note, found, err := lookup(tx, m.provider, l)
	if err != nil {
		return err
	}
	switch {
	case !found:
		item.Kind, item.Note = pay.ReconMissingLocally, note
		res.items = append(res.items, item)
		return queueReview(tx, pay.ReasonUnreconciled, "unreconciled_", m.provider, l, note)
	case note != "":
		item.Kind, item.PaymentID, item.Expected, item.Note = pay.ReconAmountMismatch, paymentID, expected, note
		res.items = append(res.items, item)
		res.notPosted = append(res.notPosted, paymentID)
		return nil
	}
	out, err := finalize.PostSettlement(tx, m.provider, m.run.ID, paymentID, l)
	switch {
	case err != nil:
		return err
	case out.Changed: // claimed by another import in the meantime
		return m.changed(tx, out.Prev, l, item, res)
	case out.Posted:
		res.posted++
	}
	res.matched++
	return nil
}

// changed lists line l, whose id was posted as prev with other figures,
// and puts it on the review queue with both versions.
func (m *matcher) changed(tx finalize.Tx, prev pay.Settlement, l pay.SettlementLine, item pay.ReconItem, res *batchResult) error {
	item.Kind, item.PaymentID, item.Expected = pay.ReconChangedSincePosted, prev.PaymentID, prev.Amount
	item.Note = fmt.Sprintf("posted by run %s as %s; this report says %s", prev.RunID,
		figures(prev.Kind, prev.ProviderRef, prev.Amount, prev.Fee, prev.Currency, prev.PayoutID),
		figures(l.Kind, l.ProviderRef, l.Amount, l.Fee, l.Currency, l.PayoutID))
	res.items = append(res.items, item)
	if prev.PaymentID != "" {
		res.notPosted = append(res.notPosted, prev.PaymentID)
	}
	return queueReview(tx, pay.ReasonChangedSincePosted, "changed_", m.provider, l, item.Note)
}

// figures writes what a settlement line says, amounts in major units.
func figures(kind pay.SettlementKind, ref string, amount, fee int64, currency, payout string) string {
	if ref == "" {
		ref = "-"
	}
	if payout == "" {
		payout = "none"
	}
	return fmt.Sprintf("%s %s amount %s fee %s net %s payout %s", kind, ref, pay.FormatAmount(amount, currency),
		pay.FormatAmount(fee, currency), pay.FormatAmount(amount-fee, currency), payout)
}

// missingAtPSP lists the provider's payments captured before cutoff
// that no report settled and no line of this run named: their count, and
// the first keep of them.
func (m *matcher) missingAtPSP(tx finalize.Tx, cutoff time.Time, keep int) ([]pay.ReconItem, int, error) {
	var (
		out []pay.ReconItem
		n   int
	)
	for _, st := range []pay.Status{pay.Captured, pay.Refunded} {
		cursor := ""
		for {
			ps, next, err := tx.ListPayments(pay.PaymentFilter{Status: st, CreatedBefore: cutoff, Limit: pay.MaxListLimit, Cursor: cursor})
			if err != nil {
				return nil, 0, fmt.Errorf("list %s payments: %w", st, err)
			}
			for _, p := range ps {
				if p.Provider != m.provider {
					continue
				}
				if _, named := m.notPosted[maphash.String(m.seed, p.ID)]; named {
					continue
				}
				ss, err := tx.SettlementsForPayment(p.ID)
				if err != nil {
					return nil, 0, err
				}
				if len(ss) > 0 {
					continue
				}
				if n++; len(out) < keep {
					out = append(out, pay.ReconItem{Kind: pay.ReconMissingAtPSP, ProviderRef: p.ProviderRef, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency,
						Note: fmt.Sprintf("%s since %s; in no settlement report", p.Status, p.CreatedAt.Format(time.RFC3339))})
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return out, n, nil
}

// chargePayment finds the payment a charge line settles: by its
// PaymentID when the report names it (a payment of provider), else by its
// ProviderRef.
func chargePayment(tx finalize.Tx, provider string, l pay.SettlementLine) (pay.Payment, error) {
	if l.PaymentID == "" {
		return tx.PaymentByRef(provider, l.ProviderRef)
	}
	p, err := tx.Payment(l.PaymentID)
	if err == nil && p.Provider != provider {
		return pay.Payment{}, pay.Errorf(pay.ENOTFOUND, "payment %s is not a payment of %s", l.PaymentID, provider)
	}
	return p, err
}

// lookup finds what line l is about. found is false for a line about
// nothing paystate knows (note says what); a note with found true is an
// amount mismatch, expected the amount paystate holds.
func lookup(tx finalize.Tx, provider string, l pay.SettlementLine) (paymentID string, expected int64, note string, found bool, err error) {
	notFound := func(e error) bool { return pay.ErrorCode(e) == pay.ENOTFOUND }
	switch l.Kind {
	case pay.SettleCharge:
		p, err := chargePayment(tx, provider, l)
		if notFound(err) {
			return "", 0, fmt.Sprintf("%s %s: no payment of %s has this reference", l.Category, l.ProviderRef, provider), false, nil
		} else if err != nil {
			return "", 0, "", false, err
		}
		switch {
		case !strings.EqualFold(p.Currency, l.Currency):
			return p.ID, p.Amount, fmt.Sprintf("settled in %s, payment is in %s", l.Currency, p.Currency), true, nil
		case p.Status != pay.Captured && p.Status != pay.Refunded:
			return p.ID, p.Amount, fmt.Sprintf("settled, payment is %s here", p.Status), true, nil
		case l.Category == "partial_capture_reversal":
			if l.Amount >= 0 || -l.Amount > p.Amount {
				return p.ID, p.Amount, fmt.Sprintf("a capture reversal of %s for a payment of %s", pay.FormatAmount(l.Amount, p.Currency), pay.FormatAmount(p.Amount, p.Currency)), true, nil
			}
		case l.Amount != p.Amount:
			return p.ID, p.Amount, fmt.Sprintf("settled %s, payment is for %s", pay.FormatAmount(l.Amount, p.Currency), pay.FormatAmount(p.Amount, p.Currency)), true, nil
		}
		return p.ID, p.Amount, "", true, nil

	case pay.SettleRefund:
		r, err := tx.RefundByRef(provider, l.ProviderRef)
		if notFound(err) {
			// On standard, the PSP's report may name the refund by the
			// id the bridge was given in data.refund.id: paystate's own.
			if own, oerr := tx.Refund(l.ProviderRef); oerr == nil && own.Provider == provider {
				r, err = own, nil
			} else if oerr != nil && !notFound(oerr) {
				return "", 0, "", false, oerr
			}
		}
		if notFound(err) {
			return "", 0, fmt.Sprintf("%s %s: no refund of %s has this reference", l.Category, l.ProviderRef, provider), false, nil
		} else if err != nil {
			return "", 0, "", false, err
		}
		want, st := -r.Amount, pay.RefundSucceeded
		if l.Category == "refund_failure" {
			want, st = r.Amount, pay.RefundFailed
		}
		switch {
		case !strings.EqualFold(r.Currency, l.Currency):
			return r.PaymentID, want, fmt.Sprintf("settled in %s, refund %s is in %s", l.Currency, r.ID, r.Currency), true, nil
		case r.Status != st:
			return r.PaymentID, want, fmt.Sprintf("%s settled, refund %s is %s here", l.Category, r.ID, r.Status), true, nil
		case l.Amount != want:
			return r.PaymentID, want, fmt.Sprintf("settled %s, refund %s is for %s", pay.FormatAmount(l.Amount, r.Currency), r.ID, pay.FormatAmount(r.Amount, r.Currency)), true, nil
		}
		return r.PaymentID, want, "", true, nil

	case pay.SettleDispute:
		d, err := tx.Dispute(provider, l.ProviderRef)
		if notFound(err) {
			return "", 0, fmt.Sprintf("%s %s: no dispute of %s has this id", l.Category, l.ProviderRef, provider), false, nil
		} else if err != nil {
			return "", 0, "", false, err
		}
		want := -d.Amount
		if l.Amount > 0 { // a reversal: the money came back
			want = d.Amount
		}
		switch {
		case !strings.EqualFold(d.Currency, l.Currency):
			return d.PaymentID, want, fmt.Sprintf("settled in %s, dispute %s is in %s", l.Currency, d.ID, d.Currency), true, nil
		case l.Amount != want:
			return d.PaymentID, want, fmt.Sprintf("settled %s, dispute %s is for %s", pay.FormatAmount(l.Amount, d.Currency), d.ID, pay.FormatAmount(d.Amount, d.Currency)), true, nil
		case l.Amount > 0 && d.Status != pay.DisputeWon:
			return d.PaymentID, want, fmt.Sprintf("reversal settled, dispute %s is %s here", d.ID, d.Status), true, nil
		}
		return d.PaymentID, want, "", true, nil

	case pay.SettleFee, pay.SettlePayout:
		if l.ProviderRef != "" {
			if p, err := tx.PaymentByRef(provider, l.ProviderRef); err == nil {
				return p.ID, 0, "", true, nil
			} else if !notFound(err) {
				return "", 0, "", false, err
			}
		}
		return "", 0, "", true, nil
	}
	return "", 0, fmt.Sprintf("category %q is not reconciled by paystate", l.Category), false, nil
}

// queueReview puts a line on the review queue with reason and note:
// one item per balance transaction (id prefix + provider + line id),
// which a second import of the line replaces.
func queueReview(tx finalize.Tx, reason, prefix, provider string, l pay.SettlementLine, note string) error {
	_, err := finalize.QueueReview(tx, pay.ReviewItem{
		ID: prefix + provider + "_" + l.ID, Reason: reason, Provider: provider, ProviderRef: l.ProviderRef, EventID: l.ID,
		Note: fmt.Sprintf("settlement line %s (%s %s): %s", l.ID, l.Category, pay.FormatAmount(l.Amount, l.Currency), note),
	}, pay.SourceSettlement)
	return err
}
