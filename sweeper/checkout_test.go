package sweeper_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripetest"
)

// stripeCheckout adds a stripe provider pointed at a stripetest.Fake to
// e, and creates a checkout payment through it.
func (e *env) stripeCheckout(order string) (*stripetest.Fake, pay.Payment) {
	e.t.Helper()
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
	}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	if p.Status != pay.RequiresAction || p.ProviderRef == "" {
		e.t.Fatalf("created %+v, want requires_action with its session", p)
	}
	return fake, p
}

// TestSweeper_Checkout: the sweeper asks Stripe for a checkout payment's
// session (GET /v1/checkout/sessions/{id}); past payment.expire_after it
// expires the session (key cancel-<payment_id>) and finalizes what Stripe
// answers, so a session completed meanwhile is captured, never failed.
func TestSweeper_Checkout(t *testing.T) {
	t.Parallel()

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 0)
		fake, p := e.stripeCheckout("o-sweep-expire")
		e.clock.Add(expireAfter + time.Second)
		if rep := e.pass(); rep.Expired != 1 {
			t.Fatalf("report=%+v, want one expiry", rep)
		}
		reqs := fake.Find("POST", "/v1/checkout/sessions/"+p.ProviderRef+"/expire")
		if len(reqs) != 1 || reqs[0].IdempotencyKey != "cancel-"+p.ID {
			t.Fatalf("expire requests %+v, want one under cancel-%s", reqs, p.ID)
		}
		if cs, _ := fake.Session(p.ProviderRef); cs.Status != "expired" {
			t.Fatalf("session %+v, want expired at Stripe", cs)
		}
		if got, want := e.payment(p.ID).Status, pay.Failed; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
		e.verify()
	})

	t.Run("CompletedMeanwhile", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 0)
		fake, p := e.stripeCheckout("o-sweep-paid")
		fake.SetSession(p.ProviderRef, "complete", "paid", "pi_paid_meanwhile")
		e.clock.Add(expireAfter + time.Second)
		e.pass()
		if got, want := e.payment(p.ID).Status, pay.Captured; got != want {
			t.Fatalf("Status=%s, want %s (the session completed before it could be expired)", got, want)
		}
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
		e := newEnv(t, 0)
		fake, p := e.stripeCheckout("o-sweep-sepa")
		// A delayed method: completed but unpaid is processing; once paid,
		// captured.
		fake.SetSession(p.ProviderRef, "complete", "unpaid", "pi_sepa")
		e.clock.Add(minAge + time.Second)
		e.pass()
		if got, want := e.payment(p.ID).Status, pay.Processing; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
		fake.SetSession(p.ProviderRef, "complete", "paid", "pi_sepa")
		e.clock.Add(minAge + time.Second)
		e.pass()
		if got, want := e.payment(p.ID).Status, pay.Captured; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
		if n := len(fake.Find("GET", "/v1/checkout/sessions/"+p.ProviderRef)); n != 2 {
			t.Fatalf("%d session retrievals, want 2", n)
		}
		e.verify()
	})
}
