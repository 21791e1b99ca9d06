package finalize

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/pay"
)

// StatusDismissed is the resolution of an orphan review item (a PSP event
// for a payment paystate does not know): there is no local payment to
// finalize, so the item can only be dismissed, with a note. A review item
// of a payment is resolved with a payment status instead.
const StatusDismissed = "dismissed"

// maxReviewNote bounds the note of a resolution, in bytes.
const maxReviewNote = 1000

// QueueReview puts a payment (or, with no PaymentID, an orphan event) on
// the review queue inside tx and appends a timeline step of kind
// pay.StepReview with source, the item's event id and its reason and note.
// It is the one way paystate queues a review item; Review.Resolve and
// DropSettled are the ways one leaves the queue.
//
// A payment already on the queue keeps its item (its reason and evidence
// stay; a human looks at the whole payment anyway) and the new evidence
// goes into the timeline only; a repeat of the same reason without an
// event (a sweeper pass that learned nothing new) writes nothing, and so
// does an unresolved item for a payment queued for any reason. Two
// exceptions: a conflicting_terminal item (two final outcomes disagree)
// replaces any item before it, an unresolved one included, which the
// sweeper would drop once the payment is final; and its timeline step is
// the anomaly step Apply appends, so QueueReview appends none. It reports
// whether it added the item. It has no effect outside tx.
func QueueReview(tx Tx, item pay.ReviewItem, source pay.Source) (bool, error) {
	if item.CreatedAt.IsZero() {
		item.CreatedAt = tx.Now()
	}
	if item.PaymentID == "" {
		return true, tx.PutReview(item)
	}
	p, err := tx.Payment(item.PaymentID)
	if err != nil {
		return false, err
	}
	if item.ID == "" {
		item.ID = p.ID
	}
	old, err := tx.Review(item.ID)
	added := pay.ErrorCode(err) == pay.ENOTFOUND
	switch {
	case err != nil && !added:
		return false, err
	case item.Reason == pay.ReasonConflictingTerminal:
		return added, tx.PutReview(item)
	case !added && (item.Reason == pay.ReasonUnresolved || (old.Reason == item.Reason && item.EventID == "")):
		return false, nil
	case added:
		if err := tx.PutReview(item); err != nil {
			return false, err
		}
	}
	note := item.Reason
	if item.Note != "" {
		note += ": " + item.Note
	}
	if err := tx.AppendStep(pay.Step{
		PaymentID: p.ID, At: tx.Now(), Source: source, Kind: pay.StepReview,
		From: p.Status, To: p.Status, Version: p.Version, EventID: item.EventID, Note: note,
	}); err != nil {
		return false, err
	}
	return added, nil
}

// AnswerText is a PSP status answer as a review item keeps it (LastPSP).
func AnswerText(a pay.PSPAnswer) string {
	switch {
	case a.Error != "":
		return "error: " + a.Error
	case !a.Found:
		return "not found: " + a.Raw
	}
	return string(a.Status) + ": " + a.Raw
}

// DropSettled takes an unresolved review item off the queue inside tx if
// its payment has become final since it was queued (a late webhook, a
// later sweeper pass), and returns the payment's status. It reports false,
// and changes nothing, for an item that is gone, queued for another reason
// meanwhile, or whose payment is still open.
func DropSettled(tx Tx, itemID string) (pay.Status, bool, error) {
	it, err := tx.Review(itemID)
	if pay.ErrorCode(err) == pay.ENOTFOUND || (err == nil && (it.Reason != pay.ReasonUnresolved || it.PaymentID == "")) {
		return "", false, nil // resolved or replaced meanwhile
	} else if err != nil {
		return "", false, err
	}
	p, err := tx.Payment(it.PaymentID)
	if pay.ErrorCode(err) == pay.ENOTFOUND {
		return "", false, nil // a human decides
	} else if err != nil || !p.Status.Terminal() {
		return "", false, err
	}
	return p.Status, true, tx.DeleteReview(it.ID)
}

// Review is the review queue as a human works through it: the items with
// their evidence, and their resolution. It reads and writes through the
// Finalizer's store.
type Review struct {
	Finalizer *Finalizer
	// Leases is taken for a payment's resolution (holder
	// "review/<process>"), so the sweeper and the inbox stay out.
	Leases *Leases
	Logger zerolog.Logger
}

// ReviewCase is one review item with what a human needs to decide: the
// payment (nil for an orphan, or a payment not found), its timeline, the
// raw webhooks received for it (for an orphan: the event nobody could
// place) and the last answer of the PSP's status API (nil if never asked).
type ReviewCase struct {
	Item     pay.ReviewItem
	Payment  *pay.Payment
	Timeline []pay.Step
	Webhooks []pay.InboxEvent
	LastPSP  *pay.PSPAnswer
}

// Queue returns every review item, oldest first, each with its evidence,
// read in one transaction. The queue is meant to stay short (it is what a
// human works through), so it is not paged.
func (r *Review) Queue(ctx context.Context) ([]ReviewCase, error) {
	var out []ReviewCase
	err := ReadTx(ctx, r.Finalizer.Store, func(tx Tx) error {
		out = nil
		items, err := tx.ListReview()
		if err != nil {
			return err
		}
		for _, it := range items {
			c, err := reviewCase(tx, it)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// reviewCase reads one item's evidence inside tx.
func reviewCase(tx Tx, it pay.ReviewItem) (ReviewCase, error) {
	c := ReviewCase{Item: it}
	found := func(err error) (bool, error) {
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			return false, nil
		}
		return err == nil, err
	}
	if it.PaymentID != "" {
		p, err := tx.Payment(it.PaymentID)
		if ok, err := found(err); err != nil {
			return c, err
		} else if ok {
			c.Payment = &p
		}
		if c.Timeline, err = tx.Steps(it.PaymentID); err != nil {
			return c, err
		}
		if c.Webhooks, err = tx.InboxForPayment(it.PaymentID); err != nil {
			return c, err
		}
		a, err := tx.PSPAnswer(it.PaymentID)
		if ok, err := found(err); err != nil {
			return c, err
		} else if ok {
			c.LastPSP = &a
		}
	} else if it.EventID != "" && it.Provider != "" {
		// An orphan: the event that nobody could place is the evidence.
		e, err := tx.InboxEvent(it.Provider, it.EventID)
		if ok, err := found(err); err != nil {
			return c, err
		} else if ok {
			c.Webhooks = append(c.Webhooks, e)
		}
	}
	if c.LastPSP == nil && it.LastPSP != "" {
		// The answer that queued the item, kept on it.
		c.LastPSP = &pay.PSPAnswer{Raw: it.LastPSP, Found: true}
	}
	return c, nil
}

// Resolution is what Resolve did: the payment as finalized, or, for an
// orphan, that the item was dismissed.
type Resolution struct {
	Item      pay.ReviewItem
	Payment   pay.Payment // zero for a dismissed orphan
	Dismissed bool
}

// Resolve settles review item id with a human's decision: status is a
// payment status, or StatusDismissed for an orphan; note (1..1000 bytes,
// required) is the human's reason, kept in the timeline.
//
// A payment's item: under the payment's lease, one transaction checks the
// state machine on the stored payment, finalizes status with source review
// and the note like any other observation, and removes the item, so a
// crash leaves either the item open and the payment as it was, or both
// done. A status the state machine would ignore (older than the stored
// one) or refuse (another final outcome than the stored one) is ECONFLICT
// and changes nothing. Resolving with the current status keeps it and
// takes the item off the queue (the sweeper queues the payment again if
// the PSP still cannot settle it). An orphan item has no payment: status
// must be StatusDismissed, and the item is removed.
func (r *Review) Resolve(ctx context.Context, id, status, note string) (Resolution, error) {
	if note == "" {
		return Resolution{}, pay.Invalidf("note", "field note: required, say why")
	}
	if err := pay.ValidateText("note", note, maxReviewNote); err != nil {
		return Resolution{}, err
	}
	var it pay.ReviewItem
	if err := ReadTx(ctx, r.Finalizer.Store, func(tx Tx) (err error) { it, err = tx.Review(id); return err }); err != nil {
		return Resolution{}, err
	}

	if it.PaymentID == "" {
		if status != StatusDismissed {
			return Resolution{}, pay.Invalidf("status", "field status: review item %s is an orphan (no payment here): it can only be %q", it.ID, StatusDismissed)
		}
		if err := WriteTx(ctx, r.Finalizer.Store, func(tx Tx) error { return tx.DeleteReview(it.ID) }); err != nil {
			return Resolution{}, err
		}
		r.Logger.Info().Str("review_id", it.ID).Str("provider", it.Provider).Str("event_id", it.EventID).
			Str("provider_ref", it.ProviderRef).Str("note", note).Msg("orphan review item dismissed")
		return Resolution{Item: it, Dismissed: true}, nil
	}

	if status == StatusDismissed {
		return Resolution{}, pay.Invalidf("status", "field status: %q is only for orphan items; resolve payment %s with its status", StatusDismissed, it.PaymentID)
	}
	st, err := pay.ParseStatus(status)
	if err != nil {
		return Resolution{}, pay.Invalidf("status", "field status: %s", pay.ErrorMessage(err))
	}
	// The state machine still holds, checked on the record the same
	// transaction finalizes.
	decide := func(tx Tx) error {
		cur, err := tx.Payment(it.PaymentID)
		if err != nil {
			return err
		}
		switch pay.Decide(cur.Status, st) {
		case pay.Stale:
			return pay.Errorf(pay.ECONFLICT, "payment %s is %s: %s is an older status and would be ignored; resolve with a final status", cur.ID, cur.Status, st)
		case pay.ConflictingTerminal:
			return pay.Errorf(pay.ECONFLICT, "payment %s is %s: the state machine does not move a final payment to %s", cur.ID, cur.Status, st)
		}
		return nil
	}
	// The item goes in the transaction that writes the decision.
	remove := func(tx Tx, _ pay.Result) error {
		if err := tx.DeleteReview(it.ID); pay.ErrorCode(err) != pay.ENOTFOUND {
			return err
		}
		return nil
	}
	var res pay.Result
	err = r.Leases.Do(ctx, it.PaymentID, func(ctx context.Context, token uint64) error {
		var err error
		res, err = r.Finalizer.finalize(ctx, pay.Observation{
			PaymentID: it.PaymentID, Source: pay.SourceReview, Status: st,
			LeaseToken: token, Note: "review: " + note,
		}, decide, remove)
		return err
	})
	if err != nil {
		return Resolution{}, err
	}
	r.Logger.Info().Str("payment_id", it.PaymentID).Str("review_id", it.ID).Str("reason", it.Reason).
		Str("status", string(res.Payment.Status)).Uint64("version", res.Payment.Version).Str("note", note).
		Msg("review item resolved")
	return Resolution{Item: it, Payment: res.Payment}, nil
}
