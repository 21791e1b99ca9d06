package pay

import "time"

// Ripple effects: the names of the delivery targets that the ripple
// workers apply outbox records to.
const (
	EffectLoyalty   = "loyalty"   // points to the customer, clawed back on refund
	EffectRetention = "retention" // the customer's last visit
	EffectReceipt   = "receipt"   // an e-mail receipt over SMTP
	EffectWebhook   = "webhook"   // a signed POST to one merchant endpoint
)

// Delivery states.
const (
	// DeliveryPending is set when the ripple fan-out creates a delivery for
	// an outbox record, and again when a failed attempt is scheduled for
	// retry or an operator retries a dead letter. A successful attempt moves
	// it to DeliveryDone, the last allowed failure to DeliveryDead.
	DeliveryPending = "pending"
	// DeliveryDone is final: the effect was applied (or had nothing to do,
	// with a note saying why).
	DeliveryDone = "done"
	// DeliveryDead is a dead letter: max_attempts failed, or a failure that
	// retrying cannot fix. Only an operator's retry moves it back to
	// DeliveryPending.
	DeliveryDead = "dead"
)

// ValidDeliveryState reports whether s is a delivery state.
func ValidDeliveryState(s string) bool {
	return s == DeliveryPending || s == DeliveryDone || s == DeliveryDead
}

// Delivery is one outbox record on its way to one target: an effect, and
// for merchant webhooks one endpoint. Each has its own attempts, schedule
// and state. A payment's records reach a target in outbox order: a
// delivery waits while an earlier record of the same payment is still
// pending for the same target.
type Delivery struct {
	ID            string // "dlv_" + ULID
	Effect        string // EffectLoyalty, ...
	Endpoint      string // EffectWebhook: the endpoint id; "" otherwise
	EventID       string // the outbox record's id
	EventType     string // "payment.captured", ...
	EventSeq      uint64 // the outbox record's Seq
	EventAt       time.Time
	PaymentID     string
	State         string
	Attempts      int       // failed or successful attempts since created or last retried
	NextAttemptAt time.Time // pending: when it is due
	LastError     string    // the error of the last failed attempt
	Note          string    // what the successful attempt did, or why it had nothing to do
	CreatedAt     time.Time
	UpdatedAt     time.Time // when State, Attempts or the schedule last changed
}

// Target names where the delivery goes: the effect, or "webhook:<endpoint
// id>". A payment's deliveries keep outbox order per target.
func (d Delivery) Target() string {
	if d.Endpoint != "" {
		return d.Effect + ":" + d.Endpoint
	}
	return d.Effect
}

// DeliveryFilter selects deliveries in one state, oldest first by the time
// they entered it (for a pending delivery: the time of its event).
type DeliveryFilter struct {
	State  string    // required: DeliveryPending, DeliveryDone or DeliveryDead
	Since  time.Time // optional: only those that entered the state at or after Since
	Limit  int       // 1..1000
	Cursor string    // opaque, from the previous page
}

// CustomerAccount is what the loyalty and retention effects keep about a
// customer, by the merchant's customer id.
type CustomerAccount struct {
	ID          string
	Points      int64     // may go below zero after a clawback
	LastVisitAt time.Time // the latest captured payment's time; zero if none
	UpdatedAt   time.Time
}

// EffectRecord marks an effect as applied, under its dedupe key
// ("loyalty:<event id>", "payment_receipt:<payment id>", ...). It is
// written in the same transaction as the effect's own write, or for an
// external effect right after the send succeeded.
type EffectRecord struct {
	Key        string
	DeliveryID string
	Points     int64 // loyalty: the points credited (negative: clawed back)
	At         time.Time
}

// WebhookEndpoint is the stored state of one merchant endpoint; the URL,
// secrets and event types come from the configuration.
type WebhookEndpoint struct {
	ID             string // derived from the URL
	URL            string
	Disabled       bool
	DisabledAt     time.Time
	DisabledReason string
	FailingSince   time.Time // the first failure since the last success; zero when healthy
	LastSuccessAt  time.Time
	UpdatedAt      time.Time
}

// RippleTx is the part of Tx that the ripple workers use: the outbox after
// the fan-out cursor, deliveries and their indexes, customer accounts,
// effect dedupe records and merchant endpoint state.
type RippleTx interface {
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
	// ListDeliveries returns a page of deliveries in one state and the
	// cursor of the next page ("" at the end).
	ListDeliveries(f DeliveryFilter) ([]Delivery, string, error)
	// OldestPendingDelivery returns the pending delivery with the oldest
	// event, and false if none is pending.
	OldestPendingDelivery() (Delivery, bool, error)
	// CountDeliveries returns how many deliveries are in a state.
	CountDeliveries(state string) (int, error)

	// CustomerAccount returns a customer's account, or ENOTFOUND.
	CustomerAccount(id string) (CustomerAccount, error)
	// PutCustomerAccount stores a customer's account (UpdatedAt becomes Now).
	PutCustomerAccount(c CustomerAccount) error

	// Effect returns the record of a dedupe key and whether there is one.
	Effect(key string) (EffectRecord, bool, error)
	// PutEffect stores the record of a dedupe key.
	PutEffect(r EffectRecord) error

	// WebhookEndpoint returns an endpoint's state; one never stored is
	// returned enabled with only its ID set.
	WebhookEndpoint(id string) (WebhookEndpoint, error)
	// PutWebhookEndpoint stores an endpoint's state (UpdatedAt becomes Now).
	PutWebhookEndpoint(e WebhookEndpoint) error
}
