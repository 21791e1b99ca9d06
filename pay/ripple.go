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
