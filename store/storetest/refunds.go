package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// refundID returns the i-th test refund id.
func refundID(i int) string { return fmt.Sprintf("re_%026d", i) }

// newRefund returns refund i of payment p for amount, pending at time at.
func newRefund(i int, p pay.Payment, amount int64, at time.Time) pay.Refund {
	return pay.Refund{
		ID: refundID(i), PaymentID: p.ID, Amount: amount, Reason: fmt.Sprintf("part %d", i),
		Status: pay.RefundPending, IdemKey: fmt.Sprintf("refund:key-%d", i), CreatedAt: at, UpdatedAt: at,
	}
}

// refundIDs returns the ids of refunds, in order.
func refundIDs(rs []pay.Refund) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// testRefunds covers the refund family: InsertRefund with its checks (a
// known payment, its currency, a free reference, no more pending and
// succeeded than the amount), UpdateRefund moving the indexes, the
// lookups and the sweeper's PendingRefunds, and the payment's refund
// amounts, which come back as stored.
func testRefunds(t *testing.T, open Opener) {
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		p.Status = pay.Captured
		e.insert(p)
		r := newRefund(1, p, 300, t0)
		e.update(func(tx store.Tx) error { return tx.InsertRefund(r) })
		var got pay.Refund
		e.view(func(tx store.Tx) (err error) { got, err = tx.Refund(r.ID); return err })
		if got.Currency != p.Currency || got.Provider != p.Provider || got.Amount != 300 || got.Reason != r.Reason ||
			got.IdemKey != r.IdemKey || got.Status != pay.RefundPending || !got.CreatedAt.Equal(t0) {
			t.Fatalf("Refund=%+v, want %+v with the payment's currency and provider", got, r)
		}

		// The PSP's reference and the outcome.
		at := e.clock.Add(time.Second)
		e.update(func(tx store.Tx) error {
			got.Status, got.ProviderRef, got.EventID, got.Amount = pay.RefundSucceeded, "psp_re_1", "evt_1", 999
			return tx.UpdateRefund(got)
		})
		e.view(func(tx store.Tx) error {
			r, err := tx.RefundByRef(p.Provider, "psp_re_1")
			if err != nil {
				return err
			}
			if r.ID != got.ID || r.Status != pay.RefundSucceeded || r.EventID != "evt_1" || r.Amount != 300 || !r.UpdatedAt.Equal(at) {
				t.Fatalf("RefundByRef=%+v, want succeeded, evt_1, amount unchanged, updated at %s", r, at)
			}
			_, err = tx.RefundByRef("stripe", "psp_re_1")
			wantCode(t, err, pay.ENOTFOUND)
			_, err = tx.Refund(refundID(99))
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})

		// The payment's amounts round-trip.
		e.update(func(tx store.Tx) error {
			cur, err := tx.Payment(p.ID)
			if err != nil {
				return err
			}
			next := cur
			next.AmountRefunded, next.AmountRefundPending, next.Version = 300, 200, cur.Version+1
			return tx.UpdatePayment(next, cur.Version)
		})
		if q := e.payment(p.ID); q.AmountRefunded != 300 || q.AmountRefundPending != 200 {
			t.Fatalf("payment amounts %d and %d, want 300 and 200", q.AmountRefunded, q.AmountRefundPending)
		}
	})

	t.Run("ErrInsert", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		e.insert(p)
		r := newRefund(1, p, 300, t0)
		e.update(func(tx store.Tx) error { return tx.InsertRefund(r) })
		err := e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(r) })
		wantCode(t, err, pay.ECONFLICT)

		other := newRefund(2, p, 100, t0)
		other.PaymentID = paymentID(9)
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(other) }), pay.ENOTFOUND)
		other = newRefund(2, p, 100, t0)
		other.Currency = "USD"
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(other) }), pay.EINVALID)
		other = newRefund(2, p, 0, t0)
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(other) }), pay.EINVALID)

		// A second reference of the provider is refused.
		a, b := newRefund(3, p, 100, t0), newRefund(4, p, 100, t0)
		a.ProviderRef, b.ProviderRef = "psp_re_x", "psp_re_x"
		e.update(func(tx store.Tx) error { return tx.InsertRefund(a) })
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(b) }), pay.ECONFLICT)
		b.ProviderRef = ""
		e.update(func(tx store.Tx) error { return tx.InsertRefund(b) })
		b.ProviderRef = "psp_re_x"
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.UpdateRefund(b) }), pay.ECONFLICT)
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.UpdateRefund(newRefund(98, p, 1, t0)) }), pay.ENOTFOUND)
	})

	t.Run("ErrExceeds", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0) // amount 1001
		e.insert(p)
		e.update(func(tx store.Tx) error { return tx.InsertRefund(newRefund(1, p, 600, t0)) })
		// Pending counts: 600 + 402 > 1001.
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(newRefund(2, p, 402, t0)) }), pay.ERefundExceeds)
		e.update(func(tx store.Tx) error { return tx.InsertRefund(newRefund(2, p, 401, t0)) })

		// A failed refund frees its amount; it cannot take it back.
		e.update(func(tx store.Tx) error {
			r, err := tx.Refund(refundID(1))
			if err != nil {
				return err
			}
			r.Status = pay.RefundFailed
			return tx.UpdateRefund(r)
		})
		e.update(func(tx store.Tx) error { return tx.InsertRefund(newRefund(3, p, 600, t0)) })
		err := e.tryUpdate(func(tx store.Tx) error {
			r, err := tx.Refund(refundID(1))
			if err != nil {
				return err
			}
			r.Status = pay.RefundSucceeded
			return tx.UpdateRefund(r)
		})
		wantCode(t, err, pay.ERefundExceeds)

		var rs []pay.Refund
		e.view(func(tx store.Tx) (err error) { rs, err = tx.RefundsForPayment(p.ID); return err })
		if got, want := refundIDs(rs), []string{refundID(1), refundID(2), refundID(3)}; !slices.Equal(got, want) {
			t.Fatalf("RefundsForPayment=%v, want %v (oldest first)", got, want)
		}
		if rs[0].Status != pay.RefundFailed {
			t.Fatalf("refund 1 is %s after the refused update, want failed", rs[0].Status)
		}
	})

	t.Run("ErrChargeDisputed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		p.Status = pay.Captured
		e.insert(p)
		e.update(func(tx store.Tx) error { return tx.InsertRefund(newRefund(1, p, 100, t0)) })
		// The disputes decide, whatever the payment's field says (a
		// payment written by an older binary lacks it).
		setDispute := func(st pay.DisputeStatus) {
			t.Helper()
			e.update(func(tx store.Tx) error {
				return tx.PutDispute(pay.Dispute{Provider: p.Provider, ID: "dp_1", PaymentID: p.ID, Amount: 500, Currency: p.Currency,
					Status: st, CreatedAt: t0, UpdatedAt: t0})
			})
		}
		// The payment's own field round-trips.
		e.update(func(tx store.Tx) error {
			cur, err := tx.Payment(p.ID)
			if err != nil {
				return err
			}
			next := cur
			next.Dispute, next.Version = pay.DisputeUnderReview, cur.Version+1
			return tx.UpdatePayment(next, cur.Version)
		})
		if got := e.payment(p.ID).Dispute; got != pay.DisputeUnderReview {
			t.Fatalf("payment's dispute=%q after the update, want %q", got, pay.DisputeUnderReview)
		}
		for i, st := range []pay.DisputeStatus{pay.DisputeNeedsResponse, pay.DisputeUnderReview, pay.DisputeLost} {
			setDispute(st)
			// A refund the merchant requests (it has a key) is refused
			// in the transaction; one learnt from the PSP is not, and a
			// pending refund from before the dispute may still settle.
			wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(newRefund(10+i, p, 100, t0)) }), pay.EChargeDisputed)
			learnt := newRefund(20+i, p, 10, t0)
			learnt.IdemKey = ""
			e.update(func(tx store.Tx) error { return tx.InsertRefund(learnt) })
		}
		e.update(func(tx store.Tx) error {
			r, err := tx.Refund(refundID(1))
			if err != nil {
				return err
			}
			r.Status = pay.RefundSucceeded
			return tx.UpdateRefund(r)
		})
		setDispute(pay.DisputeWon)
		e.update(func(tx store.Tx) error { return tx.InsertRefund(newRefund(30, p, 100, t0)) })
	})

	t.Run("PendingRefunds", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		e.insert(p)
		for i := range 5 {
			at := t0.Add(time.Duration(i) * time.Minute)
			e.update(func(tx store.Tx) error { return tx.InsertRefund(newRefund(i, p, 100, at)) })
		}
		// Refund 2 succeeds at t0+10m: no longer pending.
		e.clock.Add(10 * time.Minute)
		e.update(func(tx store.Tx) error {
			r, err := tx.Refund(refundID(2))
			if err != nil {
				return err
			}
			r.Status = pay.RefundSucceeded
			return tx.UpdateRefund(r)
		})
		pending := func(f pay.RefundFilter) []string {
			t.Helper()
			var rs []pay.Refund
			e.view(func(tx store.Tx) (err error) { rs, err = tx.PendingRefunds(f); return err })
			return refundIDs(rs)
		}
		bound := t0.Add(4 * time.Minute) // refund 4 was updated at the bound: not before it
		if got, want := pending(pay.RefundFilter{UpdatedBefore: bound, Limit: 10}), []string{refundID(0), refundID(1), refundID(3)}; !slices.Equal(got, want) {
			t.Fatalf("PendingRefunds=%v, want %v", got, want)
		}
		if got, want := pending(pay.RefundFilter{UpdatedBefore: bound, Limit: 1}), []string{refundID(0)}; !slices.Equal(got, want) {
			t.Fatalf("PendingRefunds limit 1=%v, want %v", got, want)
		}
		next := pay.RefundFilter{UpdatedBefore: bound, AfterUpdated: t0.Add(time.Minute), AfterID: refundID(1), Limit: 10}
		if got, want := pending(next), []string{refundID(3)}; !slices.Equal(got, want) {
			t.Fatalf("PendingRefunds after refund 1=%v, want %v", got, want)
		}
		err := e.s.View(context.Background(), func(tx store.Tx) error {
			_, err := tx.PendingRefunds(pay.RefundFilter{UpdatedBefore: bound})
			return err
		})
		wantCode(t, err, pay.EINVALID)
	})

	t.Run("Events", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		e.insert(p)
		// An inbox event keeps what it says of a refund or a dispute.
		due := t0.Add(7 * 24 * time.Hour)
		evs := []pay.InboxEvent{
			{Provider: "mock", EventID: "evt_r", Type: "payment.refund.failed", PaymentID: p.ID, ReceivedAt: t0,
				Refund: &pay.RefundChange{ID: refundID(1), ProviderRef: "psp_re", Amount: 250, Status: pay.RefundFailed}},
			{Provider: "mock", EventID: "evt_d", Type: "payment.dispute.created", PaymentID: p.ID, ReceivedAt: t0,
				Dispute: &pay.DisputeChange{ID: "dp_1", Amount: 1001, Currency: "EUR", Reason: "fraudulent", Status: pay.DisputeNeedsResponse, EvidenceDueBy: due}},
			{Provider: "mock", EventID: "evt_p", Type: "payment.captured", PaymentID: p.ID, Status: pay.Captured, ReceivedAt: t0},
		}
		updateEach(e, evs, func(tx store.Tx, ev pay.InboxEvent) error { return putInbox(tx, ev) })
		e.view(func(tx store.Tx) error {
			r, err := tx.InboxEvent("mock", "evt_r")
			if err != nil {
				return err
			}
			if r.Refund == nil || *r.Refund != *evs[0].Refund || r.Dispute != nil {
				t.Fatalf("refund event: %+v %+v, want %+v", r.Refund, r.Dispute, evs[0].Refund)
			}
			d, err := tx.InboxEvent("mock", "evt_d")
			if err != nil {
				return err
			}
			if d.Dispute == nil || d.Dispute.ID != "dp_1" || d.Dispute.Amount != 1001 || !d.Dispute.EvidenceDueBy.Equal(due) || d.Dispute.Status != pay.DisputeNeedsResponse {
				t.Fatalf("dispute event: %+v, want %+v", d.Dispute, evs[1].Dispute)
			}
			c, err := tx.InboxEvent("mock", "evt_p")
			if err != nil {
				return err
			}
			if c.Refund != nil || c.Dispute != nil {
				t.Fatalf("payment event carries %+v %+v", c.Refund, c.Dispute)
			}
			return nil
		})

		// An outbox record names its refund or dispute.
		rec := pay.OutboxRecord{ID: "evt_o", Type: pay.EventRefundSucceeded, PaymentID: p.ID, Status: pay.Captured, Version: 2,
			Amount: p.Amount, Currency: "EUR", RefundID: refundID(1), ObjectAmount: 250, ObjectStatus: "succeeded", AmountRefunded: 250}
		e.update(func(tx store.Tx) error { return tx.AppendOutbox(rec) })
		e.view(func(tx store.Tx) error {
			rs, err := tx.OutboxForPayment(p.ID)
			if err != nil {
				return err
			}
			if len(rs) != 1 || rs[0].RefundID != rec.RefundID || rs[0].ObjectAmount != 250 || rs[0].ObjectStatus != "succeeded" || rs[0].AmountRefunded != 250 || rs[0].DisputeID != "" {
				t.Fatalf("outbox %+v, want %+v", rs, rec)
			}
			return nil
		})
	})
}

// testRefundsConcurrent inserts 20 refunds of one payment at once, from
// 20 goroutines, whose amounts add up to more than the payment: the
// store's check in the transaction lets exactly as many in as fit, and
// the refused ones are ERefundExceeds.
func testRefundsConcurrent(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	p := newPayment(1, t0) // amount 1001
	e.insert(p)
	const n = 20
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		refused  int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// InsertRefund alone: the store's own check in the
			// transaction is what keeps the sum within the amount.
			err := e.tryUpdate(func(tx store.Tx) error { return tx.InsertRefund(newRefund(i, p, 150, t0)) })
			mu.Lock()
			defer mu.Unlock()
			switch pay.ErrorCode(err) {
			case "":
				accepted++
			case pay.ERefundExceeds:
				refused++
			default:
				t.Errorf("InsertRefund %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if got, want := accepted, int(p.Amount/150); got != want || refused != n-want {
		t.Fatalf("accepted %d, refused %d; want %d and %d (150 each of %d)", accepted, refused, want, n-want, p.Amount)
	}
	var rs []pay.Refund
	e.view(func(tx store.Tx) (err error) { rs, err = tx.RefundsForPayment(p.ID); return err })
	var sum int64
	for _, r := range rs {
		sum += r.Amount
	}
	if len(rs) != accepted || sum > p.Amount {
		t.Fatalf("%d refunds stored summing to %d, want %d within %d", len(rs), sum, accepted, p.Amount)
	}
}

// testDisputes covers the dispute family: PutDispute (insert, replace,
// its payment checked), the lookups, the list by status and deadline,
// and the count of open disputes.
func testDisputes(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	p, q := newPayment(1, t0), newPayment(2, t0)
	e.insert(p, q)
	day := 24 * time.Hour
	ds := []pay.Dispute{
		{Provider: "mock", ID: "dp_a", PaymentID: p.ID, Amount: 1001, Reason: "fraudulent", Status: pay.DisputeNeedsResponse, EvidenceDueBy: t0.Add(5 * day)},
		{Provider: "mock", ID: "dp_b", PaymentID: p.ID, Amount: 100, Status: pay.DisputeUnderReview, EvidenceDueBy: t0.Add(2 * day)},
		{Provider: "stripe", ID: "dp_a", PaymentID: q.ID, Amount: 1002, Status: pay.DisputeNeedsResponse},
		{Provider: "mock", ID: "dp_c", PaymentID: q.ID, Amount: 5, Status: pay.DisputeLost, EvidenceDueBy: t0.Add(day)},
	}
	for i := range ds {
		ds[i].CreatedAt, ds[i].UpdatedAt = t0, t0
	}
	updateEach(e, ds, store.Tx.PutDispute)

	list := func(f pay.DisputeFilter) []string {
		t.Helper()
		var got []pay.Dispute
		e.view(func(tx store.Tx) (err error) { got, err = tx.ListDisputes(f); return err })
		var out []string
		for _, d := range got {
			out = append(out, d.Provider+"/"+d.ID)
		}
		return out
	}
	if got, want := list(pay.DisputeFilter{Limit: 10}), []string{"mock/dp_c", "mock/dp_b", "mock/dp_a", "stripe/dp_a"}; !slices.Equal(got, want) {
		t.Fatalf("ListDisputes=%v, want %v (soonest deadline first, none last)", got, want)
	}
	if got, want := list(pay.DisputeFilter{Status: pay.DisputeNeedsResponse, Limit: 10}), []string{"mock/dp_a", "stripe/dp_a"}; !slices.Equal(got, want) {
		t.Fatalf("ListDisputes needs_response=%v, want %v", got, want)
	}
	if got, want := list(pay.DisputeFilter{Limit: 2}), []string{"mock/dp_c", "mock/dp_b"}; !slices.Equal(got, want) {
		t.Fatalf("ListDisputes limit 2=%v, want %v", got, want)
	}
	count := func() int {
		var n int
		e.view(func(tx store.Tx) (err error) { n, err = tx.CountOpenDisputes(); return err })
		return n
	}
	if got, want := count(), 3; got != want {
		t.Fatalf("CountOpenDisputes=%d, want %d", got, want)
	}

	// Closed: replaced in place, the list and the count follow.
	won := ds[0]
	won.Status, won.UpdatedAt = pay.DisputeWon, t0.Add(time.Hour)
	e.update(func(tx store.Tx) error { return tx.PutDispute(won) })
	if got, want := count(), 2; got != want {
		t.Fatalf("CountOpenDisputes after a win=%d, want %d", got, want)
	}
	e.view(func(tx store.Tx) error {
		d, err := tx.Dispute("mock", "dp_a")
		if err != nil {
			return err
		}
		if d.Status != pay.DisputeWon || d.Currency != "EUR" || d.Amount != 1001 || d.Reason != "fraudulent" || !d.EvidenceDueBy.Equal(t0.Add(5*day)) || !d.UpdatedAt.Equal(won.UpdatedAt) {
			t.Fatalf("Dispute=%+v, want %+v with the payment's currency", d, won)
		}
		got, err := tx.DisputesForPayment(p.ID)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[0].ID != "dp_a" || got[1].ID != "dp_b" {
			t.Fatalf("DisputesForPayment=%+v, want dp_a and dp_b", got)
		}
		_, err = tx.Dispute("mock", "dp_x")
		wantCode(t, err, pay.ENOTFOUND)
		_, err = tx.ListDisputes(pay.DisputeFilter{Status: "open", Limit: 1})
		wantCode(t, err, pay.EINVALID)
		return nil
	})
	if got, want := list(pay.DisputeFilter{Status: pay.DisputeWon, Limit: 10}), []string{"mock/dp_a"}; !slices.Equal(got, want) {
		t.Fatalf("ListDisputes won=%v, want %v", got, want)
	}

	// Another payment's dispute, or an unknown payment, is refused.
	moved := won
	moved.PaymentID = q.ID
	wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.PutDispute(moved) }), pay.ECONFLICT)
	moved.PaymentID, moved.ID = paymentID(9), "dp_new"
	wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.PutDispute(moved) }), pay.ENOTFOUND)
}
