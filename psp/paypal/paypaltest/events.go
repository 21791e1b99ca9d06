package paypaltest

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// EventSpec is a webhook event to build, in PayPal's envelope (event
// version 1.0, resource version 2.0).
type EventSpec struct {
	ID        string // "" = a fresh WH-... id
	Type      string // event_type
	At        time.Time
	PaymentID string // custom_id ("" = none: not paystate's)
	OrderID   string
	CaptureID string // "" = the one the Fake gives the order's capture (CaptureIDOf)
	Amount    string // PayPal's decimal string
	Currency  string
	// RefundID and RefundStatus for PAYMENT.CAPTURE.REFUNDED / REVERSED.
	RefundID     string
	RefundStatus string
	// DisputeID, DisputeStatus and Outcome for CUSTOMER.DISPUTE.*.
	DisputeID     string
	DisputeStatus string
	Outcome       string
}

var events atomic.Int64

// Event builds the body of a webhook event. Its shapes are those of the
// resources in PayPal's Orders v2, Payments v2 and Disputes v1 documents.
func Event(s EventSpec) []byte {
	id := s.ID
	if id == "" {
		id = "WH-" + strings.ToUpper(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")) + "-" + strconv.FormatInt(events.Add(1), 10)
	}
	capID := s.CaptureID
	if capID == "" && s.OrderID != "" {
		capID = CaptureIDOf(s.OrderID)
	}
	amount := map[string]any{"currency_code": s.Currency, "value": s.Amount}
	var resType, summary string
	var res map[string]any
	switch {
	case s.Type == "CHECKOUT.ORDER.APPROVED":
		resType, summary = "checkout-order", "An order has been approved by buyer"
		res = map[string]any{
			"id": s.OrderID, "intent": "CAPTURE", "status": "APPROVED",
			"create_time": s.At.UTC().Format(time.RFC3339),
			"purchase_units": []map[string]any{{
				"reference_id": "default", "amount": amount, "custom_id": s.PaymentID,
				"payee": map[string]any{"email_address": "merchant@example.com"},
			}},
			"payer": map[string]any{"name": map[string]any{"given_name": "John", "surname": "Doe"}, "email_address": "buyer@example.com", "payer_id": "QYR5Z8XDVJNXQ"},
			"links": []map[string]any{
				{"href": "https://api.sandbox.paypal.com/v2/checkout/orders/" + s.OrderID, "rel": "self", "method": "GET"},
				{"href": "https://api.sandbox.paypal.com/v2/checkout/orders/" + s.OrderID + "/capture", "rel": "capture", "method": "POST"},
			},
		}
	case strings.HasPrefix(s.Type, "PAYMENT.CAPTURE.") && s.RefundID == "":
		resType, summary = "capture", "Payment "+strings.ToLower(strings.TrimPrefix(s.Type, "PAYMENT.CAPTURE."))
		res = map[string]any{
			"id": capID, "status": strings.TrimPrefix(s.Type, "PAYMENT.CAPTURE."), "amount": amount,
			"final_capture": true, "custom_id": s.PaymentID,
			"seller_protection":  map[string]any{"status": "ELIGIBLE"},
			"supplementary_data": map[string]any{"related_ids": map[string]any{"order_id": s.OrderID}},
			"create_time":        s.At.UTC().Format(time.RFC3339), "update_time": s.At.UTC().Format(time.RFC3339),
			"links": []map[string]any{
				{"href": "https://api.sandbox.paypal.com/v2/payments/captures/" + capID, "rel": "self", "method": "GET"},
				{"href": "https://api.sandbox.paypal.com/v2/checkout/orders/" + s.OrderID, "rel": "up", "method": "GET"},
			},
		}
		if st := res["status"]; st == "DENIED" {
			res["status"] = "DECLINED"
		}
	case strings.HasPrefix(s.Type, "PAYMENT.CAPTURE."):
		resType, summary = "refund", "A "+s.Amount+" "+s.Currency+" capture payment was refunded"
		st := s.RefundStatus
		if st == "" {
			st = "COMPLETED"
		}
		res = map[string]any{
			"id": s.RefundID, "status": st, "amount": amount, "custom_id": s.PaymentID,
			"create_time": s.At.UTC().Format(time.RFC3339),
			"links": []map[string]any{
				{"href": "https://api.sandbox.paypal.com/v2/payments/refunds/" + s.RefundID, "rel": "self", "method": "GET"},
				{"href": "https://api.sandbox.paypal.com/v2/payments/captures/" + capID, "rel": "up", "method": "GET"},
			},
		}
	case strings.HasPrefix(s.Type, "CUSTOMER.DISPUTE."):
		resType, summary = "dispute", "A dispute was "+strings.ToLower(strings.TrimPrefix(s.Type, "CUSTOMER.DISPUTE."))
		res = map[string]any{
			"dispute_id": s.DisputeID, "create_time": s.At.UTC().Format(time.RFC3339),
			"reason": "MERCHANDISE_OR_SERVICE_NOT_RECEIVED", "status": s.DisputeStatus,
			"dispute_amount":           amount,
			"seller_response_due_date": s.At.Add(10 * 24 * time.Hour).UTC().Format(time.RFC3339),
			"dispute_life_cycle_stage": "CHARGEBACK", "dispute_channel": "INTERNAL",
			"disputed_transactions": []map[string]any{{
				"seller_transaction_id": capID, "custom": s.PaymentID, "gross_amount": amount,
				"create_time": s.At.Add(-24 * time.Hour).UTC().Format(time.RFC3339),
			}},
		}
		if s.Outcome != "" {
			res["dispute_outcome"] = map[string]any{"outcome_code": s.Outcome}
		}
	default:
		resType, summary = "unknown", "An event paystate does not map"
		res = map[string]any{"id": s.OrderID}
	}
	b, err := json.Marshal(map[string]any{
		"id": id, "event_version": "1.0", "create_time": s.At.UTC().Format(time.RFC3339),
		"resource_type": resType, "resource_version": "2.0", "event_type": s.Type, "summary": summary,
		"resource": res,
		"links": []map[string]any{
			{"href": "https://api.sandbox.paypal.com/v1/notifications/webhooks-events/" + id, "rel": "self", "method": "GET"},
			{"href": "https://api.sandbox.paypal.com/v1/notifications/webhooks-events/" + id + "/resend", "rel": "resend", "method": "POST"},
		},
	})
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return b
}
