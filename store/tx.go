package store

import (
	"context"
	"time"

	"github.com/paystate/paystate/pay"
)

// Store is paystate's storage: one backend (store/bolt, store/postgres)
// behind Open. Every backend passes the suite in store/storetest.
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

// Tx is one storage transaction: every record family, each declared
// below in the order of the schema table in store/bolt/doc.go. Values
// returned by a Tx are copies and stay valid after it ends. A backend
// implements every family; a consumer declares the families it uses as
// an interface of its own, next to its use (finalize, the sweeper,
// ripple, verify), and receives only those.
type Tx interface {
	Core
	Probe
	Payments
	Timeline
	Inbox
	Leases
	Outbox
	Deliveries
	Ledger
	Review
	Idempotency
	Effects
	PSPAnswers
	PSPCharges
	Refunds
	Disputes
	Settlements
}

// View runs fn in a read transaction of s, handing it the transaction
// as T: the families a consumer declares, and all that its function
// receives. as is the consumer's conversion, func(tx store.Tx) T { return
// tx }, in which the compiler checks that a Tx has those families.
func View[T any](ctx context.Context, s Store, as func(Tx) T, fn func(T) error) error {
	return s.View(ctx, func(tx Tx) error { return fn(as(tx)) })
}

// Update runs fn in a write transaction of s (Store.Update), handing it
// the transaction as T (View).
func Update[T any](ctx context.Context, s Store, as func(Tx) T, fn func(T) error) error {
	return s.Update(ctx, func(tx Tx) error { return fn(as(tx)) })
}

// Core is what every transaction has: the time it began and the
// callbacks that run after its commit.
type Core interface {
	// Now is the time read when the transaction began, in UTC.
	Now() time.Time
	// OnCommit registers fn to run once after a successful commit.
	OnCommit(fn func())
}

// Probe is the meta family's one write (/readyz).
type Probe interface {
	// WriteProbe writes Now to the probe record of the meta family,
	// replacing the one before: the smallest write there is, which the
	// readiness check (/readyz) commits to learn that storage takes writes.
	WriteProbe() error
}

// Payments is the payments family and its indexes.
type Payments interface {
	// Payment returns the payment with the given id, or ENOTFOUND.
	Payment(id string) (pay.Payment, error)
	// PaymentByRef finds a payment by the provider's reference, or ENOTFOUND.
	PaymentByRef(provider, ref string) (pay.Payment, error)
	// InsertPayment stores a new payment (Version 1); ECONFLICT if the id exists.
	InsertPayment(p pay.Payment) error
	// UpdatePayment writes p with compare-and-set: the stored version must be
	// prev and p.Version must be prev+1, else ECONFLICT. It maintains every
	// index (status+time, order id, provider reference).
	UpdatePayment(p pay.Payment, prev uint64) error
	// ListPayments returns a page of payments, newest first, and the cursor of
	// the next page ("" at the end).
	ListPayments(f pay.PaymentFilter) ([]pay.Payment, string, error)
	// Candidates returns up to limit payments in the given statuses whose
	// UpdatedAt is before the given time, oldest first, through the
	// status+time index.
	Candidates(statuses []pay.Status, updatedBefore time.Time, limit int) ([]pay.Payment, error)
	// CandidatesAfter is Candidates continued after the candidate
	// (afterUpdated, afterID), in the same order (UpdatedAt, then id): it
	// returns up to limit payments in the given statuses updated strictly
	// before updatedBefore whose (UpdatedAt, ID) is greater than
	// (afterUpdated, afterID). A zero afterUpdated with an empty afterID
	// starts at the oldest. A pass pages through its candidates with the
	// last payment of each page.
	CandidatesAfter(statuses []pay.Status, updatedBefore, afterUpdated time.Time, afterID string, limit int) ([]pay.Payment, error)
	// PaymentCounts returns how many payments are in each status; a
	// status with none is left out. /metrics asks it at every scrape, so a
	// backend answers from an index, without decoding payments.
	PaymentCounts() (map[pay.Status]int, error)
}

// Timeline is each payment's steps.
type Timeline interface {
	// AppendStep appends s to its payment's timeline, assigning s.Seq.
	AppendStep(s pay.Step) error
	// Steps returns a payment's timeline in order.
	Steps(paymentID string) ([]pay.Step, error)
}

// Inbox is the webhook inbox and the processed event ids.
type Inbox interface {
	// PutInbox stores a new webhook event as pending. It returns false and
	// stores nothing if (provider, event id) is already in the inbox.
	PutInbox(e pay.InboxEvent) (bool, error)
	// InboxEvent returns one stored event, or ENOTFOUND.
	InboxEvent(provider, eventID string) (pay.InboxEvent, error)
	// InboxForPayment returns the archived webhooks of a payment, oldest first.
	InboxForPayment(paymentID string) ([]pay.InboxEvent, error)
	// PendingInbox returns up to limit unprocessed events due at or before due.
	PendingInbox(due time.Time, limit int) ([]pay.InboxEvent, error)
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
}

// Leases is the payments' leases and their fencing tokens.
type Leases interface {
	// AcquireLease takes the payment's lease for holder until Now+ttl, with a
	// token one higher than any before; ELEASEHELD if a lease is in force,
	// whoever holds it (a holder does not re-enter its own lease).
	AcquireLease(paymentID, holder string, ttl time.Duration) (pay.Lease, error)
	// ReleaseLease ends the lease if token is still current; otherwise it
	// does nothing. The token counter is kept.
	ReleaseLease(paymentID string, token uint64) error
	// Lease returns the payment's current lease record (Token 0 if never taken).
	Lease(paymentID string) (pay.Lease, error)
}

// Outbox is the outbox records that a transition appends, and the
// cursor and horizon of their fan-out and purge.
type Outbox interface {
	// AppendOutbox appends r, assigning r.Seq.
	AppendOutbox(r pay.OutboxRecord) error
	// OutboxForPayment returns a payment's outbox records in order.
	OutboxForPayment(paymentID string) ([]pay.OutboxRecord, error)
	// OutboxAfter returns up to limit outbox records with Seq > seq, in Seq
	// order.
	OutboxAfter(seq uint64, limit int) ([]pay.OutboxRecord, error)
	// OutboxRecord returns the outbox record with the given Seq, or ENOTFOUND.
	OutboxRecord(seq uint64) (pay.OutboxRecord, error)
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
	// ClaimUnfanned returns up to limit outbox records that are not fanned
	// out, in Seq order, none behind an earlier record of its payment that
	// is not fanned out; the caller writes their deliveries and calls
	// MarkFanned in the same transaction. A backend with several writers
	// holds them to the end of the transaction and skips those another
	// holds (PostgreSQL: FOR UPDATE SKIP LOCKED); bbolt, with one writer,
	// returns the records after the fan-out cursor.
	ClaimUnfanned(limit int) ([]pay.OutboxRecord, error)
	// MarkFanned marks outbox records claimed by ClaimUnfanned fanned out
	// (bbolt: moves the fan-out cursor past the last of them).
	MarkFanned(seqs []uint64) error
}

// Deliveries is the deliveries of outbox records to their targets.
type Deliveries interface {
	// ClaimDeliveries returns the deliveries among ids that are pending,
	// due at Now and first in line (no earlier record of their payment is
	// pending for their target: DueDeliveries' rule), by id, each held to
	// the end of the transaction; those that another transaction holds
	// are skipped, not waited for (PostgreSQL: FOR NO KEY UPDATE SKIP
	// LOCKED; bbolt's one writer holds them all).
	ClaimDeliveries(ids []string) ([]pay.Delivery, error)
	// InsertDelivery stores a new delivery; ECONFLICT if the id exists.
	InsertDelivery(d pay.Delivery) error
	// Delivery returns one delivery, or ENOTFOUND.
	Delivery(id string) (pay.Delivery, error)
	// UpdateDelivery writes the state, attempts, schedule, error and note
	// of a stored delivery (UpdatedAt becomes Now) and moves its index
	// entries; ENOTFOUND if it is not stored.
	UpdateDelivery(d pay.Delivery) error
	// DueDeliveries returns up to limit pending deliveries due at or before
	// due, soonest first, leaving out those behind an earlier pending
	// record of the same payment for the same target.
	DueDeliveries(due time.Time, limit int) ([]pay.Delivery, error)
	// DueDeliveriesSkipping is DueDeliveries passing over, without reading
	// them, the deliveries whose id skip reports (nil skips none); they do
	// not count against limit.
	DueDeliveriesSkipping(due time.Time, limit int, skip func(id string) bool) ([]pay.Delivery, error)
	// ListDeliveries returns a page of deliveries in one state and the
	// cursor of the next page ("" at the end).
	ListDeliveries(f pay.DeliveryFilter) ([]pay.Delivery, string, error)
	// OldestPendingDelivery returns the pending delivery with the oldest
	// event, and false if none is pending.
	OldestPendingDelivery() (pay.Delivery, bool, error)
	// CountDeliveries returns how many deliveries are in a state.
	CountDeliveries(state string) (int, error)
	// PurgeDoneDeliveries removes up to limit done deliveries that were
	// finished strictly before before, and returns how many it removed.
	PurgeDoneDeliveries(before time.Time, limit int) (int, error)
}

// Ledger is the journal and the running balances.
type Ledger interface {
	// AppendLedger appends journal lines, assigning their Seq.
	AppendLedger(entries []pay.LedgerEntry) error
	// LedgerBalances returns the balance of every account and currency.
	LedgerBalances() ([]pay.Balance, error)
	// LedgerEntries returns up to limit journal lines with a Seq greater
	// than afterSeq, in Seq order (0 starts at the first line).
	LedgerEntries(afterSeq uint64, limit int) ([]pay.LedgerEntry, error)
}

// Review is the review queue.
type Review interface {
	// PutReview adds or replaces a review item.
	PutReview(item pay.ReviewItem) error
	// Review returns one review item, or ENOTFOUND.
	Review(id string) (pay.ReviewItem, error)
	// ListReview returns every review item, oldest first.
	ListReview() ([]pay.ReviewItem, error)
	// DeleteReview removes a review item (resolved).
	DeleteReview(id string) error
}

// Idempotency is the records of scoped idempotency keys.
type Idempotency interface {
	// IdemKey returns the record of a scoped idempotency key, or ENOTFOUND.
	IdemKey(key string) (pay.IdemRecord, error)
	// PutIdemKey stores r under r.Key.
	PutIdemKey(r pay.IdemRecord) error
	// ClaimIdemKey stores r unless its key has a record, and reports
	// whether it did; if not, it returns the record stored, which no other
	// transaction changes before this one ends (the one way a request
	// claims its key).
	ClaimIdemKey(r pay.IdemRecord) (stored pay.IdemRecord, claimed bool, err error)
	// PurgeIdemKeys removes up to limit idempotency keys whose ExpiresAt
	// is at or before expiredBy, oldest first, and returns how many it
	// removed.
	PurgeIdemKeys(expiredBy time.Time, limit int) (int, error)
}

// Effects is the state of ripple's effects: customer accounts, effect
// dedupe records, merchant webhook endpoints.
type Effects interface {
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
	// LockEffects holds the records of keys, and that the others have
	// none, to the end of a write transaction, so that Effect and
	// ClaimEffect of those keys read nothing more: a batch of effects
	// reads its dedupe keys at once (PostgreSQL: one statement, FOR NO
	// KEY UPDATE in the keys' order; bbolt's one writer holds them all,
	// and it does nothing). A key claimed after LockEffects found it free
	// but stored by a concurrent transaction before the commit runs the
	// transaction again, which then finds it.
	LockEffects(keys []string) error
	// WebhookEndpoint returns an endpoint's state; one never stored is
	// returned enabled with only its ID set.
	WebhookEndpoint(id string) (WebhookEndpoint, error)
	// PutWebhookEndpoint stores an endpoint's state (UpdatedAt becomes Now).
	PutWebhookEndpoint(e WebhookEndpoint) error
}

// PSPAnswers is the last answer of a PSP for each payment.
type PSPAnswers interface {
	// PutPSPAnswer stores a as the payment's last PSP answer, replacing
	// the one before. A zero At becomes Tx.Now.
	PutPSPAnswer(a pay.PSPAnswer) error
	// PSPAnswer returns the payment's last PSP answer, or ENOTFOUND.
	PSPAnswer(paymentID string) (pay.PSPAnswer, error)
}

// PSPCharges is the simulated PSP's charges (psp/mock).
type PSPCharges interface {
	// PutPSPCharge stores c under its key, replacing the one before.
	PutPSPCharge(c PSPCharge) error
	// PSPCharge returns the charge made with key, or ENOTFOUND.
	PSPCharge(key string) (PSPCharge, error)
}

// Refunds is the refunds and their indexes.
type Refunds interface {
	// InsertRefund stores a new refund; ECONFLICT if its id exists or
	// another refund of its provider has its provider reference,
	// ENOTFOUND if its payment is not stored, EINVALID for a currency
	// other than the payment's, and ERefundExceeds if the payment's
	// pending and succeeded refunds, with this one, would sum to more
	// than the payment's amount. The sum is taken in the transaction from
	// the stored refunds, so concurrent refunds of one payment cannot
	// over-refund.
	InsertRefund(r pay.Refund) error
	// UpdateRefund writes the status, provider reference, event id and
	// UpdatedAt of a stored refund and moves its index entries; ENOTFOUND
	// if it is not stored, and the same checks as InsertRefund.
	UpdateRefund(r pay.Refund) error
	// Refund returns one refund, or ENOTFOUND.
	Refund(id string) (pay.Refund, error)
	// RefundByRef finds a refund by its provider and the PSP's reference,
	// or ENOTFOUND.
	RefundByRef(provider, ref string) (pay.Refund, error)
	// RefundsForPayment returns a payment's refunds, oldest first.
	RefundsForPayment(paymentID string) ([]pay.Refund, error)
	// PendingRefunds returns up to f.Limit pending refunds updated
	// strictly before f.UpdatedBefore whose (UpdatedAt, ID) is greater
	// than (f.AfterUpdated, f.AfterID), oldest first: the sweeper's
	// candidates, through an index of pending refunds.
	PendingRefunds(f pay.RefundFilter) ([]pay.Refund, error)
}

// Disputes is the disputes and their indexes.
type Disputes interface {
	// PutDispute stores d under (d.Provider, d.ID), replacing the one
	// before, and moves its index entries.
	PutDispute(d pay.Dispute) error
	// Dispute returns one dispute, or ENOTFOUND.
	Dispute(provider, id string) (pay.Dispute, error)
	// DisputesForPayment returns a payment's disputes, by provider and id.
	DisputesForPayment(paymentID string) ([]pay.Dispute, error)
	// ListDisputes returns up to f.Limit disputes (1..MaxListLimit) in
	// f.Status ("" = any), soonest evidence deadline first, those without
	// one last.
	ListDisputes(f pay.DisputeFilter) ([]pay.Dispute, error)
	// CountOpenDisputes returns how many disputes are needs_response or
	// under_review.
	CountOpenDisputes() (int, error)
}

// Settlements is settlement reconciliation: the settlements of the PSP's
// reports and the reconciliation runs.
type Settlements interface {
	// PutSettlement stores s under (s.Provider, s.ID), replacing the one
	// before; a settlement of a payment (PaymentID set) needs the payment
	// stored (ENOTFOUND).
	PutSettlement(s pay.Settlement) error
	// ClaimSettlement stores s under (s.Provider, s.ID) if nothing is
	// stored there, and reports true; else it returns the settlement
	// stored and false, changing nothing. It is the claim of a
	// balance-transaction id: of transactions that claim one id at the
	// same time, in this process or another, one stores it, and the
	// others wait for it to end and see what it stored. The checks of
	// PutSettlement apply.
	ClaimSettlement(s pay.Settlement) (pay.Settlement, bool, error)
	// ClaimSettlementPayout sets the payout of the stored settlement
	// (provider, id) to payoutID, and UpdatedAt to at, if it has none yet,
	// and reports whether it did; ENOTFOUND if nothing is stored. Of
	// transactions that claim one payout at the same time, one sets it.
	ClaimSettlementPayout(provider, id, payoutID string, at time.Time) (bool, error)
	// Settlement returns one settlement, or ENOTFOUND.
	Settlement(provider, id string) (pay.Settlement, error)
	// SettlementsForPayment returns a payment's settlements, by provider
	// and id.
	SettlementsForPayment(paymentID string) ([]pay.Settlement, error)
	// ListSettlements returns up to limit (1..MaxListLimit) settlements
	// after (afterProvider, afterID), by provider and id ("" "" starts at
	// the first).
	ListSettlements(afterProvider, afterID string, limit int) ([]pay.Settlement, error)
	// PutReconRun stores a reconciliation run, replacing one with its id.
	PutReconRun(r pay.ReconRun) error
	// ReconRun returns one reconciliation run, or ENOTFOUND.
	ReconRun(id string) (pay.ReconRun, error)
	// ListReconRuns returns up to limit (1..MaxListLimit) runs with an id
	// before beforeID ("" = from the newest), newest first.
	ListReconRuns(beforeID string, limit int) ([]pay.ReconRun, error)
}
