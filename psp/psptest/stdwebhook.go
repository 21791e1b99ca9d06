package psptest

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/psp/stdwebhook"
)

// StandardWebhooks returns the Sign, SignRaw and Mapping of the mock's and
// standard's wire format (package stdwebhook), signed per Standard
// Webhooks with secret by the svix library. Events are encoded by
// stdwebhook.EncodeEvent, except the unknown type, which it refuses.
func StandardWebhooks(secret string) (sign func(*testing.T, Event) ([]byte, http.Header, bool), signRaw func(*testing.T, string, []byte, time.Time) http.Header, mapping []Mapping) {
	signRaw = func(t *testing.T, id string, body []byte, at time.Time) http.Header {
		t.Helper()
		h, err := stdwebhook.Sign(secret, id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	sign = func(t *testing.T, e Event) ([]byte, http.Header, bool) {
		t.Helper()
		we := stdwebhook.Event{
			ID: e.ID, Type: e.Type, Created: e.At, PaymentID: e.PaymentID, ProviderRef: e.ProviderRef,
			Amount: e.Amount, Currency: e.Currency,
		}
		switch e.Kind {
		case KindRefundSucceeded, KindRefundFailed:
			we.Amount, we.Currency = 0, ""
			we.Refund = &stdwebhook.Refund{ID: e.RefundID, Amount: e.Amount / 2}
		case KindDisputeOpened, KindDisputeWon, KindDisputeLost:
			sts, _ := e.Kind.disputeStatuses()
			we.Dispute = &stdwebhook.Dispute{ID: e.DisputeID, Amount: e.Amount, Reason: "fraudulent", Status: sts[0]}
		}
		var body []byte
		var err error
		if e.Kind == KindUnknown {
			body, err = json.Marshal(map[string]any{"id": e.ID, "type": e.Type, "created": e.At.Unix(),
				"data": map[string]any{"payment_id": e.PaymentID, "provider_ref": e.ProviderRef, "amount": e.Amount, "currency": e.Currency}})
		} else {
			body, err = stdwebhook.EncodeEvent(we)
		}
		if err != nil {
			t.Fatalf("encode %s: %v", e.Type, err)
		}
		return body, signRaw(t, e.ID, body, e.At), true
	}
	mapping = []Mapping{
		{stdwebhook.TypeCaptured, KindCaptured},
		{stdwebhook.TypeFailed, KindFailed},
		{stdwebhook.TypeProcessing, KindProcessing},
		{stdwebhook.TypeRequiresAction, KindRequiresAction},
		{stdwebhook.TypeRefunded, KindRefunded},
		{stdwebhook.TypeRefundSucceeded, KindRefundSucceeded},
		{stdwebhook.TypeRefundFailed, KindRefundFailed},
		{stdwebhook.TypeDisputeCreated, KindDisputeOpened},
		{stdwebhook.TypeDisputeClosed, KindDisputeWon},
		{stdwebhook.TypeDisputeClosed, KindDisputeLost},
		{"payment.disputed", KindUnknown},
	}
	return sign, signRaw, mapping
}
