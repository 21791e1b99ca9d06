package paypal_test

import (
	"testing"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/paypal"
	"github.com/paystate/paystate/psp/paypal/paypaltest"
)

// FuzzParseWebhook signs arbitrary bodies as PayPal would and parses them:
// never a panic, only a parsed event or EINVALID (the signature holds).
func FuzzParseWebhook(f *testing.F) {
	e := newEnv(f, nil)
	for _, typ := range []string{paypal.TypeOrderApproved, paypal.TypeCaptureCompleted, paypal.TypeCaptureRefunded, paypal.TypeDisputeResolved, "X.Y"} {
		f.Add(paypaltest.Event(paypaltest.EventSpec{Type: typ, At: e.now, PaymentID: ids.Payment(e.now), OrderID: "5O190127TN364715T",
			Amount: "10.00", Currency: "EUR", RefundID: "1J", DisputeID: "PP-D-1", DisputeStatus: "RESOLVED", Outcome: "DENIED"}))
	}
	f.Add([]byte(`{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED","create_time":"2026-01-01T00:00:00Z","resource":{"id":"3C","amount":{"currency_code":"EUR","value":"-1"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := e.prov.ParseWebhook(body, e.sign(body), e.now)
		if err != nil {
			if code := pay.ErrorCode(err); code != pay.EINVALID {
				t.Fatalf("a signed body: ErrorCode=%q (%v), want invalid", code, err)
			}
			return
		}
		if ev.EventID == "" || ev.Type == "" {
			t.Fatalf("parsed event without id or type: %+v", ev)
		}
	})
}
