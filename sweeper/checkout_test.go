package sweeper_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
	"github.com/paystate/paystate/sweeper"
)

// checkoutEnv is newEnv with a stripe provider pointed at a
// stripefake.Fake, and a checkout payment created through it.
func checkoutEnv(t *testing.T, order string) (*env, *stripefake.Fake, pay.Payment) {
	t.Helper()
	e, fake := checkoutProvider(t)
	p, err := e.payments.Create(e.ctx, finalize.CreateRequest{
		OrderID: order, Amount: 2500, Currency: "EUR", Provider: stripe.Name, Flow: pay.FlowCheckout,
		ReturnURL: "https://shop.example/back",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if p.Status != pay.RequiresAction || p.ProviderRef == "" {
		e.t.Fatalf("created %+v, want requires_action with its session", p)
	}
	return e, fake, p
}

// checkoutProvider is newEnv with a stripe provider on the env's clock
// pointed at a stripefake.Fake.
func checkoutProvider(t *testing.T) (*env, *stripefake.Fake) {
	t.Helper()
	e := newEnv(t, 0)
	fake := stripetest.NewFake(e.t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	e.t.Cleanup(tr.CloseIdleConnections)
	sp, err := stripe.New(stripe.Config{SecretKey: "sk_test_sweeper", WebhookSecret: "whsec_sweeper", APIBase: fake.URL(), ExpireAfter: expireAfter},
		stripe.WithHTTPClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}), stripe.WithMaxNetworkRetries(0),
		stripe.WithNow(e.clock.Now))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range []map[string]pay.Provider{e.payments.Providers, e.sw.Providers} {
		m[stripe.Name] = sp
	}
	return e, fake
}

// passAfter moves the clock by d, runs a pass and fails the test unless
// payment id is then in status want.
func (e *env) passAfter(d time.Duration, id string, want pay.Status) sweeper.Report {
	e.t.Helper()
	e.clock.Add(d)
	rep := e.pass()
	if got := e.payment(id).Status; got != want {
		e.t.Fatalf("Status=%s, want %s", got, want)
	}
	return rep
}

// TestSweeper_Checkout: the sweeper asks Stripe for a checkout payment's
// session (GET /v1/checkout/sessions/{id}); past payment.expire_after it
// expires the session (key cancel-<payment_id>) and finalizes what Stripe
// answers, so a session completed meanwhile is captured, never failed.
func TestSweeper_Checkout(t *testing.T) {
	t.Parallel()

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		e, fake, p := checkoutEnv(t, "o-sweep-expire")
		if rep := e.passAfter(expireAfter+time.Second, p.ID, pay.Failed); rep.Expired != 1 {
			t.Fatalf("report=%+v, want one expiry", rep)
		}
		reqs := fake.Find("POST", "/v1/checkout/sessions/"+p.ProviderRef+"/expire")
		if len(reqs) != 1 || reqs[0].IdempotencyKey != "cancel-"+p.ID {
			t.Fatalf("expire requests %+v, want one under cancel-%s", reqs, p.ID)
		}
		if cs, _ := fake.Session(p.ProviderRef); cs.Status != "expired" {
			t.Fatalf("session %+v, want expired at Stripe", cs)
		}
		e.verify()
	})

	t.Run("CompletedMeanwhile", func(t *testing.T) {
		t.Parallel()
		e, fake, p := checkoutEnv(t, "o-sweep-paid")
		fake.SetSession(p.ProviderRef, "complete", "paid", "pi_paid_meanwhile")
		// Completed before it could be expired: captured, never failed.
		e.passAfter(expireAfter+time.Second, p.ID, pay.Captured)
		if cs, _ := fake.Session(p.ProviderRef); cs.Expires != 0 {
			t.Fatalf("session %+v expired", cs)
		}
		if n := len(fake.Find("GET", "/v1/checkout/sessions/"+p.ProviderRef)); n == 0 {
			t.Fatal("the session was not asked for after the expire was refused")
		}
		e.verify()
	})

	t.Run("Reconciled", func(t *testing.T) {
		t.Parallel()
		e, fake, p := checkoutEnv(t, "o-sweep-sepa")
		// A delayed method: completed but unpaid is processing; once paid,
		// captured.
		fake.SetSession(p.ProviderRef, "complete", "unpaid", "pi_sepa")
		e.passAfter(minAge+time.Second, p.ID, pay.Processing)
		fake.SetSession(p.ProviderRef, "complete", "paid", "pi_sepa")
		e.passAfter(minAge+time.Second, p.ID, pay.Captured)
		if n := len(fake.Find("GET", "/v1/checkout/sessions/"+p.ProviderRef)); n != 2 {
			t.Fatalf("%d session retrievals, want 2", n)
		}
		e.verify()
	})
}

// TestSweeper_CheckoutLostCreate: a checkout payment whose create answer
// was lost (Stripe made the session; the answer, with the page's URL,
// never arrived) is finalize_pending without a session id. The sweeper
// asks Stripe, which re-issues the create under the same key
// (checkout-<payment_id>) and gets the same session back; nobody can pay
// on it (its URL was in the lost answer), so the sweeper expires it (key
// cancel-<payment_id>) and finalizes what Stripe answers: failed, with the
// session as its reference, not the review queue. A session paid
// meanwhile (the merchant's retry got its URL) is captured.
func TestSweeper_CheckoutLostCreate(t *testing.T) {
	t.Parallel()
	lost := func(t *testing.T, order string) (*env, *stripefake.Fake, pay.Payment) {
		t.Helper()
		e, fake := checkoutProvider(t)
		fake.DropAnswers(1)
		p, err := e.payments.Create(e.ctx, finalize.CreateRequest{
			OrderID: order, Amount: 2500, Currency: "EUR", Provider: stripe.Name, Flow: pay.FlowCheckout,
			ReturnURL: "https://shop.example/back",
		})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != pay.FinalizePending || p.ProviderRef != "" {
			t.Fatalf("created %+v, want finalize_pending without a session id", p)
		}
		return e, fake, p
	}

	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		e, fake, p := lost(t, "o-sweep-lost")
		rep := e.passAfter(minAge+time.Second, p.ID, pay.Failed)
		if rep.Reviewed != 0 {
			t.Fatalf("report=%+v, want no review", rep)
		}
		creates := fake.Find("POST", "/v1/checkout/sessions")
		if len(creates) != 2 || creates[0].IdempotencyKey != "checkout-"+p.ID || creates[1].IdempotencyKey != creates[0].IdempotencyKey {
			t.Fatalf("session creates %+v, want the lost one and its replay under checkout-%s", creates, p.ID)
		}
		got := e.payment(p.ID)
		cs, ok := fake.Session(got.ProviderRef)
		if !ok || cs.Status != "expired" || cs.Expires != 1 {
			t.Fatalf("payment ref %q, session %+v; want the one session, expired once", got.ProviderRef, cs)
		}
		if n := len(fake.Find("POST", "/v1/checkout/sessions/"+cs.ID+"/expire")); n != 1 {
			t.Fatalf("%d expire calls, want 1", n)
		}
		if _, queued := e.reviewItem(p.ID); queued {
			t.Fatal("the payment is on the review queue")
		}
		// A second pass changes nothing.
		if rep := e.pass(); rep.Changes() != 0 {
			t.Fatalf("second pass report=%+v, want no change", rep)
		}
		e.verify()
	})

	t.Run("PaidMeanwhile", func(t *testing.T) {
		t.Parallel()
		e, fake, p := lost(t, "o-sweep-lost-paid")
		creates := fake.Find("POST", "/v1/checkout/sessions")
		if len(creates) != 1 {
			t.Fatalf("%d session creates, want 1", len(creates))
		}
		// The session Stripe made; the customer paid on it.
		cs, ok := fake.SessionOf(p.ID)
		if !ok {
			t.Fatalf("no session of %s at Stripe", p.ID)
		}
		id := cs.ID
		fake.SetSession(id, "complete", "paid", "pi_lost_paid")
		e.passAfter(minAge+time.Second, p.ID, pay.Captured)
		if got := e.payment(p.ID); got.ProviderRef != id {
			t.Fatalf("provider_ref %q, want the session %s", got.ProviderRef, id)
		}
		e.verify()
	})
}

// TestSweeper_LostCreateIntent: the same for a PaymentIntent payment whose
// create answer (with its client secret) was lost: Stripe's search finds
// the PaymentIntent by its metadata, open; the sweeper cancels it (key
// cancel-<payment_id>) and the payment fails with it as its reference.
func TestSweeper_LostCreateIntent(t *testing.T) {
	t.Parallel()
	e, fake := checkoutProvider(t)
	fake.DropAnswers(1)
	p, err := e.payments.Create(e.ctx, finalize.CreateRequest{OrderID: "o-sweep-lost-pi", Amount: 2500, Currency: "EUR", Provider: stripe.Name})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != pay.FinalizePending || p.ProviderRef != "" || fake.IntentCount() != 1 {
		t.Fatalf("created %+v (%d PaymentIntents), want finalize_pending without a reference", p, fake.IntentCount())
	}
	if rep := e.passAfter(minAge+time.Second, p.ID, pay.Failed); rep.Reviewed != 0 {
		t.Fatalf("report=%+v, want no review", rep)
	}
	got := e.payment(p.ID)
	pi, ok := fake.Intent(got.ProviderRef)
	if !ok || pi.Status != "canceled" || pi.Cancels != 1 {
		t.Fatalf("payment ref %q, PaymentIntent %+v; want it canceled once", got.ProviderRef, pi)
	}
	if reqs := fake.Find("POST", "/v1/payment_intents/"+pi.ID+"/cancel"); len(reqs) != 1 || reqs[0].IdempotencyKey != "cancel-"+p.ID {
		t.Fatalf("cancel requests %+v, want one under cancel-%s", reqs, p.ID)
	}
	e.verify()
}
