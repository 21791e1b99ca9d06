package pay

import (
	"context"
	"time"
)

// Store is paystate's storage. The bbolt adapter (package store) is the
// embedded default; every backend passes the suite in store/storetest.
type Store interface {
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(tx Tx) error) error
	// Update runs fn in a read-write transaction and commits it if fn returns
	// nil. fn may run more than once (group commit) and must have no effect
	// outside the transaction; use Tx.OnCommit for those.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// Close closes the store.
	Close() error
}

// PaymentFilter selects payments for a list, newest first.
type PaymentFilter struct {
	Status  Status // optional
	OrderID string // optional
	Limit   int    // 1..500
	Cursor  string // opaque, from the previous page
}

// Tx is one storage transaction. Values returned by a Tx are copies and stay
// valid after it ends.
type Tx interface {
	// Now is the time read when the transaction began, in UTC.
	Now() time.Time
	// OnCommit registers fn to run once after a successful commit.
	OnCommit(fn func())
	RippleTx
	SweeperTx

	// Payment returns the payment with the given id, or ENOTFOUND.
	Payment(id string) (Payment, error)
	// PaymentByRef finds a payment by the provider's reference, or ENOTFOUND.
	PaymentByRef(provider, ref string) (Payment, error)
	// InsertPayment stores a new payment (Version 1); ECONFLICT if the id exists.
	InsertPayment(p Payment) error
	// UpdatePayment writes p with compare-and-set: the stored version must be
	// prev and p.Version must be prev+1, else ECONFLICT. It maintains every
	// index (status+time, order id, provider reference).
	UpdatePayment(p Payment, prev uint64) error
	// ListPayments returns a page of payments, newest first, and the cursor of
	// the next page ("" at the end).
	ListPayments(f PaymentFilter) ([]Payment, string, error)
	// Candidates returns up to limit payments in the given statuses whose
	// UpdatedAt is before the given time, oldest first, through the
	// status+time index.
	Candidates(statuses []Status, updatedBefore time.Time, limit int) ([]Payment, error)

	// AppendStep appends s to its payment's timeline, assigning s.Seq.
	AppendStep(s Step) error
	// Steps returns a payment's timeline in order.
	Steps(paymentID string) ([]Step, error)

	// PutInbox stores a new webhook event as pending. It returns false and
	// stores nothing if (provider, event id) is already in the inbox.
	PutInbox(e InboxEvent) (bool, error)
	// InboxEvent returns one stored event, or ENOTFOUND.
	InboxEvent(provider, eventID string) (InboxEvent, error)
	// InboxForPayment returns the archived webhooks of a payment, oldest first.
	InboxForPayment(paymentID string) ([]InboxEvent, error)
	// PendingInbox returns up to limit unprocessed events due at or before due.
	PendingInbox(due time.Time, limit int) ([]InboxEvent, error)
	// DeferInbox records a deferral of a pending event.
	DeferInbox(provider, eventID string, next time.Time, lastErr string) error
	// IsProcessed reports whether the event was applied.
	IsProcessed(provider, eventID string) (bool, error)
	// MarkProcessed records the event as applied (at Now) and takes it off
	// the pending list.
	MarkProcessed(provider, eventID string) error

	// AcquireLease takes the payment's lease for holder until Now+ttl, with a
	// token one higher than any before; ELEASEHELD if a lease is in force,
	// whoever holds it (a holder does not re-enter its own lease).
	AcquireLease(paymentID, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends the lease if token is still current; otherwise it
	// does nothing. The token counter is kept.
	ReleaseLease(paymentID string, token uint64) error
	// Lease returns the payment's current lease record (Token 0 if never taken).
	Lease(paymentID string) (Lease, error)

	// AppendOutbox appends r, assigning r.Seq.
	AppendOutbox(r OutboxRecord) error
	// OutboxForPayment returns a payment's outbox records in order.
	OutboxForPayment(paymentID string) ([]OutboxRecord, error)

	// AppendLedger appends journal lines, assigning their Seq.
	AppendLedger(entries []LedgerEntry) error
	// LedgerBalances returns the balance of every account and currency.
	LedgerBalances() ([]Balance, error)

	// PutReview adds or replaces a review item.
	PutReview(item ReviewItem) error
	// Review returns one review item, or ENOTFOUND.
	Review(id string) (ReviewItem, error)
	// ListReview returns every review item, oldest first.
	ListReview() ([]ReviewItem, error)
	// DeleteReview removes a review item (resolved).
	DeleteReview(id string) error

	// IdemKey returns the record of a scoped idempotency key, or ENOTFOUND.
	IdemKey(key string) (IdemRecord, error)
	// PutIdemKey stores r under r.Key.
	PutIdemKey(r IdemRecord) error
}
