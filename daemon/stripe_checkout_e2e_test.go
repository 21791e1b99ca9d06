package daemon_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripetest"
)

// bootCheckout starts a paystate whose default provider is stripe, pointed
// through a Recorder at stripe-mock, with Checkout's success and cancel
// URLs set and flow left at its default (payment_intent) unless change
// sets it.
func bootCheckout(t *testing.T, change func(*config.Stripe)) (*daemontest.Instance, *stripetest.Recorder) {
	t.Helper()
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Payment.Provider = stripe.Name
		st := &config.Stripe{SecretKey: stripeKey, WebhookSecret: stripeSecret, APIBase: rec.URL(),
			Checkout: config.StripeCheckout{SuccessURL: "https://shop.example/paid", CancelURL: "https://shop.example/cart"}}
		if change != nil {
			change(st)
		}
		c.Providers.Stripe = st
	})
	return in, rec
}

// TestE2E_StripeCheckout_Create: "flow": "checkout" makes a Checkout
// Session under checkout-<payment_id>; the payment is requires_action with
// the session's page as redirect_url and the session id as provider_ref.
// providers.stripe.flow = "checkout" makes it the default; a flow on a
// provider with one way is 400 naming "flow".
func TestE2E_StripeCheckout_Create(t *testing.T) {
	t.Parallel()
	in, rec := bootCheckout(t, nil)

	r := in.Create(`{"order_id":"o-co-1","amount":2500,"currency":"EUR","flow":"checkout","description":"Membership, June","customer":{"email":"ada@example.com"}}`, "k-co-1")
	if got, want := r.Status, http.StatusCreated; got != want {
		t.Fatalf("create: status=%d, want %d: %s", got, want, r.Body)
	}
	id := r.Str("id")
	if r.Str("status") != "requires_action" || !strings.HasPrefix(r.Str("provider_ref"), "cs_") ||
		!strings.HasPrefix(r.Str("redirect_url"), "https://checkout.stripe.com/") || r.Str("client_secret") != "" {
		t.Fatalf("create answer %s, want requires_action, a session id and its page", r.Body)
	}
	req := one(t, rec.Find("POST", "/v1/checkout/sessions"))
	for _, c := range []struct{ name, got, want string }{
		{"Idempotency-Key", req.IdempotencyKey, "checkout-" + id},
		{"client_reference_id", req.Form.Get("client_reference_id"), id},
		{"metadata", req.Form.Get("metadata[paystate_payment_id]"), id},
		{"payment_intent_data.metadata", req.Form.Get("payment_intent_data[metadata][paystate_payment_id]"), id},
		{"line item", req.Form.Get("line_items[0][price_data][product_data][name]"), "Membership, June"},
		{"customer_email", req.Form.Get("customer_email"), "ada@example.com"},
		{"success_url", req.Form.Get("success_url"), "https://shop.example/paid"},
	} {
		if c.got != c.want {
			t.Errorf("%s=%q, want %q", c.name, c.got, c.want)
		}
	}
	if n := len(rec.Find("POST", "/v1/payment_intents")); n != 0 {
		t.Fatalf("%d PaymentIntents created, want 0", n)
	}

	// Without flow: the default, a PaymentIntent.
	if r := in.Create(`{"order_id":"o-co-2","amount":2500,"currency":"EUR"}`, "k-co-2"); r.Status != http.StatusCreated || !strings.HasPrefix(r.Str("provider_ref"), "pi_") {
		t.Fatalf("create without flow: status=%d: %s, want a PaymentIntent", r.Status, r.Body)
	}

	// A flow Stripe does not offer: 400 on flow, no key consumed.
	if r := in.Create(`{"order_id":"o-co-3","amount":2500,"currency":"EUR","flow":"hosted"}`, "k-co-3"); r.Status != http.StatusBadRequest || r.JSON["error"].(map[string]any)["param"] != "flow" {
		t.Fatalf("flow hosted: status=%d: %s, want 400 on flow", r.Status, r.Body)
	}

	// The default made checkout: a create without flow makes a session,
	// one with flow payment_intent a PaymentIntent.
	in2, rec2 := bootCheckout(t, func(s *config.Stripe) { s.Flow = "checkout" })
	if r := in2.Create(`{"order_id":"o-co-4","amount":2500,"currency":"EUR","return_url":"https://shop.example/o/4"}`, "k-co-4"); r.Status != http.StatusCreated || !strings.HasPrefix(r.Str("provider_ref"), "cs_") {
		t.Fatalf("create with flow default checkout: status=%d: %s, want a session", r.Status, r.Body)
	}
	if got := one(t, rec2.Find("POST", "/v1/checkout/sessions")).Form.Get("cancel_url"); got != "https://shop.example/o/4" {
		t.Fatalf("cancel_url=%q, want the return_url", got)
	}
	if r := in2.Create(`{"order_id":"o-co-5","amount":2500,"currency":"EUR","flow":"payment_intent"}`, "k-co-5"); r.Status != http.StatusCreated || !strings.HasPrefix(r.Str("provider_ref"), "pi_") {
		t.Fatalf("create with flow payment_intent: status=%d: %s, want a PaymentIntent", r.Status, r.Body)
	}
}

// TestE2E_FlowOnMock: a provider with one way refuses any flow, naming it.
func TestE2E_FlowOnMock(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	r := in.Create(`{"order_id":"o-flow-mock","amount":2500,"currency":"EUR","flow":"checkout"}`, "k-flow-mock")
	if r.Status != http.StatusBadRequest || r.ErrCode() != "invalid_request" || r.JSON["error"].(map[string]any)["param"] != "flow" {
		t.Fatalf("flow on mock: status=%d: %s, want 400 invalid_request on flow", r.Status, r.Body)
	}
}

// one returns the only request of a list, failing otherwise.
func one(t *testing.T, reqs []stripetest.Request) stripetest.Request {
	t.Helper()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the API, want 1: %+v", len(reqs), reqs)
	}
	return reqs[0]
}
