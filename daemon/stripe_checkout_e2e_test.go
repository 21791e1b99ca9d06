package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
	"github.com/paystate/paystate/ripple/rippletest"
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

// bootCaptured is bootCheckout with a merchant endpoint subscribed to
// payment.captured, Payment Links adopted if adopt, and mutate's changes.
func bootCaptured(t *testing.T, adopt bool, mutate func(*config.Config)) (*daemontest.Instance, *rippletest.Endpoint) {
	t.Helper()
	ep := rippletest.NewEndpoint(t)
	secret, err := stdwebhook.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Payment.Provider = stripe.Name
		c.Providers.Stripe = &config.Stripe{SecretKey: stripeKey, WebhookSecret: stripeSecret, APIBase: rec.URL(),
			Checkout: config.StripeCheckout{SuccessURL: "https://shop.example/paid", AdoptPaymentLinks: adopt}}
		c.Webhooks = []config.Webhook{{URL: ep.URL, Secret: secret, Events: []string{"payment.captured"}}}
		mutate(c)
	})
	return in, ep
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
func one(t *testing.T, reqs []stripefake.Request) stripefake.Request {
	t.Helper()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the API, want 1: %+v", len(reqs), reqs)
	}
	return reqs[0]
}

// createCheckout creates a checkout payment for customer cus over the API
// and returns its id and session id.
func createCheckout(t *testing.T, in *daemontest.Instance, order, cus string, amount int) (id, session string) {
	t.Helper()
	r := in.Create(fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"EUR","flow":"checkout","customer":{"id":%q,"email":"%s@example.com"}}`, order, amount, cus, cus), "k-"+order)
	if r.Status != http.StatusCreated || r.Str("status") != "requires_action" {
		t.Fatalf("create %s: status=%d: %s", order, r.Status, r.Body)
	}
	return r.Str("id"), r.Str("provider_ref")
}

// sessionEvent is a signed-ready Checkout Session event of type typ about
// payment id, its session and PaymentIntent, edited by edit.
func sessionEvent(t *testing.T, typ, evID, id, session, intent string, edit func(obj map[string]any)) []byte {
	t.Helper()
	return stripetest.Event(t, stripetest.EventSpec{
		Type: typ, ID: evID, Created: time.Now(), Session: session, PaymentIntent: intent, PaymentID: id, Object: edit,
	})
}

// mustWebhook posts a Stripe event signed now and fails the test unless it
// is answered 200.
func mustWebhook(t *testing.T, in *daemontest.Instance, body []byte) {
	t.Helper()
	if w := stripeWebhook(in, body, stripeSecret, time.Now()); w.Status != http.StatusOK {
		t.Fatalf("webhook: status=%d: %s", w.Status, w.Body)
	}
}

// waitStatus waits until payment id is in status want.
func waitStatus(t *testing.T, in *daemontest.Instance, id, want string) daemontest.Response {
	t.Helper()
	var g daemontest.Response
	testkit.WaitFor(t, 30*time.Second, func() error {
		g = in.Do("GET", "/v1/payments/"+id, nil, nil)
		if g.Str("status") != want {
			return fmt.Errorf("status=%s, want %s", g.Str("status"), want)
		}
		return nil
	})
	return g
}

// transitionsTo counts the timeline steps of payment id that moved it to
// status to.
func transitionsTo(t *testing.T, in *daemontest.Instance, id, to string) int {
	t.Helper()
	r := in.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
	data, _ := r.JSON["data"].([]any)
	n := 0
	for _, d := range data {
		s, _ := d.(map[string]any)
		if s["kind"] == "transition" && s["to"] == to {
			n++
		}
	}
	return n
}

// deliveryCounts counts a payment's deliveries per effect, in every state.
func deliveryCounts(t *testing.T, in *daemontest.Instance, id string) (counts map[string]int, pending int) {
	t.Helper()
	counts = map[string]int{}
	for _, state := range []string{"pending", "done", "dead"} {
		r := in.Do("GET", "/v1/deliveries?state="+state+"&limit=1000", nil, nil)
		data, _ := r.JSON["data"].([]any)
		for _, v := range data {
			d, _ := v.(map[string]any)
			if d["payment_id"] == id {
				counts[d["effect"].(string)]++
				if state == "pending" {
					pending++
				}
			}
		}
	}
	return counts, pending
}

// TestE2E_StripeCheckout_CaptureAnnouncedTwice: a capture announced by the
// session (checkout.session.completed, paid) and by its PaymentIntent
// (payment_intent.succeeded, found through metadata.paystate_payment_id),
// in either order, each delivered twice, is one transition, one merchant
// webhook, one receipt, one set of loyalty points and one ledger posting;
// the PaymentIntent id is kept as the payment's second reference, so its
// charge's events (found by payment_intent alone) find the payment too.
func TestE2E_StripeCheckout_CaptureAnnouncedTwice(t *testing.T) {
	t.Parallel()
	smtpd := rippletest.NewSMTPServer(t, 0)
	in, ep := bootCaptured(t, false, func(c *config.Config) {
		c.Receipt.SMTPAddr, c.Receipt.From, c.Receipt.TLS = smtpd.Addr, "receipts@shop.example", "none"
	})

	orders := []struct {
		name         string
		sessionFirst bool
	}{{"SessionFirst", true}, {"IntentFirst", false}}
	ids := make([]string, len(orders))
	for i, o := range orders {
		id, session := createCheckout(t, in, "o-twice-"+o.name, "cus_"+o.name, 2500)
		ids[i] = id
		intent := "pi_twice_" + o.name
		completed := sessionEvent(t, stripe.TypeSessionCompleted, "evt_cs_"+o.name, id, session, intent, nil)
		succeeded := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, ID: "evt_pi_" + o.name, Created: time.Now(), PaymentIntent: intent, PaymentID: id})
		seq := [][]byte{completed, succeeded, completed, succeeded}
		if !o.sessionFirst {
			seq = [][]byte{succeeded, completed, succeeded, completed}
		}
		for _, body := range seq {
			mustWebhook(t, in, body)
		}
		g := waitStatus(t, in, id, "captured")
		if g.Str("provider_ref") != session {
			t.Fatalf("%s: provider_ref=%s, want the session %s", o.name, g.Str("provider_ref"), session)
		}
		// The charge's refund event names the payment by its PaymentIntent
		// only: the second reference finds it.
		refunded := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, ID: "evt_ch_" + o.name, Created: time.Now(), PaymentIntent: intent,
			Object: func(obj map[string]any) { obj["refunded"] = false }})
		mustWebhook(t, in, refunded)
		testkit.WaitFor(t, 30*time.Second, func() error {
			if k := stepKinds(in, id); k[len(k)-1] != "ignored_event" {
				return fmt.Errorf("%s: steps %v, want the partial-refund charge event last", o.name, k)
			}
			return nil
		})
	}

	// Every effect delivered, once.
	testkit.WaitFor(t, 60*time.Second, func() error {
		for _, id := range ids {
			counts, pending := deliveryCounts(t, in, id)
			if pending > 0 || counts["receipt"] == 0 || counts["loyalty"] == 0 || counts["webhook"] == 0 {
				return fmt.Errorf("payment %s: deliveries %v, %d pending", id, counts, pending)
			}
		}
		return nil
	})
	for i, id := range ids {
		name := orders[i].name
		if n := transitionsTo(t, in, id, "captured"); n != 1 {
			t.Errorf("%s: %d transitions to captured, want 1", name, n)
		}
		counts, _ := deliveryCounts(t, in, id)
		for _, eff := range []string{"webhook", "loyalty", "retention", "receipt"} {
			if counts[eff] != 1 {
				t.Errorf("%s: %d %s deliveries, want 1 (%v)", name, counts[eff], eff, counts)
			}
		}
		cu := in.Do("GET", "/v1/customers/cus_"+name, nil, nil)
		if cu.Num("points") != 25 {
			t.Errorf("%s: customer %s, want 25 points", name, cu.Body)
		}
	}
	if n := len(smtpd.Messages()); n != len(ids) {
		t.Errorf("%d receipts, want %d", n, len(ids))
	}
	captured := 0
	for _, r := range ep.Requests() {
		var ev struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(r.Body, &ev) == nil && ev.Type == "payment.captured" {
			captured++
		}
	}
	if captured != len(ids) {
		t.Errorf("%d payment.captured merchant webhooks, want %d", captured, len(ids))
	}
	b := in.Do("GET", "/v1/ledger/balances", nil, nil)
	data, _ := b.JSON["data"].([]any)
	for _, v := range data {
		bal, _ := v.(map[string]any)
		if bal["account"] == "merchant_revenue" && bal["currency"] == "EUR" && bal["amount"] != float64(-5000) {
			t.Errorf("merchant_revenue EUR = %v, want -5000 (two payments of 25.00, each posted once)", bal["amount"])
		}
	}
}

// reviewReason returns the reason of payment id's review item, "" if it
// has none.
func reviewReason(t *testing.T, in *daemontest.Instance, id string) string {
	t.Helper()
	r := in.Do("GET", "/v1/review", nil, nil)
	data, _ := r.JSON["data"].([]any)
	for _, v := range data {
		it, _ := v.(map[string]any)
		if it["payment_id"] == id {
			s, _ := it["reason"].(string)
			return s
		}
	}
	return ""
}

// TestE2E_StripeCheckout_Mapping drives each row of SPEC §3's mapping of
// Checkout Session events, signed by stripe-go, through a paystate: a
// completed session paid or not, the delayed method's later success or
// failure, no payment required, expiry, an amount that is not the
// payment's, and a forged or stale signature.
func TestE2E_StripeCheckout_Mapping(t *testing.T) {
	t.Parallel()
	in, _ := bootCheckout(t, nil)
	unpaid := func(obj map[string]any) { obj["payment_status"] = "unpaid" }

	type event struct {
		typ  string
		edit func(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		events []event
		want   string // status
		review string // review reason, "" for none
	}{
		{"CompletedPaid", []event{{stripe.TypeSessionCompleted, nil}}, "captured", ""},
		{"CompletedUnpaid", []event{{stripe.TypeSessionCompleted, unpaid}}, "processing", ""},
		{"UnpaidThenSucceeded", []event{{stripe.TypeSessionCompleted, unpaid}, {stripe.TypeSessionAsyncSucceeded, nil}}, "captured", ""},
		{"UnpaidThenFailed", []event{{stripe.TypeSessionCompleted, unpaid}, {stripe.TypeSessionAsyncFailed, nil}}, "failed", ""},
		{"NoPaymentRequired", []event{{stripe.TypeSessionCompleted, func(obj map[string]any) {
			obj["payment_status"], obj["amount_total"] = "no_payment_required", 0
		}}}, "requires_action", "unresolved"},
		{"Expired", []event{{stripe.TypeSessionExpired, func(obj map[string]any) { obj["payment_intent"] = nil }}}, "failed", ""},
		{"AmountMismatch", []event{{stripe.TypeSessionCompleted, func(obj map[string]any) { obj["amount_total"] = 100 }}}, "requires_action", "amount_mismatch"},
		{"CurrencyMismatch", []event{{stripe.TypeSessionCompleted, func(obj map[string]any) { obj["currency"] = "usd" }}}, "requires_action", "amount_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, session := createCheckout(t, in, "o-map-"+tc.name, "cus_map", 2500)
			intent := "pi_map_" + tc.name
			for i, ev := range tc.events {
				mustWebhook(t, in, sessionEvent(t, ev.typ, fmt.Sprintf("evt_map_%s_%d", tc.name, i), id, session, intent, ev.edit))
			}
			if tc.review != "" {
				testkit.WaitFor(t, 30*time.Second, func() error {
					if got := reviewReason(t, in, id); got != tc.review {
						return fmt.Errorf("review reason %q, want %q", got, tc.review)
					}
					return nil
				})
			}
			waitStatus(t, in, id, tc.want)
			if tc.review == "" && reviewReason(t, in, id) != "" {
				t.Fatalf("on the review queue: %s", reviewReason(t, in, id))
			}
		})
	}

	// A forged or stale signature: 400, nothing stored (the payment's
	// timeline is unchanged, and the same event signed properly is new).
	id, session := createCheckout(t, in, "o-map-forged", "cus_map", 2500)
	body := sessionEvent(t, stripe.TypeSessionCompleted, "evt_map_forged", id, session, "pi_map_forged", nil)
	before := strings.Join(stepKinds(in, id), ",")
	for name, w := range map[string]daemontest.Response{
		"forged": stripeWebhook(in, body, "whsec_someone_else", time.Now()),
		"stale":  stripeWebhook(in, body, stripeSecret, time.Now().Add(-stripe.DefaultTolerance-time.Second)),
	} {
		if w.Status != http.StatusBadRequest || w.ErrCode() != "invalid_signature" {
			t.Fatalf("%s: status=%d: %s, want 400 invalid_signature", name, w.Status, w.Body)
		}
	}
	if got := strings.Join(stepKinds(in, id), ","); got != before {
		t.Fatalf("timeline after rejected webhooks %s, want %s", got, before)
	}
	if w := stripeWebhook(in, body, stripeSecret, time.Now()); w.Status != http.StatusOK || w.JSON["duplicate"] != false {
		t.Fatalf("the event rejected before, now signed: status=%d: %s, want 200 and new", w.Status, w.Body)
	}
	waitStatus(t, in, id, "captured")
}

// TestE2E_StripeCheckout_Refund: a refund of a checkout payment goes to
// the session's PaymentIntent (its second reference), under
// refund-<refund_id>; the refund's own event finds the payment by it.
func TestE2E_StripeCheckout_Refund(t *testing.T) {
	t.Parallel()
	in, rec := bootCheckout(t, nil)
	id, session := createCheckout(t, in, "o-co-refund", "cus_refund", 2500)
	mustWebhook(t, in, sessionEvent(t, stripe.TypeSessionCompleted, "evt_co_refund_paid", id, session, "pi_co_refund", nil))
	waitStatus(t, in, id, "captured")

	rf := in.Do("POST", "/v1/payments/"+id+"/refund", []byte(`{"amount":1000}`), map[string]string{"Idempotency-Key": "k-co-refund-1"})
	if rf.Status != http.StatusCreated {
		t.Fatalf("refund: status=%d: %s", rf.Status, rf.Body)
	}
	req := one(t, rec.Find("POST", "/v1/refunds"))
	if got, want := req.Form.Get("payment_intent"), "pi_co_refund"; got != want {
		t.Fatalf("refund payment_intent=%q, want the session's PaymentIntent %q", got, want)
	}
	if got, want := req.IdempotencyKey, "refund-"+rf.Str("id"); got != want {
		t.Fatalf("refund Idempotency-Key=%q, want %q", got, want)
	}

	// A dispute names the payment by its PaymentIntent only.
	disputed := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeDisputeCreated, ID: "evt_co_dispute", Created: time.Now(),
		Object: func(obj map[string]any) {
			obj["id"], obj["payment_intent"], obj["amount"] = "du_co_refund", "pi_co_refund", 1500
		}})
	mustWebhook(t, in, disputed)
	testkit.WaitFor(t, 30*time.Second, func() error {
		r := in.Do("GET", "/v1/disputes", nil, nil)
		data, _ := r.JSON["data"].([]any)
		for _, v := range data {
			if d, _ := v.(map[string]any); d["payment_id"] == id {
				return nil
			}
		}
		return fmt.Errorf("no dispute of %s in %s", id, r.Body)
	})
}

// linkSession is a checkout.session.completed of a Payment Link made in
// Stripe's dashboard: no metadata of paystate's, the link, the merchant's
// reference and the customer on the session.
func linkSession(t *testing.T, evID, session, intent, link string, edit func(obj map[string]any)) []byte {
	t.Helper()
	return stripetest.Event(t, stripetest.EventSpec{
		Type: stripe.TypeSessionCompleted, ID: evID, Created: time.Now(), Session: session, PaymentIntent: intent, NoPaymentID: true,
		Object: func(obj map[string]any) {
			obj["payment_link"], obj["client_reference_id"], obj["customer"] = link, nil, "cus_link"
			obj["amount_total"], obj["currency"] = 4200, "eur"
			obj["customer_details"] = map[string]any{"email": "link@example.com"}
			if edit != nil {
				edit(obj)
			}
		},
	})
}

// TestE2E_StripeCheckout_PaymentLinks: with adopt_payment_links, a signed
// completed session of a Payment Link paystate did not create makes a
// payment in the transaction that applies it (source payment_link, order
// id = client_reference_id else the session id, amount, currency and
// customer from the session), captured with one merchant webhook; its
// redelivery and its PaymentIntent's event make nothing more. A completed
// session that is no link's and not paystate's is an orphan.
func TestE2E_StripeCheckout_PaymentLinks(t *testing.T) {
	t.Parallel()
	in, ep := bootCaptured(t, true, func(c *config.Config) { c.WebhookInbox.MaxAttempts = 1 })
	byOrder := func(order string) []any {
		r := in.Do("GET", "/v1/payments?order_id="+order, nil, nil)
		data, _ := r.JSON["data"].([]any)
		return data
	}

	body := linkSession(t, "evt_link_1", "cs_link_1", "pi_link_1", "plink_1", func(obj map[string]any) { obj["client_reference_id"] = "order-link-1" })
	mustWebhook(t, in, body)
	data := byOrder("order-link-1")
	if len(data) != 1 {
		t.Fatalf("%d payments of order-link-1, want 1", len(data))
	}
	p, _ := data[0].(map[string]any)
	id, _ := p["id"].(string)
	cus, _ := p["customer"].(map[string]any)
	if p["status"] != "captured" || p["flow"] != "payment_link" || p["provider"] != "stripe" || p["provider_ref"] != "cs_link_1" ||
		p["amount"] != float64(4200) || p["currency"] != "EUR" || cus["id"] != "cus_link" || cus["email"] != "link@example.com" {
		t.Fatalf("adopted payment %v, want captured 42.00 EUR from the link's session, its customer", p)
	}
	if k := stepKinds(in, id); len(k) == 0 || k[0] != "created" {
		t.Fatalf("steps %v, want created first", k)
	}
	ev := in.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
	first, _ := ev.JSON["data"].([]any)[0].(map[string]any)
	if first["source"] != "payment_link" || first["event_id"] != "evt_link_1" {
		t.Fatalf("first step %v, want source payment_link from evt_link_1", first)
	}

	// Redelivered, and announced by its PaymentIntent (untagged, found by
	// the second reference): nothing more.
	if w := stripeWebhook(in, body, stripeSecret, time.Now()); w.Status != http.StatusOK || w.JSON["duplicate"] != true {
		t.Fatalf("redelivery: status=%d: %s, want 200 duplicate", w.Status, w.Body)
	}
	mustWebhook(t, in, stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, ID: "evt_link_pi", Created: time.Now(), PaymentIntent: "pi_link_1", NoPaymentID: true,
		Object: func(obj map[string]any) { obj["amount"] = 4200 }}))
	testkit.WaitFor(t, 30*time.Second, func() error {
		if k := stepKinds(in, id); k[len(k)-1] != "duplicate" {
			return fmt.Errorf("steps %v, want the PaymentIntent's event a duplicate", k)
		}
		return nil
	})
	if n := len(byOrder("order-link-1")); n != 1 {
		t.Fatalf("%d payments of order-link-1 after redeliveries, want 1", n)
	}
	if n := transitionsTo(t, in, id, "captured"); n != 1 {
		t.Fatalf("%d transitions to captured, want 1", n)
	}

	// Without client_reference_id the session id is the order id.
	mustWebhook(t, in, linkSession(t, "evt_link_2", "cs_link_2", "pi_link_2", "plink_1", nil))
	if data := byOrder("cs_link_2"); len(data) != 1 {
		t.Fatalf("%d payments of order cs_link_2, want 1", len(data))
	}

	testkit.WaitFor(t, 30*time.Second, func() error {
		n := 0
		for _, r := range ep.Requests() {
			if strings.Contains(string(r.Body), `"payment.captured"`) {
				n++
			}
		}
		if n != 2 {
			return fmt.Errorf("%d payment.captured webhooks, want 2 (one per adopted payment)", n)
		}
		return nil
	})

	// A completed session of no link, not paystate's: an orphan.
	mustWebhook(t, in, linkSession(t, "evt_nolink", "cs_nolink", "pi_nolink", "", func(obj map[string]any) { obj["payment_link"] = nil }))
	testkit.WaitFor(t, 30*time.Second, func() error {
		r := in.Do("GET", "/v1/review", nil, nil)
		data, _ := r.JSON["data"].([]any)
		for _, v := range data {
			if it, _ := v.(map[string]any); it["reason"] == "orphan" && it["provider_ref"] == "cs_nolink" {
				return nil
			}
		}
		return fmt.Errorf("no orphan for cs_nolink in %s", r.Body)
	})
	if data := byOrder("cs_nolink"); len(data) != 0 {
		t.Fatalf("a payment was made of a session of no link: %v", data)
	}
}
