package finalize

// Disputes: the part of Apply for an observation about a dispute
// (chargeback) the PSP reports, with pay.DecideDispute as its transition
// table. A dispute does not change the payment's status; it moves money:
//
//	first seen (any status)   psp_receivable → disputes        payment.dispute.created
//	closed won                disputes → psp_receivable        payment.dispute.closed
//	closed lost               disputes → dispute_losses        payment.dispute.closed
//
// psp_receivable is the merchant's balance at the PSP, from which the PSP
// takes the disputed amount. A dispute first seen closed (its closing
// event came first) is opened and closed in the same write, each move
// posted once; its opening event, coming later, is stale: a closed
// dispute never reopens. Each change writes the payment (a new version),
// so the money moves of one payment are ordered by its compare-and-set.

import (
	"fmt"
	"strings"
	"time"

	"github.com/paystate/paystate/pay"
)

// applyDispute applies an observation about a dispute of p.
func applyDispute(tx Tx, p pay.Payment, obs pay.Observation, step pay.Step, res *pay.Result) error {
	now := tx.Now()
	c := *obs.Dispute
	provider := firstNonEmpty(obs.Provider, p.Provider)
	if c.Status == "" {
		c.Status = pay.DisputeNeedsResponse
	}
	step.To = p.Status
	d, err := tx.Dispute(provider, c.ID)
	found := err == nil
	if err != nil && pay.ErrorCode(err) != pay.ENOTFOUND {
		return err
	}
	switch {
	case !found && !p.Status.Terminal():
		// A dispute follows a capture that is not recorded here yet: the
		// event waits (the inbox applies it later, with backoff).
		return fmt.Errorf("payment %s is %s: dispute %s waits for its capture", p.ID, p.Status, c.ID)
	case !found && p.Status == pay.Failed:
		res.Rejected = pay.ReasonConflictingTerminal
		return disputeReview(tx, p, obs, pay.ReasonConflictingTerminal,
			fmt.Sprintf("%s reported dispute %s for payment %s, which failed here", describe(obs), c.ID, p.ID))
	}
	if found && d.PaymentID != p.ID {
		res.Rejected = pay.ReasonProviderRefConflict
		return disputeReview(tx, p, obs, pay.ReasonProviderRefConflict,
			fmt.Sprintf("%s reported dispute %s for payment %s; it belongs to payment %s", describe(obs), c.ID, p.ID, d.PaymentID))
	}

	if !found {
		// A new dispute: its evidence first.
		if c.Currency != "" && !strings.EqualFold(c.Currency, p.Currency) {
			res.Rejected = pay.ReasonAmountMismatch
			return disputeReview(tx, p, obs, pay.ReasonAmountMismatch,
				fmt.Sprintf("%s reported dispute %s in %s; payment %s is in %s", describe(obs), c.ID, strings.ToUpper(c.Currency), p.ID, p.Currency))
		}
		amount := c.Amount
		if amount == 0 {
			amount = p.Amount // not said: the whole payment
		}
		if amount < 0 || amount > p.Amount {
			res.Rejected = pay.ReasonAmountMismatch
			return disputeReview(tx, p, obs, pay.ReasonAmountMismatch,
				fmt.Sprintf("%s reported dispute %s of %s; payment %s is for %s", describe(obs), c.ID, pay.FormatAmount(amount, p.Currency), p.ID, pay.FormatAmount(p.Amount, p.Currency)))
		}
		d = pay.Dispute{
			Provider: provider, ID: c.ID, PaymentID: p.ID, Amount: amount, Currency: p.Currency, Reason: c.Reason,
			Status: c.Status, EvidenceDueBy: c.EvidenceDueBy.UTC(), CreatedAt: now, UpdatedAt: now,
		}
		step.Kind = pay.StepDisputeOpened
		if d.Status.Closed() {
			step.Kind = pay.StepDisputeClosed // its closing came first
		}
		step.Note = joinNote(step.Note, fmt.Sprintf("dispute %s of %s: %s", d.ID, pay.FormatAmount(d.Amount, d.Currency), d.Status))
		np, err := writeDispute(tx, p, d, step, now)
		if err != nil {
			return err
		}
		if err := openDispute(tx, np, d, now); err != nil {
			return err
		}
		if d.Status.Closed() {
			if err := closeDispute(tx, np, d, now); err != nil {
				return err
			}
		}
		if err := tx.PutDispute(d); err != nil {
			return err
		}
		res.Decision, res.Payment, res.Dispute, res.Flipped = pay.Apply, np, d, true
		return nil
	}

	res.Dispute = d
	res.Decision = pay.DecideDispute(d.Status, c.Status)
	step.Note = joinNote(step.Note, fmt.Sprintf("dispute %s: %s, reported %s", d.ID, d.Status, c.Status))
	switch res.Decision {
	case pay.Apply:
		nd := d
		nd.Status, nd.UpdatedAt = c.Status, now
		if !c.EvidenceDueBy.IsZero() {
			nd.EvidenceDueBy = c.EvidenceDueBy.UTC()
		}
		step.Kind = pay.StepDisputeUpdated
		if nd.Status.Closed() {
			step.Kind = pay.StepDisputeClosed
		}
		np, err := writeDispute(tx, p, nd, step, now)
		if err != nil {
			return err
		}
		if nd.Status.Closed() {
			if err := closeDispute(tx, np, nd, now); err != nil {
				return err
			}
		}
		if err := tx.PutDispute(nd); err != nil {
			return err
		}
		res.Payment, res.Dispute, res.Flipped = np, nd, nd.Status.Closed()

	case pay.Duplicate:
		res.Duplicate = true
		step.Kind = pay.StepDuplicate
		return tx.AppendStep(step)

	case pay.Stale, pay.ConflictingTerminal:
		return absorb(tx, p, obs, step, res, fmt.Sprintf("dispute %s is %s, %s reported %s", d.ID, d.Status, describe(obs), c.Status))
	}
	return nil
}

// writeDispute writes the next version of p for a change of one of its
// disputes, d as it becomes, with its step. The payment's Dispute is its
// disputes' status (pay.DisputeOfPayment), d's new one included: what
// DecideRefundRequest reads in the transaction of a refund.
func writeDispute(tx Tx, p pay.Payment, d pay.Dispute, step pay.Step, now time.Time) (pay.Payment, error) {
	ds, err := tx.DisputesForPayment(p.ID)
	if err != nil {
		return pay.Payment{}, err
	}
	statuses := []pay.DisputeStatus{d.Status}
	for _, o := range ds {
		if o.Provider != d.Provider || o.ID != d.ID {
			statuses = append(statuses, o.Status)
		}
	}
	np := p
	np.Dispute = pay.DisputeOfPayment(statuses...)
	if err := write(tx, &np, p.Version, now); err != nil {
		return pay.Payment{}, err
	}
	step.Version = np.Version
	return np, tx.AppendStep(step)
}

// openDispute appends payment.dispute.created and moves the disputed
// amount from the merchant's balance at the PSP to disputes.
func openDispute(tx Tx, np pay.Payment, d pay.Dispute, now time.Time) error {
	rec := disputeRecord(np, pay.EventDisputeCreated, d, pay.DisputeNeedsResponse, now)
	if err := tx.AppendOutbox(rec); err != nil {
		return err
	}
	return tx.AppendLedger(move(rec, pay.AccountDisputes, pay.AccountPSPReceivable, d.Amount))
}

// closeDispute appends payment.dispute.closed and moves the disputed
// amount out of disputes: back to the merchant's balance if won, to
// dispute_losses if lost.
func closeDispute(tx Tx, np pay.Payment, d pay.Dispute, now time.Time) error {
	rec := disputeRecord(np, pay.EventDisputeClosed, d, d.Status, now)
	if err := tx.AppendOutbox(rec); err != nil {
		return err
	}
	to := pay.AccountPSPReceivable
	if d.Status == pay.DisputeLost {
		to = pay.AccountDisputeLosses
	}
	return tx.AppendLedger(move(rec, to, pay.AccountDisputes, d.Amount))
}

// disputeRecord is the outbox record of a change of dispute d.
func disputeRecord(np pay.Payment, typ string, d pay.Dispute, st pay.DisputeStatus, now time.Time) pay.OutboxRecord {
	rec := paymentRecord(np, np.Status, typ, now)
	rec.DisputeID, rec.ObjectAmount, rec.ObjectStatus = d.ID, d.Amount, string(st)
	return rec
}

// disputeReview puts p on the review queue about a dispute observation
// that was not applied, with the evidence.
func disputeReview(tx Tx, p pay.Payment, obs pay.Observation, reason, note string) error {
	return refundReview(tx, p, obs, pay.Refund{}, reason, note)
}
