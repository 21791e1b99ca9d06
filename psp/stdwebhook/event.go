package stdwebhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
)

// Event types of the mock and standard wire format, and the status each one
// reports.
const (
	TypeCaptured       = "payment.captured"
	TypeFailed         = "payment.failed"
	TypeProcessing     = "payment.processing"
	TypeRequiresAction = "payment.requires_action"
	TypeRefunded       = "payment.refunded"

	// Events about one refund of a payment, whose data.refund is {id,
	// amount}: id is paystate's refund id ("re_...", which the
	// merchant's code passes to its PSP) or the PSP's reference of the
	// refund; an optional provider_ref gives the PSP's reference next to
	// paystate's id.
	TypeRefundSucceeded = "payment.refund.succeeded"
	TypeRefundFailed    = "payment.refund.failed"

	// Events about a dispute of a payment, whose data.dispute is {id,
	// amount, reason, status, evidence_due_by}: id is the PSP's, status
	// a dispute status (created: needs_response, the default, or
	// under_review; closed: won or lost), evidence_due_by unix seconds
	// or an RFC 3339 time.
	TypeDisputeCreated = "payment.dispute.created"
	TypeDisputeClosed  = "payment.dispute.closed"
)

// refundStatus maps each refund event type to the refund status it
// reports.
var refundStatus = map[string]pay.RefundStatus{
	TypeRefundSucceeded: pay.RefundSucceeded,
	TypeRefundFailed:    pay.RefundFailed,
}

// RefundStatusOf returns the refund status a refund event type reports
// and whether typ is one.
func RefundStatusOf(typ string) (pay.RefundStatus, bool) {
	s, ok := refundStatus[typ]
	return s, ok
}

// IsDisputeType reports whether typ is an event type about a dispute.
func IsDisputeType(typ string) bool { return typ == TypeDisputeCreated || typ == TypeDisputeClosed }

// Known reports whether typ is an event type of the wire format.
func Known(typ string) bool {
	_, payment := eventStatus[typ]
	_, refund := refundStatus[typ]
	return payment || refund || IsDisputeType(typ)
}

// eventStatus maps each known event type to the status it reports.
var eventStatus = map[string]pay.Status{
	TypeCaptured:       pay.Captured,
	TypeFailed:         pay.Failed,
	TypeProcessing:     pay.Processing,
	TypeRequiresAction: pay.RequiresAction,
	TypeRefunded:       pay.Refunded,
}

// StatusOf returns the status an event type reports and whether the type is
// known.
func StatusOf(typ string) (pay.Status, bool) {
	s, ok := eventStatus[typ]
	return s, ok
}

// TypeOf returns the event type that reports status s, or "" if no event of
// the wire format reports it.
func TypeOf(s pay.Status) string {
	for typ, st := range eventStatus {
		if st == s {
			return typ
		}
	}
	return ""
}

// Event is one webhook body of the mock and standard wire format:
//
//	{"id": "evt_...", "type": "payment.captured", "created": 1700000000,
//	 "data": {"payment_id": "pay_...", "provider_ref": "...", "amount": 1000, "currency": "EUR"}}
//
// An event about a refund or a dispute carries it in data as well:
//
//	"data": {"payment_id": "pay_...", "refund": {"id": "re_...", "amount": 250}}
//	"data": {"payment_id": "pay_...", "dispute": {"id": "dp_1", "amount": 1000,
//	         "reason": "fraudulent", "status": "needs_response", "evidence_due_by": 1700600000}}
//
// Amount and Currency are evidence: an event whose amount or currency
// differs from the payment's is not applied (finalize puts the payment on
// the review queue as amount_mismatch). 0 and "" mean not said.
type Event struct {
	ID          string
	Type        string
	Created     time.Time // sent as whole unix seconds
	PaymentID   string
	ProviderRef string
	Amount      int64
	Currency    string
	// Refund is data.refund of a refund event; Dispute data.dispute of a
	// dispute event.
	Refund  *Refund
	Dispute *Dispute
}

// Refund is data.refund: the refund an event is about.
type Refund struct {
	ID          string // paystate's refund id, or the PSP's reference
	ProviderRef string // optional: the PSP's reference next to paystate's id
	Amount      int64  // 0 = not said
}

// Dispute is data.dispute: the dispute an event is about.
type Dispute struct {
	ID            string
	Amount        int64 // 0 = not said: the whole payment
	Reason        string
	Status        pay.DisputeStatus
	EvidenceDueBy time.Time // zero = not said
}

// wireEvent is the JSON form of Event. Pointers tell a missing field from a
// zero one.
type wireEvent struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created *int64    `json:"created"`
	Data    *wireData `json:"data"`
}

type wireData struct {
	PaymentID   string       `json:"payment_id,omitempty"`
	ProviderRef string       `json:"provider_ref,omitempty"`
	Amount      int64        `json:"amount"`
	Currency    string       `json:"currency,omitempty"`
	Refund      *wireRefund  `json:"refund,omitempty"`
	Dispute     *wireDispute `json:"dispute,omitempty"`
}

type wireRefund struct {
	ID          string `json:"id"`
	ProviderRef string `json:"provider_ref,omitempty"`
	Amount      int64  `json:"amount"`
}

type wireDispute struct {
	ID            string          `json:"id"`
	Amount        int64           `json:"amount"`
	Reason        string          `json:"reason,omitempty"`
	Status        string          `json:"status,omitempty"`
	EvidenceDueBy json.RawMessage `json:"evidence_due_by,omitempty"`
}

// dueBy reads evidence_due_by: unix seconds or an RFC 3339 time; zero
// when absent or null.
func (d *wireDispute) dueBy() (time.Time, error) {
	raw := strings.TrimSpace(string(d.EvidenceDueBy))
	if raw == "" || raw == "null" {
		return time.Time{}, nil
	}
	var n int64
	if err := json.Unmarshal(d.EvidenceDueBy, &n); err == nil {
		if n <= 0 {
			return time.Time{}, pay.Invalidf("data.dispute.evidence_due_by", "data.dispute.evidence_due_by must be a positive unix time, got %d", n)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	var s string
	if err := json.Unmarshal(d.EvidenceDueBy, &s); err == nil {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, pay.Invalidf("data.dispute.evidence_due_by", "data.dispute.evidence_due_by must be unix seconds or an RFC 3339 time, got %s", quoteShort(raw))
}

// EncodeEvent returns the JSON body of e. It checks e as ParseEvent would, so
// what it encodes parses.
func EncodeEvent(e Event) ([]byte, error) {
	created := e.Created.Unix()
	w := wireEvent{
		ID:      e.ID,
		Type:    e.Type,
		Created: &created,
		Data: &wireData{
			PaymentID:   e.PaymentID,
			ProviderRef: e.ProviderRef,
			Amount:      e.Amount,
			Currency:    e.Currency,
		},
	}
	if r := e.Refund; r != nil {
		w.Data.Refund = &wireRefund{ID: r.ID, ProviderRef: r.ProviderRef, Amount: r.Amount}
	}
	if d := e.Dispute; d != nil {
		w.Data.Dispute = &wireDispute{ID: d.ID, Amount: d.Amount, Reason: d.Reason, Status: string(d.Status)}
		if !d.EvidenceDueBy.IsZero() {
			w.Data.Dispute.EvidenceDueBy = json.RawMessage(strconv.FormatInt(d.EvidenceDueBy.Unix(), 10))
		}
	}
	if err := w.validate(); err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// DecodeEvent parses a webhook body of the wire format. Unknown fields are
// ignored, so a sender may add some; a body that is not one JSON object, a
// missing or malformed field, or an unknown type is an EINVALID error naming
// the field.
func DecodeEvent(body []byte) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(body, &w); err != nil {
		return Event{}, jsonError(err)
	}
	if err := w.validate(); err != nil {
		return Event{}, err
	}
	e := Event{
		ID:          w.ID,
		Type:        w.Type,
		Created:     time.Unix(*w.Created, 0).UTC(),
		PaymentID:   w.Data.PaymentID,
		ProviderRef: w.Data.ProviderRef,
		Amount:      w.Data.Amount,
		Currency:    w.Data.Currency,
	}
	if r := w.Data.Refund; r != nil {
		e.Refund = &Refund{ID: r.ID, ProviderRef: r.ProviderRef, Amount: r.Amount}
	}
	if d := w.Data.Dispute; d != nil {
		due, _ := d.dueBy() // checked by validate
		e.Dispute = &Dispute{ID: d.ID, Amount: d.Amount, Reason: d.Reason, Status: disputeStatus(w.Type, d.Status), EvidenceDueBy: due}
	}
	return e, nil
}

// disputeStatus is the status of a dispute event: data.dispute.status,
// needs_response when a created event does not say.
func disputeStatus(typ, s string) pay.DisputeStatus {
	if s == "" && typ == TypeDisputeCreated {
		return pay.DisputeNeedsResponse
	}
	return pay.DisputeStatus(s)
}

// ParseEvent parses a webhook body of the wire format (DecodeEvent) into the
// provider-neutral event that paystate stores and applies.
func ParseEvent(body []byte) (pay.WebhookEvent, error) {
	e, err := DecodeEvent(body)
	if err != nil {
		return pay.WebhookEvent{}, err
	}
	st, _ := StatusOf(e.Type)
	out := pay.WebhookEvent{
		EventID:     e.ID,
		Type:        e.Type,
		PaymentID:   e.PaymentID,
		ProviderRef: e.ProviderRef,
		Status:      st,
		Amount:      e.Amount,
		Currency:    strings.ToUpper(e.Currency),
		OccurredAt:  e.Created,
	}
	if rs, ok := RefundStatusOf(e.Type); ok {
		// The refund's amount is the refund's, not the payment's: it is
		// evidence about the refund only.
		c := &pay.RefundChange{Status: rs, Amount: e.Refund.Amount, ProviderRef: e.Refund.ProviderRef}
		if ids.ValidRefund(e.Refund.ID) {
			c.ID = e.Refund.ID
		} else {
			c.ProviderRef = e.Refund.ID
		}
		out.Refund, out.Amount = c, 0
	}
	if d := e.Dispute; d != nil {
		out.Dispute = &pay.DisputeChange{ID: d.ID, Amount: d.Amount, Reason: d.Reason, Status: d.Status, EvidenceDueBy: d.EvidenceDueBy}
		if out.Currency != "" {
			out.Dispute.Currency = out.Currency
		}
		out.Amount = 0
	}
	return out, nil
}

// validate checks the fields of a decoded or to-be-encoded event.
func (w wireEvent) validate() error {
	if w.ID == "" {
		return pay.Errorf(pay.EINVALID, "id is required")
	}
	if err := pay.ValidateText("id", w.ID, MaxIDLen); err != nil {
		return err
	}
	if w.Type == "" {
		return pay.Errorf(pay.EINVALID, "type is required")
	}
	if !Known(w.Type) {
		return pay.Errorf(pay.EINVALID, "type %s is not one of %s, %s, %s, %s, %s, %s, %s, %s, %s",
			quoteShort(w.Type), TypeCaptured, TypeFailed, TypeProcessing, TypeRequiresAction, TypeRefunded,
			TypeRefundSucceeded, TypeRefundFailed, TypeDisputeCreated, TypeDisputeClosed)
	}
	if w.Created == nil {
		return pay.Errorf(pay.EINVALID, "created is required")
	}
	if *w.Created <= 0 {
		return pay.Errorf(pay.EINVALID, "created must be a positive unix time, got %d", *w.Created)
	}
	if w.Data == nil {
		return pay.Errorf(pay.EINVALID, "data is required")
	}
	if w.Data.PaymentID == "" && w.Data.ProviderRef == "" {
		return pay.Errorf(pay.EINVALID, "data.payment_id or data.provider_ref is required")
	}
	if err := pay.ValidateText("data.payment_id", w.Data.PaymentID, MaxIDLen); err != nil {
		return err
	}
	if err := pay.ValidateText("data.provider_ref", w.Data.ProviderRef, MaxIDLen); err != nil {
		return err
	}
	if w.Data.Amount < 0 {
		return pay.Errorf(pay.EINVALID, "data.amount must not be negative, got %d", w.Data.Amount)
	}
	if c := w.Data.Currency; c != "" && pay.ValidateCurrency(strings.ToUpper(c)) != nil {
		return pay.Errorf(pay.EINVALID, "data.currency must be an ISO 4217 code of three letters, got %s", quoteShort(c))
	}
	return w.validateMoney()
}

// validateMoney checks data.refund of a refund event and data.dispute of
// a dispute event; other events must carry neither.
func (w wireEvent) validateMoney() error {
	_, refund := RefundStatusOf(w.Type)
	dispute := IsDisputeType(w.Type)
	switch r := w.Data.Refund; {
	case !refund && r != nil:
		return pay.Invalidf("data.refund", "data.refund is only for %s and %s events", TypeRefundSucceeded, TypeRefundFailed)
	case refund && r == nil:
		return pay.Invalidf("data.refund", "data.refund is required for a %s event", w.Type)
	case refund && r.ID == "":
		return pay.Invalidf("data.refund.id", "data.refund.id is required")
	case refund:
		if err := pay.ValidateText("data.refund.id", r.ID, MaxIDLen); err != nil {
			return err
		}
		if err := pay.ValidateText("data.refund.provider_ref", r.ProviderRef, MaxIDLen); err != nil {
			return err
		}
		if r.Amount < 0 {
			return pay.Invalidf("data.refund.amount", "data.refund.amount must not be negative, got %d", r.Amount)
		}
	}
	switch d := w.Data.Dispute; {
	case !dispute && d != nil:
		return pay.Invalidf("data.dispute", "data.dispute is only for %s and %s events", TypeDisputeCreated, TypeDisputeClosed)
	case dispute && d == nil:
		return pay.Invalidf("data.dispute", "data.dispute is required for a %s event", w.Type)
	case dispute && d.ID == "":
		return pay.Invalidf("data.dispute.id", "data.dispute.id is required")
	case dispute:
		if err := pay.ValidateText("data.dispute.id", d.ID, MaxIDLen); err != nil {
			return err
		}
		if err := pay.ValidateText("data.dispute.reason", d.Reason, pay.MaxRefundReason); err != nil {
			return err
		}
		if d.Amount < 0 {
			return pay.Invalidf("data.dispute.amount", "data.dispute.amount must not be negative, got %d", d.Amount)
		}
		st := disputeStatus(w.Type, d.Status)
		switch {
		case !st.Valid():
			return pay.Invalidf("data.dispute.status", "data.dispute.status %s is not one of needs_response, under_review, won, lost", quoteShort(d.Status))
		case w.Type == TypeDisputeClosed && !st.Closed():
			return pay.Invalidf("data.dispute.status", "data.dispute.status of a %s event must be won or lost, got %s", w.Type, quoteShort(d.Status))
		case w.Type == TypeDisputeCreated && st.Closed():
			return pay.Invalidf("data.dispute.status", "data.dispute.status of a %s event must be needs_response or under_review, got %s", w.Type, quoteShort(d.Status))
		}
		if _, err := d.dueBy(); err != nil {
			return err
		}
	}
	return nil
}

// jsonError turns a decoding error into an EINVALID error naming the field.
func jsonError(err error) error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntaxErr):
		return pay.Errorf(pay.EINVALID, "body is not valid JSON: %s at byte %d", syntaxErr.Error(), syntaxErr.Offset)
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return pay.Errorf(pay.EINVALID, "body must be a JSON object, got %s", typeErr.Value)
	case errors.As(err, &typeErr):
		return pay.Errorf(pay.EINVALID, "%s must be %s, got %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	default:
		return pay.Errorf(pay.EINVALID, "body is not valid JSON: %s", err.Error())
	}
}

// jsonKind names a Go kind in JSON terms.
func jsonKind(kind string) string {
	switch kind {
	case "int64":
		return "an integer"
	case "string":
		return "a string"
	case "struct", "ptr":
		return "an object"
	}
	return kind
}

// quoteShort quotes a value taken from a request for an error message,
// cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}
