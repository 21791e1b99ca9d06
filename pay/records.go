package pay

import "time"

// Lease is a time-limited claim on one payment. Token is a fencing number
// that grows on every acquisition of that payment's lease, so a worker whose
// lease ran out cannot write after the next holder took over.
type Lease struct {
	PaymentID string
	Holder    string
	Token     uint64
	ExpiresAt time.Time
}

// Held reports whether the lease is still in force at now.
func (l Lease) Held(now time.Time) bool { return l.Token != 0 && now.Before(l.ExpiresAt) }

// OutboxRecord is one event of a real transition, appended in the same
// transaction as the payment write and delivered by the ripple workers.
type OutboxRecord struct {
	Seq       uint64 // assigned by the store, increasing
	ID        string // "evt_" + ULID: the webhook-id and the effects' dedupe key
	Type      string // "payment.captured", ...
	PaymentID string
	Status    Status
	From      Status
	Version   uint64
	OrderID   string
	Amount    int64
	Currency  string
	Customer  Customer
	Provider  string
	CreatedAt time.Time
	// The events of a refund or a dispute (payment.refund.*,
	// payment.dispute.*) name it and say its amount and status;
	// AmountRefunded is the payment's after the event. They are zero on
	// the events of a payment's status.
	RefundID       string
	DisputeID      string
	ObjectAmount   int64
	ObjectStatus   string
	AmountRefunded int64
}

// InboxEvent is one accepted webhook: the inbox entry while it waits to be
// applied, and the archived webhook history afterwards.
type InboxEvent struct {
	Provider      string
	EventID       string
	Type          string
	PaymentID     string // paystate's payment, "" while unknown (orphan)
	ProviderRef   string
	SecondRef     string // see Observation.SecondRef
	Status        Status // "" when the event carries no status
	StepKind      string // with no Status: the timeline step kind (pay.StepFailedAttempt, ...)
	Amount        int64  // what the event says the payment is for; 0 = not said
	Currency      string // "" = not said
	OccurredAt    time.Time
	ReceivedAt    time.Time
	Body          []byte // the raw body as received
	Attempts      int    // how often it was tried and deferred
	NextAttemptAt time.Time
	LastError     string
	Processed     bool
	// Refund and Dispute are what an event about a refund or a dispute
	// says of it; nil for events about the payment's status.
	Refund  *RefundChange
	Dispute *DisputeChange
}

// Review reasons.
const (
	ReasonUnresolved          = "unresolved"
	ReasonConflictingTerminal = "conflicting_terminal"
	ReasonOrphan              = "orphan"
	// ReasonAmountMismatch: the PSP reported another amount or currency than
	// the payment's; the observation was not applied.
	ReasonAmountMismatch = "amount_mismatch"
	// ReasonProviderRefConflict: the PSP reference of an observation is
	// already bound to another payment.
	ReasonProviderRefConflict = "provider_ref_conflict"
	// ReasonSyncContradicted: a /sync report of a terminal status that the
	// provider's status API contradicts.
	ReasonSyncContradicted = "sync_contradicted"
	// ReasonInboxExhausted: a webhook could not be applied within
	// webhook_inbox.max_attempts tries; the item carries its last error.
	ReasonInboxExhausted = "inbox_exhausted"
)

// ReviewItem is a payment that needs a human.
type ReviewItem struct {
	ID          string // the payment id, or "orphan_<provider>_<event id>" for an orphan
	PaymentID   string // "" for an orphan
	Reason      string
	Provider    string
	ProviderRef string
	EventID     string
	Observed    Status // the status that could not be applied, if any
	Note        string
	LastPSP     string // the last PSP status answer, as text
	CreatedAt   time.Time
}

// Idempotency key states.
const (
	IdemInFlight = "in_flight"
	IdemDone     = "done"
)

// IdemRecord is the stored state of one idempotency key of the merchant API.
type IdemRecord struct {
	Key         string // scoped: operation, API key hash and the client's key
	Fingerprint string // hex SHA-256 of method, path and body
	State       string
	Owner       string    // the process that runs the request
	LockedUntil time.Time // an in-flight record past this is taken over
	PaymentID   string    // the payment the request created or acted on
	StatusCode  int
	Body        []byte // the stored response (never with secrets)
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// Ledger accounts.
const (
	AccountPSPReceivable   = "psp_receivable"   // money the PSP holds for the merchant
	AccountMerchantRevenue = "merchant_revenue" // what the merchant earned
)

// LedgerEntry is one line of a double-entry journal: Amount > 0 debits,
// Amount < 0 credits. The entries of one posting sum to zero per currency.
type LedgerEntry struct {
	Seq       uint64 // assigned by the store
	PaymentID string
	EventID   string // the outbox record of the transition that posted it
	Account   string
	Currency  string
	Amount    int64
	At        time.Time
}

// Balance is the sum of an account's entries in one currency.
type Balance struct {
	Account  string
	Currency string
	Amount   int64
}

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
