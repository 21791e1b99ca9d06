package stripe_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
)

// FuzzParseWebhook feeds arbitrary bodies and Stripe-Signature headers to
// ParseWebhook. When sign is true the body is signed with the right secret,
// age seconds before now, and extra is appended to the header, so the
// mapping behind the signature check is reached too. ParseWebhook must
// never panic, must fail only with ESIGNATURE or EINVALID, and an accepted
// event must be complete and consistent with its type. Seeds:
// testdata/fuzz/FuzzParseWebhook.
func FuzzParseWebhook(f *testing.F) {
	p, err := stripe.New(stripe.Config{SecretKey: secretKey, WebhookSecret: webhookSecret})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"id":"evt_1","object":"event","api_version":"2026-03-25.dahlia","created":1767323045,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","object":"payment_intent","metadata":{"paystate_payment_id":"pay_1"}}}}`), true, int64(0), "")
	f.Add([]byte(`{}`), false, int64(0), "t=0,v1=00")

	f.Fuzz(func(t *testing.T, body []byte, sign bool, age int64, extra string) {
		now := time.Now()
		sig := extra
		if sign && age > -1e9 && age < 1e9 {
			sig = stripefake.Sign(webhookSecret, body, now.Add(-time.Duration(age)*time.Second)) + extra
		}
		h := http.Header{}
		h.Set(stripe.HeaderSignature, sig)

		e, err := p.ParseWebhook(body, h, now)
		if err != nil {
			if code := pay.ErrorCode(err); code != pay.ESIGNATURE && code != pay.EINVALID {
				t.Fatalf("ErrorCode=%q (%v), want %s or %s", code, err, pay.ESIGNATURE, pay.EINVALID)
			}
			return
		}
		if !sign {
			t.Fatalf("accepted a body signed by no one: %+v", e)
		}
		if age > int64(stripe.DefaultTolerance/time.Second)+1 {
			t.Fatalf("accepted a signature %d s old", age)
		}
		if e.EventID == "" || e.Type == "" || e.OccurredAt.IsZero() {
			t.Fatalf("incomplete event %+v", e)
		}
		if e.Ignore {
			if e.Status != "" || e.StepKind != "" {
				t.Fatalf("ignored event with an effect: %+v", e)
			}
			return
		}
		if e.ProviderRef == "" && e.PaymentID == "" {
			t.Fatalf("event without payment id and provider reference: %+v", e)
		}
		want := map[string]pay.Status{
			stripe.TypeSucceeded: pay.Captured, stripe.TypeCanceled: pay.Failed,
			stripe.TypeProcessing: pay.Processing, stripe.TypeRequiresAction: pay.RequiresAction,
		}
		switch e.Type {
		case stripe.TypePaymentFailed:
			if e.Status != "" || e.StepKind != pay.StepFailedAttempt {
				t.Fatalf("payment_failed mapped to %+v", e)
			}
		case stripe.TypeChargeRefunded:
			if (e.Status == pay.Refunded) == (e.StepKind != "") {
				t.Fatalf("charge.refunded mapped to %+v", e)
			}
		default:
			if st, ok := want[e.Type]; !ok || e.Status != st || e.StepKind != "" {
				t.Fatalf("%s mapped to %+v", e.Type, e)
			}
		}
	})
}
