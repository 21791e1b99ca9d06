// Package reconcile is settlement reconciliation: the PSP's settlement
// report (what it actually paid out, with its fees) matched line by line
// against what paystate holds. The sweeper compares states; this compares
// money.
//
// ReadStripe and ReadGeneric read the two CSV formats (a header map,
// never column positions; a malformed file is refused whole, with the
// line number), Stripe fetches the balance transactions from Stripe's API,
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
	"fmt"
	"strings"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
)

// RunPrefix is the prefix of a reconciliation run's id.
const RunPrefix = "rr_"

// DefaultSettleWithin is reconcile.settle_within's default: a payment
// captured longer ago and in no report is missing_at_psp.
const DefaultSettleWithin = 7 * 24 * time.Hour

// Engine matches settlement reports against a store.
type Engine struct {
	Store pay.Store
	// SettleWithin is how long a captured payment may wait for its
	// settlement; 0 means DefaultSettleWithin.
	SettleWithin time.Duration
	// Now is the clock of run ids; default time.Now. The run's time is
	// the transaction's.
	Now func() time.Time
}

// Run matches lines of provider's report, read from source (a name for
// the run: "import:stripe:FILE"), stores the run and returns it. Nothing
// is written if it fails.
func (e *Engine) Run(ctx context.Context, provider, source string, lines []pay.SettlementLine) (pay.ReconRun, error) {
	if provider == "" {
		return pay.ReconRun{}, pay.Invalidf("provider", "provider is required")
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	within := e.SettleWithin
	if within <= 0 {
		within = DefaultSettleWithin
	}
	id := ids.New(RunPrefix, now())
	var run pay.ReconRun
	err := e.Store.Update(ctx, func(tx pay.Tx) error {
		var err error
		run, err = match(tx, id, provider, source, within, lines)
		return err
	})
	if err != nil {
		return pay.ReconRun{}, fmt.Errorf("reconcile: %w", err)
	}
	return run, nil
}

// match is one run inside tx: it may run more than once (group commit)
// and has no effect outside tx.
func match(tx pay.Tx, id, provider, source string, within time.Duration, lines []pay.SettlementLine) (pay.ReconRun, error) {
	run := pay.ReconRun{ID: id, Provider: provider, Source: source, Lines: len(lines), CreatedAt: tx.Now()}
	add := func(it pay.ReconItem) {
		switch it.Kind {
		case pay.ReconAmountMismatch:
			run.Mismatched++
		case pay.ReconMissingLocally:
			run.MissingLocally++
		case pay.ReconMissingAtPSP:
			run.MissingAtPSP++
		}
		if len(run.Items) < pay.MaxReconItems {
			run.Items = append(run.Items, it)
		}
	}
	seen := map[string]bool{} // payments a line of this report named

	// Each line: find what it is about, compare, post.
	for _, l := range lines {
		item := pay.ReconItem{Line: l.Line, LineID: l.ID, ProviderRef: l.ProviderRef, Amount: l.Amount, Currency: l.Currency}
		paymentID, expected, note, found, err := lookup(tx, provider, l)
		if err != nil {
			return run, fmt.Errorf("line %d (%s): %w", l.Line, l.ID, err)
		}
		if paymentID != "" {
			seen[paymentID] = true
		}
		switch {
		case !found:
			item.Kind, item.Note = pay.ReconMissingLocally, note
			if err := queueUnreconciled(tx, provider, l, note); err != nil {
				return run, err
			}
			add(item)
			continue
		case note != "":
			item.Kind, item.PaymentID, item.Expected, item.Note = pay.ReconAmountMismatch, paymentID, expected, note
			add(item)
			continue
		}
		run.Matched++
		posted, err := finalize.PostSettlement(tx, provider, id, paymentID, l)
		if err != nil {
			return run, fmt.Errorf("line %d (%s): %w", l.Line, l.ID, err)
		}
		if posted {
			run.Posted++
		}
	}

	// Payments captured long ago that no report settled.
	cutoff := tx.Now().Add(-within)
	for _, st := range []pay.Status{pay.Captured, pay.Refunded} {
		cursor := ""
		for {
			ps, next, err := tx.ListPayments(pay.PaymentFilter{Status: st, CreatedBefore: cutoff, Limit: pay.MaxListLimit, Cursor: cursor})
			if err != nil {
				return run, fmt.Errorf("list %s payments: %w", st, err)
			}
			for _, p := range ps {
				if p.Provider != provider || seen[p.ID] {
					continue
				}
				ss, err := tx.SettlementsForPayment(p.ID)
				if err != nil {
					return run, err
				}
				if !hasCharge(ss) {
					add(pay.ReconItem{Kind: pay.ReconMissingAtPSP, ProviderRef: p.ProviderRef, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency,
						Note: fmt.Sprintf("%s since %s; in no settlement report", p.Status, p.CreatedAt.Format(time.RFC3339))})
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return run, tx.PutReconRun(run)
}

// hasCharge reports whether a payment's settlements include its charge.
func hasCharge(ss []pay.Settlement) bool {
	for _, s := range ss {
		if s.Kind == pay.SettleCharge {
			return true
		}
	}
	return false
}

// lookup finds what line l is about. found is false for a line about
// nothing paystate knows (note says what); a note with found true is an
// amount mismatch, expected the amount paystate holds.
func lookup(tx pay.Tx, provider string, l pay.SettlementLine) (paymentID string, expected int64, note string, found bool, err error) {
	notFound := func(e error) bool { return pay.ErrorCode(e) == pay.ENOTFOUND }
	switch l.Kind {
	case pay.SettleCharge:
		p, err := tx.PaymentByRef(provider, l.ProviderRef)
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

// queueUnreconciled puts a line about nothing paystate knows on the
// review queue, reason unreconciled: one item per balance transaction,
// which a second import of the line replaces.
func queueUnreconciled(tx pay.Tx, provider string, l pay.SettlementLine, note string) error {
	_, err := finalize.QueueReview(tx, pay.ReviewItem{
		ID: "unreconciled_" + provider + "_" + l.ID, Reason: pay.ReasonUnreconciled, Provider: provider, ProviderRef: l.ProviderRef,
		EventID: l.ID, Note: fmt.Sprintf("settlement line %s (%s %s): %s", l.ID, l.Category, pay.FormatAmount(l.Amount, l.Currency), note),
	}, pay.SourceSettlement)
	return err
}
