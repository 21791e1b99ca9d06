package sweeper_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/paypal"
	"github.com/paystate/paystate/psp/paypal/paypaltest"
)

// TestSweeper_PayPalLostRefund: PayPal makes a refund and its answer is
// lost, so the refund stays pending with no PayPal id. Past min_age the
// sweeper asks PayPal (RefundStatus), which repeats the request under the
// same PayPal-Request-Id: PayPal answers with the refund it made, and the
// refund is settled, one refund at PayPal. A refund whose answer was lost
// longer ago than paypal.RefundRepeatWithin is not asked again: it goes
// on the review queue (refund_unresolved) and stays pending.
func TestSweeper_PayPalLostRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	fake := paypaltest.NewFake(t)
	pp, err := paypal.New(paypal.Config{ClientID: paypaltest.ClientID, Secret: paypaltest.Secret, APIBase: fake.URL(), WebhookID: "1JE4291016473214C"},
		paypal.WithNow(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	e.payments.Providers[paypal.Name], e.sw.Providers[paypal.Name] = pp, pp
	p, err := e.payments.Create(e.ctx, finalize.CreateRequest{
		OrderID: "o-sweep-paypal-refund", Amount: 2500, Currency: "EUR", Provider: paypal.Name, ReturnURL: "https://shop.example/back",
	})
	if err != nil || p.Status != pay.RequiresAction {
		t.Fatalf("created %+v (%v), want requires_action", p, err)
	}
	fake.Approve(p.ProviderRef)
	e.passAfter(minAge+time.Second, p.ID, pay.Captured) // the sweeper captures the approved order
	if got, want := e.payment(p.ID).SecondRef, fake.CaptureID(p.ProviderRef); got != want || got == "" {
		t.Fatalf("SecondRef=%q, want the capture %q", got, want)
	}

	refund := func(key string, amount int64) pay.Refund {
		t.Helper()
		fake.LoseRefundAnswer()
		_, err := e.payments.RefundOnce(e.ctx, p.ID, finalize.RefundRequest{Amount: amount}, finalize.IdemKey{Key: key, Fingerprint: key, Status: http.StatusCreated})
		if pay.ErrorCode(err) != pay.EPSP {
			t.Fatalf("refund with its answer lost: %v, want EPSP (no answer)", err)
		}
		refunds, err := e.payments.Refunds(e.ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refunds {
			if r.Amount == amount {
				if r.Status != pay.RefundPending || r.ProviderRef != "" {
					t.Fatalf("refund %+v, want pending without a PayPal id", r)
				}
				return r
			}
		}
		t.Fatalf("no refund of %d in %+v", amount, refunds)
		return pay.Refund{}
	}

	t.Run("Settled", func(t *testing.T) {
		r := refund("refund:lost", 500)
		e.clock.Add(minAge + time.Second)
		if rep := e.pass(); rep.Corrected != 1 || rep.Reviewed != 0 {
			t.Fatalf("Corrected=%d Reviewed=%d, want 1 and 0", rep.Corrected, rep.Reviewed)
		}
		got := e.refund(r.ID)
		if got.Status != pay.RefundSucceeded || got.ProviderRef == "" {
			t.Fatalf("refund %+v, want succeeded with PayPal's id", got)
		}
		if n := fake.RefundCalls(); n != 1 {
			t.Fatalf("refunds at PayPal: %d, want 1", n)
		}
		for _, q := range fake.Find(http.MethodPost, "/refund") {
			if q.RequestID != pay.RefundKey(r.ID) {
				t.Fatalf("refund request under %q, want %q", q.RequestID, pay.RefundKey(r.ID))
			}
		}
		if q := e.payment(p.ID); q.AmountRefunded != 500 || q.AmountRefundPending != 0 {
			t.Fatalf("payment refunded %d, pending %d; want 500 and 0", q.AmountRefunded, q.AmountRefundPending)
		}
	})

	t.Run("Aged", func(t *testing.T) {
		r := refund("refund:aged", 700)
		posts := len(fake.Find(http.MethodPost, "/refund"))
		e.clock.Add(paypal.RefundRepeatWithin)
		if rep := e.pass(); rep.Reviewed != 1 || rep.Corrected != 0 {
			t.Fatalf("Reviewed=%d Corrected=%d, want 1 and 0", rep.Reviewed, rep.Corrected)
		}
		if n := len(fake.Find(http.MethodPost, "/refund")); n != posts {
			t.Fatalf("refund requests %d after the pass, want %d: an aged refund is not asked again", n, posts)
		}
		if got := e.refund(r.ID); got.Status != pay.RefundPending {
			t.Fatalf("refund is %s, want still pending", got.Status)
		}
		if it, ok := e.reviewItem("refund_" + r.ID); !ok || it.Reason != pay.ReasonRefundUnresolved {
			t.Fatalf("review item %+v (%v), want refund_unresolved", it, ok)
		}
	})
	e.verify()
}
