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
	e := newEnv(t, 0)
	fake := stripetest.NewFake(e.t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	e.t.Cleanup(tr.CloseIdleConnections)
	sp, err := stripe.New(stripe.Config{SecretKey: "sk_test_sweeper", WebhookSecret: "whsec_sweeper", APIBase: fake.URL(), ExpireAfter: expireAfter},
		stripe.WithHTTPClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}), stripe.WithMaxNetworkRetries(0))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range []map[string]pay.Provider{e.payments.Providers, e.sw.Providers} {
		m[stripe.Name] = sp
	}
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
