package storetest

// The tests of the ripple families: the fan-out cursor and the
// deliveries of the outbox, and the effect state (customer accounts,
// dedupe records, endpoints).

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// delivery returns pending delivery i of outbox record seq of payment p to
// effect (and endpoint, for a webhook), due at t0.
func delivery(i int, p string, seq uint64, effect, endpoint string) pay.Delivery {
	return pay.Delivery{
		ID: fmt.Sprintf("dlv_%026d", i), Effect: effect, Endpoint: endpoint,
		EventID: fmt.Sprintf("evt_%d", seq), EventType: "payment.captured", EventSeq: seq,
		EventAt: t0, PaymentID: p, State: pay.DeliveryPending, NextAttemptAt: t0,
	}
}

// deliveryIDs returns the ids of ds.
func deliveryIDs(ds []pay.Delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// wantDeliveries fails the test unless ds are deliveries want[i], in order.
func wantDeliveries(t *testing.T, what string, ds []pay.Delivery, want ...int) {
	t.Helper()
	w := make([]string, 0, len(want))
	for _, i := range want {
		w = append(w, fmt.Sprintf("dlv_%026d", i))
	}
	if got := deliveryIDs(ds); !slices.Equal(got, w) {
		t.Fatalf("%s=%v, want %v", what, got, w)
	}
}

func testRippleCursor(t *testing.T, open Opener) {
	e := newEnv(t, open)
	e.view(func(tx store.Tx) error {
		cur, err := tx.RippleCursor()
		if err != nil {
			return err
		}
		if got, want := cur, uint64(0); got != want {
			t.Fatalf("RippleCursor of a new store=%d, want %d", got, want)
		}
		recs, err := tx.OutboxAfter(0, 10)
		if err != nil {
			return err
		}
		if len(recs) != 0 {
			t.Fatalf("OutboxAfter of an empty outbox=%v, want none", recs)
		}
		_, err = tx.OutboxRecord(1)
		wantCode(t, err, pay.ENOTFOUND)
		return nil
	})
	e.update(func(tx store.Tx) error {
		for i := 1; i <= 5; i++ {
			if err := tx.AppendOutbox(pay.OutboxRecord{ID: fmt.Sprintf("evt_%d", i), Type: "payment.captured", PaymentID: paymentID(i % 2), Status: pay.Captured}); err != nil {
				return err
			}
		}
		return nil
	})
	// Seqs increase in append order; they need not be dense (PostgreSQL's
	// are not).
	// PostgreSQL's OutboxAfter holds records back while an older
	// transaction of the database (another test's) is open: read again
	// until they show, a bounded number of times.
	var all []pay.OutboxRecord
	for range 1000 {
		e.view(func(tx store.Tx) (err error) { all, err = tx.OutboxAfter(0, 10); return err })
		if len(all) >= 5 {
			break
		}
	}
	if got, want := len(all), 5; got != want {
		t.Fatalf("len(OutboxAfter(0, 10))=%d, want %d", got, want)
	}
	for i, r := range all {
		if r.ID != fmt.Sprintf("evt_%d", i+1) || r.Seq == 0 || i > 0 && r.Seq <= all[i-1].Seq {
			t.Fatalf("OutboxAfter(0, 10)[%d]=%s with Seq %d, want evt_%d with a Seq above the one before", i, r.ID, r.Seq, i+1)
		}
	}
	e.view(func(tx store.Tx) error {
		recs, err := tx.OutboxAfter(all[1].Seq, 2)
		if err != nil {
			return err
		}
		if got, want := len(recs), 2; got != want {
			t.Fatalf("len(OutboxAfter(second, 2))=%d, want %d", got, want)
		}
		if recs[0].Seq != all[2].Seq || recs[1].Seq != all[3].Seq {
			t.Fatalf("OutboxAfter(second, 2) Seqs=%d,%d, want %d,%d", recs[0].Seq, recs[1].Seq, all[2].Seq, all[3].Seq)
		}
		r, err := tx.OutboxRecord(recs[1].Seq)
		if err != nil {
			return err
		}
		if got, want := r.ID, recs[1].ID; got != want {
			t.Fatalf("OutboxRecord(%d).ID=%s, want %s", recs[1].Seq, got, want)
		}
		_, err = tx.OutboxAfter(0, 0)
		wantCode(t, err, pay.EINVALID)
		return nil
	})
	e.update(func(tx store.Tx) error { return tx.SetRippleCursor(all[3].Seq) })
	e.update(func(tx store.Tx) error {
		cur, err := tx.RippleCursor()
		if err != nil {
			return err
		}
		if got, want := cur, all[3].Seq; got != want {
			t.Fatalf("RippleCursor=%d, want %d", got, want)
		}
		wantCode(t, tx.SetRippleCursor(all[2].Seq), pay.EINVALID)
		recs, err := tx.OutboxAfter(cur, 10)
		if err != nil {
			return err
		}
		if got, want := len(recs), 1; got != want {
			t.Fatalf("len(OutboxAfter(cursor))=%d, want %d", got, want)
		}
		return nil
	})
}

// testClaims: the outbox records not fanned out are claimed in Seq order
// and, once marked, not again; the deliveries claimed are those among the
// ones asked for that are pending, due and first in line, by id.
func testClaims(t *testing.T, open Opener) {
	e := newEnv(t, open)
	e.update(func(tx store.Tx) error {
		for i := 1; i <= 3; i++ {
			if err := tx.AppendOutbox(pay.OutboxRecord{ID: fmt.Sprintf("evt_%d", i), Type: "payment.captured", PaymentID: paymentID(i), Status: pay.Captured}); err != nil {
				return err
			}
		}
		return nil
	})
	// Each claim is checked after its transaction, so that a failure
	// stops no writer.
	claim := func(limit int, want ...string) {
		t.Helper()
		var got, seqs []string
		e.update(func(tx store.Tx) error {
			got, seqs = nil, nil
			recs, err := tx.ClaimUnfanned(limit)
			if err != nil {
				return err
			}
			var marks []uint64
			for _, r := range recs {
				got, seqs, marks = append(got, r.ID), append(seqs, fmt.Sprint(r.Seq)), append(marks, r.Seq)
			}
			return tx.MarkFanned(marks)
		})
		if !slices.Equal(got, want) {
			t.Fatalf("ClaimUnfanned(%d)=%q (Seqs %s), want %q", limit, got, seqs, want)
		}
	}
	claim(2, "evt_1", "evt_2")
	claim(10, "evt_3")
	claim(10)

	// a and b are one payment's records for one target: b waits for a.
	// c, another payment's, is due later; d is another target's.
	p := paymentID(1)
	a, b := delivery(1, p, 1, pay.EffectLoyalty, ""), delivery(2, p, 2, pay.EffectLoyalty, "")
	c, d := delivery(3, paymentID(2), 3, pay.EffectLoyalty, ""), delivery(4, p, 2, pay.EffectRetention, "")
	c.NextAttemptAt = e.clock.Now().Add(time.Hour)
	e.update(func(tx store.Tx) error {
		for _, x := range []pay.Delivery{a, b, c, d} {
			if err := tx.InsertDelivery(x); err != nil {
				return err
			}
		}
		return nil
	})
	claimAll := func(want ...string) {
		t.Helper()
		var claimed []pay.Delivery
		e.update(func(tx store.Tx) (err error) {
			claimed, err = tx.ClaimDeliveries([]string{d.ID, c.ID, b.ID, "dlv_missing", a.ID})
			return err
		})
		if got := deliveryIDs(claimed); !slices.Equal(got, want) {
			t.Fatalf("ClaimDeliveries=%q, want %q", got, want)
		}
	}
	claimAll(a.ID, d.ID)
	e.update(func(tx store.Tx) error {
		a.State = pay.DeliveryDone
		return tx.UpdateDelivery(a)
	})
	claimAll(b.ID, d.ID)
}

func testDelivery(t *testing.T, open Opener) {
	e := newEnv(t, open)
	p := paymentID(1)
	d := delivery(1, p, 7, pay.EffectWebhook, "we_1")
	d.NextAttemptAt, d.EventAt = time.Time{}, time.Time{}
	e.clock.Add(time.Minute)
	e.update(func(tx store.Tx) error { return tx.InsertDelivery(d) })

	var got pay.Delivery
	e.view(func(tx store.Tx) (err error) { got, err = tx.Delivery(d.ID); return err })
	now := t0.Add(time.Minute)
	for name, tm := range map[string]time.Time{"CreatedAt": got.CreatedAt, "UpdatedAt": got.UpdatedAt, "NextAttemptAt": got.NextAttemptAt, "EventAt": got.EventAt} {
		if !tm.Equal(now) {
			t.Fatalf("%s=%s, want %s (Tx.Now)", name, tm, now)
		}
	}
	if got.Target() != "webhook:we_1" || got.EventSeq != 7 || got.EventID != d.EventID || got.PaymentID != p || got.State != pay.DeliveryPending {
		t.Fatalf("Delivery=%+v, want the delivery stored", got)
	}

	// Conflicts and bad input write nothing.
	err := e.tryUpdate(func(tx store.Tx) error { return tx.InsertDelivery(d) })
	wantCode(t, err, pay.ECONFLICT)
	twin := delivery(2, p, 7, pay.EffectWebhook, "we_1")
	err = e.tryUpdate(func(tx store.Tx) error { return tx.InsertDelivery(twin) })
	wantCode(t, err, pay.ECONFLICT)
	for name, mutate := range map[string]func(*pay.Delivery){
		"NoID":      func(d *pay.Delivery) { d.ID = "" },
		"NoEffect":  func(d *pay.Delivery) { d.Effect = "" },
		"NoEvent":   func(d *pay.Delivery) { d.EventID = "" },
		"NoPayment": func(d *pay.Delivery) { d.PaymentID = "" },
		"BadState":  func(d *pay.Delivery) { d.State = "sent" },
	} {
		bad := delivery(3, p, 8, pay.EffectLoyalty, "")
		mutate(&bad)
		err := e.tryUpdate(func(tx store.Tx) error { return tx.InsertDelivery(bad) })
		if got, want := pay.ErrorCode(err), pay.EINVALID; got != want {
			t.Fatalf("%s: InsertDelivery error %v: code=%q, want %q", name, err, got, want)
		}
	}
	e.view(func(tx store.Tx) error {
		_, err := tx.Delivery("dlv_unknown")
		wantCode(t, err, pay.ENOTFOUND)
		return nil
	})

	// An update writes the schedule and outcome, keeps what it is about,
	// and stamps UpdatedAt.
	e.clock.Add(time.Minute)
	upd := got
	upd.State, upd.Attempts, upd.LastError, upd.Note = pay.DeliveryDead, 3, "answered 500", ""
	upd.PaymentID, upd.EventSeq, upd.Effect = paymentID(9), 99, pay.EffectReceipt // ignored
	e.update(func(tx store.Tx) error { return tx.UpdateDelivery(upd) })
	e.view(func(tx store.Tx) (err error) { got, err = tx.Delivery(d.ID); return err })
	if got.State != pay.DeliveryDead || got.Attempts != 3 || got.LastError != "answered 500" {
		t.Fatalf("Delivery after update=%+v, want dead after 3 attempts", got)
	}
	if got.PaymentID != p || got.EventSeq != 7 || got.Effect != pay.EffectWebhook {
		t.Fatalf("Delivery after update=%+v, want payment, event and effect kept", got)
	}
	if want := t0.Add(2 * time.Minute); !got.UpdatedAt.Equal(want) {
		t.Fatalf("UpdatedAt=%s, want %s (Tx.Now)", got.UpdatedAt, want)
	}
	if want := now; !got.CreatedAt.Equal(want) {
		t.Fatalf("CreatedAt=%s, want %s (kept)", got.CreatedAt, want)
	}
	// Out of line, the same record may be pending again for the target.
	e.update(func(tx store.Tx) error { return tx.InsertDelivery(twin) })

	missing := delivery(4, p, 9, pay.EffectLoyalty, "")
	err = e.tryUpdate(func(tx store.Tx) error { return tx.UpdateDelivery(missing) })
	wantCode(t, err, pay.ENOTFOUND)
	upd.State = "sent"
	err = e.tryUpdate(func(tx store.Tx) error { return tx.UpdateDelivery(upd) })
	wantCode(t, err, pay.EINVALID)
}

func testDueDeliveries(t *testing.T, open Opener) {
	e := newEnv(t, open)
	// Five payments, one delivery each, due at t0+i minutes (reversed
	// insertion order).
	e.update(func(tx store.Tx) error {
		for i := 5; i >= 1; i-- {
			d := delivery(i, paymentID(i), uint64(i), pay.EffectLoyalty, "")
			d.NextAttemptAt = t0.Add(time.Duration(i) * time.Minute)
			if err := tx.InsertDelivery(d); err != nil {
				return err
			}
		}
		return nil
	})
	due := func(at time.Time, limit int) []pay.Delivery {
		t.Helper()
		var ds []pay.Delivery
		e.view(func(tx store.Tx) (err error) { ds, err = tx.DueDeliveries(at, limit); return err })
		return ds
	}
	wantDeliveries(t, "DueDeliveries(t0)", due(t0, 10))
	wantDeliveries(t, "DueDeliveries(t0+3m)", due(t0.Add(3*time.Minute), 10), 1, 2, 3)
	wantDeliveries(t, "DueDeliveries(t0+1h, 2)", due(t0.Add(time.Hour), 2), 1, 2)
	skipping := func(limit int, skip ...int) []pay.Delivery {
		t.Helper()
		ids := map[string]bool{}
		for _, i := range skip {
			ids[delivery(i, "", 0, "", "").ID] = true
		}
		var ds []pay.Delivery
		e.view(func(tx store.Tx) (err error) {
			ds, err = tx.DueDeliveriesSkipping(t0.Add(time.Hour), limit, func(id string) bool { return ids[id] })
			return err
		})
		return ds
	}
	wantDeliveries(t, "DueDeliveriesSkipping(t0+1h, 2, skip 1 and 3)", skipping(2, 1, 3), 2, 4)
	wantDeliveries(t, "DueDeliveriesSkipping(t0+1h, 10, skip none)", skipping(10), 1, 2, 3, 4, 5)

	// Done and dead deliveries are never due; a reschedule moves one.
	e.update(func(tx store.Tx) error {
		d1, err := tx.Delivery(delivery(1, "", 0, "", "").ID)
		if err != nil {
			return err
		}
		d1.State = pay.DeliveryDone
		if err := tx.UpdateDelivery(d1); err != nil {
			return err
		}
		d2, err := tx.Delivery(delivery(2, "", 0, "", "").ID)
		if err != nil {
			return err
		}
		d2.NextAttemptAt = t0.Add(10 * time.Minute)
		return tx.UpdateDelivery(d2)
	})
	wantDeliveries(t, "DueDeliveries(t0+1h) after updates", due(t0.Add(time.Hour), 10), 3, 4, 5, 2)
	e.view(func(tx store.Tx) error {
		_, err := tx.DueDeliveries(t0, 0)
		wantCode(t, err, pay.EINVALID)
		n, err := tx.CountDeliveries(pay.DeliveryPending)
		if err != nil {
			return err
		}
		if got, want := n, 4; got != want {
			t.Fatalf("CountDeliveries(pending)=%d, want %d", got, want)
		}
		d, ok, err := tx.OldestPendingDelivery()
		if err != nil {
			return err
		}
		if !ok || d.ID != delivery(2, "", 0, "", "").ID {
			t.Fatalf("OldestPendingDelivery=%s %v, want delivery 2 (all events at t0; ids order them)", d.ID, ok)
		}
		_, err = tx.CountDeliveries("sent")
		wantCode(t, err, pay.EINVALID)
		return nil
	})
}

func testDeliveriesInOrder(t *testing.T, open Opener) {
	e := newEnv(t, open)
	a, b := paymentID(1), paymentID(2)
	// Payment a: records 1 and 3 for loyalty, record 3 also for a webhook;
	// payment b: record 2 for loyalty. All due at t0.
	updateEach(e, []pay.Delivery{
		delivery(3, a, 3, pay.EffectLoyalty, ""),
		delivery(1, a, 1, pay.EffectLoyalty, ""),
		delivery(2, b, 2, pay.EffectLoyalty, ""),
		delivery(4, a, 3, pay.EffectWebhook, "we_1"),
	}, store.Tx.InsertDelivery)
	due := func() []pay.Delivery {
		t.Helper()
		var ds []pay.Delivery
		e.view(func(tx store.Tx) (err error) { ds, err = tx.DueDeliveries(t0, 10); return err })
		return ds
	}
	// Record 3 of a waits for record 1 for loyalty, not for the webhook.
	wantDeliveries(t, "DueDeliveries", due(), 1, 2, 4)

	finish := func(i int, state string) {
		t.Helper()
		e.update(func(tx store.Tx) error {
			d, err := tx.Delivery(delivery(i, "", 0, "", "").ID)
			if err != nil {
				return err
			}
			d.State = state
			return tx.UpdateDelivery(d)
		})
	}
	finish(1, pay.DeliveryDead)
	wantDeliveries(t, "DueDeliveries after record 1 died", due(), 2, 3, 4)

	// A dead letter put back goes first again.
	e.update(func(tx store.Tx) error {
		d, err := tx.Delivery(delivery(1, "", 0, "", "").ID)
		if err != nil {
			return err
		}
		d.State, d.NextAttemptAt = pay.DeliveryPending, t0
		return tx.UpdateDelivery(d)
	})
	wantDeliveries(t, "DueDeliveries after record 1 was retried", due(), 1, 2, 4)
	finish(1, pay.DeliveryDone)
	wantDeliveries(t, "DueDeliveries after record 1 was done", due(), 2, 3, 4)
}

func testListDeliveries(t *testing.T, open Opener) {
	e := newEnv(t, open)
	// Deliveries 1..5 die at t0+i minutes; 6 stays pending.
	e.update(func(tx store.Tx) error {
		for i := 1; i <= 6; i++ {
			if err := tx.InsertDelivery(delivery(i, paymentID(i), uint64(i), pay.EffectRetention, "")); err != nil {
				return err
			}
		}
		return nil
	})
	for i := 1; i <= 5; i++ {
		e.clock.Add(time.Minute)
		e.update(func(tx store.Tx) error {
			d, err := tx.Delivery(delivery(i, "", 0, "", "").ID)
			if err != nil {
				return err
			}
			d.State, d.Attempts, d.LastError = pay.DeliveryDead, 15, "failed"
			return tx.UpdateDelivery(d)
		})
	}
	list := func(f pay.DeliveryFilter) ([]pay.Delivery, string) {
		t.Helper()
		var (
			ds   []pay.Delivery
			next string
		)
		e.view(func(tx store.Tx) (err error) { ds, next, err = tx.ListDeliveries(f); return err })
		return ds, next
	}
	ds, next := list(pay.DeliveryFilter{State: pay.DeliveryDead, Limit: 10})
	wantDeliveries(t, "dead", ds, 1, 2, 3, 4, 5)
	if next != "" {
		t.Fatalf("next cursor=%q, want none", next)
	}
	ds, _ = list(pay.DeliveryFilter{State: pay.DeliveryDead, Since: t0.Add(3 * time.Minute), Limit: 10})
	wantDeliveries(t, "dead since t0+3m", ds, 3, 4, 5)
	ds, _ = list(pay.DeliveryFilter{State: pay.DeliveryPending, Limit: 10})
	wantDeliveries(t, "pending", ds, 6)
	ds, _ = list(pay.DeliveryFilter{State: pay.DeliveryDone, Limit: 10})
	wantDeliveries(t, "done", ds)

	// Pages of two.
	var all []pay.Delivery
	f := pay.DeliveryFilter{State: pay.DeliveryDead, Since: t0.Add(2 * time.Minute), Limit: 2}
	for range 10 {
		ds, next := list(f)
		all = append(all, ds...)
		if next == "" {
			break
		}
		f.Cursor = next
	}
	wantDeliveries(t, "dead since t0+2m, by pages", all, 2, 3, 4, 5)

	e.view(func(tx store.Tx) error {
		for name, f := range map[string]pay.DeliveryFilter{
			"NoState":    {Limit: 10},
			"BadState":   {State: "failed", Limit: 10},
			"NoLimit":    {State: pay.DeliveryDead},
			"BadCursor":  {State: pay.DeliveryDead, Limit: 10, Cursor: "not-a-cursor"},
			"LimitAbove": {State: pay.DeliveryDead, Limit: 1001},
		} {
			_, _, err := tx.ListDeliveries(f)
			if got, want := pay.ErrorCode(err), pay.EINVALID; got != want {
				t.Fatalf("%s: ListDeliveries error %v: code=%q, want %q", name, err, got, want)
			}
		}
		n, err := tx.CountDeliveries(pay.DeliveryDead)
		if err != nil {
			return err
		}
		if got, want := n, 5; got != want {
			t.Fatalf("CountDeliveries(dead)=%d, want %d", got, want)
		}
		return nil
	})
}

func testCustomerAccount(t *testing.T, open Opener) {
	e := newEnv(t, open)
	e.view(func(tx store.Tx) error {
		_, err := tx.CustomerAccount("cus_1")
		wantCode(t, err, pay.ENOTFOUND)
		_, err = tx.CustomerAccount("")
		wantCode(t, err, pay.EINVALID)
		return nil
	})
	e.clock.Add(time.Minute)
	e.update(func(tx store.Tx) error {
		if err := tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_1", Points: -3}); err != nil {
			return err
		}
		return tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_2", Points: 12, LastVisitAt: t0.Add(-time.Hour)})
	})
	e.view(func(tx store.Tx) error {
		c1, err := tx.CustomerAccount("cus_1")
		if err != nil {
			return err
		}
		if c1.ID != "cus_1" || c1.Points != -3 || !c1.LastVisitAt.IsZero() || !c1.UpdatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("CustomerAccount(cus_1)=%+v, want -3 points, no visit, updated at Tx.Now", c1)
		}
		c2, err := tx.CustomerAccount("cus_2")
		if err != nil {
			return err
		}
		if c2.Points != 12 || !c2.LastVisitAt.Equal(t0.Add(-time.Hour)) {
			t.Fatalf("CustomerAccount(cus_2)=%+v, want 12 points, last visit %s", c2, t0.Add(-time.Hour))
		}
		return nil
	})
}

func testEffect(t *testing.T, open Opener) {
	e := newEnv(t, open)
	e.update(func(tx store.Tx) error {
		if _, ok, err := tx.Effect("loyalty:evt_1"); err != nil || ok {
			t.Fatalf("Effect of a new key: ok=%v err=%v, want none", ok, err)
		}
		return tx.PutEffect(store.EffectRecord{Key: "loyalty:evt_1", DeliveryID: "dlv_1", Points: -12})
	})
	e.view(func(tx store.Tx) error {
		r, ok, err := tx.Effect("loyalty:evt_1")
		if err != nil {
			return err
		}
		if !ok || r.DeliveryID != "dlv_1" || r.Points != -12 || !r.At.Equal(t0) {
			t.Fatalf("Effect=%+v ok=%v, want the record, at Tx.Now", r, ok)
		}
		_, _, err = tx.Effect("")
		wantCode(t, err, pay.EINVALID)
		return nil
	})
	// ClaimEffect stores a record for a free key only, in its own
	// transaction and in a later one; the first record stays.
	e.update(func(tx store.Tx) error {
		for i, want := range []bool{true, false} {
			ok, err := tx.ClaimEffect(store.EffectRecord{Key: "retention:evt_1", DeliveryID: fmt.Sprintf("dlv_%d", i)})
			if err != nil || ok != want {
				return fmt.Errorf("ClaimEffect #%d in one transaction: claimed=%v err=%v, want %v", i+1, ok, err, want)
			}
		}
		return nil
	})
	e.update(func(tx store.Tx) error {
		if ok, err := tx.ClaimEffect(store.EffectRecord{Key: "loyalty:evt_1", DeliveryID: "dlv_9"}); err != nil || ok {
			return fmt.Errorf("ClaimEffect of a key with a record: claimed=%v err=%v, want false", ok, err)
		}
		r, _, err := tx.Effect("retention:evt_1")
		if err == nil && r.DeliveryID != "dlv_0" {
			return fmt.Errorf("effect after two claims=%+v, want the first claim's record", r)
		}
		return err
	})
	// After LockEffects, the same answers: a key with a record is not
	// claimed, a free one is once, and what was put is read back.
	e.update(func(tx store.Tx) error {
		if err := tx.LockEffects([]string{"loyalty:evt_1", "loyalty:evt_2", "loyalty_payment:pay_2", "loyalty:evt_1"}); err != nil {
			return err
		}
		if ok, err := tx.ClaimEffect(store.EffectRecord{Key: "loyalty:evt_1", DeliveryID: "dlv_8"}); err != nil || ok {
			return fmt.Errorf("ClaimEffect of a locked key with a record: claimed=%v err=%v, want false", ok, err)
		}
		for i, want := range []bool{true, false} {
			ok, err := tx.ClaimEffect(store.EffectRecord{Key: "loyalty:evt_2", DeliveryID: fmt.Sprintf("dlv_2%d", i), Points: 7})
			if err != nil || ok != want {
				return fmt.Errorf("ClaimEffect #%d of a locked free key: claimed=%v err=%v, want %v", i+1, ok, err, want)
			}
		}
		if _, ok, err := tx.Effect("loyalty_payment:pay_2"); err != nil || ok {
			return fmt.Errorf("a locked free key read: ok=%v err=%v, want none", ok, err)
		}
		if err := tx.PutEffect(store.EffectRecord{Key: "loyalty_payment:pay_2", DeliveryID: "dlv_20", Points: 7}); err != nil {
			return err
		}
		r, ok, err := tx.Effect("loyalty_payment:pay_2")
		if err != nil || !ok || r.Points != 7 || r.DeliveryID != "dlv_20" {
			return fmt.Errorf("a locked key read after PutEffect: %+v ok=%v err=%v, want 7 points of dlv_20", r, ok, err)
		}
		return nil
	})
	e.view(func(tx store.Tx) error {
		for key, want := range map[string]string{"loyalty:evt_2": "dlv_20", "loyalty_payment:pay_2": "dlv_20"} {
			if r, ok, err := tx.Effect(key); err != nil || !ok || r.DeliveryID != want {
				return fmt.Errorf("effect %s after the commit: %+v ok=%v err=%v, want %s's", key, r, ok, err, want)
			}
		}
		return nil
	})
}

func testWebhookEndpoint(t *testing.T, open Opener) {
	e := newEnv(t, open)
	e.view(func(tx store.Tx) error {
		ep, err := tx.WebhookEndpoint("we_1")
		if err != nil {
			return err
		}
		if ep != (store.WebhookEndpoint{ID: "we_1"}) {
			t.Fatalf("WebhookEndpoint never stored=%+v, want only its id, enabled", ep)
		}
		return nil
	})
	want := store.WebhookEndpoint{
		ID: "we_1", URL: "https://shop.example/hooks", Disabled: true, DisabledAt: t0,
		DisabledReason: "answered 410 Gone", FailingSince: t0.Add(-time.Hour), LastSuccessAt: t0.Add(-2 * time.Hour),
	}
	e.update(func(tx store.Tx) error { return tx.PutWebhookEndpoint(want) })
	e.view(func(tx store.Tx) error {
		got, err := tx.WebhookEndpoint("we_1")
		if err != nil {
			return err
		}
		if !got.UpdatedAt.Equal(t0) {
			t.Fatalf("UpdatedAt=%s, want %s (Tx.Now)", got.UpdatedAt, t0)
		}
		got.UpdatedAt = time.Time{}
		if !got.DisabledAt.Equal(want.DisabledAt) || !got.FailingSince.Equal(want.FailingSince) || !got.LastSuccessAt.Equal(want.LastSuccessAt) {
			t.Fatalf("WebhookEndpoint times=%+v, want %+v", got, want)
		}
		got.DisabledAt, got.FailingSince, got.LastSuccessAt = want.DisabledAt, want.FailingSince, want.LastSuccessAt
		if got != want {
			t.Fatalf("WebhookEndpoint=%+v, want %+v", got, want)
		}
		return nil
	})
}

func testPurgeDoneDeliveries(t *testing.T, open Opener) {
	e := newEnv(t, open)
	// Deliveries 1..3 are done at t0+1m, +2m and +3m, 4 dies at t0+4m and
	// 5 stays pending.
	e.update(func(tx store.Tx) error {
		for i := 1; i <= 5; i++ {
			if err := tx.InsertDelivery(delivery(i, paymentID(i), uint64(i), pay.EffectRetention, "")); err != nil {
				return err
			}
		}
		return nil
	})
	for i, state := range []string{pay.DeliveryDone, pay.DeliveryDone, pay.DeliveryDone, pay.DeliveryDead} {
		e.clock.Add(time.Minute)
		e.update(func(tx store.Tx) error {
			d, err := tx.Delivery(delivery(i+1, "", 0, "", "").ID)
			if err != nil {
				return err
			}
			d.State, d.Attempts = state, 1
			return tx.UpdateDelivery(d)
		})
	}
	purge := func(before time.Time, limit int) int {
		t.Helper()
		var n int
		e.update(func(tx store.Tx) (err error) { n, err = tx.PurgeDoneDeliveries(before, limit); return err })
		return n
	}
	list := func(state string) []pay.Delivery {
		t.Helper()
		var ds []pay.Delivery
		e.view(func(tx store.Tx) (err error) {
			ds, _, err = tx.ListDeliveries(pay.DeliveryFilter{State: state, Limit: 10})
			return err
		})
		return ds
	}

	if got, want := purge(t0.Add(time.Hour), 1), 1; got != want {
		t.Fatalf("PurgeDoneDeliveries(limit 1)=%d, want %d", got, want)
	}
	wantDeliveries(t, "done after a purge of one", list(pay.DeliveryDone), 2, 3)
	// Strictly before: delivery 3, done at t0+3m, is kept.
	if got, want := purge(t0.Add(3*time.Minute), 10), 1; got != want {
		t.Fatalf("PurgeDoneDeliveries(t0+3m)=%d, want %d", got, want)
	}
	wantDeliveries(t, "done after a purge before t0+3m", list(pay.DeliveryDone), 3)
	if got, want := purge(t0.Add(time.Hour), 10), 1; got != want {
		t.Fatalf("PurgeDoneDeliveries(t0+1h)=%d, want %d", got, want)
	}
	// Dead letters and pending deliveries are kept.
	wantDeliveries(t, "done after every purge", list(pay.DeliveryDone))
	wantDeliveries(t, "dead", list(pay.DeliveryDead), 4)
	wantDeliveries(t, "pending", list(pay.DeliveryPending), 5)
	e.view(func(tx store.Tx) error {
		_, err := tx.Delivery(delivery(1, "", 0, "", "").ID)
		wantCode(t, err, pay.ENOTFOUND)
		n, err := tx.CountDeliveries(pay.DeliveryDone)
		if err != nil {
			return err
		}
		if n != 0 {
			t.Fatalf("CountDeliveries(done)=%d after the purge, want 0", n)
		}
		return nil
	})
	if err := e.tryUpdate(func(tx store.Tx) error { _, err := tx.PurgeDoneDeliveries(t0.Add(time.Hour), 0); return err }); pay.ErrorCode(err) != pay.EINVALID {
		t.Fatalf("PurgeDoneDeliveries(limit 0): error %v, want code %s", err, pay.EINVALID)
	}
}
