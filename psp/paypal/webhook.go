package paypal

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	ppgo "github.com/plutov/paypal/v4"

	"github.com/paystate/paystate/pay"
)

// Event types paystate maps.
const (
	TypeOrderApproved    = "CHECKOUT.ORDER.APPROVED"
	TypeCaptureCompleted = "PAYMENT.CAPTURE.COMPLETED"
	TypeCaptureDenied    = "PAYMENT.CAPTURE.DENIED"
	TypeCaptureDeclined  = "PAYMENT.CAPTURE.DECLINED"
	TypeCapturePending   = "PAYMENT.CAPTURE.PENDING"
	TypeCaptureRefunded  = "PAYMENT.CAPTURE.REFUNDED"
	TypeCaptureReversed  = "PAYMENT.CAPTURE.REVERSED"
	TypeDisputeCreated   = "CUSTOMER.DISPUTE.CREATED"
	TypeDisputeUpdated   = "CUSTOMER.DISPUTE.UPDATED"
	TypeDisputeResolved  = "CUSTOMER.DISPUTE.RESOLVED"
)

// maxIDLen bounds the ids read from an event.
const maxIDLen = 255

// verifyTimeout bounds the network part of a verification (a certificate
// fetch, the verify call).
const verifyTimeout = 10 * time.Second

// ParseWebhook checks the delivery's transmission time against now and the
// tolerance, verifies its signature (offline, or by PayPal's
// verify-webhook-signature call with verify = "api") and maps the event
// (see the package documentation). A missing, malformed or wrong
// signature, a certificate from a host not allowed, untrusted or expired,
// or a stale transmission time is ESIGNATURE; a signed body that is not a
// PayPal event, or lacks what paystate needs, EINVALID; a type paystate
// does not map is Ignore.
func (p *Provider) ParseWebhook(body []byte, header http.Header, now time.Time) (pay.WebhookEvent, error) {
	t, err := p.readTransmission(header, now)
	if err != nil {
		return pay.WebhookEvent{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	if p.verify == VerifyAPI {
		err = p.verifyAPI(ctx, body, header)
	} else {
		err = p.verifyOffline(ctx, body, t, now)
	}
	if err != nil {
		return pay.WebhookEvent{}, err
	}
	return mapEvent(body)
}

// event is a PayPal webhook event (Webhooks API v1, event version 1.0).
type event struct {
	ID           string          `json:"id"`
	CreateTime   string          `json:"create_time"`
	ResourceType string          `json:"resource_type"`
	EventType    string          `json:"event_type"`
	Resource     json.RawMessage `json:"resource"`
}

// resource is what paystate reads of an event's resource: an order, a
// capture, a refund or a dispute.
type resource struct {
	ID                string              `json:"id"`
	Status            string              `json:"status"`
	CustomID          string              `json:"custom_id"`
	Amount            *ppgo.Money         `json:"amount"`
	Links             []ppgo.Link         `json:"links"`
	PurchaseUnits     []ppgo.PurchaseUnit `json:"purchase_units"`
	SupplementaryData *struct {
		RelatedIDs struct {
			OrderID string `json:"order_id"`
		} `json:"related_ids"`
	} `json:"supplementary_data"`

	// A dispute's.
	DisputeID             string      `json:"dispute_id"`
	Reason                string      `json:"reason"`
	DisputeAmount         *ppgo.Money `json:"dispute_amount"`
	SellerResponseDueDate string      `json:"seller_response_due_date"`
	DisputeOutcome        *struct {
		OutcomeCode string `json:"outcome_code"`
	} `json:"dispute_outcome"`
	DisputedTransactions []struct {
		SellerTransactionID string `json:"seller_transaction_id"`
		Custom              string `json:"custom"`
		InvoiceNumber       string `json:"invoice_number"`
	} `json:"disputed_transactions"`
}

// mapEvent maps a verified PayPal event to paystate's event.
func mapEvent(body []byte) (pay.WebhookEvent, error) {
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "paypal event: %s", cut(err.Error(), 200))
	}
	switch {
	case ev.ID == "":
		return pay.WebhookEvent{}, pay.Invalidf("id", "paypal event: id is required")
	case ev.EventType == "":
		return pay.WebhookEvent{}, pay.Invalidf("event_type", "paypal event %s: event_type is required", cut(ev.ID, 80))
	}
	if err := pay.ValidateText("id", ev.ID, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	if err := pay.ValidateText("event_type", ev.EventType, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	at, err := time.Parse(time.RFC3339, ev.CreateTime)
	if err != nil {
		return pay.WebhookEvent{}, pay.Invalidf("create_time", "paypal event %s: create_time must be an RFC 3339 time", ev.ID)
	}
	e := pay.WebhookEvent{EventID: ev.ID, Type: ev.EventType, OccurredAt: at.UTC()}

	var want string // the resource the event type carries
	switch ev.EventType {
	case TypeOrderApproved:
		// The buyer approved: a trigger, not evidence. paystate captures
		// the order now, under the payment's lease (finalize.Pull calls
		// Status, which captures an APPROVED order under
		// capture-<payment_id>), and finalizes the capture's status.
		e.Pull, want = true, "checkout-order"
	case TypeCaptureCompleted:
		e.Status, want = pay.Captured, "capture"
	case TypeCaptureDenied, TypeCaptureDeclined:
		e.Status, want = pay.Failed, "capture"
	case TypeCapturePending:
		e.Status, want = pay.Processing, "capture"
	case TypeCaptureRefunded, TypeCaptureReversed:
		want = "refund"
	case TypeDisputeCreated, TypeDisputeUpdated, TypeDisputeResolved:
		want = "dispute"
	default:
		e.Ignore = true
		return e, nil
	}
	if len(ev.Resource) == 0 || string(ev.Resource) == "null" {
		return pay.WebhookEvent{}, pay.Invalidf("resource", "paypal event %s: resource is required", ev.ID)
	}
	var r resource
	if err := json.Unmarshal(ev.Resource, &r); err != nil {
		return pay.WebhookEvent{}, pay.Invalidf("resource", "paypal event %s: resource: %s", ev.ID, cut(err.Error(), 200))
	}

	switch want {
	case "checkout-order":
		if r.ID == "" {
			return pay.WebhookEvent{}, pay.Invalidf("resource.id", "paypal event %s: resource.id (the order) is required", ev.ID)
		}
		e.ProviderRef = r.ID
		if len(r.PurchaseUnits) > 0 {
			u := r.PurchaseUnits[0]
			e.PaymentID = u.CustomID
			if u.Amount != nil {
				if err := amountOf(ev.ID, "resource.purchase_units[0].amount", &ppgo.Money{Currency: u.Amount.Currency, Value: u.Amount.Value}, &e.Amount, &e.Currency); err != nil {
					return pay.WebhookEvent{}, err
				}
			}
		}
	case "capture":
		if r.ID == "" {
			return pay.WebhookEvent{}, pay.Invalidf("resource.id", "paypal event %s: resource.id (the capture) is required", ev.ID)
		}
		e.PaymentID, e.SecondRef = r.CustomID, r.ID
		if r.SupplementaryData != nil {
			e.ProviderRef = r.SupplementaryData.RelatedIDs.OrderID
		}
		if err := amountOf(ev.ID, "resource.amount", r.Amount, &e.Amount, &e.Currency); err != nil {
			return pay.WebhookEvent{}, err
		}
	case "refund":
		if r.ID == "" {
			return pay.WebhookEvent{}, pay.Invalidf("resource.id", "paypal event %s: resource.id (the refund) is required", ev.ID)
		}
		st, ok := RefundStatusOf(r.Status)
		if !ok {
			return pay.WebhookEvent{}, pay.Invalidf("resource.status", "paypal event %s: refund status %q is not one paystate knows", ev.ID, cut(r.Status, 40))
		}
		var amount int64
		var cur string
		if err := amountOf(ev.ID, "resource.amount", r.Amount, &amount, &cur); err != nil {
			return pay.WebhookEvent{}, err
		}
		e.PaymentID, e.SecondRef = r.CustomID, captureOf(r.Links)
		e.Refund = &pay.RefundChange{ProviderRef: r.ID, Amount: amount, Status: st}
	case "dispute":
		if err := disputeEvent(ev.ID, &e, r); err != nil {
			return pay.WebhookEvent{}, err
		}
	}
	if err := pay.ValidateText("custom_id", e.PaymentID, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	if err := pay.ValidateText("order_id", e.ProviderRef, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	if err := pay.ValidateText("capture id", e.SecondRef, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	// Every order paystate makes carries its payment id as custom_id: a
	// resource without it is someone else's unless its order or its
	// capture is known.
	e.Untagged = e.PaymentID == ""
	if e.PaymentID == "" && e.ProviderRef == "" && e.SecondRef == "" && e.Dispute == nil {
		return pay.WebhookEvent{}, pay.Invalidf("resource.custom_id", "paypal event %s: names no payment (no custom_id, no order or capture id)", ev.ID)
	}
	return e, nil
}

// amountOf reads a money object into an amount in minor units and an
// upper-case currency; nil reads as not said.
func amountOf(id, field string, m *ppgo.Money, amount *int64, currency *string) error {
	if m == nil {
		return nil
	}
	cur := strings.ToUpper(m.Currency)
	if err := pay.ValidateCurrency(cur); err != nil {
		return pay.Invalidf(field+".currency_code", "paypal event %s: %s.currency_code %q is not a currency code", id, field, cut(m.Currency, 40))
	}
	v, err := pay.ParseAmount(m.Value, cur)
	if err != nil || v < 0 {
		return pay.Invalidf(field+".value", "paypal event %s: %s.value %q is not an amount", id, field, cut(m.Value, 40))
	}
	*amount, *currency = v, cur
	return nil
}

// captureOf returns the capture id a refund's links name (rel "up",
// .../v2/payments/captures/<id>), "" if none does.
func captureOf(links []ppgo.Link) string {
	const part = "/v2/payments/captures/"
	for _, l := range links {
		if l.Rel != "up" {
			continue
		}
		u, err := url.Parse(l.Href)
		if err != nil {
			continue
		}
		if i := strings.LastIndex(u.Path, part); i >= 0 && !strings.Contains(u.Path[i+len(part):], "/") {
			return u.Path[i+len(part):]
		}
	}
	return ""
}

// DisputeStatusOf maps a dispute's status, and for a RESOLVED one its
// outcome, to a dispute status: the seller to answer → needs_response;
// waiting for the buyer or under PayPal's review → under_review; resolved
// in the seller's favour, cancelled by the buyer or denied → won; resolved
// in the buyer's favour, with a payout, or accepted → lost.
func DisputeStatusOf(status, outcome string) (pay.DisputeStatus, bool) {
	switch status {
	case "OPEN", "WAITING_FOR_SELLER_RESPONSE":
		return pay.DisputeNeedsResponse, true
	case "WAITING_FOR_BUYER_RESPONSE", "UNDER_REVIEW", "OTHER":
		return pay.DisputeUnderReview, true
	case "RESOLVED":
		switch outcome {
		case "RESOLVED_SELLER_FAVOUR", "CANCELED_BY_BUYER", "DENIED", "NONE":
			return pay.DisputeWon, true
		case "RESOLVED_BUYER_FAVOUR", "RESOLVED_WITH_PAYOUT", "ACCEPTED":
			return pay.DisputeLost, true
		}
	}
	return "", false
}

// disputeEvent fills in an event about a dispute: the payment is its
// disputed transaction's custom (the capture's custom_id), the amount the
// dispute's.
func disputeEvent(id string, e *pay.WebhookEvent, r resource) error {
	if r.DisputeID == "" {
		return pay.Invalidf("resource.dispute_id", "paypal event %s: resource.dispute_id is required", id)
	}
	outcome := ""
	if r.DisputeOutcome != nil {
		outcome = r.DisputeOutcome.OutcomeCode
	}
	st, ok := DisputeStatusOf(r.Status, outcome)
	if !ok {
		return pay.Invalidf("resource.status", "paypal event %s: dispute status %q (outcome %q) is not one paystate knows", id, cut(r.Status, 40), cut(outcome, 40))
	}
	if err := pay.ValidateText("resource.dispute_id", r.DisputeID, maxIDLen); err != nil {
		return err
	}
	if err := pay.ValidateText("resource.reason", r.Reason, pay.MaxRefundReason); err != nil {
		return err
	}
	d := &pay.DisputeChange{ID: r.DisputeID, Reason: strings.ToLower(r.Reason), Status: st}
	if err := amountOf(id, "resource.dispute_amount", r.DisputeAmount, &d.Amount, &d.Currency); err != nil {
		return err
	}
	if r.SellerResponseDueDate != "" {
		if due, err := time.Parse(time.RFC3339, r.SellerResponseDueDate); err == nil {
			d.EvidenceDueBy = due.UTC()
		}
	}
	// The disputed transaction names the payment by its custom_id and by
	// its capture (seller_transaction_id, the payment's second reference).
	for _, t := range r.DisputedTransactions {
		if e.PaymentID == "" {
			e.PaymentID = t.Custom
		}
		if e.SecondRef == "" {
			e.SecondRef = t.SellerTransactionID
		}
	}
	e.Dispute = d
	return nil
}
