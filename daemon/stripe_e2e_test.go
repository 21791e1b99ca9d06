package daemon_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
)

const (
	stripeKey    = "sk_test_paystateE2E0123456789"
	stripeSecret = "whsec_paystate_e2e_0123456789abcdef"
)

// bootStripe starts a paystate whose default provider is stripe, pointed
// through a Recorder at stripe-mock (started for the test if none runs).
func bootStripe(t *testing.T) (*daemontest.Instance, *stripetest.Recorder) {
	t.Helper()
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Payment.Provider = stripe.Name
		c.Providers.Stripe = &config.Stripe{SecretKey: stripeKey, WebhookSecret: stripeSecret, APIBase: rec.URL()}
	})
	return in, rec
}

// stripeWebhook posts a Stripe event signed at ts with secret.
func stripeWebhook(in *daemontest.Instance, body []byte, secret string, ts time.Time) daemontest.Response {
	return in.Do("POST", "/webhooks/stripe", body, map[string]string{
		"Stripe-Signature": stripefake.Sign(secret, body, ts),
		"Authorization":    "",
	})
}

// stepKinds returns the kinds of a payment's timeline steps.
func stepKinds(in *daemontest.Instance, id string) []string {
	in.T.Helper()
	r := in.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
	if r.Status != http.StatusOK {
		in.T.Fatalf("events: status=%d: %s", r.Status, r.Body)
	}
	data, _ := r.JSON["data"].([]any)
	kinds := make([]string, 0, len(data))
	for _, d := range data {
		s, _ := d.(map[string]any)
		k, _ := s["kind"].(string)
		kinds = append(kinds, k)
	}
	return kinds
}

// TestE2E_Stripe drives a paystate with the stripe provider over HTTP only.
// The Stripe API is stripe-mock behind a Recorder (which shows the
// Idempotency-Key headers that reached it); the outcome at Stripe arrives
// as webhooks built from testdata/stripe and signed with stripe-go's
// webhook.GenerateTestSignedPayload.
func TestE2E_Stripe(t *testing.T) {
	t.Parallel()
	in, rec := bootStripe(t)

	// Create: a PaymentIntent under charge-<payment_id>; the payment waits
	// for Stripe.js with its client secret.
	r := in.Create(`{"order_id":"o-stripe-1","amount":2500,"currency":"EUR","customer":{"id":"c1","email":"c1@example.com"}}`, "k-stripe-1")
	if got, want := r.Status, http.StatusCreated; got != want {
		t.Fatalf("create: status=%d, want %d: %s", got, want, r.Body)
	}
	id, ref := r.Str("id"), r.Str("provider_ref")
	if got, want := r.Str("status"), "created"; got != want {
		t.Fatalf("status=%s, want %s: %s", got, want, r.Body)
	}
	if r.Str("provider") != "stripe" || !strings.HasPrefix(ref, "pi_") || !strings.Contains(r.Str("client_secret"), "_secret_") {
		t.Fatalf("create answer %s, want provider stripe, a PaymentIntent and its client secret", r.Body)
	}
	creates := rec.Find("POST", "/v1/payment_intents")
	if len(creates) != 1 {
		t.Fatalf("%d PaymentIntent creates reached the API, want 1", len(creates))
	}
	if got, want := creates[0].IdempotencyKey, "charge-"+id; got != want {
		t.Fatalf("Idempotency-Key=%q, want %q", got, want)
	}
	if got, want := creates[0].Form.Get("metadata[paystate_payment_id]"), id; got != want {
		t.Fatalf("metadata[paystate_payment_id]=%q, want %q", got, want)
	}
	if got, want := creates[0].Form.Get("currency"), "eur"; got != want {
		t.Fatalf("currency=%q, want %q", got, want)
	}

	// The customer paid: payment_intent.succeeded captures it.
	now := time.Now()
	succeeded := stripetest.Event(t, stripetest.EventSpec{
		Type: stripe.TypeSucceeded, ID: "evt_e2e_succeeded", Created: now, PaymentIntent: ref, PaymentID: id,
	})
	if w := stripeWebhook(in, succeeded, stripeSecret, now); w.Status != http.StatusOK || w.JSON["duplicate"] != false {
		t.Fatalf("webhook: status=%d: %s", w.Status, w.Body)
	}
	var version float64
	testkit.WaitFor(t, 30*time.Second, func() error {
		g := in.Do("GET", "/v1/payments/"+id, nil, nil)
		assertNoSecretWhenFinal(t, g)
		if g.Str("status") != "captured" {
			return fmt.Errorf("status=%s, want captured", g.Str("status"))
		}
		version = g.Num("version")
		return nil
	})
	stepsAfterCapture := stepKinds(in, id)

	// A redelivery is answered 2xx and changes nothing.
	w := stripeWebhook(in, succeeded, stripeSecret, time.Now())
	if w.Status != http.StatusOK || w.JSON["duplicate"] != true {
		t.Fatalf("redelivery: status=%d: %s, want 200 duplicate", w.Status, w.Body)
	}

	// A bad signature or a stale timestamp: 400 invalid_signature, nothing
	// stored (the same event, correctly signed, is new afterwards).
	again := stripetest.Event(t, stripetest.EventSpec{
		Type: stripe.TypeSucceeded, ID: "evt_e2e_again", Created: now, PaymentIntent: ref, PaymentID: id,
	})
	for name, w := range map[string]daemontest.Response{
		"other secret": stripeWebhook(in, again, "whsec_someone_else", time.Now()),
		"stale":        stripeWebhook(in, again, stripeSecret, time.Now().Add(-stripe.DefaultTolerance-time.Second)),
		"no header":    in.Do("POST", "/webhooks/stripe", again, map[string]string{"Authorization": ""}),
	} {
		if w.Status != http.StatusBadRequest || w.ErrCode() != "invalid_signature" {
			t.Fatalf("%s: status=%d code=%s, want 400 invalid_signature: %s", name, w.Status, w.ErrCode(), w.Body)
		}
	}
	if got, want := strings.Join(stepKinds(in, id), ","), strings.Join(stepsAfterCapture, ","); got != want {
		t.Fatalf("timeline after rejected webhooks %s, want %s", got, want)
	}
	if w := stripeWebhook(in, again, stripeSecret, time.Now()); w.Status != http.StatusOK || w.JSON["duplicate"] != false {
		t.Fatalf("the event rejected before, now signed: status=%d: %s, want 200 and new", w.Status, w.Body)
	}
	testkit.WaitFor(t, 30*time.Second, func() error {
		if n := len(stepKinds(in, id)); n <= len(stepsAfterCapture) {
			return fmt.Errorf("%d steps: evt_e2e_again not applied yet", n)
		}
		return nil
	})
	if g := in.Do("GET", "/v1/payments/"+id, nil, nil); g.Num("version") != version || g.Str("status") != "captured" {
		t.Fatalf("after duplicates: %s, want captured at version %v", g.Body, version)
	}

	// An event type paystate does not map: 2xx, nothing stored (so a
	// redelivery is not a duplicate either).
	other := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, Rename: "payment_intent.created", ID: "evt_e2e_created", PaymentIntent: ref, PaymentID: id})
	for range 2 {
		if w := stripeWebhook(in, other, stripeSecret, time.Now()); w.Status != http.StatusOK || w.JSON["duplicate"] != false {
			t.Fatalf("unmapped event: status=%d: %s, want 200 and not a duplicate", w.Status, w.Body)
		}
	}

	// Refund through the API: a Refund of the whole amount under
	// refund-<refund_id>.
	rf := in.Do("POST", "/v1/payments/"+id+"/refund", nil, map[string]string{"Idempotency-Key": "k-stripe-refund-1"})
	if rf.Status != http.StatusCreated || rf.Str("status") != "succeeded" {
		t.Fatalf("refund: status=%d: %s, want 201 succeeded", rf.Status, rf.Body)
	}
	assertNoSecretWhenFinal(t, rf)
	refunds := rec.Find("POST", "/v1/refunds")
	if len(refunds) != 1 {
		t.Fatalf("%d refunds reached the API, want 1", len(refunds))
	}
	if got, want := refunds[0].IdempotencyKey, "refund-"+rf.Str("id"); got != want {
		t.Fatalf("refund Idempotency-Key=%q, want %q", got, want)
	}
	if got, want := refunds[0].Form.Get("payment_intent"), ref; got != want {
		t.Fatalf("refund payment_intent=%q, want %q", got, want)
	}

	// Stripe's charge.refunded follows; it finds the payment by the charge's
	// payment_intent (provider_ref) and changes nothing.
	refunded := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, ID: "evt_e2e_refunded", Created: time.Now(), PaymentIntent: ref})
	if w := stripeWebhook(in, refunded, stripeSecret, time.Now()); w.Status != http.StatusOK {
		t.Fatalf("charge.refunded: status=%d: %s", w.Status, w.Body)
	}
	testkit.WaitFor(t, 30*time.Second, func() error {
		steps := stepKinds(in, id)
		if last := steps[len(steps)-1]; last != "duplicate" {
			return fmt.Errorf("last step %s, want the duplicate of charge.refunded (steps %v)", last, steps)
		}
		return nil
	})
	if g := in.Do("GET", "/v1/payments/"+id, nil, nil); g.Str("status") != "refunded" {
		t.Fatalf("after charge.refunded: %s", g.Body)
	}
}

// TestE2E_StripeFailedAttempt: a declined try leaves the payment open (the
// customer may try again on the same PaymentIntent, so it keeps its client
// secret); only payment_intent.canceled fails it.
func TestE2E_StripeFailedAttempt(t *testing.T) {
	t.Parallel()
	in, _ := bootStripe(t)
	r := in.Create(`{"order_id":"o-stripe-2","amount":2500,"currency":"EUR"}`, "k-stripe-2")
	if r.Status != http.StatusCreated {
		t.Fatalf("create: status=%d: %s", r.Status, r.Body)
	}
	id, ref := r.Str("id"), r.Str("provider_ref")

	failed := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypePaymentFailed, ID: "evt_e2e_declined", Created: time.Now(), PaymentIntent: ref, PaymentID: id})
	if w := stripeWebhook(in, failed, stripeSecret, time.Now()); w.Status != http.StatusOK {
		t.Fatalf("payment_failed: status=%d: %s", w.Status, w.Body)
	}
	testkit.WaitFor(t, 30*time.Second, func() error {
		for _, k := range stepKinds(in, id) {
			if k == "failed_attempt" {
				return nil
			}
		}
		return fmt.Errorf("no failed_attempt step yet: %v", stepKinds(in, id))
	})
	if g := in.Do("GET", "/v1/payments/"+id, nil, nil); g.Str("status") != "created" || g.Str("client_secret") == "" {
		t.Fatalf("after a failed attempt: %s, want created with its client secret", g.Body)
	}

	canceled := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeCanceled, ID: "evt_e2e_canceled", Created: time.Now(), PaymentIntent: ref, PaymentID: id})
	if w := stripeWebhook(in, canceled, stripeSecret, time.Now()); w.Status != http.StatusOK {
		t.Fatalf("canceled: status=%d: %s", w.Status, w.Body)
	}
	testkit.WaitFor(t, 30*time.Second, func() error {
		g := in.Do("GET", "/v1/payments/"+id, nil, nil)
		assertNoSecretWhenFinal(t, g)
		if g.Str("status") != "failed" {
			return fmt.Errorf("status=%s, want failed", g.Str("status"))
		}
		return nil
	})
}
