package sweeper_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// TestSweeper_PendingRefunds: a refund left pending is a candidate like a
// payment. The mock's refund of an amount ending in 06 fails after its
// webhook delay, and the webhook never arrives here: the sweeper asks the
// PSP (RefundStatus) once the refund is older than min_age and finalizes
// the failure, freeing its amount; a second pass changes nothing. A
// standard refund, which only its webhook settles, waits until
// give_up_after and then goes on the review queue (refund_unresolved),
// once.
func TestSweeper_PendingRefunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Millisecond)
	p := e.create("mock", 1006)
	key := finalize.IdemKey{Key: "refund:sweep", Fingerprint: "fp", Status: http.StatusCreated}
	r, err := e.payments.RefundOnce(e.ctx, p.ID, finalize.RefundRequest{Amount: 500}, key)
	if err != nil || r.Refund.Status != pay.RefundPending {
		t.Fatalf("refund: %+v (%v), want pending", r.Refund, err)
	}
	e.mock.Wait() // the PSP failed it; its webhook went nowhere

	// Younger than min_age: not a candidate yet.
	e.pass()
	if got := e.refund(r.Refund.ID); got.Status != pay.RefundPending {
		t.Fatalf("refund is %s before min_age, want pending", got.Status)
	}
	e.clock.Add(minAge + time.Second)
	rep := e.pass()
	if got := e.refund(r.Refund.ID); got.Status != pay.RefundFailed {
		t.Fatalf("refund is %s after the pass, want failed", got.Status)
	}
	if rep.Corrected != 1 {
		t.Fatalf("Corrected=%d, want 1", rep.Corrected)
	}
	if q := e.payment(p.ID); q.AmountRefundPending != 0 || q.Refundable() != q.Amount {
		t.Fatalf("payment %+v: the failed refund's amount is not free", q)
	}
	before := e.snapshot(p.ID)
	e.clock.Add(minAge + time.Second)
	if rep := e.pass(); rep.Corrected != 0 {
		t.Fatalf("second pass corrected %d, want 0", rep.Corrected)
	}
	if after := e.snapshot(p.ID); len(after.steps) != len(before.steps) || after.payment.Version != before.payment.Version {
		t.Fatal("the second pass wrote the payment")
	}

	// Standard: pending until its webhook, on the review queue past give_up_after.
	s := e.create("standard", 2000)
	if _, err := e.payments.Report(e.ctx, s.ID, finalize.ReportRequest{Status: pay.Captured, ProviderRef: "pi_std"}); err != nil {
		t.Fatal(err)
	}
	sr, err := e.payments.RefundOnce(e.ctx, s.ID, finalize.RefundRequest{}, finalize.IdemKey{Key: "refund:std", Fingerprint: "fp2", Status: http.StatusCreated})
	if err != nil || sr.Refund.Status != pay.RefundPending || sr.Refund.Amount != 2000 {
		t.Fatalf("standard refund: %+v (%v), want 2000 pending", sr.Refund, err)
	}
	e.clock.Add(minAge + time.Second)
	if rep := e.pass(); rep.Reviewed != 0 {
		t.Fatalf("Reviewed=%d before give_up_after, want 0", rep.Reviewed)
	}
	e.clock.Add(giveUpAfter)
	if rep := e.pass(); rep.Reviewed != 1 {
		t.Fatalf("Reviewed=%d past give_up_after, want 1", rep.Reviewed)
	}
	if rep := e.pass(); rep.Reviewed != 0 {
		t.Fatalf("Reviewed=%d on the next pass, want 0 (queued once)", rep.Reviewed)
	}
	var item pay.ReviewItem
	e.view(func(tx store.Tx) (err error) { item, err = tx.Review("refund_" + sr.Refund.ID); return err })
	if item.Reason != pay.ReasonRefundUnresolved || item.PaymentID != s.ID {
		t.Fatalf("review item %+v, want refund_unresolved of %s", item, s.ID)
	}
	if got := e.refund(sr.Refund.ID); got.Status != pay.RefundPending {
		t.Fatalf("standard refund is %s, want still pending: paystate does not guess", got.Status)
	}
}

func (e *env) refund(id string) pay.Refund {
	e.t.Helper()
	var r pay.Refund
	e.view(func(tx store.Tx) (err error) { r, err = tx.Refund(id); return err })
	return r
}
