package pay

import "time"

// PSPAnswer is the last answer of a provider about one payment, as the
// sweeper received it from the status API (or the note that there is none).
// It is kept per payment as evidence for the review queue and carries no
// secret: Raw is the provider's answer as text without client secrets.
type PSPAnswer struct {
	PaymentID string
	Provider  string
	Status    Status // what the PSP said; "" when it did not say
	Found     bool   // false: the PSP does not know the payment
	Raw       string // the answer as text
	Error     string // the call failed (after retries): its client-safe message
	// At is when the answer was first recorded. An answer equal to the
	// stored one is not written again, so a pass that learns nothing new
	// writes nothing.
	At time.Time
}

// Same reports whether a and b say the same thing (At aside).
func (a PSPAnswer) Same(b PSPAnswer) bool {
	a.At, b.At = time.Time{}, time.Time{}
	return a == b
}

// SweeperTx is the part of Tx the reconciliation sweeper needs beyond the
// payment methods: paging through candidates, housekeeping in bounded
// batches through time indexes (so a purge costs O(what it removes), not a
// scan of everything kept), and the last PSP answer of each payment.
type SweeperTx interface {
	// CandidatesAfter is Candidates continued after the candidate
	// (afterUpdated, afterID), in the same order (UpdatedAt, then id): it
	// returns up to limit payments in the given statuses updated strictly
	// before updatedBefore whose (UpdatedAt, ID) is greater than
	// (afterUpdated, afterID). A zero afterUpdated with an empty afterID
	// starts at the oldest. A pass pages through its candidates with the
	// last payment of each page.
	CandidatesAfter(statuses []Status, updatedBefore, afterUpdated time.Time, afterID string, limit int) ([]Payment, error)

	// PurgeIdemKeys removes up to limit idempotency keys whose ExpiresAt
	// is at or before expiredBy, oldest first, and returns how many it
	// removed.
	PurgeIdemKeys(expiredBy time.Time, limit int) (int, error)
	// PurgeProcessed removes up to limit processed event ids recorded
	// (MarkProcessed) strictly before before, oldest first, together with
	// their archived inbox entries, and returns how many event ids it
	// removed. Pending inbox entries are never removed. A redelivery of a
	// purged event is accepted as new.
	PurgeProcessed(before time.Time, limit int) (int, error)
	// PurgeOutbox removes up to limit delivered outbox records (fanned
	// out, no delivery pending, none dead since before) created strictly
	// before before, oldest first, with their effects' dedupe keys, and
	// returns how many it removed. It moves the purge horizon past them.
	PurgeOutbox(before time.Time, limit int) (int, error)
	// OutboxHorizon returns the purge horizon: outbox records created
	// before it may be gone, later ones are all kept; zero if none was
	// ever purged. verify does not ask for a record older than it.
	OutboxHorizon() (time.Time, error)

	// PutPSPAnswer stores a as the payment's last PSP answer, replacing
	// the one before. A zero At becomes Tx.Now.
	PutPSPAnswer(a PSPAnswer) error
	// PSPAnswer returns the payment's last PSP answer, or ENOTFOUND.
	PSPAnswer(paymentID string) (PSPAnswer, error)
}

// DeliveryPurger is implemented by a Tx that keeps ripple delivery state:
// the sweeper removes done deliveries past the retention through it.
type DeliveryPurger interface {
	// PurgeDoneDeliveries removes up to limit done deliveries that were
	// finished strictly before before, and returns how many it removed.
	PurgeDoneDeliveries(before time.Time, limit int) (int, error)
}
