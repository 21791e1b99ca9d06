package stripe_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/psptest"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
)

// intentMapping is the mapping table of a PaymentIntent payment's events
// (SPEC §3 "stripe").
var intentMapping = []psptest.Mapping{
	{Type: stripe.TypeSucceeded, Kind: psptest.KindCaptured},
	{Type: stripe.TypeCanceled, Kind: psptest.KindFailed},
	{Type: stripe.TypeProcessing, Kind: psptest.KindProcessing},
	{Type: stripe.TypeRequiresAction, Kind: psptest.KindRequiresAction},
	{Type: stripe.TypePaymentFailed, Kind: psptest.KindFailedAttempt},
	{Type: stripe.TypeChargeRefunded, Kind: psptest.KindRefunded},
	{Type: stripe.TypeChargeRefundUpdated, Kind: psptest.KindRefundSucceeded},
	{Type: stripe.TypeChargeRefundUpdated, Kind: psptest.KindRefundPending},
	{Type: stripe.TypeRefundUpdated, Kind: psptest.KindRefundSucceeded},
	{Type: stripe.TypeRefundFailed, Kind: psptest.KindRefundFailed},
	{Type: stripe.TypeDisputeCreated, Kind: psptest.KindDisputeOpened},
	{Type: stripe.TypeDisputeUpdated, Kind: psptest.KindDisputeOpened},
	{Type: stripe.TypeDisputeClosed, Kind: psptest.KindDisputeWon},
	{Type: stripe.TypeDisputeClosed, Kind: psptest.KindDisputeLost},
	// A real event type paystate does not act on.
	{Type: "payment_intent.created", Kind: psptest.KindUnknown},
}

// checkoutMapping is the mapping table of a Checkout Session payment's
// events (SPEC §3 "Stripe Checkout Sessions and Payment Links"): the
// session's, and its PaymentIntent's, found through the metadata.
var checkoutMapping = []psptest.Mapping{
	{Type: stripe.TypeSessionCompleted, Kind: psptest.KindCaptured},
	{Type: stripe.TypeSessionCompleted, Kind: psptest.KindProcessing},
	{Type: stripe.TypeSessionCompleted, Kind: psptest.KindReview},
	{Type: stripe.TypeSessionAsyncSucceeded, Kind: psptest.KindCaptured},
	{Type: stripe.TypeSessionAsyncFailed, Kind: psptest.KindFailed},
	{Type: stripe.TypeSessionExpired, Kind: psptest.KindFailed},
	{Type: stripe.TypeSucceeded, Kind: psptest.KindCaptured},
	{Type: "checkout.session.created", Kind: psptest.KindUnknown},
}

// testdataFile is the payload of testdata/stripe each event type is built
// from, where it has none of its own.
var testdataFile = map[string]string{
	stripe.TypeRefundUpdated:  stripe.TypeChargeRefundUpdated,
	stripe.TypeRefundFailed:   stripe.TypeChargeRefundUpdated,
	stripe.TypeDisputeUpdated: stripe.TypeDisputeCreated,
	"payment_intent.created":  stripe.TypeSucceeded,
	// Stripe sends it; paystate acts on the session once it completed.
	"checkout.session.created": stripe.TypeSessionExpired,
}

// signEvent builds the Stripe event of a suite's Event from testdata/stripe
// and signs it with stripe-go. On a checkout payment the PaymentIntent is
// the event's SecondRef.
func signEvent(checkout bool) func(t *testing.T, e psptest.Event) ([]byte, http.Header, bool) {
	return func(t *testing.T, e psptest.Event) ([]byte, http.Header, bool) {
		spec := stripetest.EventSpec{Type: e.Type, ID: e.ID, Created: e.At, PaymentIntent: e.ProviderRef, PaymentID: e.PaymentID}
		if f, ok := testdataFile[e.Type]; ok {
			spec.Type, spec.Rename = f, e.Type
		}
		if checkout {
			spec.PaymentIntent = e.SecondRef
		}
		currency := strings.ToLower(e.Currency)
		switch obj := strings.SplitN(e.Type, ".", 2)[0]; {
		case obj == "checkout":
			spec.Session = e.ProviderRef
			spec.Object = func(o map[string]any) {
				o["amount_total"], o["currency"] = e.Amount, currency
				o["payment_status"] = map[psptest.Kind]string{psptest.KindProcessing: "unpaid", psptest.KindReview: "no_payment_required"}[e.Kind]
				if o["payment_status"] == "" {
					o["payment_status"] = "paid"
				}
			}
		case e.Kind == psptest.KindRefundSucceeded || e.Kind == psptest.KindRefundFailed || e.Kind == psptest.KindRefundPending:
			spec.Object = func(o map[string]any) {
				o["id"], o["payment_intent"] = "re_conf_"+strings.ToLower(e.ID[9:]), spec.PaymentIntent
				o["amount"], o["currency"] = e.Amount/2, currency
				o["status"] = strings.TrimPrefix(string(e.Kind), "refund_")
				o["metadata"].(map[string]any)["paystate_refund_id"] = e.RefundID
			}
		case e.Kind == psptest.KindDisputeOpened || e.Kind == psptest.KindDisputeWon || e.Kind == psptest.KindDisputeLost:
			status := map[psptest.Kind]string{psptest.KindDisputeWon: "won", psptest.KindDisputeLost: "lost"}[e.Kind]
			if status == "" {
				status = map[string]string{stripe.TypeDisputeUpdated: "under_review"}[e.Type]
			}
			if status == "" {
				status = "needs_response"
			}
			spec.Object = func(o map[string]any) {
				o["id"], o["payment_intent"] = e.DisputeID, spec.PaymentIntent
				o["amount"], o["currency"], o["status"] = e.Amount, currency, status
			}
		default: // a PaymentIntent or its charge
			spec.Object = func(o map[string]any) { o["amount"], o["currency"] = e.Amount, currency }
		}
		body := stripetest.Event(t, spec)
		return body, stripefake.Header(webhookSecret, body, e.At), true
	}
}

// harness is the suite's view of a stripe provider pointed at apiBase,
// whose requests calls returns: PaymentIntents, or with checkout Checkout
// Sessions.
func harness(t *testing.T, apiBase string, calls func() []stripefake.Request, checkout bool) psptest.Harness {
	h := psptest.Harness{
		Provider: newProvider(t, apiBase),
		Payment: func(id string) pay.Payment {
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2500, Currency: "EUR", Provider: stripe.Name, Status: pay.Created, Version: 1}
		},
		Sign: signEvent(checkout),
		SignRaw: func(t *testing.T, id string, body []byte, at time.Time) http.Header {
			return stripefake.Header(webhookSecret, body, at)
		},
		Mapping: intentMapping,
		Calls: func() []psptest.Call {
			var out []psptest.Call
			for _, r := range calls() {
				out = append(out, psptest.Call{Method: r.Method, Path: r.Path, Key: r.IdempotencyKey})
			}
			return out
		},
		// stripe-go measures the signature's age with the wall clock.
		Now:            time.Now,
		Tolerance:      stripe.DefaultTolerance,
		IgnoresUnknown: true,
		UnknownRef:     "pi_unknown000000000000",
	}
	if checkout {
		h.Provider = checkoutProvider(t, apiBase, 2*time.Hour)
		h.Payment = func(id string) pay.Payment {
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2500, Currency: "EUR", Provider: stripe.Name,
				Flow: pay.FlowCheckout, Customer: pay.Customer{Email: "ada@example.com"}, Status: pay.Created, Version: 1}
		}
		h.Mapping = checkoutMapping
		h.UnknownRef = "cs_test_unknown000000000000"
	}
	return h
}

// TestConformance_StripeMock runs the provider conformance suite against
// stripe-mock, behind a Recorder: every request must have a shape
// Stripe's OpenAPI description accepts and carry its derived key.
// stripe-mock is stateless, so the suite does not check replays, unknown
// references and cancel outcomes (the Fake runs cover them), and a payment
// counts as captured without a capture at the API.
func TestConformance_StripeMock(t *testing.T) {
	t.Parallel()
	for _, flow := range []string{pay.FlowPaymentIntent, pay.FlowCheckout} {
		t.Run(flow, func(t *testing.T) {
			t.Parallel()
			rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
			h := harness(t, rec.URL(), rec.Requests, flow == pay.FlowCheckout)
			h.Stateless = true
			h.Capture = func(t *testing.T, p pay.Payment) pay.Payment {
				p.Status, p.ClientSecret, p.RedirectURL = pay.Captured, "", ""
				return p
			}
			psptest.Run(t, h)
		})
	}
}

// TestConformance_Fake runs the provider conformance suite against
// stripefake.Fake, which keeps PaymentIntents and Checkout Sessions and
// enforces idempotency keys.
func TestConformance_Fake(t *testing.T) {
	t.Parallel()
	for _, flow := range []string{pay.FlowPaymentIntent, pay.FlowCheckout} {
		t.Run(flow, func(t *testing.T) {
			t.Parallel()
			fake := stripetest.NewFake(t)
			checkout := flow == pay.FlowCheckout
			h := harness(t, fake.URL(), fake.Requests, checkout)
			h.Capture = func(t *testing.T, p pay.Payment) pay.Payment {
				// The customer paid.
				if checkout {
					p.SecondRef = "pi_conf_" + strings.ToLower(p.ID[4:])
					fake.SetSession(p.ProviderRef, "complete", "paid", p.SecondRef)
				} else {
					fake.SetStatus(p.ProviderRef, "succeeded")
				}
				p.Status, p.ClientSecret, p.RedirectURL = pay.Captured, "", ""
				return p
			}
			psptest.Run(t, h)
		})
	}
}
