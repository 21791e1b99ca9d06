package sweeper_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// TestSweeper_OutboxRetention: past ripple.retention the sweeper purges
// delivered outbox records with their effects' dedupe keys, never one
// with a delivery pending, and verify, which learns the purge horizon from
// the store, still finds the database clean.
func TestSweeper_OutboxRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	const keep = 48 * time.Hour
	e.sw.OutboxRetention = keep // ProcessedRetention stays at 30 days

	// Two payments captured a minute apart, each with its outbox record,
	// fanned out to the loyalty effect: a's delivery is done, b's pending.
	a := e.create("mock", 1000)
	e.clock.Add(time.Minute)
	b := e.create("mock", 2000)
	if a.Status != pay.Captured || b.Status != pay.Captured {
		t.Fatalf("statuses %s and %s, want captured", a.Status, b.Status)
	}
	var recs []pay.OutboxRecord
	e.update(func(tx store.Tx) error {
		var err error
		if recs, err = tx.OutboxAfter(0, 100); err != nil {
			return err
		}
		for i, r := range recs {
			d := pay.Delivery{
				ID: fmt.Sprintf("dlv_%d", i), Effect: pay.EffectLoyalty, EventID: r.ID, EventType: r.Type,
				EventSeq: r.Seq, EventAt: r.CreatedAt, PaymentID: r.PaymentID, State: pay.DeliveryPending,
			}
			if r.PaymentID == a.ID {
				d.State = pay.DeliveryDone
			}
			if err := tx.InsertDelivery(d); err != nil {
				return err
			}
			if err := tx.PutEffect(store.EffectRecord{Key: pay.EffectLoyalty + ":" + r.ID, DeliveryID: d.ID, Points: 10}); err != nil {
				return err
			}
		}
		return tx.SetRippleCursor(recs[len(recs)-1].Seq)
	})
	if len(recs) != 2 {
		t.Fatalf("%d outbox records, want 2 (one capture each)", len(recs))
	}
	outbox := func(id string) int {
		t.Helper()
		var n int
		e.view(func(tx store.Tx) error { rs, err := tx.OutboxForPayment(id); n = len(rs); return err })
		return n
	}
	clean := func(when string) {
		t.Helper()
		rep, err := verify.Run(e.ctx, e.db)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Mismatches {
			t.Errorf("verify %s: %s", when, m)
		}
	}

	// Within the retention nothing goes.
	e.clock.Add(keep - 2*time.Minute)
	if rep := e.pass(); rep.PurgedOutbox != 0 {
		t.Fatalf("report=%+v, want no outbox record purged within the retention", rep)
	}

	// Past it: a's record and its dedupe key; b's waits for its delivery.
	e.clock.Add(time.Hour)
	if rep := e.pass(); rep.PurgedOutbox != 1 || rep.PurgedDeliveries != 1 {
		t.Fatalf("report=%+v, want a's outbox record and its done delivery purged", rep)
	}
	if got, want := outbox(a.ID), 0; got != want {
		t.Fatalf("a has %d outbox records, want %d", got, want)
	}
	if got, want := outbox(b.ID), 1; got != want {
		t.Fatalf("b has %d outbox records with its delivery pending, want %d", got, want)
	}
	e.view(func(tx store.Tx) error {
		if _, ok, err := tx.Effect(pay.EffectLoyalty + ":" + recs[0].ID); err != nil || ok {
			t.Fatalf("a's dedupe key: kept=%v, %v; want it gone with the record", ok, err)
		}
		if _, ok, err := tx.Effect(pay.EffectLoyalty + ":" + recs[1].ID); err != nil || !ok {
			t.Fatalf("b's dedupe key: kept=%v, %v; want it kept", ok, err)
		}
		return nil
	})
	clean("after the first purge")

	// b's delivery is done: its record goes at the next pass.
	e.update(func(tx store.Tx) error {
		d, err := tx.Delivery("dlv_1")
		if err != nil {
			return err
		}
		d.State = pay.DeliveryDone
		return tx.UpdateDelivery(d)
	})
	if rep := e.pass(); rep.PurgedOutbox != 1 {
		t.Fatalf("report=%+v, want b's outbox record purged", rep)
	}
	if got, want := outbox(b.ID), 0; got != want {
		t.Fatalf("b has %d outbox records, want %d", got, want)
	}
	clean("after both purges")
	if rep := e.pass(); rep.PurgedOutbox != 0 {
		t.Fatalf("report=%+v, want nothing more", rep)
	}
}
