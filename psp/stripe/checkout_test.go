package stripe_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v85"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
)

// checkoutProvider returns a provider pointed at apiBase whose Checkout
// Sessions send the customer back to the shop and expire after expire.
func checkoutProvider(t *testing.T, apiBase string, expire time.Duration, opts ...stripe.Option) *stripe.Provider {
	t.Helper()
	p, err := stripe.New(stripe.Config{
		SecretKey: secretKey, WebhookSecret: webhookSecret, APIBase: apiBase, ExpireAfter: expire,
		Checkout: stripe.CheckoutConfig{SuccessURL: "https://shop.example/paid", CancelURL: "https://shop.example/cart"},
	}, append([]stripe.Option{stripe.WithMaxNetworkRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkoutPayment is a payment as paystate stores it before creating its
// Checkout Session.
func checkoutPayment() pay.Payment {
	pm := payment()
	pm.Flow, pm.CreatedAt = pay.FlowCheckout, time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	pm.Customer = pay.Customer{ID: "cus_42", Email: "ada@example.com"}
	return pm
}

// createSession creates pm's Checkout Session through p and returns the
// answer and the create request that reached the API behind rec.
func createSession(t *testing.T, p *stripe.Provider, rec *stripetest.Recorder, pm pay.Payment) (pay.PSPResult, stripefake.Request) {
	t.Helper()
	res, err := p.Create(context.Background(), pm, "checkout-"+pm.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.Find("POST", "/v1/checkout/sessions") {
		if r.Form.Get("client_reference_id") == pm.ID {
			return res, r
		}
	}
	t.Fatalf("no session create of %s reached the API", pm.ID)
	return res, stripefake.Request{}
}

// TestProvider_Create_Checkout checks the Checkout Session request
// against stripe-mock, through a Recorder: every parameter SPEC §3 lists,
// the key checkout-<payment_id>, and the answer requires_action with the
// session's url.
func TestProvider_Create_Checkout(t *testing.T) {
	t.Parallel()
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	p := checkoutProvider(t, rec.URL(), 2*time.Hour)

	t.Run("ConfigURLs", func(t *testing.T) {
		pm := checkoutPayment()
		res, req := createSession(t, p, rec, pm)
		for _, c := range []struct{ name, got, want string }{
			{"Idempotency-Key", req.IdempotencyKey, "checkout-" + pm.ID},
			{"Stripe-Version", req.StripeVersion, stripego.APIVersion},
			{"mode", req.Form.Get("mode"), "payment"},
			{"line_items[0][quantity]", req.Form.Get("line_items[0][quantity]"), "1"},
			{"line_items[0][price_data][unit_amount]", req.Form.Get("line_items[0][price_data][unit_amount]"), "2500"},
			{"line_items[0][price_data][currency]", req.Form.Get("line_items[0][price_data][currency]"), "eur"},
			{"line_items[0][price_data][product_data][name]", req.Form.Get("line_items[0][price_data][product_data][name]"), pm.OrderID},
			{"client_reference_id", req.Form.Get("client_reference_id"), pm.ID},
			{"metadata[paystate_payment_id]", req.Form.Get("metadata[paystate_payment_id]"), pm.ID},
			{"payment_intent_data[metadata][paystate_payment_id]", req.Form.Get("payment_intent_data[metadata][paystate_payment_id]"), pm.ID},
			{"customer_email", req.Form.Get("customer_email"), "ada@example.com"},
			{"success_url", req.Form.Get("success_url"), "https://shop.example/paid"},
			{"cancel_url", req.Form.Get("cancel_url"), "https://shop.example/cart"},
			{"expires_at", req.Form.Get("expires_at"), strconv.FormatInt(pm.CreatedAt.Add(2*time.Hour).Unix(), 10)},
		} {
			if c.got != c.want {
				t.Errorf("%s=%q, want %q", c.name, c.got, c.want)
			}
		}
		// stripe-mock answers its fixture: an open session.
		if got, want := res.Status, pay.RequiresAction; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
		if !strings.HasPrefix(res.ProviderRef, "cs_") || !strings.HasPrefix(res.RedirectURL, "https://checkout.stripe.com/") || res.ClientSecret != "" {
			t.Fatalf("result=%+v, want the session id, its url and no client secret", res)
		}
		if n := len(rec.Find("POST", "/v1/payment_intents")); n != 0 {
			t.Fatalf("%d PaymentIntents created, want 0", n)
		}
	})

	t.Run("ReturnURLAndDescription", func(t *testing.T) {
		pm := checkoutPayment()
		pm.ReturnURL, pm.Description, pm.Customer = "https://shop.example/orders/7", "Membership, June", pay.Customer{}
		_, req := createSession(t, p, rec, pm)
		for _, c := range []struct{ name, got, want string }{
			{"line_items[0][price_data][product_data][name]", req.Form.Get("line_items[0][price_data][product_data][name]"), "Membership, June"},
			{"success_url", req.Form.Get("success_url"), "https://shop.example/orders/7"},
			{"cancel_url", req.Form.Get("cancel_url"), "https://shop.example/orders/7"},
			{"customer_email", req.Form.Get("customer_email"), ""},
		} {
			if c.got != c.want {
				t.Errorf("%s=%q, want %q", c.name, c.got, c.want)
			}
		}
	})

	t.Run("Resumed", func(t *testing.T) {
		// A create resumed after its answer was stored retrieves the
		// session: no second one.
		pm := checkoutPayment()
		pm.ProviderRef = "cs_test_resumed"
		before := len(rec.Find("POST", "/v1/checkout/sessions"))
		res, err := p.Create(context.Background(), pm, "checkout-"+pm.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(rec.Find("POST", "/v1/checkout/sessions")); got != before {
			t.Fatalf("%d sessions created, want none", got-before)
		}
		one(t, rec.Find("GET", "/v1/checkout/sessions/cs_test_resumed"), "retrieve")
		if res.Status != pay.RequiresAction || !res.Found {
			t.Fatalf("result=%+v, want the open session", res)
		}
	})
}

// TestProvider_Status_Checkout asks Stripe for a checkout payment's
// session, not for a PaymentIntent.
func TestProvider_Status_Checkout(t *testing.T) {
	t.Parallel()
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	p := checkoutProvider(t, rec.URL(), time.Hour)
	pm := checkoutPayment()
	pm.ProviderRef = "cs_test_status"
	res, err := p.Status(context.Background(), pm)
	if err != nil {
		t.Fatal(err)
	}
	one(t, rec.Find("GET", "/v1/checkout/sessions/cs_test_status"), "retrieve")
	if res.Status != pay.RequiresAction || !res.Found || !strings.Contains(res.Raw, "checkout_session=") {
		t.Fatalf("result=%+v, want the open session", res)
	}
}

// TestProvider_Status_CheckoutLostCreate: the status of a checkout payment
// whose create answer was lost (no session id) re-issues the create, within
// a day of the payment's creation, under the same key and with the same
// parameters, so that Stripe answers the session the lost request made,
// and then retrieves it as it is now; later (the key may be gone at Stripe)
// it creates nothing and the payment is Found false.
func TestProvider_Status_CheckoutLostCreate(t *testing.T) {
	t.Parallel()
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	pm := checkoutPayment()
	now := pm.CreatedAt.Add(time.Hour)
	p := checkoutProvider(t, rec.URL(), time.Hour, stripe.WithNow(func() time.Time { return now }))
	_, lost := createSession(t, p, rec, pm) // its answer never reached paystate

	res, err := p.Status(context.Background(), pm)
	if err != nil || !res.Found || !strings.HasPrefix(res.ProviderRef, "cs_") || res.Status != pay.RequiresAction {
		t.Fatalf("Status=%+v, %v; want the open session", res, err)
	}
	creates := rec.Find("POST", "/v1/checkout/sessions")
	if len(creates) != 2 {
		t.Fatalf("%d session creates, want the lost one and its repetition", len(creates))
	}
	again := creates[1]
	if again.IdempotencyKey != "checkout-"+pm.ID || again.IdempotencyKey != lost.IdempotencyKey {
		t.Fatalf("repeated create under key %q, the lost one under %q; want checkout-%s", again.IdempotencyKey, lost.IdempotencyKey, pm.ID)
	}
	if got, want := again.Form.Encode(), lost.Form.Encode(); got != want {
		t.Fatalf("repeated create's parameters\n%s\nwant the lost one's (Stripe refuses a key with other parameters)\n%s", got, want)
	}
	one(t, rec.Find("GET", "/v1/checkout/sessions/"+res.ProviderRef), "retrieve")

	now = pm.CreatedAt.Add(stripe.KeyLife + time.Minute)
	if res, err := p.Status(context.Background(), pm); err != nil || res.Found {
		t.Fatalf("Status a day later = %+v, %v; want Found false", res, err)
	}
	if n := len(rec.Find("POST", "/v1/checkout/sessions")); n != 2 {
		t.Fatalf("%d session creates after the key's life, want no new one", n)
	}
}

func TestSessionStatusOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status stripego.CheckoutSessionStatus
		paid   stripego.CheckoutSessionPaymentStatus
		want   pay.Status
		ok     bool
	}{
		{"open", "unpaid", pay.RequiresAction, true},
		{"complete", "paid", pay.Captured, true},
		{"complete", "unpaid", pay.Processing, true},
		{"complete", "no_payment_required", "", false},
		{"expired", "unpaid", pay.Failed, true},
		{"other", "paid", "", false},
	} {
		got, ok := stripe.SessionStatusOf(tc.status, tc.paid)
		if got != tc.want || ok != tc.ok {
			t.Errorf("SessionStatusOf(%s, %s)=%s,%v; want %s,%v", tc.status, tc.paid, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		after, want time.Duration
	}{
		{0, 24 * time.Hour},
		{10 * time.Minute, 30 * time.Minute},
		{time.Hour, time.Hour},
		{72 * time.Hour, 24 * time.Hour},
	} {
		if got := stripe.SessionExpiry(t0, tc.after).Sub(t0); got != tc.want {
			t.Errorf("SessionExpiry(+%s)=+%s, want +%s", tc.after, got, tc.want)
		}
	}
}

func TestProvider_Flow(t *testing.T) {
	t.Parallel()
	withURL := checkoutProvider(t, "http://127.0.0.1:1", time.Hour)
	checkoutDefault, err := stripe.New(stripe.Config{SecretKey: secretKey, WebhookSecret: webhookSecret, Flow: pay.FlowCheckout})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		p        *stripe.Provider
		flow     string
		returnTo string
		want     string
		param    string
	}{
		{"Default", withURL, "", "", pay.FlowPaymentIntent, ""},
		{"Checkout", withURL, pay.FlowCheckout, "", pay.FlowCheckout, ""},
		{"ConfigDefault", checkoutDefault, "", "https://shop.example/back", pay.FlowCheckout, ""},
		{"ConfigDefaultOverridden", checkoutDefault, pay.FlowPaymentIntent, "", pay.FlowPaymentIntent, ""},
		{"NoWayBack", checkoutDefault, "", "", "", "return_url"},
		{"RelativeReturnURL", withURL, pay.FlowCheckout, "/back", "", "return_url"},
		{"Unknown", withURL, "hosted", "", "", "flow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pm := payment()
			pm.Flow, pm.ReturnURL = tc.flow, tc.returnTo
			got, err := tc.p.Flow(pm)
			if tc.param != "" {
				var pe *pay.Error
				if !asPayError(err, &pe) || pe.Code != pay.EINVALID || pe.Param != tc.param {
					t.Fatalf("Flow=%q, %v; want EINVALID on %s", got, err, tc.param)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Flow=%q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := stripe.New(stripe.Config{SecretKey: secretKey, WebhookSecret: webhookSecret, Flow: "hosted"}); err == nil || !strings.Contains(err.Error(), "providers.stripe.flow") {
		t.Fatalf("New with flow hosted: %v, want an error naming providers.stripe.flow", err)
	}
	if _, err := stripe.New(stripe.Config{SecretKey: secretKey, WebhookSecret: webhookSecret, Checkout: stripe.CheckoutConfig{CancelURL: "cart"}}); err == nil || !strings.Contains(err.Error(), "providers.stripe.checkout.cancel_url") {
		t.Fatalf("New with a relative cancel_url: %v, want an error naming providers.stripe.checkout.cancel_url", err)
	}
}

// asPayError reports whether err is a *pay.Error, setting *target.
func asPayError(err error, target **pay.Error) bool { return errors.As(err, target) }

// TestParseWebhook_Session maps the Checkout Session events: the session
// is the provider_ref, its PaymentIntent the second reference, its
// amount_total and currency the evidence; payment_status decides a
// completed session.
func TestParseWebhook_Session(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "")
	now := time.Now()
	for _, tc := range []struct {
		typ, paid string
		status    pay.Status
		step      string
	}{
		{stripe.TypeSessionCompleted, "paid", pay.Captured, ""},
		{stripe.TypeSessionCompleted, "unpaid", pay.Processing, ""},
		{stripe.TypeSessionCompleted, "no_payment_required", "", pay.StepReview},
		{stripe.TypeSessionAsyncSucceeded, "paid", pay.Captured, ""},
		{stripe.TypeSessionAsyncFailed, "unpaid", pay.Failed, ""},
		{stripe.TypeSessionExpired, "unpaid", pay.Failed, ""},
	} {
		body := stripetest.Event(t, stripetest.EventSpec{
			Type: tc.typ, Session: "cs_test_map", PaymentIntent: "pi_map", PaymentID: "pay_map",
			Object: func(o map[string]any) { o["payment_status"], o["amount_total"], o["currency"] = tc.paid, 1234, "usd" },
		})
		e, err := p.ParseWebhook(body, stripefake.Header(webhookSecret, body, now), now)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.typ, tc.paid, err)
		}
		if e.Status != tc.status || e.StepKind != tc.step || e.ProviderRef != "cs_test_map" || e.SecondRef != "pi_map" ||
			e.PaymentID != "pay_map" || e.Amount != 1234 || e.Currency != "USD" || e.Untagged {
			t.Errorf("%s %s: event=%+v, want status %q step %q, refs cs_test_map and pi_map, 12.34 USD", tc.typ, tc.paid, e, tc.status, tc.step)
		}
	}
	body := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSessionCompleted,
		Object: func(o map[string]any) { o["payment_status"] = "sort_of" }})
	_, err := p.ParseWebhook(body, stripefake.Header(webhookSecret, body, now), now)
	wantCode(t, err, pay.EINVALID)
}

// TestProvider_Refund_Checkout: a checkout payment is refunded on its
// session's PaymentIntent: its second reference, else the one Stripe
// names on the session.
func TestProvider_Refund_Checkout(t *testing.T) {
	t.Parallel()
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	p := checkoutProvider(t, rec.URL(), time.Hour)
	for _, tc := range []struct {
		name, second, want string
	}{
		{"SecondRef", "pi_known", "pi_known"},
		// stripe-mock's session fixture names this PaymentIntent.
		{"FromSession", "", "pi_1PgafyB7WZ01zgkWSjxsAJo3"},
	} {
		pm := checkoutPayment()
		pm.ProviderRef, pm.SecondRef, pm.Status = "cs_test_refund_"+tc.name, tc.second, pay.Captured
		r := pay.Refund{ID: "re_" + tc.name, PaymentID: pm.ID, Amount: 500}
		if _, err := p.Refund(context.Background(), pm, r, "refund-"+r.ID); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got string
		for _, req := range rec.Find("POST", "/v1/refunds") {
			if req.IdempotencyKey == "refund-"+r.ID {
				got = req.Form.Get("payment_intent")
			}
		}
		if got != tc.want {
			t.Errorf("%s: refund payment_intent=%q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestParseWebhook_PaymentLink: a completed session of a Payment Link
// without paystate's metadata carries the payment to make (Adopt) only
// with adopt_payment_links; either way it is never "not ours".
func TestParseWebhook_PaymentLink(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := stripetest.Event(t, stripetest.EventSpec{
		Type: stripe.TypeSessionCompleted, Session: "cs_link", PaymentIntent: "pi_link", NoPaymentID: true,
		Object: func(o map[string]any) {
			o["payment_link"], o["client_reference_id"], o["customer"] = "plink_1", "order 7\u202e", map[string]any{"id": "cus_9"}
			o["customer_details"] = map[string]any{"email": "l@example.com"}
		},
	})
	adopting, err := stripe.New(stripe.Config{SecretKey: secretKey, WebhookSecret: webhookSecret, Checkout: stripe.CheckoutConfig{AdoptPaymentLinks: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		p     *stripe.Provider
		adopt bool
	}{{"Off", newProvider(t, ""), false}, {"On", adopting, true}} {
		e, err := tc.p.ParseWebhook(body, stripefake.Header(webhookSecret, body, now), now)
		if err != nil {
			t.Fatal(err)
		}
		if e.Untagged || (e.Adopt != nil) != tc.adopt {
			t.Fatalf("%s: event=%+v, want Untagged false and Adopt set %v", tc.name, e, tc.adopt)
		}
		if a := e.Adopt; a != nil {
			// An order id paystate would refuse (a bidirectional override)
			// gives way to the session id.
			if a.OrderID != "cs_link" || a.Amount != 2500 || a.Currency != "EUR" || a.Flow != pay.FlowPaymentLink ||
				a.Customer != (pay.Customer{ID: "cus_9", Email: "l@example.com"}) {
				t.Fatalf("Adopt=%+v", a)
			}
		}
	}
}
