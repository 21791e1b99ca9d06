package finalize

// Refunds: the part of Apply for an observation about a refund (a
// merchant's request, the PSP's answer or webhook, the sweeper), with
// pay.DecideRefund as its transition table.
//
// A refund moves through pending → succeeded | failed. Each change writes
// the payment (a new version, with the timeline step of the change):
// AmountRefundPending holds the pending refunds, AmountRefunded the
// succeeded ones, and the store refuses a refund that would take their
// sum past the amount (pay.ERefundExceeds), inside the transaction. A
// refund that succeeds appends payment.refund.succeeded and posts its
// amount back (psp_receivable → merchant_revenue); the one that
// completes the amount makes the payment refunded, with
// payment.refunded in the same write. A refund that fails, whenever it
// fails, appends payment.refund.failed and frees its amount.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
)

// findRefund finds the refund an observation is about: by paystate's id,
// else by the PSP's reference. A refund of another payment is not it.
func findRefund(rt Tx, p pay.Payment, c pay.RefundChange) (pay.Refund, bool, error) {
	if c.ID != "" {
		r, err := rt.Refund(c.ID)
		switch {
		case err == nil && r.PaymentID == p.ID:
			return r, true, nil
		case err != nil && pay.ErrorCode(err) != pay.ENOTFOUND:
			return pay.Refund{}, false, err
		}
	}
	if c.ProviderRef != "" {
		r, err := rt.RefundByRef(p.Provider, c.ProviderRef)
		switch {
		case err == nil && r.PaymentID == p.ID:
			return r, true, nil
		case err != nil && pay.ErrorCode(err) != pay.ENOTFOUND:
			return pay.Refund{}, false, err
		}
	}
	return pay.Refund{}, false, nil
}

// applyRefund applies an observation about a refund of p.
func applyRefund(tx Tx, p pay.Payment, obs pay.Observation, step pay.Step, res *pay.Result) error {
	rt := tx
	now := tx.Now()
	c := *obs.Refund
	step.To = p.Status
	r, found, err := findRefund(rt, p, c)
	if err != nil {
		return err
	}
	if !found {
		return newRefund(tx, p, obs, step, res)
	}
	res.Refund = r

	// Evidence: a PSP that reports another amount for the refund is not
	// believed; a human looks.
	if c.Amount != 0 && c.Amount != r.Amount {
		res.Rejected = pay.ReasonAmountMismatch
		return refundReview(tx, p, obs, r, pay.ReasonAmountMismatch,
			fmt.Sprintf("%s reported refund %s of %s; it is of %s", describe(obs), r.ID, pay.FormatAmount(c.Amount, p.Currency), pay.FormatAmount(r.Amount, p.Currency)))
	}

	res.Decision = pay.DecideRefund(r.Status, c.Status)
	step.Note = joinNote(step.Note, fmt.Sprintf("refund %s: %s, reported %s", r.ID, r.Status, c.Status))
	switch res.Decision {
	case pay.Apply:
		np := p
		if c.ProviderRef != "" && r.ProviderRef == "" {
			r.ProviderRef = c.ProviderRef
		}
		switch c.Status {
		case pay.RefundSucceeded:
			np.AmountRefundPending -= r.Amount
			np.AmountRefunded += r.Amount
			step.Kind = pay.StepRefundSucceeded
			if np.AmountRefunded == np.Amount && np.Status == pay.Captured {
				np.Status = pay.Refunded // the last of the amount: refunded in full
			}
		case pay.RefundFailed:
			np.AmountRefundPending -= r.Amount
			step.Kind = pay.StepRefundFailed
		}
		if err := write(tx, &np, p.Version, now); err != nil {
			return err
		}
		step.To, step.Version = np.Status, np.Version
		if err := tx.AppendStep(step); err != nil {
			return err
		}
		if c.Status == pay.RefundSucceeded {
			err = succeedRefund(tx, np, p.Status, r, now)
		} else {
			err = failRefund(tx, np, p.Status, r, now)
		}
		if err != nil {
			return err
		}
		if np.Status != p.Status {
			if err := tx.AppendOutbox(paymentRecord(np, p.Status, pay.EventType(np.Status), now)); err != nil {
				return err
			}
		}
		if res.Refund, err = rt.Refund(r.ID); err != nil {
			return err
		}
		res.Payment, res.Flipped = np, true

	case pay.Duplicate:
		res.Duplicate = true
		step.Kind = pay.StepDuplicate
		if c.ProviderRef != "" && r.ProviderRef == "" {
			// The PSP's id of the refund, learnt now.
			r.ProviderRef = c.ProviderRef
			if err := rt.UpdateRefund(r); err != nil {
				return err
			}
			res.Refund.ProviderRef = r.ProviderRef
		}
		return tx.AppendStep(step)

	case pay.Stale, pay.ConflictingTerminal:
		return absorb(tx, p, obs, step, res, fmt.Sprintf("refund %s is %s, %s reported %s", r.ID, r.Status, describe(obs), c.Status))
	}
	return nil
}

// newRefund applies an observation of a refund paystate does not hold
// yet: a merchant's request (pending, before the PSP is called) or a
// refund the PSP made and reports (made at its dashboard, or another
// system's), in whatever status it reports. A request is decided by
// pay.DecideRefundRequest, here in the transaction: one that does not fit
// in what is left is ERefundExceeds, one of a payment whose dispute is
// open or lost EChargeDisputed, and either writes nothing; a reported refund
// that does not fit, or of a payment that is not captured here, goes on
// the review queue.
func newRefund(tx Tx, p pay.Payment, obs pay.Observation, step pay.Step, res *pay.Result) error {
	rt := tx
	now := tx.Now()
	c := *obs.Refund
	amount := c.Amount
	if c.Request {
		var err error
		if amount, err = pay.DecideRefundRequest(p, amount); err != nil {
			return err
		}
	} else {
		if c.ID != "" && !strings.HasPrefix(c.ID, ids.RefundPrefix) && c.ProviderRef == "" {
			c.ProviderRef = c.ID // the PSP's id given as the refund's
		}
		switch {
		case c.ID != "" && strings.HasPrefix(c.ID, ids.RefundPrefix) && c.ProviderRef == "":
			// A refund paystate would have made, unknown here: nothing to
			// move; the timeline keeps the event.
			step.Kind, step.To = pay.StepIgnoredEvent, p.Status
			step.Note = joinNote(step.Note, fmt.Sprintf("refund %s is not a refund of this payment", c.ID))
			res.Stale = true
			return tx.AppendStep(step)
		case p.Status != pay.Captured:
			res.Rejected = pay.ReasonAmountMismatch
			return refundReview(tx, p, obs, pay.Refund{}, pay.ReasonAmountMismatch,
				fmt.Sprintf("%s reported a refund of %s; payment %s is %s here", describe(obs), pay.FormatAmount(amount, p.Currency), p.ID, p.Status))
		case amount <= 0 || amount > p.Unrefunded():
			res.Rejected = pay.ReasonAmountMismatch
			return refundReview(tx, p, obs, pay.Refund{}, pay.ReasonAmountMismatch,
				fmt.Sprintf("%s reported a refund of %s; %s is left to refund of payment %s", describe(obs), pay.FormatAmount(amount, p.Currency), pay.FormatAmount(p.Unrefunded(), p.Currency), p.ID))
		}
	}

	// The refund is stored pending first: that is what the store's sum
	// checks against the amount. An outcome reported with it follows in
	// the same write.
	r := pay.Refund{
		ID: ids.Refund(now), PaymentID: p.ID, Provider: p.Provider, Amount: amount, Currency: p.Currency,
		Reason: c.Reason, Status: pay.RefundPending, ProviderRef: c.ProviderRef, IdemKey: c.IdemKey,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := rt.InsertRefund(r); err != nil {
		return err
	}
	np := p
	switch c.Status {
	case pay.RefundSucceeded:
		np.AmountRefunded += amount
		step.Kind = pay.StepRefundSucceeded
		if np.AmountRefunded == np.Amount {
			np.Status = pay.Refunded
		}
	case pay.RefundFailed:
		step.Kind = pay.StepRefundFailed
	default:
		np.AmountRefundPending += amount
		step.Kind = pay.StepRefundRequested
	}
	if err := write(tx, &np, p.Version, now); err != nil {
		return err
	}
	step.To, step.Version = np.Status, np.Version
	step.Note = joinNote(step.Note, fmt.Sprintf("refund %s of %s: %s", r.ID, pay.FormatAmount(amount, p.Currency), c.Status))
	if err := tx.AppendStep(step); err != nil {
		return err
	}
	var err error
	switch c.Status {
	case pay.RefundSucceeded:
		err = succeedRefund(tx, np, p.Status, r, now)
		if err == nil && np.Status != p.Status {
			err = tx.AppendOutbox(paymentRecord(np, p.Status, pay.EventType(np.Status), now))
		}
	case pay.RefundFailed:
		err = failRefund(tx, np, p.Status, r, now)
	}
	if err != nil {
		return err
	}
	if res.Refund, err = rt.Refund(r.ID); err != nil {
		return err
	}
	res.Decision = pay.Apply
	res.Payment, res.Flipped = np, c.Status.Terminal()
	return nil
}

// refundRest settles the refunds of a captured payment reported refunded
// in full (a payment.refunded webhook, a human on the review queue): its
// pending refunds succeeded, and what they and the succeeded ones leave is
// refunded by a refund of its own. It sets np's amounts and returns the
// refunds to succeed (succeedRefund) once np is written; a new one is not
// stored yet (ID set, Status pending).
func refundRest(tx Tx, np *pay.Payment, obs pay.Observation, now time.Time) ([]pay.Refund, error) {
	refunds, err := tx.RefundsForPayment(np.ID)
	if err != nil {
		return nil, err
	}
	var settle []pay.Refund
	held := int64(0)
	for _, r := range refunds {
		if r.Status == pay.RefundPending {
			settle = append(settle, r)
		}
		if r.Status != pay.RefundFailed {
			held += r.Amount
		}
	}
	if rest := np.Amount - held; rest > 0 {
		r := pay.Refund{
			ID: ids.Refund(now), PaymentID: np.ID, Provider: np.Provider, Amount: rest, Currency: np.Currency,
			Reason: "the PSP reported the payment refunded in full (" + string(obs.Source) + ")",
			Status: pay.RefundPending, CreatedAt: now, UpdatedAt: now,
		}
		if err := tx.InsertRefund(r); err != nil {
			return nil, err
		}
		settle = append(settle, r)
	}
	np.AmountRefunded, np.AmountRefundPending = np.Amount, 0
	return settle, nil
}

// succeedRefund records refund r of the payment np (written) as
// succeeded: payment.refund.succeeded, and its posting, which reverses
// the capture by the refund's amount.
func succeedRefund(tx Tx, np pay.Payment, from pay.Status, r pay.Refund, now time.Time) error {
	rec := refundRecord(np, from, pay.EventRefundSucceeded, r, pay.RefundSucceeded, now)
	if err := tx.AppendOutbox(rec); err != nil {
		return err
	}
	if err := tx.AppendLedger(refundPosting(rec, r.Amount)); err != nil {
		return err
	}
	r.Status, r.EventID = pay.RefundSucceeded, rec.ID
	return tx.UpdateRefund(r)
}

// failRefund records refund r of the payment np (written) as failed:
// payment.refund.failed; its amount is free again.
func failRefund(tx Tx, np pay.Payment, from pay.Status, r pay.Refund, now time.Time) error {
	rec := refundRecord(np, from, pay.EventRefundFailed, r, pay.RefundFailed, now)
	if err := tx.AppendOutbox(rec); err != nil {
		return err
	}
	r.Status, r.EventID = pay.RefundFailed, rec.ID
	return tx.UpdateRefund(r)
}

// refundPosting is the posting of a succeeded refund: its amount back
// from the merchant's revenue to the customer, out of the PSP receivable.
func refundPosting(rec pay.OutboxRecord, amount int64) []pay.LedgerEntry {
	return move(rec, pay.AccountMerchantRevenue, pay.AccountPSPReceivable, amount)
}

// paymentRecord is the outbox record of type typ about payment np
// (written), which was in status from.
func paymentRecord(np pay.Payment, from pay.Status, typ string, now time.Time) pay.OutboxRecord {
	return pay.OutboxRecord{
		ID: ids.Event(now), Type: typ, PaymentID: np.ID, Status: np.Status, From: from, Version: np.Version,
		OrderID: np.OrderID, Amount: np.Amount, Currency: np.Currency, Customer: np.Customer, Provider: np.Provider,
		CreatedAt: now, AmountRefunded: np.AmountRefunded,
	}
}

// refundRecord is the outbox record of an outcome of refund r.
func refundRecord(np pay.Payment, from pay.Status, typ string, r pay.Refund, st pay.RefundStatus, now time.Time) pay.OutboxRecord {
	rec := paymentRecord(np, from, typ, now)
	rec.RefundID, rec.ObjectAmount, rec.ObjectStatus = r.ID, r.Amount, string(st)
	return rec
}

// refundReview puts p on the review queue about a refund observation that
// was not applied, with the evidence.
func refundReview(tx Tx, p pay.Payment, obs pay.Observation, r pay.Refund, reason, note string) error {
	if err := tx.AppendStep(pay.Step{
		PaymentID: p.ID, At: tx.Now(), Source: obs.Source, Kind: pay.StepIgnoredEvent, From: p.Status, To: p.Status,
		Version: p.Version, EventID: obs.EventID, Note: note,
	}); err != nil {
		return err
	}
	ref := r.ProviderRef
	if ref == "" && obs.Refund != nil {
		ref = obs.Refund.ProviderRef
	}
	_, err := QueueReview(tx, pay.ReviewItem{
		ID: p.ID, PaymentID: p.ID, Reason: reason, Provider: p.Provider, ProviderRef: firstNonEmpty(ref, p.ProviderRef),
		EventID: obs.EventID, Note: note, CreatedAt: tx.Now(),
	}, obs.Source)
	return err
}

// absorb records a stale or conflicting observation of p, its status or
// a refund or a dispute of it (res.Decision says which), as a timeline
// step; a conflicting one also goes on the review queue with note (and
// the status observed, "" for a refund's or a dispute's).
func absorb(tx Tx, p pay.Payment, obs pay.Observation, step pay.Step, res *pay.Result, note string) error {
	if res.Decision == pay.Stale {
		res.Stale = true
		step.Kind = pay.StepStale
		return tx.AppendStep(step)
	}
	res.Anomaly = true
	step.Kind = pay.StepAnomaly
	if err := tx.AppendStep(step); err != nil {
		return err
	}
	_, err := QueueReview(tx, pay.ReviewItem{
		ID: p.ID, PaymentID: p.ID, Reason: pay.ReasonConflictingTerminal, Provider: p.Provider, ProviderRef: p.ProviderRef,
		EventID: obs.EventID, Observed: obs.Status, Note: note, CreatedAt: tx.Now(),
	}, obs.Source)
	return err
}

// describe names the source of an observation for a note.
func describe(obs pay.Observation) string {
	if obs.EventID != "" {
		return string(obs.Source) + " event " + obs.EventID
	}
	return string(obs.Source)
}

// firstNonEmpty returns the first string that is not empty.
func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// RefundRequest is the merchant's request to refund a payment.
type RefundRequest struct {
	Amount int64 // minor units; 0 = whatever is left
	Reason string
}

// Validate checks the request's fields and names the wrong one.
func (r RefundRequest) Validate() error {
	if r.Amount != 0 {
		if err := pay.ValidateAmount(r.Amount); err != nil {
			return err
		}
	}
	return pay.ValidateText("reason", r.Reason, pay.MaxRefundReason)
}

// Refunded is what RefundOnce did under its idempotency key: the refund
// and its payment as committed (for a replay, as they are now), the claim
// and the key's record.
type Refunded struct {
	Refund  pay.Refund
	Payment pay.Payment
	Done
}

// RefundOnce refunds part or all of a captured payment under an
// idempotency key (Idempotency.Do), in two commits. The first claims the
// key and creates the refund (pending, "re_" + ULID) through Apply, the
// key's record naming the payment and the refund naming the key: the
// store refuses a refund that would take the payment's pending and
// succeeded refunds past its amount (pay.ERefundExceeds, 409) and then
// nothing is written, the key included. The PSP is then called with the
// refund's own key ("refund-<refund id>"), outside any transaction, and
// the second commit finalizes its answer (succeeded, pending or failed)
// with the key's answer. A crash between the two leaves the key in
// flight; the retry that takes it over finds the refund by the key and
// asks the PSP again under the same refund key, which answers the first
// refund instead of making a second. An unknown payment is ENOTFOUND,
// stored as the key's answer in one commit. A PSP that refuses the refund
// (EINVALID, EUNSUPPORTED) fails it, freeing its amount, and that error is
// the answer; a PSP that does not answer leaves it pending (the sweeper
// asks later) and is EPSP. A replay, a reused key, a key in flight and a
// payment that cannot be refunded are answered from a read transaction
// and write nothing.
func (s *Payments) RefundOnce(ctx context.Context, paymentID string, req RefundRequest, key IdemKey) (Refunded, error) {
	var out Refunded
	if err := req.Validate(); err != nil {
		return out, err
	}
	obs := pay.Observation{
		PaymentID: paymentID, Source: pay.SourceAPI,
		Refund: &pay.RefundChange{Request: true, Amount: req.Amount, Reason: req.Reason, Status: pay.RefundPending},
	}
	var err error
	out.Done, err = s.keys().Do(ctx, key, Op{
		Check: func(tx Tx, resumed string) error {
			p, err := tx.Payment(paymentID)
			switch {
			case pay.ErrorCode(err) == pay.ENOTFOUND:
				return nil // a final answer, stored on the key (Start)
			case err != nil:
				return err
			case resumed != p.ID:
				if err := refundable(p, req.Amount); err != nil {
					return err
				}
			}
			_, err = s.provider(p.Provider)
			return err
		},
		Start: func(tx Tx, stored, resumed string) (_ string, err error) {
			// The refund of a request that died is resumed; else the
			// refund is created, naming its key.
			if out.Refund, out.Payment, err = refundOfKey(tx, resumed, stored); err != nil || out.Refund.ID != "" {
				return paymentID, err
			}
			o, change := obs, *obs.Refund
			change.IdemKey, o.Refund = stored, &change
			res, err := Apply(tx, o)
			if err != nil {
				return "", err
			}
			tx.OnCommit(func() { s.Finalizer.committed(o, res) })
			out.Refund = res.Refund
			return paymentID, nil
		},
		Run: func(ctx context.Context, _ string, finish func(Tx) error) (err error) {
			out.Refund, out.Payment, err = s.refundAtPSP(ctx, out.Refund, func(tx Tx, _ pay.Result) error { return finish(tx) })
			return err
		},
	})
	if err != nil || out.Claim != ClaimReplay {
		return out, err
	}
	err = ReadTx(ctx, s.Store, func(tx Tx) (err error) {
		out.Refund, out.Payment, err = refundOfKey(tx, out.Record.PaymentID, out.Record.Key)
		return err
	})
	return out, err
}

// refundable says whether p can be refunded by amount (0: the rest):
// pay.DecideRefundRequest on a read, to answer a refused request without
// a write. The transaction that creates the refund decides again.
func refundable(p pay.Payment, amount int64) error {
	_, err := pay.DecideRefundRequest(p, amount)
	return err
}

// refundOfKey returns the refund of payment paymentID that the request
// with the scoped idempotency key created, and the payment; a zero refund
// if there is none.
func refundOfKey(tx Tx, paymentID, key string) (pay.Refund, pay.Payment, error) {
	if paymentID == "" {
		return pay.Refund{}, pay.Payment{}, nil
	}
	p, err := tx.Payment(paymentID)
	if err != nil {
		return pay.Refund{}, pay.Payment{}, err
	}
	refunds, err := tx.RefundsForPayment(paymentID)
	if err != nil {
		return pay.Refund{}, pay.Payment{}, err
	}
	for _, r := range refunds {
		if r.IdemKey == key {
			return r, p, nil
		}
	}
	return pay.Refund{}, p, nil
}

// refundAtPSP calls the payment's provider to refund r (pending) under
// its key and finalizes the answer; then runs in that transaction. A
// refund that is final already (a resumed request) is only answered:
// then runs in a transaction of its own.
func (s *Payments) refundAtPSP(ctx context.Context, r pay.Refund, then func(Tx, pay.Result) error) (pay.Refund, pay.Payment, error) {
	p, err := s.Get(ctx, r.PaymentID)
	if err != nil {
		return pay.Refund{}, pay.Payment{}, err
	}
	if r.Status.Terminal() {
		err := WriteTx(ctx, s.Store, func(tx Tx) error { return then(tx, pay.Result{Payment: p, Refund: r}) })
		return r, p, err
	}
	prov, err := s.provider(p.Provider)
	if err != nil {
		return pay.Refund{}, pay.Payment{}, err
	}
	cctx, cancel := s.pspContext(ctx)
	ans, err := prov.Refund(cctx, p, r, pay.RefundKey(r.ID))
	cancel()
	log := s.Logger.With().Str("payment_id", p.ID).Str("refund_id", r.ID).Logger()
	obs := pay.Observation{PaymentID: p.ID, Source: pay.SourceSync, Refund: &pay.RefundChange{ID: r.ID}}
	var refused error
	switch code := pay.ErrorCode(err); {
	case err == nil:
		obs.Refund.Status, obs.Refund.ProviderRef = ans.Status, ans.ProviderRef
		obs.Note = "refund answer: " + ans.Raw
		if ans.Status == pay.RefundPending && ans.ProviderRef == "" {
			// Nothing new (report mode: no PSP was called): the answer
			// is stored on its own.
			var out pay.Refund
			err := WriteTx(ctx, s.Store, func(tx Tx) error {
				cur, err := tx.Refund(r.ID)
				if err != nil {
					return err
				}
				out = cur
				return then(tx, pay.Result{Payment: p, Refund: cur})
			})
			return out, p, err
		}
	case code == pay.EINVALID || code == pay.EUNSUPPORTED:
		// The PSP answered and refused: nothing was refunded.
		log.Warn().Str("error", pay.ErrorMessage(err)).Msg("refund refused by the PSP")
		obs.Refund.Status = pay.RefundFailed
		obs.Note = "refund refused by the PSP: " + pay.ErrorMessage(err)
		refused = err
	default:
		// The refund may have happened: it stays pending, for the
		// PSP's webhook, a retry with the same key or the sweeper.
		log.Warn().Str("error", pay.ErrorMessage(err)).Msg("refund answer lost")
		if rerr := WriteTx(ctx, s.Store, func(tx Tx) error {
			return Record(tx, p.ID, pay.SourceSync, pay.StepPSPError, "", "", "refund "+r.ID+" answer lost: "+pay.ErrorMessage(err))
		}); rerr != nil {
			log.Warn().Err(rerr).Msg("record refund error")
		}
		return pay.Refund{}, pay.Payment{}, pay.Errorf(pay.EPSP, "the PSP did not confirm refund %s: %s", r.ID, pay.ErrorMessage(err))
	}
	thenIf := then
	if refused != nil {
		thenIf = nil // the refusal is the answer: the caller stores it
	}
	res, err := s.Finalizer.finalize(ctx, obs, nil, thenIf)
	if err != nil {
		return pay.Refund{}, pay.Payment{}, fmt.Errorf("finalize refund %s: %w", r.ID, err)
	}
	if refused != nil {
		return pay.Refund{}, pay.Payment{}, refused
	}
	return res.Refund, res.Payment, nil
}

// Refunds returns a payment's refunds, oldest first; ENOTFOUND for an
// unknown payment.
func (s *Payments) Refunds(ctx context.Context, paymentID string) (refunds []pay.Refund, err error) {
	err = ReadTx(ctx, s.Store, func(tx Tx) error {
		if _, err := tx.Payment(paymentID); err != nil {
			return err
		}
		refunds, err = tx.RefundsForPayment(paymentID)
		return err
	})
	return refunds, err
}

// Disputes returns disputes in a status ("" = any), soonest evidence
// deadline first; limit 0 means pay.DefaultListLimit.
func (s *Payments) Disputes(ctx context.Context, status pay.DisputeStatus, limit int) (ds []pay.Dispute, err error) {
	if limit == 0 {
		limit = pay.DefaultListLimit
	}
	err = ReadTx(ctx, s.Store, func(tx Tx) error {
		ds, err = tx.ListDisputes(pay.DisputeFilter{Status: status, Limit: limit})
		return err
	})
	return ds, err
}
