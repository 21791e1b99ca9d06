package stdwebhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
)

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
	PaymentID   string `json:"payment_id,omitempty"`
	ProviderRef string `json:"provider_ref,omitempty"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency,omitempty"`
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
	return Event{
		ID:          w.ID,
		Type:        w.Type,
		Created:     time.Unix(*w.Created, 0).UTC(),
		PaymentID:   w.Data.PaymentID,
		ProviderRef: w.Data.ProviderRef,
		Amount:      w.Data.Amount,
		Currency:    w.Data.Currency,
	}, nil
}

// ParseEvent parses a webhook body of the wire format (DecodeEvent) into the
// provider-neutral event that paystate stores and applies.
func ParseEvent(body []byte) (pay.WebhookEvent, error) {
	e, err := DecodeEvent(body)
	if err != nil {
		return pay.WebhookEvent{}, err
	}
	st, _ := StatusOf(e.Type)
	return pay.WebhookEvent{
		EventID:     e.ID,
		Type:        e.Type,
		PaymentID:   e.PaymentID,
		ProviderRef: e.ProviderRef,
		Status:      st,
		Amount:      e.Amount,
		Currency:    strings.ToUpper(e.Currency),
		OccurredAt:  e.Created,
	}, nil
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
	if _, ok := StatusOf(w.Type); !ok {
		return pay.Errorf(pay.EINVALID, "type %s is not one of %s, %s, %s, %s, %s",
			quoteShort(w.Type), TypeCaptured, TypeFailed, TypeProcessing, TypeRequiresAction, TypeRefunded)
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
