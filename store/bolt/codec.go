package bolt

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/oklog/ulid/v2"

	"github.com/paystate/paystate/pay"
)

// Values are CBOR maps (RFC 8949) of the record types below, in the order
// of the families of doc.go's table, keyed by small integers: the cbor tag
// of each field fixes its number on disk, so a field renamed in package pay
// or here does not change the file format, and a record carries no field
// names. Empty fields are left out. Times are stamps (integer nanoseconds,
// UTC); byte slices are CBOR byte strings, not base64; ids are idents and
// strings of a closed vocabulary symbols (symbol.go), both written with
// omitzero (a type with its own MarshalCBOR is not left out by
// omitempty). Fields are only ever
// added, under new numbers (decoding ignores unknown ones); anything else
// is a new SchemaVersion. The json names are those of schema 1, whose
// values were JSON objects: the migration (migrate.go) reads old records
// through these same types.

// paymentRecord is the value of payments.
type paymentRecord struct {
	ID            string `json:"id" cbor:"-"`
	OrderID       string `json:"order_id" cbor:"2,keyasint,omitempty"`
	Amount        int64  `json:"amount" cbor:"3,keyasint,omitempty"`
	Currency      symbol `json:"currency" cbor:"4,keyasint,omitzero"`
	CustomerID    string `json:"customer_id" cbor:"5,keyasint,omitempty"`
	CustomerEmail string `json:"customer_email" cbor:"6,keyasint,omitempty"`
	Provider      symbol `json:"provider" cbor:"7,keyasint,omitzero"`
	ProviderRef   string `json:"provider_ref" cbor:"8,keyasint,omitempty"`
	Status        symbol `json:"status" cbor:"9,keyasint,omitzero"`
	Version       uint64 `json:"version" cbor:"10,keyasint,omitempty"`
	ClientSecret  string `json:"client_secret" cbor:"11,keyasint,omitempty"`
	RedirectURL   string `json:"redirect_url" cbor:"12,keyasint,omitempty"`
	ReturnURL     string `json:"return_url" cbor:"13,keyasint,omitempty"`
	CreatedAt     stamp  `json:"created_at" cbor:"14,keyasint,omitzero"`
	UpdatedAt     stamp  `json:"updated_at" cbor:"15,keyasint,omitzero"`
	// Fields 16 and 17 came with partial refunds; a record without them
	// has refunded nothing.
	AmountRefunded      int64 `json:"-" cbor:"16,keyasint,omitempty"`
	AmountRefundPending int64 `json:"-" cbor:"17,keyasint,omitempty"`
	// Field 18 came with the refund rule of disputes: the status of the
	// payment's dispute; a record without it has none recorded (Open
	// fills it once from the disputes, fillPaymentDisputes).
	Dispute symbol `json:"-" cbor:"18,keyasint,omitzero"`
	// Fields 19 and 20 came with Stripe Checkout: how the provider takes
	// the payment and the merchant's description; a record without them
	// is a provider's only way, without a description.
	Flow        symbol `json:"-" cbor:"19,keyasint,omitzero"`
	Description string `json:"-" cbor:"20,keyasint,omitempty"`
	// Field 21: the second reference of a payment on a hosted page.
	SecondRef string `json:"-" cbor:"21,keyasint,omitempty"`
}

func fromPayment(p pay.Payment) paymentRecord {
	return paymentRecord{
		ID: p.ID, OrderID: p.OrderID, Amount: p.Amount, Currency: symbol(p.Currency),
		CustomerID: p.Customer.ID, CustomerEmail: p.Customer.Email,
		Provider: symbol(p.Provider), ProviderRef: p.ProviderRef, Status: symbol(p.Status), Version: p.Version,
		ClientSecret: p.ClientSecret, RedirectURL: p.RedirectURL, ReturnURL: p.ReturnURL,
		CreatedAt: at(p.CreatedAt), UpdatedAt: at(p.UpdatedAt),
		AmountRefunded: p.AmountRefunded, AmountRefundPending: p.AmountRefundPending, Dispute: symbol(p.Dispute),
		Flow: symbol(p.Flow), Description: p.Description, SecondRef: p.SecondRef,
	}
}

func (r paymentRecord) payment() pay.Payment {
	return pay.Payment{
		ID: r.ID, OrderID: r.OrderID, Amount: r.Amount, Currency: string(r.Currency),
		Customer: pay.Customer{ID: r.CustomerID, Email: r.CustomerEmail},
		Provider: string(r.Provider), ProviderRef: r.ProviderRef, Status: pay.Status(r.Status), Version: r.Version,
		ClientSecret: r.ClientSecret, RedirectURL: r.RedirectURL, ReturnURL: r.ReturnURL,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		AmountRefunded: r.AmountRefunded, AmountRefundPending: r.AmountRefundPending, Dispute: pay.DisputeStatus(r.Dispute),
		Flow: string(r.Flow), Description: r.Description, SecondRef: r.SecondRef,
	}
}

// stepRecord is the value of timeline.
type stepRecord struct {
	PaymentID string `json:"payment_id" cbor:"-"`
	Seq       uint64 `json:"seq" cbor:"-"`
	At        stamp  `json:"at" cbor:"3,keyasint,omitzero"`
	Source    symbol `json:"source" cbor:"4,keyasint,omitzero"`
	Kind      symbol `json:"kind" cbor:"5,keyasint,omitzero"`
	From      symbol `json:"from" cbor:"6,keyasint,omitzero"`
	To        symbol `json:"to" cbor:"7,keyasint,omitzero"`
	Version   uint64 `json:"version" cbor:"8,keyasint,omitempty"`
	EventID   ident  `json:"event_id" cbor:"9,keyasint,omitzero"`
	Note      string `json:"note" cbor:"10,keyasint,omitempty"`
}

func fromStep(s pay.Step) stepRecord {
	return stepRecord{
		PaymentID: s.PaymentID, Seq: s.Seq, At: at(s.At), Source: symbol(s.Source), Kind: symbol(s.Kind),
		From: symbol(s.From), To: symbol(s.To), Version: s.Version, EventID: ident(s.EventID), Note: s.Note,
	}
}

func (r stepRecord) step() pay.Step {
	return pay.Step{
		PaymentID: r.PaymentID, Seq: r.Seq, At: r.At.UTC(), Source: pay.Source(r.Source), Kind: string(r.Kind),
		From: pay.Status(r.From), To: pay.Status(r.To), Version: r.Version, EventID: string(r.EventID), Note: r.Note,
	}
}

// inboxRecord is the value of inbox. The raw body is BodyZ, a zstd frame
// (body.go), or Body, as it came, where the frame would not be smaller
// (a CBOR byte string; base64 only in schema 1's JSON). ProcessedAt is
// when the event was recorded as processed (MarkProcessed), zero while it
// is pending; until schema 4 that was Processed and an entry of
// processed, which the migration folds in.
type inboxRecord struct {
	Provider      string `json:"provider" cbor:"-"`
	EventID       string `json:"event_id" cbor:"-"`
	Type          symbol `json:"type" cbor:"3,keyasint,omitzero"`
	PaymentID     ident  `json:"payment_id" cbor:"4,keyasint,omitzero"`
	ProviderRef   string `json:"provider_ref" cbor:"5,keyasint,omitempty"`
	Status        symbol `json:"status" cbor:"6,keyasint,omitzero"`
	StepKind      symbol `json:"step_kind" cbor:"7,keyasint,omitzero"`
	Amount        int64  `json:"amount" cbor:"8,keyasint,omitempty"`
	Currency      symbol `json:"currency" cbor:"9,keyasint,omitzero"`
	OccurredAt    stamp  `json:"occurred_at" cbor:"10,keyasint,omitzero"`
	ReceivedAt    stamp  `json:"received_at" cbor:"11,keyasint,omitzero"`
	Body          []byte `json:"body" cbor:"12,keyasint,omitempty"`
	Attempts      int    `json:"attempts" cbor:"13,keyasint,omitempty"`
	NextAttemptAt stamp  `json:"next_attempt_at" cbor:"14,keyasint,omitzero"`
	LastError     string `json:"last_error" cbor:"15,keyasint,omitempty"`
	// Processed is schema 3's flag, read only by the migration.
	Processed bool `json:"processed" cbor:"16,keyasint,omitempty"`
	// Fields 17 and 18 came with refunds and disputes, 19 and 20 with
	// schema 4.
	Refund      *refundChangeRecord  `json:"-" cbor:"17,keyasint,omitempty"`
	Dispute     *disputeChangeRecord `json:"-" cbor:"18,keyasint,omitempty"`
	BodyZ       []byte               `json:"-" cbor:"19,keyasint,omitempty"`
	ProcessedAt stamp                `json:"-" cbor:"20,keyasint,omitzero"`
	// Field 21 came with Stripe Checkout (pay.Observation.SecondRef).
	SecondRef string `json:"-" cbor:"21,keyasint,omitempty"`
}

// refundChangeRecord is what an inbox event says of a refund.
type refundChangeRecord struct {
	ID          ident  `cbor:"1,keyasint,omitzero"`
	ProviderRef string `cbor:"2,keyasint,omitempty"`
	Amount      int64  `cbor:"3,keyasint,omitempty"`
	Reason      symbol `cbor:"4,keyasint,omitzero"`
	Status      symbol `cbor:"5,keyasint,omitzero"`
}

// disputeChangeRecord is what an inbox event says of a dispute.
type disputeChangeRecord struct {
	ID            string `cbor:"1,keyasint,omitempty"`
	Amount        int64  `cbor:"2,keyasint,omitempty"`
	Currency      symbol `cbor:"3,keyasint,omitzero"`
	Reason        symbol `cbor:"4,keyasint,omitzero"`
	Status        symbol `cbor:"5,keyasint,omitzero"`
	EvidenceDueBy stamp  `cbor:"6,keyasint,omitzero"`
}

func fromRefundChange(c *pay.RefundChange) *refundChangeRecord {
	if c == nil {
		return nil
	}
	return &refundChangeRecord{ID: ident(c.ID), ProviderRef: c.ProviderRef, Amount: c.Amount, Reason: symbol(c.Reason), Status: symbol(c.Status)}
}

func (r *refundChangeRecord) change() *pay.RefundChange {
	if r == nil {
		return nil
	}
	return &pay.RefundChange{ID: string(r.ID), ProviderRef: r.ProviderRef, Amount: r.Amount, Reason: string(r.Reason), Status: pay.RefundStatus(r.Status)}
}

func fromDisputeChange(c *pay.DisputeChange) *disputeChangeRecord {
	if c == nil {
		return nil
	}
	return &disputeChangeRecord{ID: c.ID, Amount: c.Amount, Currency: symbol(c.Currency), Reason: symbol(c.Reason), Status: symbol(c.Status), EvidenceDueBy: at(c.EvidenceDueBy)}
}

func (r *disputeChangeRecord) change() *pay.DisputeChange {
	if r == nil {
		return nil
	}
	return &pay.DisputeChange{ID: r.ID, Amount: r.Amount, Currency: string(r.Currency), Reason: string(r.Reason), Status: pay.DisputeStatus(r.Status), EvidenceDueBy: r.EvidenceDueBy.UTC()}
}

// fromInbox returns the record of a new event, its body packed (body.go)
// and not processed.
func fromInbox(e pay.InboxEvent) inboxRecord {
	r := inboxRecord{
		Provider: e.Provider, EventID: e.EventID, Type: symbol(e.Type), PaymentID: ident(e.PaymentID),
		ProviderRef: e.ProviderRef, SecondRef: e.SecondRef, Status: symbol(e.Status), StepKind: symbol(e.StepKind), Amount: e.Amount, Currency: symbol(e.Currency),
		OccurredAt: at(e.OccurredAt), ReceivedAt: at(e.ReceivedAt),
		Attempts: e.Attempts, NextAttemptAt: at(e.NextAttemptAt), LastError: e.LastError,
		Refund: fromRefundChange(e.Refund), Dispute: fromDisputeChange(e.Dispute),
	}
	r.setBody(e.Body)
	return r
}

// setBody stores body in BodyZ if its frame is smaller, else in Body.
// The frame refers to the record's ids (bodyRefs), which are set first.
func (r *inboxRecord) setBody(body []byte) {
	r.Body, r.BodyZ = nil, packBody(body, r.bodyRefs())
	if r.BodyZ == nil {
		r.Body = body
	}
}

// bodyRefs are the ids of the record its packed body refers to.
func (r *inboxRecord) bodyRefs() bodyRefs {
	return bodyRefs{event: r.EventID, payment: string(r.PaymentID), ref: r.ProviderRef}
}

// event returns the stored event, its body unpacked.
func (r inboxRecord) event() (pay.InboxEvent, error) {
	body := r.Body
	if r.BodyZ != nil {
		var err error
		if body, err = unpackBody(r.BodyZ, r.bodyRefs()); err != nil {
			return pay.InboxEvent{}, fmt.Errorf("inbox event %s/%s: %w", r.Provider, r.EventID, err)
		}
	}
	return pay.InboxEvent{
		Provider: r.Provider, EventID: r.EventID, Type: string(r.Type), PaymentID: string(r.PaymentID),
		ProviderRef: r.ProviderRef, SecondRef: r.SecondRef, Status: pay.Status(r.Status), StepKind: string(r.StepKind), Amount: r.Amount, Currency: string(r.Currency),
		OccurredAt: r.OccurredAt.UTC(), ReceivedAt: r.ReceivedAt.UTC(), Body: body,
		Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC(), LastError: r.LastError, Processed: !r.ProcessedAt.IsZero(),
		Refund: r.Refund.change(), Dispute: r.Dispute.change(),
	}, nil
}

// processedRecord is the value of processed.
type processedRecord struct {
	At stamp `json:"at" cbor:"1,keyasint,omitzero"`
}

// leaseRecord is the value of leases. The payment id is the key.
type leaseRecord struct {
	Holder    string `json:"holder" cbor:"1,keyasint,omitempty"`
	Token     uint64 `json:"token" cbor:"2,keyasint,omitempty"`
	ExpiresAt stamp  `json:"expires_at" cbor:"3,keyasint,omitzero"`
}

// outboxRecord is the value of outbox.
type outboxRecord struct {
	// Seq is the key's (schema 4; field 1 until schema 3).
	Seq           uint64 `json:"seq" cbor:"-"`
	ID            ident  `json:"id" cbor:"2,keyasint,omitzero"`
	Type          symbol `json:"type" cbor:"3,keyasint,omitzero"`
	PaymentID     ident  `json:"payment_id" cbor:"4,keyasint,omitzero"`
	Status        symbol `json:"status" cbor:"5,keyasint,omitzero"`
	From          symbol `json:"from" cbor:"6,keyasint,omitzero"`
	Version       uint64 `json:"version" cbor:"7,keyasint,omitempty"`
	OrderID       string `json:"order_id" cbor:"8,keyasint,omitempty"`
	Amount        int64  `json:"amount" cbor:"9,keyasint,omitempty"`
	Currency      symbol `json:"currency" cbor:"10,keyasint,omitzero"`
	CustomerID    string `json:"customer_id" cbor:"11,keyasint,omitempty"`
	CustomerEmail string `json:"customer_email" cbor:"12,keyasint,omitempty"`
	Provider      symbol `json:"provider" cbor:"13,keyasint,omitzero"`
	CreatedAt     stamp  `json:"created_at" cbor:"14,keyasint,omitzero"`
	// Fields 15 to 19 came with refunds and disputes.
	RefundID       ident  `json:"-" cbor:"15,keyasint,omitzero"`
	DisputeID      string `json:"-" cbor:"16,keyasint,omitempty"`
	ObjectAmount   int64  `json:"-" cbor:"17,keyasint,omitempty"`
	ObjectStatus   symbol `json:"-" cbor:"18,keyasint,omitzero"`
	AmountRefunded int64  `json:"-" cbor:"19,keyasint,omitempty"`
}

func fromOutbox(r pay.OutboxRecord) outboxRecord {
	return outboxRecord{
		Seq: r.Seq, ID: ident(r.ID), Type: symbol(r.Type), PaymentID: ident(r.PaymentID), Status: symbol(r.Status), From: symbol(r.From),
		Version: r.Version, OrderID: r.OrderID, Amount: r.Amount, Currency: symbol(r.Currency),
		CustomerID: r.Customer.ID, CustomerEmail: r.Customer.Email, Provider: symbol(r.Provider), CreatedAt: at(r.CreatedAt),
		RefundID: ident(r.RefundID), DisputeID: r.DisputeID, ObjectAmount: r.ObjectAmount, ObjectStatus: symbol(r.ObjectStatus),
		AmountRefunded: r.AmountRefunded,
	}
}

func (r outboxRecord) record() pay.OutboxRecord {
	return pay.OutboxRecord{
		Seq: r.Seq, ID: string(r.ID), Type: string(r.Type), PaymentID: string(r.PaymentID), Status: pay.Status(r.Status), From: pay.Status(r.From),
		Version: r.Version, OrderID: r.OrderID, Amount: r.Amount, Currency: string(r.Currency),
		Customer: pay.Customer{ID: r.CustomerID, Email: r.CustomerEmail}, Provider: string(r.Provider), CreatedAt: r.CreatedAt.UTC(),
		RefundID: string(r.RefundID), DisputeID: r.DisputeID, ObjectAmount: r.ObjectAmount, ObjectStatus: string(r.ObjectStatus),
		AmountRefunded: r.AmountRefunded,
	}
}

// deliveryRecord is the value of deliveries.
type deliveryRecord struct {
	ID            string `json:"id" cbor:"-"`
	Effect        symbol `json:"effect" cbor:"2,keyasint,omitzero"`
	Endpoint      string `json:"endpoint" cbor:"3,keyasint,omitempty"`
	EventID       ident  `json:"event_id" cbor:"4,keyasint,omitzero"`
	EventType     symbol `json:"event_type" cbor:"5,keyasint,omitzero"`
	EventSeq      uint64 `json:"event_seq" cbor:"6,keyasint,omitempty"`
	EventAt       stamp  `json:"event_at" cbor:"7,keyasint,omitzero"`
	PaymentID     ident  `json:"payment_id" cbor:"8,keyasint,omitzero"`
	State         symbol `json:"state" cbor:"9,keyasint,omitzero"`
	Attempts      int    `json:"attempts" cbor:"10,keyasint,omitempty"`
	NextAttemptAt stamp  `json:"next_attempt_at" cbor:"11,keyasint,omitzero"`
	LastError     string `json:"last_error" cbor:"12,keyasint,omitempty"`
	Note          string `json:"note" cbor:"13,keyasint,omitempty"`
	CreatedAt     stamp  `json:"created_at" cbor:"14,keyasint,omitzero"`
	UpdatedAt     stamp  `json:"updated_at" cbor:"15,keyasint,omitzero"`
}

func fromDelivery(d pay.Delivery) deliveryRecord {
	return deliveryRecord{
		ID: d.ID, Effect: symbol(d.Effect), Endpoint: d.Endpoint, EventID: ident(d.EventID), EventType: symbol(d.EventType),
		EventSeq: d.EventSeq, EventAt: at(d.EventAt), PaymentID: ident(d.PaymentID), State: symbol(d.State),
		Attempts: d.Attempts, NextAttemptAt: at(d.NextAttemptAt), LastError: d.LastError, Note: d.Note,
		CreatedAt: at(d.CreatedAt), UpdatedAt: at(d.UpdatedAt),
	}
}

func (r deliveryRecord) delivery() pay.Delivery {
	return pay.Delivery{
		ID: r.ID, Effect: string(r.Effect), Endpoint: r.Endpoint, EventID: string(r.EventID), EventType: string(r.EventType),
		EventSeq: r.EventSeq, EventAt: r.EventAt.UTC(), PaymentID: string(r.PaymentID), State: string(r.State),
		Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC(), LastError: r.LastError, Note: r.Note,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// ledgerRecord is the value of ledger.
type ledgerRecord struct {
	// Seq is the key's (schema 4; field 1 until schema 3).
	Seq       uint64 `json:"seq" cbor:"-"`
	PaymentID ident  `json:"payment_id" cbor:"2,keyasint,omitzero"`
	EventID   ident  `json:"event_id" cbor:"3,keyasint,omitzero"`
	Account   symbol `json:"account" cbor:"4,keyasint,omitzero"`
	Currency  symbol `json:"currency" cbor:"5,keyasint,omitzero"`
	Amount    int64  `json:"amount" cbor:"6,keyasint,omitempty"`
	At        stamp  `json:"at" cbor:"7,keyasint,omitzero"`
}

func fromLedger(e pay.LedgerEntry) ledgerRecord {
	return ledgerRecord{
		Seq: e.Seq, PaymentID: ident(e.PaymentID), EventID: ident(e.EventID), Account: symbol(e.Account),
		Currency: symbol(e.Currency), Amount: e.Amount, At: at(e.At),
	}
}

// reviewRecord is the value of review.
type reviewRecord struct {
	ID          string `json:"id" cbor:"1,keyasint,omitempty"`
	PaymentID   ident  `json:"payment_id" cbor:"2,keyasint,omitzero"`
	Reason      symbol `json:"reason" cbor:"3,keyasint,omitzero"`
	Provider    symbol `json:"provider" cbor:"4,keyasint,omitzero"`
	ProviderRef string `json:"provider_ref" cbor:"5,keyasint,omitempty"`
	EventID     string `json:"event_id" cbor:"6,keyasint,omitempty"`
	Observed    symbol `json:"observed" cbor:"7,keyasint,omitzero"`
	Note        string `json:"note" cbor:"8,keyasint,omitempty"`
	LastPSP     string `json:"last_psp" cbor:"9,keyasint,omitempty"`
	CreatedAt   stamp  `json:"created_at" cbor:"10,keyasint,omitzero"`
}

func fromReview(i pay.ReviewItem) reviewRecord {
	return reviewRecord{
		ID: i.ID, PaymentID: ident(i.PaymentID), Reason: symbol(i.Reason), Provider: symbol(i.Provider), ProviderRef: i.ProviderRef,
		EventID: i.EventID, Observed: symbol(i.Observed), Note: i.Note, LastPSP: i.LastPSP, CreatedAt: at(i.CreatedAt),
	}
}

func (r reviewRecord) item() pay.ReviewItem {
	return pay.ReviewItem{
		ID: r.ID, PaymentID: string(r.PaymentID), Reason: string(r.Reason), Provider: string(r.Provider), ProviderRef: r.ProviderRef,
		EventID: r.EventID, Observed: pay.Status(r.Observed), Note: r.Note, LastPSP: r.LastPSP, CreatedAt: r.CreatedAt.UTC(),
	}
}

// idemRecord is the value of idempotency_keys.
type idemRecord struct {
	Key         string   `json:"key" cbor:"-"`
	Fingerprint hexBytes `json:"fingerprint" cbor:"2,keyasint,omitzero"`
	State       symbol   `json:"state" cbor:"3,keyasint,omitzero"`
	Owner       hexBytes `json:"owner" cbor:"4,keyasint,omitzero"`
	LockedUntil stamp    `json:"locked_until" cbor:"5,keyasint,omitzero"`
	PaymentID   ident    `json:"payment_id" cbor:"6,keyasint,omitzero"`
	StatusCode  int      `json:"status_code" cbor:"7,keyasint,omitempty"`
	Body        []byte   `json:"body" cbor:"8,keyasint,omitempty"`
	CreatedAt   stamp    `json:"created_at" cbor:"9,keyasint,omitzero"`
	ExpiresAt   stamp    `json:"expires_at" cbor:"10,keyasint,omitzero"`
}

// idemExpiry is the one field of an idemRecord that indexIdem reads: the
// decoder skips the others (a stored answer's body among them) without
// copying them.
type idemExpiry struct {
	ExpiresAt stamp `cbor:"10,keyasint,omitzero"`
}

func fromIdem(r pay.IdemRecord) idemRecord {
	return idemRecord{
		Key: r.Key, Fingerprint: hexBytes(r.Fingerprint), State: symbol(r.State), Owner: hexBytes(r.Owner), LockedUntil: at(r.LockedUntil),
		PaymentID: ident(r.PaymentID), StatusCode: r.StatusCode, Body: r.Body, CreatedAt: at(r.CreatedAt), ExpiresAt: at(r.ExpiresAt),
	}
}

func (r idemRecord) record() pay.IdemRecord {
	return pay.IdemRecord{
		Key: r.Key, Fingerprint: string(r.Fingerprint), State: string(r.State), Owner: string(r.Owner), LockedUntil: r.LockedUntil.UTC(),
		PaymentID: string(r.PaymentID), StatusCode: r.StatusCode, Body: r.Body, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
	}
}

// customerRecord is the value of customers. The customer id is the key.
type customerRecord struct {
	Points      int64 `json:"points" cbor:"1,keyasint,omitempty"`
	LastVisitAt stamp `json:"last_visit_at" cbor:"2,keyasint,omitzero"`
	UpdatedAt   stamp `json:"updated_at" cbor:"3,keyasint,omitzero"`
}

// effectRecord is the value of effects. The dedupe key is the key.
type effectRecord struct {
	DeliveryID ident `json:"delivery_id" cbor:"1,keyasint,omitzero"`
	Points     int64 `json:"points" cbor:"2,keyasint,omitempty"`
	At         stamp `json:"at" cbor:"3,keyasint,omitzero"`
}

// endpointRecord is the value of webhook_endpoints. The endpoint id is the
// key.
type endpointRecord struct {
	URL            string `json:"url" cbor:"1,keyasint,omitempty"`
	Disabled       bool   `json:"disabled" cbor:"2,keyasint,omitempty"`
	DisabledAt     stamp  `json:"disabled_at" cbor:"3,keyasint,omitzero"`
	DisabledReason string `json:"disabled_reason" cbor:"4,keyasint,omitempty"`
	FailingSince   stamp  `json:"failing_since" cbor:"5,keyasint,omitzero"`
	LastSuccessAt  stamp  `json:"last_success_at" cbor:"6,keyasint,omitzero"`
	UpdatedAt      stamp  `json:"updated_at" cbor:"7,keyasint,omitzero"`
}

// pspAnswerRecord is the value of psp_answers; the payment id is the key.
type pspAnswerRecord struct {
	Provider symbol `json:"provider" cbor:"1,keyasint,omitzero"`
	Status   symbol `json:"status" cbor:"2,keyasint,omitzero"`
	Found    bool   `json:"found" cbor:"3,keyasint,omitempty"`
	Raw      string `json:"raw" cbor:"4,keyasint,omitempty"`
	Error    string `json:"error" cbor:"5,keyasint,omitempty"`
	At       stamp  `json:"at" cbor:"6,keyasint,omitzero"`
}

// stamp is a time in a record: on disk the CBOR integer of nanoseconds
// since the Unix epoch, in JSON (schema 1, read by the migration only) RFC
// 3339. The zero time is left out of the record (omitzero) and reads back
// as the zero time; so does the instant of the epoch itself, which no
// record holds. Times outside what an int64 of nanoseconds can hold (before
// 1678, after 2262) cannot be stored.
type stamp struct{ time.Time }

// at returns t, in UTC, as a stamp.
func at(t time.Time) stamp { return stamp{t.UTC()} }

// MarshalCBOR encodes the stamp as an integer of nanoseconds, in the
// shortest head, as the library writes an int64 (every record holds a few
// stamps; the library's path boxed each).
func (s stamp) MarshalCBOR() ([]byte, error) {
	if s.IsZero() {
		return []byte{0}, nil
	}
	if s.Before(minStamp) || s.After(maxStamp) {
		return nil, fmt.Errorf("time %s is outside the years 1678 to 2262", s.Format(time.RFC3339))
	}
	return appendInt(make([]byte, 0, 9), s.UnixNano()), nil
}

// UnmarshalCBOR decodes a stamp written by MarshalCBOR. An integer is read
// directly; anything else goes through the library, which also reports
// what is wrong.
func (s *stamp) UnmarshalCBOR(data []byte) error {
	ns, ok := readInt(data)
	if !ok {
		if err := decMode.Unmarshal(data, &ns); err != nil {
			return err
		}
	}
	s.Time = time.Time{}
	if ns != 0 {
		s.Time = time.Unix(0, ns).UTC()
	}
	return nil
}

// appendInt appends n as a CBOR integer (major type 0, or 1 for a negative
// n) in its shortest head (RFC 8949 §4.2.1).
func appendInt(b []byte, n int64) []byte {
	major, u := byte(0), uint64(n)
	if n < 0 {
		major, u = 1, uint64(-1-n)
	}
	switch {
	case u < 24:
		return append(b, major<<5|byte(u))
	case u <= math.MaxUint8:
		return append(b, major<<5|24, byte(u))
	case u <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, major<<5|25), uint16(u))
	case u <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, major<<5|26), uint32(u))
	}
	return binary.BigEndian.AppendUint64(append(b, major<<5|27), u)
}

// readInt reads data when it is exactly one CBOR integer that fits an
// int64, in a head of any length; ok is false for anything else.
func readInt(data []byte) (n int64, ok bool) {
	if len(data) == 0 {
		return 0, false
	}
	major, info := data[0]>>5, data[0]&0x1f
	if major > 1 {
		return 0, false
	}
	var u uint64
	switch {
	case info < 24 && len(data) == 1:
		u = uint64(info)
	case info == 24 && len(data) == 2:
		u = uint64(data[1])
	case info == 25 && len(data) == 3:
		u = uint64(binary.BigEndian.Uint16(data[1:]))
	case info == 26 && len(data) == 5:
		u = uint64(binary.BigEndian.Uint32(data[1:]))
	case info == 27 && len(data) == 9:
		u = binary.BigEndian.Uint64(data[1:])
	default:
		return 0, false
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	if major == 1 {
		return -1 - int64(u), true
	}
	return int64(u), true
}

// ident is an id in a record. The ids paystate makes, "<prefix>_" and a
// ULID in its canonical 26 characters, are stored as a CBOR byte string:
// the prefix's code (identPrefixes) and the ULID's 16 bytes, 18 bytes
// instead of 31; any other string (a PSP's event id, a merchant's order id)
// as CBOR text. Either reads back as the same string.
type ident string

// identPrefixes are the prefixes of the ids paystate makes, by code; the
// codes are part of the file format: only ever append.
var identPrefixes = []string{"pay_", "evt_", "dlv_"}

// MarshalCBOR encodes the id. It writes the CBOR heads itself: ids are
// encoded many times per write transaction, and the library's general path
// (parse, String to compare, Marshal of a fresh slice) was a fifth of a
// webhook's encoding time.
func (s ident) MarshalCBOR() ([]byte, error) {
	if code, u, ok := compactID(string(s)); ok {
		out := make([]byte, 2, 2+len(ulid.ULID{}))
		out[0], out[1] = 0x40|byte(1+len(ulid.ULID{})), code // byte string of 17
		return append(out, u[:]...), nil
	}
	if len(s) <= 0xffff {
		return append(appendHead(make([]byte, 0, 3+len(s)), 3, len(s)), s...), nil
	}
	return cborMode.Marshal(string(s))
}

// compactID returns the prefix code and the ULID of an id paystate made:
// a prefix of identPrefixes and a ULID in its canonical 26 characters.
func compactID(s string) (code byte, u ulid.ULID, ok bool) {
	for code, prefix := range identPrefixes {
		rest, ok := strings.CutPrefix(s, prefix)
		if !ok || len(rest) != ulid.EncodedSize || !canonicalULID(rest) {
			continue
		}
		u, err := ulid.ParseStrict(rest)
		if err != nil {
			continue
		}
		return byte(code), u, true
	}
	return 0, ulid.ULID{}, false
}

// canonicalULID reports whether s has no lower-case letter, so that a ULID
// parsed from it prints back as s (ulid.ParseStrict accepts either case).
func canonicalULID(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			return false
		}
	}
	return true
}

// appendHead appends the head of a CBOR item of major type major (2 byte
// string, 3 text) and length n <= 0xffff.
func appendHead(b []byte, major byte, n int) []byte {
	switch {
	case n < 24:
		return append(b, major<<5|byte(n))
	case n <= 0xff:
		return append(b, major<<5|24, byte(n))
	}
	return append(b, major<<5|25, byte(n>>8), byte(n))
}

// readHead reads the head of the CBOR item in data (len(data) > 0): its
// major type, the head's length and its argument n up to 0xffff, or -1
// for a longer argument, which the callers leave to the library.
func readHead(data []byte) (major byte, head, n int) {
	major, info := data[0]>>5, int(data[0]&0x1f)
	switch {
	case info < 24:
		return major, 1, info
	case info == 24 && len(data) >= 2:
		return major, 2, int(data[1])
	case info == 25 && len(data) >= 3:
		return major, 3, int(data[1])<<8 | int(data[2])
	}
	return major, 1, -1
}

// UnmarshalCBOR decodes an id written by MarshalCBOR. The two shapes it
// writes (a byte string of 17, a definite text string) are read directly;
// anything else goes through the library, which also reports what is wrong.
func (s *ident) UnmarshalCBOR(data []byte) error {
	if len(data) > 0 {
		major, head, n := readHead(data)
		switch {
		case major == 2 && n == 1+len(ulid.ULID{}) && len(data) == head+n && int(data[head]) < len(identPrefixes):
			*s = ident(identPrefixes[data[head]] + ulid.ULID(data[head+1:]).String())
			return nil
		case major == 3 && n >= 0 && len(data) == head+n && utf8.Valid(data[head:]):
			*s = ident(data[head:])
			return nil
		}
	}
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case string:
		*s = ident(v)
	case []byte:
		if len(v) != 1+len(ulid.ULID{}) {
			return fmt.Errorf("id of %d bytes, want %d", len(v), 1+len(ulid.ULID{}))
		}
		if int(v[0]) >= len(identPrefixes) {
			return fmt.Errorf("id with prefix code %d", v[0])
		}
		*s = ident(identPrefixes[v[0]] + ulid.ULID(v[1:]).String())
	default:
		return fmt.Errorf("id is a %T", v)
	}
	return nil
}

// hexBytes is a string of lowercase hexadecimal digits, such as a SHA-256
// fingerprint, stored as the bytes it spells (a CBOR byte string, half the
// size); any other string is stored as CBOR text. Either reads back as the
// same string.
type hexBytes string

// MarshalCBOR encodes the string.
func (s hexBytes) MarshalCBOR() ([]byte, error) {
	if n := len(s) / 2; len(s)%2 == 0 && n <= 0xffff && lowerHex(string(s)) {
		b := appendHead(make([]byte, 0, 3+n), 2, n)
		return hex.AppendDecode(b, []byte(s))
	}
	if len(s) <= 0xffff {
		return append(appendHead(make([]byte, 0, 3+len(s)), 3, len(s)), s...), nil
	}
	return cborMode.Marshal(string(s))
}

// lowerHex reports whether s is made only of the digits 0-9 and a-f, so
// that the bytes it spells print back as s.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// UnmarshalCBOR decodes a string written by MarshalCBOR. The two shapes it
// writes are read directly; anything else goes through the library, which
// also reports what is wrong.
func (s *hexBytes) UnmarshalCBOR(data []byte) error {
	if len(data) > 0 {
		major, head, n := readHead(data)
		switch {
		case major == 2 && n >= 0 && len(data) == head+n:
			*s = hexBytes(hex.EncodeToString(data[head:]))
			return nil
		case major == 3 && n >= 0 && len(data) == head+n && utf8.Valid(data[head:]):
			*s = hexBytes(data[head:])
			return nil
		}
	}
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case string:
		*s = hexBytes(v)
	case []byte:
		*s = hexBytes(hex.EncodeToString(v))
	default:
		return fmt.Errorf("hex string is a %T", v)
	}
	return nil
}

var (
	minStamp = time.Unix(0, math.MinInt64)
	maxStamp = time.Unix(0, math.MaxInt64)
)

// cborMode and decMode are the CBOR options of every value: the core
// deterministic encoding (RFC 8949 §4.2.1: shortest integers, sorted map
// keys), so that the same record is always the same bytes; decoding
// refuses duplicate map keys and bounds nesting and lengths.
var (
	cborMode = mustEncMode(cbor.CoreDetEncOptions())
	decMode  = mustDecMode(cbor.DecOptions{DupMapKey: cbor.DupMapKeyEnforcedAPF, MaxNestedLevels: 4, MaxArrayElements: 1 << 16, MaxMapPairs: 64})
)

func mustEncMode(o cbor.EncOptions) cbor.EncMode {
	m, err := o.EncMode()
	if err != nil {
		panic(err)
	}
	return m
}

func mustDecMode(o cbor.DecOptions) cbor.DecMode {
	m, err := o.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// pspChargeRecord is the value of psp_charges; the charge key is the key.
type pspChargeRecord struct {
	PaymentID    ident  `cbor:"1,keyasint,omitzero"`
	ProviderRef  string `cbor:"2,keyasint,omitempty"`
	Amount       int64  `cbor:"3,keyasint,omitempty"`
	Currency     symbol `cbor:"4,keyasint,omitzero"`
	Status       symbol `cbor:"5,keyasint,omitzero"`
	ClientSecret string `cbor:"6,keyasint,omitempty"`
	RedirectURL  string `cbor:"7,keyasint,omitempty"`
	RefundKey    string `cbor:"8,keyasint,omitempty"`
	Calls        int    `cbor:"9,keyasint,omitempty"`
	Refunds      int    `cbor:"10,keyasint,omitempty"`
	CreatedAt    stamp  `cbor:"11,keyasint,omitzero"`
	// AmountRefunded came with partial refunds.
	AmountRefunded int64 `cbor:"12,keyasint,omitempty"`
}

// refundRecord is the value of refunds; the refund id is the key.
type refundRecord struct {
	PaymentID   ident  `cbor:"1,keyasint,omitzero"`
	Provider    symbol `cbor:"2,keyasint,omitzero"`
	Amount      int64  `cbor:"3,keyasint,omitempty"`
	Currency    symbol `cbor:"4,keyasint,omitzero"`
	Reason      symbol `cbor:"5,keyasint,omitzero"`
	Status      symbol `cbor:"6,keyasint,omitzero"`
	ProviderRef string `cbor:"7,keyasint,omitempty"`
	IdemKey     string `cbor:"8,keyasint,omitempty"`
	EventID     ident  `cbor:"9,keyasint,omitzero"`
	CreatedAt   stamp  `cbor:"10,keyasint,omitzero"`
	UpdatedAt   stamp  `cbor:"11,keyasint,omitzero"`
}

func fromRefund(r pay.Refund) refundRecord {
	return refundRecord{
		PaymentID: ident(r.PaymentID), Provider: symbol(r.Provider), Amount: r.Amount, Currency: symbol(r.Currency), Reason: symbol(r.Reason),
		Status: symbol(r.Status), ProviderRef: r.ProviderRef, IdemKey: r.IdemKey, EventID: ident(r.EventID),
		CreatedAt: at(r.CreatedAt), UpdatedAt: at(r.UpdatedAt),
	}
}

func (r refundRecord) refund(id string) pay.Refund {
	return pay.Refund{
		ID: id, PaymentID: string(r.PaymentID), Provider: string(r.Provider), Amount: r.Amount, Currency: string(r.Currency), Reason: string(r.Reason),
		Status: pay.RefundStatus(r.Status), ProviderRef: r.ProviderRef, IdemKey: r.IdemKey, EventID: string(r.EventID),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// disputeRecord is the value of disputes; provider and dispute id are the
// key.
type disputeRecord struct {
	PaymentID     ident  `cbor:"1,keyasint,omitzero"`
	Amount        int64  `cbor:"2,keyasint,omitempty"`
	Currency      symbol `cbor:"3,keyasint,omitzero"`
	Reason        symbol `cbor:"4,keyasint,omitzero"`
	Status        symbol `cbor:"5,keyasint,omitzero"`
	EvidenceDueBy stamp  `cbor:"6,keyasint,omitzero"`
	CreatedAt     stamp  `cbor:"7,keyasint,omitzero"`
	UpdatedAt     stamp  `cbor:"8,keyasint,omitzero"`
}

func fromDispute(d pay.Dispute) disputeRecord {
	return disputeRecord{
		PaymentID: ident(d.PaymentID), Amount: d.Amount, Currency: symbol(d.Currency), Reason: symbol(d.Reason), Status: symbol(d.Status),
		EvidenceDueBy: at(d.EvidenceDueBy), CreatedAt: at(d.CreatedAt), UpdatedAt: at(d.UpdatedAt),
	}
}

func (r disputeRecord) dispute(provider, id string) pay.Dispute {
	return pay.Dispute{
		Provider: provider, ID: id, PaymentID: string(r.PaymentID), Amount: r.Amount, Currency: string(r.Currency), Reason: string(r.Reason),
		Status: pay.DisputeStatus(r.Status), EvidenceDueBy: r.EvidenceDueBy.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// encode marshals a record. The record types hold only strings, numbers,
// byte slices and stamps, so an error means a time out of a stamp's range.
func encode(what string, v any) ([]byte, error) {
	b, err := cborMode.Marshal(v)
	if err != nil {
		return nil, pay.Errorf(pay.EINVALID, "%s cannot be stored: %v", what, err)
	}
	return b, nil
}

// decode unmarshals a stored value into v. The decoder copies every string
// and byte slice it keeps, so v stays valid after the transaction.
func decode(what string, data []byte, v any) error {
	if err := decMode.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// keyed is a record whose key holds some of its fields: they are not in
// its value (their cbor tag is "-"), and setKey fills them from the key.
type keyed interface{ setKey(k []byte) error }

// decodeAt is decode of the value v stored at key k: a keyed record gets
// the fields its key holds.
func decodeAt(what string, k, v []byte, r any) error {
	if err := decode(what, v, r); err != nil {
		return err
	}
	if kr, ok := r.(keyed); ok {
		if err := kr.setKey(k); err != nil {
			return fmt.Errorf("decode %s: key %x: %w", what, k, err)
		}
	}
	return nil
}

func (r *paymentRecord) setKey(k []byte) (err error)  { r.ID, err = keyIDOf(k); return err }
func (r *deliveryRecord) setKey(k []byte) (err error) { r.ID, err = keyIDOf(k); return err }
func (r *outboxRecord) setKey(k []byte) (err error)   { r.Seq, err = seqOf(k); return err }
func (r *ledgerRecord) setKey(k []byte) (err error)   { r.Seq, err = seqOf(k); return err }

// seqOf reads a key of seqKey.
func seqOf(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, errors.New("not be64(seq)")
	}
	return binary.BigEndian.Uint64(k), nil
}

func (r *idemRecord) setKey(k []byte) error {
	key, ok := parseIdemKey(k)
	if !ok {
		return errors.New("not an idempotency key")
	}
	r.Key = key
	return nil
}

// keyIDOf reads a key that is a key id (appendKeyID).
func keyIDOf(k []byte) (string, error) {
	id, ok := parseKeyID(k)
	if !ok {
		return "", errors.New("not a key id")
	}
	return id, nil
}

func (r *stepRecord) setKey(k []byte) error {
	id, rest, ok := readStrID(k)
	if !ok || len(rest) != 8 {
		return errors.New("not str(payment key id) ‖ be64(seq)")
	}
	r.PaymentID, r.Seq = id, binary.BigEndian.Uint64(rest)
	return nil
}

func (r *inboxRecord) setKey(k []byte) error {
	provider, rest, ok := readWord(k)
	if !ok || len(rest) == 0 {
		return errors.New("not word(provider) ‖ event id")
	}
	r.Provider, r.EventID = provider, string(rest)
	return nil
}

// decodeJSON unmarshals a value of schema 1 (JSON) into v: the migration
// reads the old records through the same types, by their json names.
func decodeJSON(what string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s (schema 1): %w", what, err)
	}
	return nil
}
