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

// PaymentFilter selects payments for a list, newest first. Every field is
// optional; a payment is listed when it matches all that are set (Match).
type PaymentFilter struct {
	Status  Status
	OrderID string
	// CustomerID is matched exactly; CustomerEmail with ASCII letters
	// compared case-insensitively (FoldEmail).
	CustomerID    string
	CustomerEmail string
	// CreatedFrom (inclusive) and CreatedBefore (exclusive) bound
	// CreatedAt; a zero time is no bound.
	CreatedFrom   time.Time
	CreatedBefore time.Time
	Limit         int    // 1..500
	Cursor        string // opaque, from the previous page
}

// Tx is one storage transaction. Values returned by a Tx are copies and stay
// valid after it ends.
//
// Its methods are grouped by record family, in the order of the schema
// table in store/doc.go, and a backend implements every one of them. A
// consumer declares the few it calls as an interface of its own, next to
// its use (finalize, the sweeper, ripple, verify), so that it depends on
// what it needs and a backend can be written and tested family by family.
type Tx interface {
	// Now is the time read when the transaction began, in UTC.
	Now() time.Time
	// OnCommit registers fn to run once after a successful commit.
	OnCommit(fn func())
	// WriteProbe writes Now to the probe record of the meta family,
	// replacing the one before: the smallest write there is, which the
	// readiness check (/readyz) commits to learn that storage takes writes.
	WriteProbe() error

	// Payments and their indexes.

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
	// CandidatesAfter is Candidates continued after the candidate
	// (afterUpdated, afterID), in the same order (UpdatedAt, then id): it
	// returns up to limit payments in the given statuses updated strictly
	// before updatedBefore whose (UpdatedAt, ID) is greater than
	// (afterUpdated, afterID). A zero afterUpdated with an empty afterID
	// starts at the oldest. A pass pages through its candidates with the
	// last payment of each page.
	CandidatesAfter(statuses []Status, updatedBefore, afterUpdated time.Time, afterID string, limit int) ([]Payment, error)
	// PaymentCounts returns how many payments are in each status; a
	// status with none is left out. /metrics asks it at every scrape, so a
	// backend answers from an index, without decoding payments.
	PaymentCounts() (map[Status]int, error)

	// Timeline.

	// AppendStep appends s to its payment's timeline, assigning s.Seq.
	AppendStep(s Step) error
	// Steps returns a payment's timeline in order.
	Steps(paymentID string) ([]Step, error)

	// Inbox and processed event ids.

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
	// PurgeProcessed removes up to limit processed event ids recorded
	// (MarkProcessed) strictly before before, oldest first, together with
	// their archived inbox entries, and returns how many event ids it
	// removed. Pending inbox entries are never removed. A redelivery of a
	// purged event is accepted as new.
	PurgeProcessed(before time.Time, limit int) (int, error)

	// Leases.

	// AcquireLease takes the payment's lease for holder until Now+ttl, with a
	// token one higher than any before; ELEASEHELD if a lease is in force,
	// whoever holds it (a holder does not re-enter its own lease).
	AcquireLease(paymentID, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends the lease if token is still current; otherwise it
	// does nothing. The token counter is kept.
	ReleaseLease(paymentID string, token uint64) error
	// Lease returns the payment's current lease record (Token 0 if never taken).
	Lease(paymentID string) (Lease, error)

	// Outbox and deliveries.

	// AppendOutbox appends r, assigning r.Seq.
	AppendOutbox(r OutboxRecord) error
	// OutboxForPayment returns a payment's outbox records in order.
	OutboxForPayment(paymentID string) ([]OutboxRecord, error)
	// OutboxAfter returns up to limit outbox records with Seq > seq, in Seq
	// order.
	OutboxAfter(seq uint64, limit int) ([]OutboxRecord, error)
	// OutboxRecord returns the outbox record with the given Seq, or ENOTFOUND.
	OutboxRecord(seq uint64) (OutboxRecord, error)
	// RippleCursor returns the Seq of the last outbox record fanned out to
	// deliveries, 0 if none.
	RippleCursor() (uint64, error)
	// SetRippleCursor records the last outbox record fanned out.
	SetRippleCursor(seq uint64) error
	// PurgeOutbox removes up to limit delivered outbox records (fanned
	// out, no delivery pending, none dead since before) created strictly
	// before before, oldest first, with their effects' dedupe keys, and
	// returns how many it removed. It moves the purge horizon past them.
	PurgeOutbox(before time.Time, limit int) (int, error)
	// OutboxHorizon returns the purge horizon: outbox records created
	// before it may be gone, later ones are all kept; zero if none was
	// ever purged. verify does not ask for a record older than it.
	OutboxHorizon() (time.Time, error)
	// InsertDelivery stores a new delivery; ECONFLICT if the id exists.
	InsertDelivery(d Delivery) error
	// Delivery returns one delivery, or ENOTFOUND.
	Delivery(id string) (Delivery, error)
	// UpdateDelivery writes the state, attempts, schedule, error and note
	// of a stored delivery (UpdatedAt becomes Now) and moves its index
	// entries; ENOTFOUND if it is not stored.
	UpdateDelivery(d Delivery) error
	// DueDeliveries returns up to limit pending deliveries due at or before
	// due, soonest first, leaving out those behind an earlier pending
	// record of the same payment for the same target.
	DueDeliveries(due time.Time, limit int) ([]Delivery, error)
	// DueDeliveriesSkipping is DueDeliveries passing over, without reading
	// them, the deliveries whose id skip reports (nil skips none); they do
	// not count against limit.
	DueDeliveriesSkipping(due time.Time, limit int, skip func(id string) bool) ([]Delivery, error)
	// ListDeliveries returns a page of deliveries in one state and the
	// cursor of the next page ("" at the end).
	ListDeliveries(f DeliveryFilter) ([]Delivery, string, error)
	// OldestPendingDelivery returns the pending delivery with the oldest
	// event, and false if none is pending.
	OldestPendingDelivery() (Delivery, bool, error)
	// CountDeliveries returns how many deliveries are in a state.
	CountDeliveries(state string) (int, error)
	// PurgeDoneDeliveries removes up to limit done deliveries that were
	// finished strictly before before, and returns how many it removed.
	PurgeDoneDeliveries(before time.Time, limit int) (int, error)

	// Ledger.

	// AppendLedger appends journal lines, assigning their Seq.
	AppendLedger(entries []LedgerEntry) error
	// LedgerBalances returns the balance of every account and currency.
	LedgerBalances() ([]Balance, error)
	// LedgerEntries returns up to limit journal lines with a Seq greater
	// than afterSeq, in Seq order (0 starts at the first line).
	LedgerEntries(afterSeq uint64, limit int) ([]LedgerEntry, error)

	// Review queue.

	// PutReview adds or replaces a review item.
	PutReview(item ReviewItem) error
	// Review returns one review item, or ENOTFOUND.
	Review(id string) (ReviewItem, error)
	// ListReview returns every review item, oldest first.
	ListReview() ([]ReviewItem, error)
	// DeleteReview removes a review item (resolved).
	DeleteReview(id string) error

	// Idempotency keys.

	// IdemKey returns the record of a scoped idempotency key, or ENOTFOUND.
	IdemKey(key string) (IdemRecord, error)
	// PutIdemKey stores r under r.Key.
	PutIdemKey(r IdemRecord) error
	// ClaimIdemKey stores r unless its key has a record, and reports
	// whether it did; if not, it returns the record stored, which no other
	// transaction changes before this one ends (the one way a request
	// claims its key).
	ClaimIdemKey(r IdemRecord) (stored IdemRecord, claimed bool, err error)
	// PurgeIdemKeys removes up to limit idempotency keys whose ExpiresAt
	// is at or before expiredBy, oldest first, and returns how many it
	// removed.
	PurgeIdemKeys(expiredBy time.Time, limit int) (int, error)

	// Effect state: customer accounts, effect dedupe records, merchant
	// webhook endpoints.

	// CustomerAccount returns a customer's account, or ENOTFOUND.
	CustomerAccount(id string) (CustomerAccount, error)
	// PutCustomerAccount stores a customer's account (UpdatedAt becomes Now).
	PutCustomerAccount(c CustomerAccount) error
	// Effect returns the record of a dedupe key and whether there is one.
	Effect(key string) (EffectRecord, bool, error)
	// PutEffect stores the record of a dedupe key.
	PutEffect(r EffectRecord) error
	// ClaimEffect stores r unless its key has a record, and reports
	// whether it did (the one way an effect claims its dedupe key).
	ClaimEffect(r EffectRecord) (bool, error)
	// WebhookEndpoint returns an endpoint's state; one never stored is
	// returned enabled with only its ID set.
	WebhookEndpoint(id string) (WebhookEndpoint, error)
	// PutWebhookEndpoint stores an endpoint's state (UpdatedAt becomes Now).
	PutWebhookEndpoint(e WebhookEndpoint) error

	// PSP answers.

	// PutPSPAnswer stores a as the payment's last PSP answer, replacing
	// the one before. A zero At becomes Tx.Now.
	PutPSPAnswer(a PSPAnswer) error
	// PSPAnswer returns the payment's last PSP answer, or ENOTFOUND.
	PSPAnswer(paymentID string) (PSPAnswer, error)

	// The simulated PSP's charges.

	// PutPSPCharge stores c under its key, replacing the one before.
	PutPSPCharge(c PSPCharge) error
	// PSPCharge returns the charge made with key, or ENOTFOUND.
	PSPCharge(key string) (PSPCharge, error)

	// Refunds.

	// InsertRefund stores a new refund; ECONFLICT if its id exists or
	// another refund of its provider has its provider reference,
	// ENOTFOUND if its payment is not stored, EINVALID for a currency
	// other than the payment's, and ERefundExceeds if the payment's
	// pending and succeeded refunds, with this one, would sum to more
	// than the payment's amount. The sum is taken in the transaction from
	// the stored refunds, so concurrent refunds of one payment cannot
	// over-refund.
	InsertRefund(r Refund) error
	// UpdateRefund writes the status, provider reference, event id and
	// UpdatedAt of a stored refund and moves its index entries; ENOTFOUND
	// if it is not stored, and the same checks as InsertRefund.
	UpdateRefund(r Refund) error
	// Refund returns one refund, or ENOTFOUND.
	Refund(id string) (Refund, error)
	// RefundByRef finds a refund by its provider and the PSP's reference,
	// or ENOTFOUND.
	RefundByRef(provider, ref string) (Refund, error)
	// RefundsForPayment returns a payment's refunds, oldest first.
	RefundsForPayment(paymentID string) ([]Refund, error)
	// PendingRefunds returns up to f.Limit pending refunds updated
	// strictly before f.UpdatedBefore whose (UpdatedAt, ID) is greater
	// than (f.AfterUpdated, f.AfterID), oldest first: the sweeper's
	// candidates, through an index of pending refunds.
	PendingRefunds(f RefundFilter) ([]Refund, error)

	// Disputes.

	// PutDispute stores d under (d.Provider, d.ID), replacing the one
	// before, and moves its index entries.
	PutDispute(d Dispute) error
	// Dispute returns one dispute, or ENOTFOUND.
	Dispute(provider, id string) (Dispute, error)
	// DisputesForPayment returns a payment's disputes, by provider and id.
	DisputesForPayment(paymentID string) ([]Dispute, error)
	// ListDisputes returns up to f.Limit disputes (1..MaxListLimit) in
	// f.Status ("" = any), soonest evidence deadline first, those without
	// one last.
	ListDisputes(f DisputeFilter) ([]Dispute, error)
	// CountOpenDisputes returns how many disputes are needs_response or
	// under_review.
	CountOpenDisputes() (int, error)

	// Settlement reconciliation (reconcile.go).

	// PutSettlement stores s under (s.Provider, s.ID), replacing the one
	// before; a settlement of a payment (PaymentID set) needs the payment
	// stored (ENOTFOUND).
	PutSettlement(s Settlement) error
	// ClaimSettlement stores s under (s.Provider, s.ID) if nothing is
	// stored there, and reports true; else it returns the settlement
	// stored and false, changing nothing. It is the claim of a
	// balance-transaction id: of transactions that claim one id at the
	// same time, in this process or another, one stores it, and the
	// others wait for it to end and see what it stored. The checks of
	// PutSettlement apply.
	ClaimSettlement(s Settlement) (Settlement, bool, error)
	// ClaimSettlementPayout sets the payout of the stored settlement
	// (provider, id) to payoutID, and UpdatedAt to at, if it has none yet,
	// and reports whether it did; ENOTFOUND if nothing is stored. Of
	// transactions that claim one payout at the same time, one sets it.
	ClaimSettlementPayout(provider, id, payoutID string, at time.Time) (bool, error)
	// Settlement returns one settlement, or ENOTFOUND.
	Settlement(provider, id string) (Settlement, error)
	// SettlementsForPayment returns a payment's settlements, by provider
	// and id.
	SettlementsForPayment(paymentID string) ([]Settlement, error)
	// ListSettlements returns up to limit (1..MaxListLimit) settlements
	// after (afterProvider, afterID), by provider and id ("" "" starts at
	// the first).
	ListSettlements(afterProvider, afterID string, limit int) ([]Settlement, error)
	// PutReconRun stores a reconciliation run, replacing one with its id.
	PutReconRun(r ReconRun) error
	// ReconRun returns one reconciliation run, or ENOTFOUND.
	ReconRun(id string) (ReconRun, error)
	// ListReconRuns returns up to limit (1..MaxListLimit) runs with an id
	// before beforeID ("" = from the newest), newest first.
	ListReconRuns(beforeID string, limit int) ([]ReconRun, error)
}
