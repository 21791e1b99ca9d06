// Package verify replays every payment's timeline and checks it against the
// stored record (SPEC "Self-verification"): versions strictly increasing
// with no gaps, no transition the state machine forbids, one outbox record
// per real transition, every processed webhook reflected in the timeline,
// no client secret or redirect URL kept by a final payment, and a ledger
// that balances per currency. Outbox records purged after their retention
// are not asked for: a transition older than the store's purge horizon
// (store.Tx.OutboxHorizon) may have lost its record; a younger one must
// have it. It reads one consistent snapshot and changes nothing. It is
// the engine of `paystate verify` (cli/verify.go, which adds the file and
// journal checks of the store); the simulation and the tests of other
// packages run it too.
//
// Refunds and disputes are checked against their payment and the ledger:
// a payment's pending and succeeded refunds never exceed its amount, its
// amount_refunded is the sum of the succeeded ones (refunded exactly when
// it is the whole amount), each succeeded refund has one posting of its
// amount (psp_receivable → merchant_revenue) under the event of its
// success and a refund that did not succeed has none, each change of a
// refund or dispute has its outbox record, and the disputes and
// dispute_losses accounts hold, per payment, what its open and lost
// disputes say.
package verify

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Mismatch is one problem found.
type Mismatch struct {
	PaymentID string // "" for a problem of the whole database (the ledger)
	Problem   string
}

// String formats a mismatch for the command line.
func (m Mismatch) String() string {
	if m.PaymentID == "" {
		return m.Problem
	}
	return m.PaymentID + ": " + m.Problem
}

// Report is the result of a verification.
type Report struct {
	Payments    int
	Steps       int
	Transitions int
	Refunds     int
	Disputes    int
	Mismatches  []Mismatch

	// What the ledger must hold, gathered payment by payment and checked
	// in one pass over the journal (checkMoney).
	refundEvents map[string]refundEvent      // event id → the refund it must post
	disputeSums  map[string]*disputeExpected // payment id → its disputes' money
	settlements  map[string]*settlementSums  // balance-transaction id → its postings
}

// settlementSums is what the journal must hold under a settlement's
// balance-transaction id (its fee posting, and its payout posting once
// it names a payout), and what it holds.
type settlementSums struct {
	name                  string // provider/id
	paymentID             string
	fee, payout           int64 // what must be posted
	wantFee, wantPayout   int   // in so many postings
	feeLines, payoutLines int   // what the journal holds
	gotFee, gotPayout     int64
}

// refundEvent is what the posting of a refund's outcome must be: its
// amount if it succeeded, nothing if not.
type refundEvent struct {
	paymentID, refundID string
	currency            string
	amount              int64 // 0: no posting
	debit, credit       int64 // what the journal holds under the event
	lines               int
}

// disputeExpected is what the disputes and dispute_losses accounts must
// hold for one payment.
type disputeExpected struct {
	open, lost       int64 // from the dispute records
	disputes, losses int64 // from the journal
}

// OK reports whether nothing was found.
func (r Report) OK() bool { return len(r.Mismatches) == 0 }

// verifyTx is what verify reads of a storage transaction.
type verifyTx interface {
	ListPayments(f pay.PaymentFilter) ([]pay.Payment, string, error)
	PaymentCounts() (map[pay.Status]int, error)
	Steps(paymentID string) ([]pay.Step, error)
	OutboxForPayment(paymentID string) ([]pay.OutboxRecord, error)
	OutboxHorizon() (time.Time, error)
	InboxForPayment(paymentID string) ([]pay.InboxEvent, error)
	LedgerBalances() ([]pay.Balance, error)
	LedgerEntries(afterSeq uint64, limit int) ([]pay.LedgerEntry, error)
	RefundsForPayment(paymentID string) ([]pay.Refund, error)
	DisputesForPayment(paymentID string) ([]pay.Dispute, error)
	ListSettlements(afterProvider, afterID string, limit int) ([]pay.Settlement, error)
}

// Options of RunWith.
type Options struct {
	// Progress, if set, is called after each payment with the number of
	// payments checked so far (from 1 again if the store runs the read
	// transaction a second time) and the number there are (0 if the store
	// could not count them), for `paystate verify` to show progress.
	Progress func(done, total int)
}

// Run verifies the whole store in one read transaction.
func Run(ctx context.Context, s store.Store) (Report, error) {
	return RunWith(ctx, s, Options{})
}

// RunWith is Run with options.
func RunWith(ctx context.Context, s store.Store, opts Options) (Report, error) {
	var r Report
	// The store hands a store.Tx; verify receives only its verifyTx.
	err := s.View(ctx, func(tx store.Tx) error {
		r = Report{}
		return verifyAll(tx, opts, &r)
	})
	return r, err
}

// verifyAll is RunWith in its read transaction.
func verifyAll(tx verifyTx, opts Options, r *Report) error {
	horizon, err := tx.OutboxHorizon()
	if err != nil {
		return fmt.Errorf("outbox horizon: %w", err)
	}
	total := 0
	if opts.Progress != nil {
		// Only for the progress: a count that fails leaves it
		// unknown, and the checks below find what is wrong.
		if counts, err := tx.PaymentCounts(); err == nil {
			for _, n := range counts {
				total += n
			}
		}
	}
	cursor := ""
	for {
		page, next, err := tx.ListPayments(pay.PaymentFilter{Limit: 500, Cursor: cursor})
		if err != nil {
			return fmt.Errorf("list payments: %w", err)
		}
		for _, p := range page {
			if err := checkPayment(tx, p, horizon, r); err != nil {
				return fmt.Errorf("payment %s: %w", p.ID, err)
			}
			if opts.Progress != nil {
				opts.Progress(r.Payments, total)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if err := checkLedger(tx, r); err != nil {
		return err
	}
	if err := loadSettlements(tx, r); err != nil {
		return err
	}
	return checkMoney(tx, r)
}

func (r *Report) add(id, format string, args ...any) {
	r.Mismatches = append(r.Mismatches, Mismatch{PaymentID: id, Problem: fmt.Sprintf(format, args...)})
}

// checkPayment replays one payment's timeline. Transitions before horizon
// may have lost their outbox record to the purge.
func checkPayment(tx verifyTx, p pay.Payment, horizon time.Time, r *Report) error {
	r.Payments++
	steps, err := tx.Steps(p.ID)
	if err != nil {
		return err
	}
	outbox, err := tx.OutboxForPayment(p.ID)
	if err != nil {
		return err
	}
	events, err := tx.InboxForPayment(p.ID)
	if err != nil {
		return err
	}
	r.Steps += len(steps)

	// Replay: written versions 1..N without gaps, each transition allowed
	// from the status the replay has reached.
	var (
		version     uint64
		status      pay.Status
		transitions []pay.Step
		moneySteps  []pay.Step
		eventSteps  = map[string]bool{}
	)
	for i, s := range steps {
		if s.Seq != uint64(i+1) {
			r.add(p.ID, "timeline step %d has sequence %d", i+1, s.Seq)
		}
		if s.EventID != "" {
			eventSteps[s.EventID] = true
		}
		if !s.Wrote() {
			continue
		}
		if s.Version != version+1 {
			r.add(p.ID, "version gap: step %d wrote version %d after version %d", s.Seq, s.Version, version)
		}
		version = s.Version
		switch s.Kind {
		case pay.StepCreated:
			if i != 0 || s.Version != 1 {
				r.add(p.ID, "creation at step %d, version %d", s.Seq, s.Version)
			}
			status = s.To
		case pay.StepTransition:
			if s.From != status {
				r.add(p.ID, "step %d moves from %s, but the payment was %s", s.Seq, s.From, status)
			}
			if !pay.CanTransition(s.From, s.To) {
				r.add(p.ID, "step %d: transition %s → %s is forbidden", s.Seq, s.From, s.To)
			}
			status = s.To
			transitions = append(transitions, s)
		case pay.StepUpdate:
			if s.To != status {
				r.add(p.ID, "step %d updates status %s, but the payment was %s", s.Seq, s.To, status)
			}
		default: // a refund's or a dispute's change (pay.MoneyStep)
			if s.From != status {
				r.add(p.ID, "step %d (%s) starts from %s, but the payment was %s", s.Seq, s.Kind, s.From, status)
			}
			if s.To != s.From {
				if !pay.CanTransition(s.From, s.To) || s.Kind != pay.StepRefundSucceeded {
					r.add(p.ID, "step %d (%s): transition %s → %s is forbidden", s.Seq, s.Kind, s.From, s.To)
				}
				transitions = append(transitions, s)
			}
			status = s.To
			moneySteps = append(moneySteps, s)
		}
	}
	r.Transitions += len(transitions)
	if version != p.Version {
		r.add(p.ID, "timeline ends at version %d, record has version %d", version, p.Version)
	}
	if status != p.Status {
		r.add(p.ID, "timeline ends in status %s, record has %s", status, p.Status)
	}
	checkSecrets(p, r)

	// One outbox record per real transition, in the same order, matched by
	// version; the records of transitions before the purge horizon may be
	// gone.
	byVersion := make(map[uint64]pay.Step, len(transitions))
	for _, t := range transitions {
		byVersion[t.Version] = t
	}
	matched := make(map[uint64]bool, len(outbox))
	var (
		last  uint64
		money []pay.OutboxRecord
	)
	for _, o := range outbox {
		if o.RefundID != "" || o.DisputeID != "" {
			money = append(money, o)
			if o.Version < last {
				r.add(p.ID, "outbox record %s (version %d) comes after the record of version %d", o.ID, o.Version, last)
			}
			last = max(last, o.Version)
			continue
		}
		t, ok := byVersion[o.Version]
		switch {
		case !ok:
			r.add(p.ID, "outbox record %s (%s, version %d) matches no transition", o.ID, o.Type, o.Version)
		case matched[o.Version]:
			r.add(p.ID, "outbox record %s (%s, version %d) is a second record of its transition", o.ID, o.Type, o.Version)
		case o.Status != t.To || o.Type != pay.EventType(t.To):
			r.add(p.ID, "outbox record %s (%s, version %d) does not match transition to %s at version %d", o.ID, o.Type, o.Version, t.To, t.Version)
		}
		if o.Version < last {
			r.add(p.ID, "outbox record %s (version %d) comes after the record of version %d", o.ID, o.Version, last)
		}
		matched[o.Version], last = true, max(last, o.Version)
	}
	for _, t := range transitions {
		if !matched[t.Version] && !t.At.Before(horizon) {
			r.add(p.ID, "missing outbox record: transition to %s at version %d (step %d) has none", t.To, t.Version, t.Seq)
		}
	}

	if err := checkRefundsAndDisputes(tx, p, moneySteps, transitions, money, horizon, r); err != nil {
		return err
	}

	// Every processed webhook of the payment has its timeline step.
	for _, e := range events {
		if !e.Processed {
			continue
		}
		if !eventSteps[e.EventID] {
			r.add(p.ID, "webhook %s/%s is processed but has no timeline step", e.Provider, e.EventID)
		}
	}
	return nil
}

// checkSecrets checks the secret rule at rest: finalize keeps no client
// secret or redirect URL once a payment is final (finalize.View shows
// them only while it is open), and what it keeps is printable text, as a
// report's fields are checked (pay.ValidateText) before they are stored.
// The values are never put into the report.
func checkSecrets(p pay.Payment, r *Report) {
	if p.Status.Terminal() && (p.ClientSecret != "" || p.RedirectURL != "") {
		r.add(p.ID, "the payment is %s, a final status, and still holds a client secret or redirect URL", p.Status)
	}
	for _, f := range []struct{ name, v string }{{"client_secret", p.ClientSecret}, {"redirect_url", p.RedirectURL}} {
		// No limit of length here: a provider's answer is stored as it
		// came, and only a report is held to 2,048 bytes.
		if err := pay.ValidateText(f.name, f.v, len(f.v)); err != nil {
			r.add(p.ID, "stored %s", pay.ErrorMessage(err))
		}
	}
}

// checkLedger checks that every currency balances.
func checkLedger(tx verifyTx, r *Report) error {
	bs, err := tx.LedgerBalances()
	if err != nil {
		return fmt.Errorf("ledger balances: %w", err)
	}
	sum := map[string]int64{}
	for _, b := range bs {
		sum[b.Currency] += b.Amount
	}
	curs := make([]string, 0, len(sum))
	for c := range sum {
		curs = append(curs, c)
	}
	sort.Strings(curs)
	for _, c := range curs {
		if sum[c] != 0 {
			r.add("", "ledger does not balance in %s: accounts sum to %s", c, pay.FormatAmount(sum[c], c))
		}
	}
	return nil
}

// moneyRecords are the outbox records each kind of money step appends.
var moneyRecords = map[string][]string{
	pay.StepRefundSucceeded: {pay.EventRefundSucceeded},
	pay.StepRefundFailed:    {pay.EventRefundFailed},
	pay.StepDisputeOpened:   {pay.EventDisputeCreated},
	pay.StepDisputeClosed:   {pay.EventDisputeClosed},
}

// checkRefundsAndDisputes checks a payment's refunds and disputes: their
// sums against the payment, their steps against their outbox records, and
// notes what the ledger must hold for them (checkMoney).
func checkRefundsAndDisputes(tx verifyTx, p pay.Payment, steps, transitions []pay.Step, money []pay.OutboxRecord, horizon time.Time, r *Report) error {
	refunds, err := tx.RefundsForPayment(p.ID)
	if err != nil {
		return err
	}
	disputes, err := tx.DisputesForPayment(p.ID)
	if err != nil {
		return err
	}
	r.Refunds += len(refunds)
	r.Disputes += len(disputes)

	// Sums.
	var succeeded, pending int64
	for _, f := range refunds {
		switch f.Status {
		case pay.RefundSucceeded:
			succeeded += f.Amount
		case pay.RefundPending:
			pending += f.Amount
		}
		amount := int64(0)
		if f.Status == pay.RefundSucceeded {
			amount = f.Amount
			if f.EventID == "" {
				r.add(p.ID, "refund %s succeeded without the event of its success", f.ID)
			}
		}
		if f.EventID != "" {
			if r.refundEvents == nil {
				r.refundEvents = map[string]refundEvent{}
			}
			r.refundEvents[f.EventID] = refundEvent{paymentID: p.ID, refundID: f.ID, currency: f.Currency, amount: amount}
		}
	}
	if succeeded+pending > p.Amount {
		r.add(p.ID, "refunded more than captured: refunds succeeded %s and pending %s of an amount of %s",
			pay.FormatAmount(succeeded, p.Currency), pay.FormatAmount(pending, p.Currency), pay.FormatAmount(p.Amount, p.Currency))
	}
	if len(refunds) > 0 || p.AmountRefunded != 0 || p.AmountRefundPending != 0 {
		if p.AmountRefunded != succeeded || p.AmountRefundPending != pending {
			r.add(p.ID, "amount_refunded %s and pending %s, its refunds say %s and %s", pay.FormatAmount(p.AmountRefunded, p.Currency),
				pay.FormatAmount(p.AmountRefundPending, p.Currency), pay.FormatAmount(succeeded, p.Currency), pay.FormatAmount(pending, p.Currency))
		}
		if full := succeeded == p.Amount; full != (p.Status == pay.Refunded) {
			r.add(p.ID, "status %s with %s of %s refunded", p.Status, pay.FormatAmount(succeeded, p.Currency), pay.FormatAmount(p.Amount, p.Currency))
		}
	}
	if len(disputes) > 0 {
		if r.disputeSums == nil {
			r.disputeSums = map[string]*disputeExpected{}
		}
		e := &disputeExpected{}
		for _, d := range disputes {
			switch d.Status {
			case pay.DisputeNeedsResponse, pay.DisputeUnderReview:
				e.open += d.Amount
			case pay.DisputeLost:
				e.lost += d.Amount
			}
		}
		r.disputeSums[p.ID] = e
	}
	statuses := make([]pay.DisputeStatus, 0, len(disputes))
	for _, d := range disputes {
		statuses = append(statuses, d.Status)
	}
	if want := pay.DisputeOfPayment(statuses...); p.Dispute != want {
		r.add(p.ID, "the payment says its dispute is %q, its disputes say %q", p.Dispute, want)
	}

	// Each money step has its records at its version, each record a step.
	type key struct {
		version uint64
		typ     string
	}
	have := map[key]int{}
	for _, o := range money {
		have[key{o.Version, o.Type}]++
	}
	wrote := map[uint64]pay.Step{}
	for _, s := range steps {
		wrote[s.Version] = s
		for _, typ := range moneyRecords[s.Kind] {
			if have[key{s.Version, typ}] == 0 && !s.At.Before(horizon) {
				r.add(p.ID, "missing outbox record: %s at version %d (step %d) has no %s", s.Kind, s.Version, s.Seq, typ)
			}
		}
	}
	for _, t := range transitions {
		wrote[t.Version] = t
	}
	for _, o := range money {
		s, ok := wrote[o.Version]
		okKind := false
		if ok {
			switch o.Type {
			case pay.EventRefundSucceeded:
				okKind = s.Kind == pay.StepRefundSucceeded || (s.Kind == pay.StepTransition && s.To == pay.Refunded)
			case pay.EventRefundFailed:
				okKind = s.Kind == pay.StepRefundFailed
			case pay.EventDisputeCreated:
				okKind = s.Kind == pay.StepDisputeOpened || s.Kind == pay.StepDisputeClosed
			case pay.EventDisputeClosed:
				okKind = s.Kind == pay.StepDisputeClosed
			}
		}
		if !okKind {
			r.add(p.ID, "outbox record %s (%s, version %d) matches no change of a refund or dispute", o.ID, o.Type, o.Version)
		}
	}
	return nil
}

// checkMoney reads the journal once and checks what the refunds and
// disputes of every payment said it must hold.
func checkMoney(tx verifyTx, r *Report) error {
	if len(r.refundEvents) == 0 && len(r.disputeSums) == 0 && len(r.settlements) == 0 {
		return nil
	}
	var after uint64
	for {
		lines, err := tx.LedgerEntries(after, 1000)
		if err != nil {
			return fmt.Errorf("ledger entries: %w", err)
		}
		for _, l := range lines {
			after = l.Seq
			if e, ok := r.refundEvents[l.EventID]; ok {
				e.lines++
				switch {
				case l.Account == pay.AccountMerchantRevenue && l.Amount > 0:
					e.debit += l.Amount
				case l.Account == pay.AccountPSPReceivable && l.Amount < 0:
					e.credit -= l.Amount
				default:
					e.lines += 100 // a line that is not of a refund's posting
				}
				r.refundEvents[l.EventID] = e
			}
			if l.Account == pay.AccountPSPFees || l.Account == pay.AccountPayouts {
				settlementLine(r, l)
			}
			if d, ok := r.disputeSums[l.PaymentID]; ok {
				switch l.Account {
				case pay.AccountDisputes:
					d.disputes += l.Amount
				case pay.AccountDisputeLosses:
					d.losses += l.Amount
				}
			}
		}
		if len(lines) < 1000 {
			break
		}
	}
	ids := make([]string, 0, len(r.refundEvents))
	for id := range r.refundEvents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		e := r.refundEvents[id]
		switch {
		case e.amount == 0 && e.lines > 0:
			r.add(e.paymentID, "refund %s did not succeed but the ledger has %d lines under its event %s", e.refundID, e.lines, id)
		case e.amount > 0 && (e.lines != 2 || e.debit != e.amount || e.credit != e.amount):
			r.add(e.paymentID, "refund %s of %s: the ledger has %d lines under its event %s (revenue %s, receivable %s), want one posting of its amount",
				e.refundID, pay.FormatAmount(e.amount, e.currency), e.lines, id, pay.FormatAmount(e.debit, e.currency), pay.FormatAmount(-e.credit, e.currency))
		}
	}
	checkSettlements(r)
	pids := make([]string, 0, len(r.disputeSums))
	for id := range r.disputeSums {
		pids = append(pids, id)
	}
	sort.Strings(pids)
	for _, id := range pids {
		d := r.disputeSums[id]
		if d.disputes != d.open || d.losses != d.lost {
			r.add(id, "disputes: the ledger holds %d disputed and %d lost, the disputes say %d open and %d lost", d.disputes, d.losses, d.open, d.lost)
		}
	}
	return nil
}

// loadSettlements notes what the journal must hold for each posted
// settlement line (SPEC "Settlement reconciliation"): its fee once, its
// payout once when it names one.
func loadSettlements(tx verifyTx, r *Report) error {
	provider, id := "", ""
	for {
		ss, err := tx.ListSettlements(provider, id, pay.MaxListLimit)
		if err != nil {
			return fmt.Errorf("settlements: %w", err)
		}
		for _, s := range ss {
			if r.settlements == nil {
				r.settlements = map[string]*settlementSums{}
			}
			e := r.settlements[s.ID]
			if e == nil {
				e = &settlementSums{name: s.Provider + "/" + s.ID, paymentID: s.PaymentID}
				r.settlements[s.ID] = e
			} else {
				e.name += " and " + s.Provider + "/" + s.ID // one id at two providers: their sums
			}
			if fee := pay.SettlementFee(s.Kind, s.Amount, s.Fee); fee != 0 {
				e.fee += fee
				e.wantFee++
			}
			if net := pay.SettlementPayout(s.Kind, s.Amount, s.Fee); s.PayoutID != "" && net != 0 {
				e.payout += net
				e.wantPayout++
			}
		}
		if len(ss) < pay.MaxListLimit {
			return nil
		}
		provider, id = ss[len(ss)-1].Provider, ss[len(ss)-1].ID
	}
}

// settlementLine counts a journal line of psp_fees or payouts under its
// settlement; one under no settlement is a mismatch.
func settlementLine(r *Report, l pay.LedgerEntry) {
	e, ok := r.settlements[l.EventID]
	if !ok {
		r.add(l.PaymentID, "ledger line %d: %d in %s under %s, which is no posted settlement line", l.Seq, l.Amount, l.Account, l.EventID)
		return
	}
	if l.Account == pay.AccountPSPFees {
		e.feeLines++
		e.gotFee += l.Amount
	} else {
		e.payoutLines++
		e.gotPayout += l.Amount
	}
}

// checkSettlements compares each settlement's postings with its figures:
// one fee posting of its fee (none if it is 0), one payout posting of its
// net once it names a payout (none before).
func checkSettlements(r *Report) {
	for _, id := range slices.Sorted(maps.Keys(r.settlements)) {
		e := r.settlements[id]
		if e.feeLines != e.wantFee || e.gotFee != e.fee {
			r.add(e.paymentID, "settlement %s: %d fee postings of %d in psp_fees, want %d of %d", e.name, e.feeLines, e.gotFee, e.wantFee, e.fee)
		}
		if e.payoutLines != e.wantPayout || e.gotPayout != e.payout {
			r.add(e.paymentID, "settlement %s: %d payout postings of %d in payouts, want %d of %d", e.name, e.payoutLines, e.gotPayout, e.wantPayout, e.payout)
		}
	}
}
