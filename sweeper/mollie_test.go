package sweeper_test

import (
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mollie"
	"github.com/paystate/paystate/psp/mollie/mollietest"
)

// TestSweeper_Mollie: with no webhook at all, the sweeper asks Mollie
// (GET /v2/payments/{id}) about an open payment and finalizes its answer;
// past payment.expire_after it cancels the payment at Mollie and
// finalizes what Mollie answers.
func TestSweeper_Mollie(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, order string) (*env, *mollietest.Fake, pay.Payment) {
		e := newEnv(t, 0)
		fake := mollietest.New(t)
		mp, err := mollie.New(mollie.Config{APIKey: mollietest.APIKey, APIBase: fake.URL, WebhookURL: "https://shop.example/webhooks/mollie"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.payments.Providers[mollie.Name], e.sw.Providers[mollie.Name] = mp, mp
		p, err := e.payments.Create(e.ctx, finalize.CreateRequest{
			OrderID: order, Amount: 2500, Currency: "EUR", Provider: mollie.Name, ReturnURL: "https://shop.example/back",
		})
		if err != nil || p.Status != pay.RequiresAction || p.ProviderRef == "" {
			t.Fatalf("created %+v (%v), want requires_action with a Mollie id", p, err)
		}
		return e, fake, p
	}

	t.Run("Reconciled", func(t *testing.T) {
		t.Parallel()
		e, fake, p := setup(t, "o-sweep-mollie-paid")
		fake.SetStatus(p.ProviderRef, "pending")
		e.passAfter(minAge+time.Second, p.ID, pay.Processing)
		fake.SetStatus(p.ProviderRef, "paid")
		e.passAfter(minAge+time.Second, p.ID, pay.Captured)
		if n := fake.Requests("GET /v2/payments/{id}"); n != 2 {
			t.Fatalf("%d fetches, want 2", n)
		}
		e.verify()
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		e, fake, p := setup(t, "o-sweep-mollie-open")
		e.passAfter(expireAfter+time.Second, p.ID, pay.Failed)
		if got, _ := fake.Payment(p.ProviderRef); got.Status != "canceled" {
			t.Fatalf("Mollie holds %s, want canceled", got.Status)
		}
		e.verify()
	})
}
