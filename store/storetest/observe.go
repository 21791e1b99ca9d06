package storetest

import (
	"context"
	"maps"
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// testPaymentCounts: the counts follow inserts and every status change,
// a status with no payment is left out, and a rolled-back write counts
// nothing.
func testPaymentCounts(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	counts := func() map[pay.Status]int {
		t.Helper()
		var c map[pay.Status]int
		e.view(func(tx store.Tx) (err error) { c, err = tx.PaymentCounts(); return err })
		return c
	}
	want := func(what string, w map[pay.Status]int) {
		t.Helper()
		if got := counts(); !maps.Equal(got, w) {
			t.Fatalf("%s: PaymentCounts=%v, want %v", what, got, w)
		}
	}

	want("empty store", map[pay.Status]int{})
	for i := range 5 {
		e.insert(newPayment(i, t0))
	}
	want("5 created", map[pay.Status]int{pay.Created: 5})

	at := t0.Add(1)
	e.move(paymentID(0), pay.Processing, at)
	e.move(paymentID(1), pay.Captured, at)
	e.move(paymentID(2), pay.Captured, at)
	e.move(paymentID(3), pay.Failed, at)
	want("moved", map[pay.Status]int{pay.Created: 1, pay.Processing: 1, pay.Captured: 2, pay.Failed: 1})
	e.move(paymentID(1), pay.Refunded, at.Add(1))
	e.move(paymentID(0), pay.Captured, at.Add(1))
	want("moved again", map[pay.Status]int{pay.Created: 1, pay.Captured: 2, pay.Failed: 1, pay.Refunded: 1})

	// A write that rolls back leaves the counts as they were.
	err := e.tryUpdate(func(tx store.Tx) error {
		if err := tx.InsertPayment(newPayment(9, t0)); err != nil {
			return err
		}
		return pay.Errorf(pay.EINVALID, "roll back")
	})
	wantCode(t, err, pay.EINVALID)
	want("after a rollback", map[pay.Status]int{pay.Created: 1, pay.Captured: 2, pay.Failed: 1, pay.Refunded: 1})
}

// testWriteProbe: the probe commits in a write transaction, as often as
// it is made, and changes nothing a reader of payments sees; it is a real
// write, which a read-only transaction refuses.
func testWriteProbe(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	if err := e.s.View(context.Background(), store.Tx.WriteProbe); err == nil {
		t.Fatal("WriteProbe in a read-only transaction: no error, want the write refused")
	}
	e.insert(newPayment(1, t0))
	for range 3 {
		e.update(store.Tx.WriteProbe)
		e.clock.Add(1)
	}
	var c map[pay.Status]int
	e.view(func(tx store.Tx) (err error) { c, err = tx.PaymentCounts(); return err })
	if got, want := c[pay.Created], 1; got != want || len(c) != 1 {
		t.Fatalf("after probes: PaymentCounts=%v, want only %d created", c, want)
	}
	samePayment(t, e.payment(paymentID(1)), newPayment(1, t0))
}
