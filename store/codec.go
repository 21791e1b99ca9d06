package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
)

// Values are JSON objects of the record types below, in the order of the
// families of doc.go's table. The domain types carry no tags; these do, so
// the field names on disk are fixed here and a field renamed in package pay
// does not change the file format. Times are RFC 3339 with nanoseconds in
// UTC. Fields are only ever added (decoding ignores unknown ones); anything
// else is a new SchemaVersion.

// paymentRecord is the value of payments.
type paymentRecord struct {
	ID            string    `json:"id"`
	OrderID       string    `json:"order_id"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	CustomerID    string    `json:"customer_id,omitempty"`
	CustomerEmail string    `json:"customer_email,omitempty"`
	Provider      string    `json:"provider"`
	ProviderRef   string    `json:"provider_ref,omitempty"`
	Status        string    `json:"status"`
	Version       uint64    `json:"version"`
	ClientSecret  string    `json:"client_secret,omitempty"`
	RedirectURL   string    `json:"redirect_url,omitempty"`
	ReturnURL     string    `json:"return_url,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func fromPayment(p pay.Payment) paymentRecord {
	return paymentRecord{
		ID: p.ID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency,
		CustomerID: p.Customer.ID, CustomerEmail: p.Customer.Email,
		Provider: p.Provider, ProviderRef: p.ProviderRef, Status: string(p.Status), Version: p.Version,
		ClientSecret: p.ClientSecret, RedirectURL: p.RedirectURL, ReturnURL: p.ReturnURL,
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
	}
}

func (r paymentRecord) payment() pay.Payment {
	return pay.Payment{
		ID: r.ID, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		Customer: pay.Customer{ID: r.CustomerID, Email: r.CustomerEmail},
		Provider: r.Provider, ProviderRef: r.ProviderRef, Status: pay.Status(r.Status), Version: r.Version,
		ClientSecret: r.ClientSecret, RedirectURL: r.RedirectURL, ReturnURL: r.ReturnURL,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// stepRecord is the value of timeline.
type stepRecord struct {
	PaymentID string    `json:"payment_id"`
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"at"`
	Source    string    `json:"source"`
	Kind      string    `json:"kind"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	Version   uint64    `json:"version"`
	EventID   string    `json:"event_id,omitempty"`
	Note      string    `json:"note,omitempty"`
}

func fromStep(s pay.Step) stepRecord {
	return stepRecord{
		PaymentID: s.PaymentID, Seq: s.Seq, At: s.At.UTC(), Source: string(s.Source), Kind: s.Kind,
		From: string(s.From), To: string(s.To), Version: s.Version, EventID: s.EventID, Note: s.Note,
	}
}

func (r stepRecord) step() pay.Step {
	return pay.Step{
		PaymentID: r.PaymentID, Seq: r.Seq, At: r.At.UTC(), Source: pay.Source(r.Source), Kind: r.Kind,
		From: pay.Status(r.From), To: pay.Status(r.To), Version: r.Version, EventID: r.EventID, Note: r.Note,
	}
}

// inboxRecord is the value of inbox. Body is base64 in JSON.
type inboxRecord struct {
	Provider      string    `json:"provider"`
	EventID       string    `json:"event_id"`
	Type          string    `json:"type,omitempty"`
	PaymentID     string    `json:"payment_id,omitempty"`
	ProviderRef   string    `json:"provider_ref,omitempty"`
	Status        string    `json:"status,omitempty"`
	StepKind      string    `json:"step_kind,omitempty"`
	Amount        int64     `json:"amount,omitempty"`
	Currency      string    `json:"currency,omitempty"`
	OccurredAt    time.Time `json:"occurred_at"`
	ReceivedAt    time.Time `json:"received_at"`
	Body          []byte    `json:"body,omitempty"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error,omitempty"`
	Processed     bool      `json:"processed"`
}

func fromInbox(e pay.InboxEvent) inboxRecord {
	return inboxRecord{
		Provider: e.Provider, EventID: e.EventID, Type: e.Type, PaymentID: e.PaymentID,
		ProviderRef: e.ProviderRef, Status: string(e.Status), StepKind: e.StepKind, Amount: e.Amount, Currency: e.Currency,
		OccurredAt: e.OccurredAt.UTC(), ReceivedAt: e.ReceivedAt.UTC(), Body: e.Body,
		Attempts: e.Attempts, NextAttemptAt: e.NextAttemptAt.UTC(), LastError: e.LastError, Processed: e.Processed,
	}
}

func (r inboxRecord) event() pay.InboxEvent {
	return pay.InboxEvent{
		Provider: r.Provider, EventID: r.EventID, Type: r.Type, PaymentID: r.PaymentID,
		ProviderRef: r.ProviderRef, Status: pay.Status(r.Status), StepKind: r.StepKind, Amount: r.Amount, Currency: r.Currency,
		OccurredAt: r.OccurredAt.UTC(), ReceivedAt: r.ReceivedAt.UTC(), Body: r.Body,
		Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC(), LastError: r.LastError, Processed: r.Processed,
	}
}

// processedRecord is the value of processed.
type processedRecord struct {
	At time.Time `json:"at"`
}

// leaseRecord is the value of leases. The payment id is the key.
type leaseRecord struct {
	Holder    string    `json:"holder"`
	Token     uint64    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// outboxRecord is the value of outbox.
type outboxRecord struct {
	Seq           uint64    `json:"seq"`
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	PaymentID     string    `json:"payment_id"`
	Status        string    `json:"status"`
	From          string    `json:"from,omitempty"`
	Version       uint64    `json:"version"`
	OrderID       string    `json:"order_id,omitempty"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency,omitempty"`
	CustomerID    string    `json:"customer_id,omitempty"`
	CustomerEmail string    `json:"customer_email,omitempty"`
	Provider      string    `json:"provider,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

func fromOutbox(r pay.OutboxRecord) outboxRecord {
	return outboxRecord{
		Seq: r.Seq, ID: r.ID, Type: r.Type, PaymentID: r.PaymentID, Status: string(r.Status), From: string(r.From),
		Version: r.Version, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		CustomerID: r.Customer.ID, CustomerEmail: r.Customer.Email, Provider: r.Provider, CreatedAt: r.CreatedAt.UTC(),
	}
}

func (r outboxRecord) record() pay.OutboxRecord {
	return pay.OutboxRecord{
		Seq: r.Seq, ID: r.ID, Type: r.Type, PaymentID: r.PaymentID, Status: pay.Status(r.Status), From: pay.Status(r.From),
		Version: r.Version, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		Customer: pay.Customer{ID: r.CustomerID, Email: r.CustomerEmail}, Provider: r.Provider, CreatedAt: r.CreatedAt.UTC(),
	}
}

// deliveryRecord is the value of deliveries.
type deliveryRecord struct {
	ID            string    `json:"id"`
	Effect        string    `json:"effect"`
	Endpoint      string    `json:"endpoint,omitempty"`
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	EventSeq      uint64    `json:"event_seq"`
	EventAt       time.Time `json:"event_at"`
	PaymentID     string    `json:"payment_id"`
	State         string    `json:"state"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error,omitempty"`
	Note          string    `json:"note,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func fromDelivery(d pay.Delivery) deliveryRecord {
	return deliveryRecord{
		ID: d.ID, Effect: d.Effect, Endpoint: d.Endpoint, EventID: d.EventID, EventType: d.EventType,
		EventSeq: d.EventSeq, EventAt: d.EventAt.UTC(), PaymentID: d.PaymentID, State: d.State,
		Attempts: d.Attempts, NextAttemptAt: d.NextAttemptAt.UTC(), LastError: d.LastError, Note: d.Note,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
}

func (r deliveryRecord) delivery() pay.Delivery {
	return pay.Delivery{
		ID: r.ID, Effect: r.Effect, Endpoint: r.Endpoint, EventID: r.EventID, EventType: r.EventType,
		EventSeq: r.EventSeq, EventAt: r.EventAt.UTC(), PaymentID: r.PaymentID, State: r.State,
		Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC(), LastError: r.LastError, Note: r.Note,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// ledgerRecord is the value of ledger.
type ledgerRecord struct {
	Seq       uint64    `json:"seq"`
	PaymentID string    `json:"payment_id,omitempty"`
	EventID   string    `json:"event_id,omitempty"`
	Account   string    `json:"account"`
	Currency  string    `json:"currency"`
	Amount    int64     `json:"amount"`
	At        time.Time `json:"at"`
}

func fromLedger(e pay.LedgerEntry) ledgerRecord {
	return ledgerRecord{
		Seq: e.Seq, PaymentID: e.PaymentID, EventID: e.EventID, Account: e.Account,
		Currency: e.Currency, Amount: e.Amount, At: e.At.UTC(),
	}
}

// reviewRecord is the value of review.
type reviewRecord struct {
	ID          string    `json:"id"`
	PaymentID   string    `json:"payment_id,omitempty"`
	Reason      string    `json:"reason"`
	Provider    string    `json:"provider,omitempty"`
	ProviderRef string    `json:"provider_ref,omitempty"`
	EventID     string    `json:"event_id,omitempty"`
	Observed    string    `json:"observed,omitempty"`
	Note        string    `json:"note,omitempty"`
	LastPSP     string    `json:"last_psp,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

func fromReview(i pay.ReviewItem) reviewRecord {
	return reviewRecord{
		ID: i.ID, PaymentID: i.PaymentID, Reason: i.Reason, Provider: i.Provider, ProviderRef: i.ProviderRef,
		EventID: i.EventID, Observed: string(i.Observed), Note: i.Note, LastPSP: i.LastPSP, CreatedAt: i.CreatedAt.UTC(),
	}
}

func (r reviewRecord) item() pay.ReviewItem {
	return pay.ReviewItem{
		ID: r.ID, PaymentID: r.PaymentID, Reason: r.Reason, Provider: r.Provider, ProviderRef: r.ProviderRef,
		EventID: r.EventID, Observed: pay.Status(r.Observed), Note: r.Note, LastPSP: r.LastPSP, CreatedAt: r.CreatedAt.UTC(),
	}
}

// idemRecord is the value of idempotency_keys. Body is base64 in JSON.
type idemRecord struct {
	Key         string    `json:"key"`
	Fingerprint string    `json:"fingerprint"`
	State       string    `json:"state"`
	Owner       string    `json:"owner,omitempty"`
	LockedUntil time.Time `json:"locked_until"`
	PaymentID   string    `json:"payment_id,omitempty"`
	StatusCode  int       `json:"status_code,omitempty"`
	Body        []byte    `json:"body,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

func fromIdem(r pay.IdemRecord) idemRecord {
	return idemRecord{
		Key: r.Key, Fingerprint: r.Fingerprint, State: r.State, Owner: r.Owner, LockedUntil: r.LockedUntil.UTC(),
		PaymentID: r.PaymentID, StatusCode: r.StatusCode, Body: r.Body, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
	}
}

func (r idemRecord) record() pay.IdemRecord {
	return pay.IdemRecord{
		Key: r.Key, Fingerprint: r.Fingerprint, State: r.State, Owner: r.Owner, LockedUntil: r.LockedUntil.UTC(),
		PaymentID: r.PaymentID, StatusCode: r.StatusCode, Body: r.Body, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
	}
}

// customerRecord is the value of customers. The customer id is the key.
type customerRecord struct {
	Points      int64     `json:"points"`
	LastVisitAt time.Time `json:"last_visit_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// effectRecord is the value of effects. The dedupe key is the key.
type effectRecord struct {
	DeliveryID string    `json:"delivery_id,omitempty"`
	Points     int64     `json:"points,omitempty"`
	At         time.Time `json:"at"`
}

// endpointRecord is the value of webhook_endpoints. The endpoint id is the
// key.
type endpointRecord struct {
	URL            string    `json:"url"`
	Disabled       bool      `json:"disabled"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	FailingSince   time.Time `json:"failing_since,omitzero"`
	LastSuccessAt  time.Time `json:"last_success_at,omitzero"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// pspAnswerRecord is the value of psp_answers; the payment id is the key.
type pspAnswerRecord struct {
	Provider string    `json:"provider,omitempty"`
	Status   string    `json:"status,omitempty"`
	Found    bool      `json:"found"`
	Raw      string    `json:"raw,omitempty"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
}

// encode marshals a record. The record types hold only strings, numbers,
// byte slices and times within year 0..9999, so an error means a time out of
// that range.
func encode(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, pay.Errorf(pay.EINVALID, "%s cannot be stored: %v", what, err)
	}
	return b, nil
}

// decode unmarshals a stored value into v. json.Unmarshal copies everything
// it keeps, so v stays valid after the transaction.
func decode(what string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}
