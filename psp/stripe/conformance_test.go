package stripe_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/psptest"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
)

// kindFiles maps the suite's webhook kinds to Stripe event types (and the
// testdata payload each is built from).
var kindFiles = map[psptest.Kind]stripetest.EventSpec{
	psptest.KindCaptured:       {Type: stripe.TypeSucceeded},
	psptest.KindFailed:         {Type: stripe.TypeCanceled},
	psptest.KindProcessing:     {Type: stripe.TypeProcessing},
	psptest.KindRequiresAction: {Type: stripe.TypeRequiresAction},
	psptest.KindRefunded:       {Type: stripe.TypeChargeRefunded},
	psptest.KindFailedAttempt:  {Type: stripe.TypePaymentFailed},
	// A real event type paystate does not act on.
	psptest.KindUnknown: {Type: stripe.TypeSucceeded, Rename: "payment_intent.created"},
}

// harness is the suite's view of a stripe provider pointed at apiBase.
func harness(t *testing.T, apiBase string) psptest.Harness {
	signRaw := func(t *testing.T, id string, body []byte, at time.Time) http.Header {
		return stripefake.Header(webhookSecret, body, at)
	}
	return psptest.Harness{
		Provider: newProvider(t, apiBase),
		Payment: func(id string) pay.Payment {
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2500, Currency: "EUR", Provider: stripe.Name, Status: pay.Created, Version: 1}
		},
		Sign: func(t *testing.T, e psptest.Event) ([]byte, http.Header, bool) {
			spec, ok := kindFiles[e.Kind]
			if !ok {
				return nil, nil, false
			}
			spec.ID, spec.Created, spec.PaymentIntent, spec.PaymentID = e.ID, e.At, e.ProviderRef, e.PaymentID
			body := stripetest.Event(t, spec)
			return body, signRaw(t, e.ID, body, e.At), true
		},
		SignRaw: signRaw,
		// stripe-go measures the signature's age with the wall clock.
		Now:            time.Now,
		Tolerance:      stripe.DefaultTolerance,
		IgnoresUnknown: true,
		UnknownRef:     "pi_unknown000000000000",
	}
}

// TestConformance_StripeMock runs the provider conformance suite against
// stripe-mock: every request must have a shape Stripe's OpenAPI description
// accepts. stripe-mock is stateless, so the suite skips its checks of
// replays, unknown references and cancel outcomes (the Fake run covers
// them), and a payment counts as captured without a capture at the API.
func TestConformance_StripeMock(t *testing.T) {
	t.Parallel()
	h := harness(t, stripetest.MockURL(t))
	h.Stateless = true
	h.Capture = func(t *testing.T, p pay.Payment) pay.Payment {
		p.Status, p.ClientSecret, p.RedirectURL = pay.Captured, "", ""
		return p
	}
	psptest.Run(t, h)
}

// TestConformance_Fake runs the provider conformance suite against the
// status-scripted Fake Stripe API, which keeps PaymentIntents and enforces
// idempotency keys.
func TestConformance_Fake(t *testing.T) {
	t.Parallel()
	fake := stripetest.NewFake(t)
	h := harness(t, fake.URL())
	h.Capture = func(t *testing.T, p pay.Payment) pay.Payment {
		fake.SetStatus(p.ProviderRef, "succeeded") // the customer paid
		p.Status, p.ClientSecret, p.RedirectURL = pay.Captured, "", ""
		return p
	}
	psptest.Run(t, h)
}
