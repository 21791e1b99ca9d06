package bolt_test

import (
	"context"
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// TestDB_TimelineGrows: a timeline is one value whose array head grows from
// one byte to two (24 steps) and three (256): 300 steps appended one by
// one, in transactions of their own and several in one, read back in
// order, each with its Seq, and the file passes its check (bolttest).
func TestDB_TimelineGrows(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	ctx := context.Background()
	const id = "pay_01KB0000000000000000000001"
	for i := 0; i < 300; {
		first, n := i, min(1+i%3, 300-i)
		err := db.Update(ctx, func(tx store.Tx) error {
			i = first // the function may run again
			for range n {
				if err := tx.AppendStep(pay.Step{PaymentID: id, Source: pay.SourceSync, Kind: pay.StepTransition, Version: uint64(i + 1)}); err != nil {
					return err
				}
				i++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var steps []pay.Step
	if err := db.View(ctx, func(tx store.Tx) (err error) { steps, err = tx.Steps(id); return err }); err != nil {
		t.Fatal(err)
	}
	if got, want := len(steps), 300; got != want {
		t.Fatalf("%d steps, want %d", got, want)
	}
	for i, s := range steps {
		if s.Seq != uint64(i+1) || s.Version != uint64(i+1) || s.PaymentID != id {
			t.Fatalf("step %d: Seq=%d Version=%d PaymentID=%s, want %d, %d, %s", i, s.Seq, s.Version, s.PaymentID, i+1, i+1, id)
		}
	}
}
