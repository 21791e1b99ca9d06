package finalize

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// maxRetries bounds the re-reads after a lost compare-and-set. With bbolt the
// write lock makes a lost CAS impossible inside one transaction; a backend
// with concurrent writers (PostgreSQL) may lose it and re-read.
const maxRetries = 8

// Tx is what finalize uses of a storage transaction, and all that its
// functions receive: the payment and its timeline, the inbox and the
// processed event ids, the lease (fencing), the outbox and the ledger,
// the review queue, idempotency keys, the PSP's answers, refunds,
// disputes and settlements. Deliveries, the effects' state and the mock
// PSP's charges are ripple's and psp/mock's, not finalize's: the compiler
// keeps finalize out of them.
type Tx interface {
	store.Core
	store.Payments
	store.Timeline
	store.Inbox
	store.Leases
	store.Outbox
	store.Ledger
	store.Review
	store.Idempotency
	store.PSPAnswers
	store.Refunds
	store.Disputes
	store.Settlements
}

// ReadTx runs fn in a read transaction of s, handing it the transaction as
// finalize's Tx.
func ReadTx(ctx context.Context, s store.Store, fn func(tx Tx) error) error {
	return store.View(ctx, s, asTx, fn)
}

// WriteTx runs fn in a write transaction of s (store.Store.Update),
// handing it the transaction as finalize's Tx.
func WriteTx(ctx context.Context, s store.Store, fn func(tx Tx) error) error {
	return store.Update(ctx, s, asTx, fn)
}

// asTx is where the compiler checks that a store.Tx is a finalize.Tx.
func asTx(tx store.Tx) Tx { return tx }

// Finalizer applies observations to payments. It is the only code in
// paystate that changes a payment's status.
type Finalizer struct {
	Store store.Store

	// Notify, if set, is called after every commit that appended outbox
	// records (the ripple workers' wake-up). It must not block.
	Notify func()

	Logger zerolog.Logger
}

// New returns a Finalizer over store.
func New(store store.Store) *Finalizer {
	return &Finalizer{Store: store, Logger: zerolog.Nop()}
}

// Finalize applies obs in one storage transaction and returns the committed
// payment and what happened. A version conflict is reported in the result,
// never as an error; a stale lease token is an ELEASELOST error and changes
// nothing.
func (f *Finalizer) Finalize(ctx context.Context, obs pay.Observation) (pay.Result, error) {
	return f.FinalizeIf(ctx, obs, nil)
}

// FinalizeIf is Finalize with a precondition checked in the same
// transaction: if check returns an error, nothing is written and the error
// is returned. The webhook inbox uses it to apply an event only while no
// one holds the payment's lease (LeaseFree), in one transaction.
func (f *Finalizer) FinalizeIf(ctx context.Context, obs pay.Observation, check func(tx Tx) error) (pay.Result, error) {
	return f.finalize(ctx, obs, check, nil)
}

// FinalizeThen is Finalize with then, if not nil, run after Apply in the
// same transaction, for writes that belong with the observation (the
// sweeper stores the PSP answer it finalizes there); its error rolls
// everything back and is returned.
func (f *Finalizer) FinalizeThen(ctx context.Context, obs pay.Observation, then func(tx Tx, res pay.Result) error) (pay.Result, error) {
	return f.finalize(ctx, obs, nil, then)
}

// finalize is FinalizeIf with then, if not nil, run after Apply in the same
// transaction (a review resolution removes its item there, a create stores
// its idempotency answer); its error rolls everything back.
func (f *Finalizer) finalize(ctx context.Context, obs pay.Observation, check func(tx Tx) error, then func(tx Tx, res pay.Result) error) (pay.Result, error) {
	if err := checkObservation(obs); err != nil {
		return pay.Result{}, err
	}
	var res pay.Result
	var err error
	for range maxRetries {
		refused := false // check or then said no: a conflict of theirs is the answer
		err = WriteTx(ctx, f.Store, func(tx Tx) error {
			refused = false
			if check != nil {
				if err := check(tx); err != nil {
					refused = true
					return err
				}
			}
			var err error
			res, err = Apply(tx, obs)
			if err != nil {
				return err
			}
			if then != nil {
				if err := then(tx, res); err != nil {
					refused = true
					return err
				}
			}
			r := res // the OnCommit closure must see this attempt's result
			tx.OnCommit(func() { f.committed(obs, r) })
			return nil
		})
		if refused || pay.ErrorCode(err) != pay.ECONFLICT {
			break
		}
	}
	if err != nil {
		return pay.Result{}, err
	}
	return res, nil
}

// committed runs after a successful commit: metrics, the log line and the
// ripple wake-up. It is the only place the Finalizer has effects outside
// storage.
func (f *Finalizer) committed(obs pay.Observation, r pay.Result) {
	outcome := Outcome(r)
	metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_finalize_outcomes_total{outcome=%q}`, outcome)).Inc()
	if r.Conflict {
		// A conflict comes with one of the outcomes above (the rules ran
		// on the fresh record); it is counted on its own too.
		metrics.GetOrCreateCounter(`paystate_finalize_outcomes_total{outcome="conflict"}`).Inc()
		metrics.GetOrCreateCounter(`paystate_finalize_version_conflicts_total`).Inc()
	}
	ev := f.Logger.Debug()
	if r.Anomaly || r.Rejected != "" {
		ev = f.Logger.Warn()
	}
	ev.Str("payment_id", obs.PaymentID).Str("source", string(obs.Source)).
		Str("observed", string(obs.Status)).Str("status", string(r.Payment.Status)).
		Uint64("version", r.Payment.Version).Str("outcome", outcome).Bool("conflict", r.Conflict).
		Func(func(e *zerolog.Event) {
			if obs.EventID != "" {
				e.Str("event_id", obs.EventID)
			}
			if r.Rejected != "" {
				e.Str("reason", r.Rejected)
			}
		}).Msg("finalize")
	if r.Flipped && f.Notify != nil {
		f.Notify()
	}
}

// Outcome names a result for metrics and logs: flipped, rejected,
// duplicate, stale, anomaly or update.
func Outcome(r pay.Result) string {
	switch {
	case r.Flipped:
		return "flipped"
	case r.Rejected != "":
		return "rejected"
	case r.Anomaly:
		return "anomaly"
	case r.Stale:
		return "stale"
	case r.Duplicate:
		return "duplicate"
	}
	return "update"
}

// Apply is the body of Finalize inside a transaction the caller owns, for
// code that writes more in the same transaction; today every caller goes
// through Finalize, FinalizeIf or Review.Resolve, which wrap it with the
// retry on a lost compare-and-set and the effects after commit. It has no
// effect outside tx.
func Apply(tx Tx, obs pay.Observation) (pay.Result, error) {
	now := tx.Now()

	// Read the payment.
	p, err := tx.Payment(obs.PaymentID)
	if err != nil {
		return pay.Result{}, err
	}
	res := pay.Result{Payment: p}

	// An event applied before changes nothing, not even the timeline.
	if obs.EventID != "" {
		done, err := tx.IsProcessed(obs.Provider, obs.EventID)
		if err != nil {
			return pay.Result{}, err
		}
		if done {
			res.Duplicate = true
			res.Decision = pay.Duplicate
			return res, nil
		}
	}

	// Fencing: a caller whose lease is no longer current must not write.
	if obs.LeaseToken != 0 {
		l, err := tx.Lease(p.ID)
		if err != nil {
			return pay.Result{}, err
		}
		if l.Token != obs.LeaseToken || !l.Held(now) {
			return pay.Result{}, pay.Errorf(pay.ELEASELOST, "lease %d of payment %s is no longer current", obs.LeaseToken, p.ID)
		}
	}

	step := pay.Step{PaymentID: p.ID, At: now, Source: obs.Source, From: p.Status, To: obs.Status, Version: p.Version, EventID: obs.EventID, Note: obs.Note}

	// A version the payment never had (versions only grow) is no conflict
	// to resolve: the caller made it up, or read another payment.
	if obs.ExpectedVersion > p.Version {
		return pay.Result{}, pay.Invalidf("expected_version", "expected_version %d is above payment %s's version %d: the payment never had that version (send the version you read, from the ETag or the view's version)",
			obs.ExpectedVersion, p.ID, p.Version)
	}

	// A version conflict is a signal to re-read: the rules below run on the
	// fresh record just read.
	if obs.ExpectedVersion != 0 && obs.ExpectedVersion != p.Version {
		res.Conflict = true
		c := step
		c.Kind = pay.StepConflict
		c.Note = fmt.Sprintf("expected version %d, found %d", obs.ExpectedVersion, p.Version)
		if err := tx.AppendStep(c); err != nil {
			return pay.Result{}, err
		}
	}

	// Check the evidence: an observation that contradicts the payment (its
	// amount, its currency, its PSP reference) is not applied. The payment
	// goes on the review queue; a webhook's event is processed all the
	// same, so it is acknowledged and not retried.
	if err := checkObservation(obs); err != nil {
		return pay.Result{}, err
	}
	res.Decision = pay.Decide(p.Status, obs.Status)
	if reason, note, err := contradiction(tx, p, obs); err != nil {
		return pay.Result{}, err
	} else if reason != "" {
		item := pay.ReviewItem{
			ID: p.ID, PaymentID: p.ID, Reason: reason, Provider: p.Provider, ProviderRef: obs.ProviderRef,
			EventID: obs.EventID, Observed: obs.Status, Note: note, CreatedAt: now,
		}
		if item.ProviderRef == "" {
			item.ProviderRef = p.ProviderRef
		}
		if _, err := QueueReview(tx, item, obs.Source); err != nil {
			return pay.Result{}, err
		}
		res.Rejected = reason
		if obs.EventID != "" {
			if err := tx.MarkProcessed(obs.Provider, obs.EventID); err != nil {
				return pay.Result{}, err
			}
		}
		return res, nil
	}

	// A refund or a dispute has a table of its own (pay.DecideRefund,
	// pay.DecideDispute) and moves money; a status, the payment's.
	var err2 error
	switch {
	case obs.Refund != nil:
		err2 = applyRefund(tx, p, obs, step, &res)
	case obs.Dispute != nil:
		err2 = applyDispute(tx, p, obs, step, &res)
	default:
		err2 = applyStatus(tx, p, obs, step, &res)
	}
	if err2 != nil {
		return pay.Result{}, err2
	}

	// The event is processed in the same transaction as its effect.
	if obs.EventID != "" {
		if err := tx.MarkProcessed(obs.Provider, obs.EventID); err != nil {
			return pay.Result{}, err
		}
	}
	return res, nil
}

// checkObservation checks that obs says one thing: a payment status, or
// (with no status) a refund or a dispute.
func checkObservation(obs pay.Observation) error {
	switch {
	case obs.Refund != nil || obs.Dispute != nil:
		if obs.Status != "" || (obs.Refund != nil && obs.Dispute != nil) {
			return pay.Errorf(pay.EINVALID, "an observation is about a status, a refund or a dispute, not more than one")
		}
		if obs.Refund != nil && !obs.Refund.Status.Valid() {
			return pay.Invalidf("status", "refund status %q is not one of pending, succeeded, failed", obs.Refund.Status)
		}
		if obs.Dispute != nil && (obs.Dispute.ID == "" || (obs.Dispute.Status != "" && !obs.Dispute.Status.Valid())) {
			return pay.Invalidf("status", "a dispute observation needs the dispute's id and a dispute status, got %q", obs.Dispute.Status)
		}
	case !obs.Status.Valid():
		return pay.Errorf(pay.EINVALID, "status %q is not a payment status", obs.Status)
	}
	return nil
}

// applyStatus is Apply for an observation of the payment's status: the
// transition table of pay.Decide, already in res.Decision.
func applyStatus(tx Tx, p pay.Payment, obs pay.Observation, step pay.Step, res *pay.Result) error {
	now := tx.Now()
	switch res.Decision {
	case pay.Apply:
		np := withProviderData(p, obs)
		np.Status = obs.Status
		if np.Status.Terminal() {
			// Secrets are worthless once the payment is final; keep none.
			np.ClientSecret, np.RedirectURL = "", ""
		}
		// A captured payment reported refunded in full: its refunds
		// settle, and what none of them covers is refunded by one more
		// (refundRest), each with its own posting and event.
		var settle []pay.Refund
		if p.Status == pay.Captured && np.Status == pay.Refunded {
			var err error
			if settle, err = refundRest(tx, &np, obs, now); err != nil {
				return err
			}
			if len(settle) > 0 {
				step.Note = joinNote(step.Note, fmt.Sprintf("%d refund(s) settled as succeeded", len(settle)))
			}
		}
		if err := write(tx, &np, p.Version, now); err != nil {
			return err
		}
		step.Kind, step.Version = pay.StepTransition, np.Version
		if err := tx.AppendStep(step); err != nil {
			return err
		}
		for _, r := range settle {
			if err := succeedRefund(tx, np, p.Status, r, now); err != nil {
				return err
			}
		}
		rec := pay.OutboxRecord{
			ID: ids.Event(now), Type: pay.EventType(np.Status), PaymentID: np.ID,
			Status: np.Status, From: p.Status, Version: np.Version,
			OrderID: np.OrderID, Amount: np.Amount, Currency: np.Currency,
			Customer: np.Customer, Provider: np.Provider, CreatedAt: now,
			AmountRefunded: np.AmountRefunded,
		}
		if err := tx.AppendOutbox(rec); err != nil {
			return err
		}
		if entries := postings(p.Status, rec); len(entries) > 0 {
			if err := tx.AppendLedger(entries); err != nil {
				return err
			}
		}
		res.Payment, res.Flipped = np, true

	case pay.Duplicate:
		res.Duplicate = true
		np := withProviderData(p, obs)
		if np != p {
			// Same status, but the PSP told us something new (its reference,
			// a secret for the customer): write it as an update.
			if err := write(tx, &np, p.Version, now); err != nil {
				return err
			}
			step.Kind, step.Version = pay.StepUpdate, np.Version
			res.Payment = np
		} else {
			step.Kind = pay.StepDuplicate
		}
		if err := tx.AppendStep(step); err != nil {
			return err
		}

	case pay.Stale, pay.ConflictingTerminal:
		return absorb(tx, p, obs, step, res, fmt.Sprintf("stored %s, %s reported %s", p.Status, obs.Source, obs.Status))
	}
	return nil
}

// contradiction returns the review reason and the evidence, as text, if
// obs contradicts p: a PSP reference bound to another payment, or other
// than the one p already has; an amount or currency other than p's. It
// returns "" when the observation is consistent with the payment (fields
// the observation does not carry are not compared).
func contradiction(tx Tx, p pay.Payment, obs pay.Observation) (reason, note string, err error) {
	src := string(obs.Source)
	if obs.EventID != "" {
		src += " event " + obs.EventID
	}
	page, second := obsRefs(p, obs)
	for _, r := range []struct{ name, ref, have string }{{"provider_ref", page, p.ProviderRef}, {"second reference", second, p.SecondRef}} {
		if r.ref == "" {
			continue
		}
		if r.have != "" && r.have != r.ref {
			return pay.ReasonProviderRefConflict, fmt.Sprintf("%s reported %s %s; payment %s has %s %s", src, r.name, r.ref, p.ID, r.name, r.have), nil
		}
		if r.have == "" {
			other, err := tx.PaymentByRef(p.Provider, r.ref)
			switch {
			case err == nil && other.ID != p.ID:
				return pay.ReasonProviderRefConflict, fmt.Sprintf("%s reported %s %s for payment %s; %s reference %s belongs to payment %s", src, r.name, r.ref, p.ID, p.Provider, r.ref, other.ID), nil
			case err != nil && pay.ErrorCode(err) != pay.ENOTFOUND:
				return "", "", err
			}
		}
	}
	if (obs.Amount != 0 && obs.Amount != p.Amount) || (obs.Currency != "" && !strings.EqualFold(obs.Currency, p.Currency)) {
		got := pay.FormatAmount(obs.Amount, obs.Currency)
		switch {
		case obs.Amount == 0:
			got = "currency " + strings.ToUpper(obs.Currency)
		case obs.Currency == "":
			got = "amount " + pay.FormatAmount(obs.Amount, p.Currency)
		}
		return pay.ReasonAmountMismatch, fmt.Sprintf("%s reported %s %s; payment %s is for %s", src, obs.Status, got, p.ID, pay.FormatAmount(p.Amount, p.Currency)), nil
	}
	return "", "", nil
}

// Record appends a timeline step that changes no status (a failed attempt
// at the PSP, an event without a status) and, for a webhook, records its
// event as processed, in one transaction.
func Record(tx Tx, paymentID string, source pay.Source, kind, provider, eventID, note string) error {
	p, err := tx.Payment(paymentID)
	if err != nil {
		return err
	}
	if eventID != "" {
		if done, err := tx.IsProcessed(provider, eventID); err != nil || done {
			return err
		}
	}
	if err := tx.AppendStep(pay.Step{
		PaymentID: p.ID, At: tx.Now(), Source: source, Kind: kind,
		From: p.Status, To: p.Status, Version: p.Version, EventID: eventID, Note: note,
	}); err != nil {
		return err
	}
	if eventID != "" {
		return tx.MarkProcessed(provider, eventID)
	}
	return nil
}

// obsRefs is what obs says of p's PSP references: page to hold as
// ProviderRef, second as SecondRef. A checkout payment's ProviderRef is
// its page (a Checkout Session), its SecondRef the object under it (the
// session's PaymentIntent): an observation whose ProviderRef is its
// SecondRef is about that object, not the page (a PaymentIntent's or a
// charge's event). On any other payment a SecondRef equal to ProviderRef
// is the same object (a PaymentIntent's event on a payment_intent
// payment); one that differs is the object the PSP keeps the money in
// under the payment's reference (a PayPal order's capture), and an
// observation may name it alone (a PayPal refund or dispute naming only
// the capture).
func obsRefs(p pay.Payment, obs pay.Observation) (page, second string) {
	if !p.OnHostedPage() {
		if obs.SecondRef == obs.ProviderRef {
			return obs.ProviderRef, ""
		}
		return obs.ProviderRef, obs.SecondRef
	}
	if obs.ProviderRef == obs.SecondRef {
		return "", obs.SecondRef
	}
	return obs.ProviderRef, obs.SecondRef
}

// withProviderData returns p with the PSP data the observation carries.
func withProviderData(p pay.Payment, obs pay.Observation) pay.Payment {
	// A PSP reference, once known, does not change.
	page, second := obsRefs(p, obs)
	if page != "" && p.ProviderRef == "" {
		p.ProviderRef = page
	}
	if second != "" && p.SecondRef == "" {
		p.SecondRef = second
	}
	if obs.Status.ShowsSecrets() {
		if obs.ClientSecret != "" {
			p.ClientSecret = obs.ClientSecret
		}
		if obs.RedirectURL != "" {
			p.RedirectURL = obs.RedirectURL
		}
	}
	return p
}

// write stores np as the next version after prev (compare-and-set).
func write(tx Tx, np *pay.Payment, prev uint64, now time.Time) error {
	np.Version = prev + 1
	np.UpdatedAt = now.UTC()
	return tx.UpdatePayment(*np, prev)
}

// postings returns the ledger lines of a transition: a capture moves the
// amount into the PSP receivable against revenue. A refund reverses it by
// its own amount, each refund with its own posting (refundPosting), so a
// transition to refunded posts nothing itself; a payment refunded without
// ever being captured here posted nothing and reverses nothing.
func postings(_ pay.Status, rec pay.OutboxRecord) []pay.LedgerEntry {
	if rec.Status != pay.Captured || rec.Type != pay.EventType(pay.Captured) {
		return nil
	}
	return move(rec, pay.AccountPSPReceivable, pay.AccountMerchantRevenue, rec.Amount)
}

// move is the posting of amt from the account credited to the account
// debited, for the event rec.
func move(rec pay.OutboxRecord, debited, credited string, amt int64) []pay.LedgerEntry {
	base := pay.LedgerEntry{PaymentID: rec.PaymentID, EventID: rec.ID, Currency: rec.Currency, At: rec.CreatedAt}
	debit, credit := base, base
	debit.Account, debit.Amount = debited, amt
	credit.Account, credit.Amount = credited, -amt
	return []pay.LedgerEntry{debit, credit}
}

// joinNote joins two notes of a timeline step.
func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// clock reads an injected clock, time.Now if none, in UTC. It is the one
// place the package defaults a Now field.
func clock(now func() time.Time) time.Time {
	return defaults.Clock(now)().UTC()
}
