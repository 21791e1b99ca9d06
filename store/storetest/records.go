package storetest

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

func testTimeline(t *testing.T, open Opener) {
	t.Run("Seq", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		a, b := paymentID(1), paymentID(2)
		updateEach(e, []pay.Step{
			{PaymentID: a, Seq: 99, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1},
			{PaymentID: b, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1},
			{PaymentID: a, Source: pay.SourceWebhook, Kind: pay.StepTransition, From: pay.Created, To: pay.Captured, Version: 2, EventID: "evt_1", At: t0.Add(time.Second)},
		}, store.Tx.AppendStep)
		e.clock.Add(time.Minute)
		e.update(func(tx store.Tx) error {
			return tx.AppendStep(pay.Step{PaymentID: a, Source: pay.SourceWebhook, Kind: pay.StepDuplicate, Version: 2, EventID: "evt_2", Note: "again"})
		})

		e.view(func(tx store.Tx) error {
			steps, err := tx.Steps(a)
			if err != nil {
				return err
			}
			if got, want := len(steps), 3; got != want {
				t.Fatalf("len(Steps)=%d, want %d", got, want)
			}
			for i, s := range steps {
				if got, want := s.Seq, uint64(i+1); got != want {
					t.Fatalf("Steps[%d].Seq=%d, want %d", i, got, want)
				}
				if got, want := s.PaymentID, a; got != want {
					t.Fatalf("Steps[%d].PaymentID=%s, want %s", i, got, want)
				}
			}
			if got, want := steps[0].At, t0; !got.Equal(want) {
				t.Fatalf("Steps[0].At=%s, want %s (Tx.Now)", got, want)
			}
			if got, want := steps[1].At, t0.Add(time.Second); !got.Equal(want) {
				t.Fatalf("Steps[1].At=%s, want %s", got, want)
			}
			if got, want := steps[2].At, t0.Add(time.Minute); !got.Equal(want) {
				t.Fatalf("Steps[2].At=%s, want %s (Tx.Now)", got, want)
			}
			s := steps[1]
			if s.Source != pay.SourceWebhook || s.Kind != pay.StepTransition || s.From != pay.Created || s.To != pay.Captured || s.Version != 2 || s.EventID != "evt_1" {
				t.Fatalf("Steps[1]=%+v, want the webhook transition", s)
			}
			if got, want := steps[2].Note, "again"; got != want {
				t.Fatalf("Steps[2].Note=%q, want %q", got, want)
			}

			steps, err = tx.Steps(b)
			if err != nil {
				return err
			}
			if got, want := len(steps), 1; got != want {
				t.Fatalf("len(Steps(b))=%d, want %d", got, want)
			}
			if got, want := steps[0].Seq, uint64(1); got != want {
				t.Fatalf("Steps(b)[0].Seq=%d, want %d", got, want)
			}

			steps, err = tx.Steps(paymentID(3))
			if err != nil {
				return err
			}
			if got, want := len(steps), 0; got != want {
				t.Fatalf("len(Steps(unknown))=%d, want %d", got, want)
			}
			return nil
		})
	})

	t.Run("PrefixID", func(t *testing.T) {
		// One id that is a prefix of another keeps its own timeline.
		t.Parallel()
		e := newEnv(t, open)
		updateEach(e, []string{"pay_a", "pay_ab", "pay_a", "pay_abc"}, func(tx store.Tx, id string) error {
			return tx.AppendStep(pay.Step{PaymentID: id, Kind: pay.StepUpdate})
		})
		e.view(func(tx store.Tx) error {
			for id, want := range map[string]int{"pay_a": 2, "pay_ab": 1, "pay_abc": 1} {
				steps, err := tx.Steps(id)
				if err != nil {
					return err
				}
				if got := len(steps); got != want {
					t.Fatalf("len(Steps(%s))=%d, want %d", id, got, want)
				}
			}
			return nil
		})
	})
}

func testInbox(t *testing.T, open Opener) {
	ev := func(id string, paymentID string, received time.Time) pay.InboxEvent {
		return pay.InboxEvent{
			Provider: "mock", EventID: id, Type: "payment.captured", PaymentID: paymentID,
			ProviderRef: "pi_" + paymentID, Status: pay.Captured, OccurredAt: received.Add(-time.Second),
			ReceivedAt: received, Body: []byte(`{"id":"` + id + `"}`),
		}
	}
	// pending returns the event ids PendingInbox lists at due.
	pending := func(t *testing.T, e *env, due time.Time, limit int) []string {
		t.Helper()
		var out []string
		e.view(func(tx store.Tx) error {
			evs, err := tx.PendingInbox(due, limit)
			for _, ev := range evs {
				out = append(out, ev.EventID)
			}
			return err
		})
		return out
	}
	wantEvents := func(t *testing.T, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("events=%v, want %v", got, want)
		}
	}

	t.Run("PutInbox", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		want := ev("evt_1", paymentID(1), t0)
		want.SecondRef = "pi_second" // a Checkout Session's PaymentIntent
		var first, second, other bool
		e.update(func(tx store.Tx) (err error) {
			if first, err = tx.PutInbox(want); err != nil {
				return err
			}
			dup := want
			dup.Type, dup.Body = "payment.failed", []byte("{}")
			if second, err = tx.PutInbox(dup); err != nil {
				return err
			}
			dup.Provider = "stripe" // the same id at another provider is another event
			other, err = tx.PutInbox(dup)
			return err
		})
		if !first || second || !other {
			t.Fatalf("PutInbox=%t, then %t, other provider %t; want true, false, true", first, second, other)
		}
		e.view(func(tx store.Tx) error {
			got, err := tx.InboxEvent("mock", "evt_1")
			if err != nil {
				return err
			}
			if got.Type != want.Type || !bytes.Equal(got.Body, want.Body) || got.PaymentID != want.PaymentID ||
				got.ProviderRef != want.ProviderRef || got.SecondRef != want.SecondRef || got.Status != want.Status || !got.OccurredAt.Equal(want.OccurredAt) ||
				!got.ReceivedAt.Equal(want.ReceivedAt) || got.Processed || got.Attempts != 0 {
				t.Fatalf("InboxEvent=%+v, want %+v", got, want)
			}
			if !got.NextAttemptAt.Equal(want.ReceivedAt) {
				t.Fatalf("NextAttemptAt=%s, want ReceivedAt %s", got.NextAttemptAt, want.ReceivedAt)
			}
			if ok, err := tx.IsProcessed("mock", "evt_1"); err != nil || ok {
				t.Fatalf("IsProcessed=%t, %v; want false", ok, err)
			}
			_, err = tx.InboxEvent("mock", "evt_2")
			wantCode(t, err, pay.ENOTFOUND)
			_, err = tx.InboxEvent("other", "evt_1")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})
	})

	t.Run("ReceivedAtDefault", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error { return putInbox(tx, pay.InboxEvent{Provider: "mock", EventID: "evt_1"}) })
		e.view(func(tx store.Tx) error {
			got, err := tx.InboxEvent("mock", "evt_1")
			if err != nil {
				return err
			}
			if !got.ReceivedAt.Equal(t0) || !got.NextAttemptAt.Equal(t0) {
				t.Fatalf("ReceivedAt=%s, NextAttemptAt=%s; want both %s (Tx.Now)", got.ReceivedAt, got.NextAttemptAt, t0)
			}
			return nil
		})
		wantEvents(t, pending(t, e, t0, 10), "evt_1")
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error {
			_, err := tx.PutInbox(pay.InboxEvent{Provider: "mock"})
			wantCode(t, err, pay.EINVALID)
			_, err = tx.PutInbox(pay.InboxEvent{EventID: "evt_1"})
			wantCode(t, err, pay.EINVALID)
			return nil
		})
	})

	t.Run("InboxForPayment", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		updateEach(e, []pay.InboxEvent{
			ev("evt_3", paymentID(1), t0.Add(3*time.Second)),
			ev("evt_1", paymentID(1), t0.Add(1*time.Second)),
			ev("evt_2", paymentID(2), t0.Add(2*time.Second)),
			ev("evt_4", "", t0), // orphan: no payment yet
			ev("evt_0", paymentID(1), t0.Add(2*time.Second)),
		}, func(tx store.Tx, x pay.InboxEvent) error {
			return putInbox(tx, x)
		})
		e.view(func(tx store.Tx) error {
			for id, want := range map[string][]string{
				paymentID(1): {"evt_1", "evt_0", "evt_3"},
				paymentID(2): {"evt_2"},
				paymentID(3): nil,
			} {
				evs, err := tx.InboxForPayment(id)
				if err != nil {
					return err
				}
				var got []string
				for _, ev := range evs {
					got = append(got, ev.EventID)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("InboxForPayment(%s)=%v, want %v", id, got, want)
				}
			}
			return nil
		})
	})

	t.Run("PendingInbox", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error {
			for i, at := range []time.Duration{3, 1, 2, 5} {
				x := ev(fmt.Sprintf("evt_%d", i), paymentID(1), t0.Add(at*time.Second))
				if err := putInbox(tx, x); err != nil {
					return err
				}
			}
			return nil
		})
		wantEvents(t, pending(t, e, t0.Add(10*time.Second), 10), "evt_1", "evt_2", "evt_0", "evt_3")
		wantEvents(t, pending(t, e, t0.Add(2*time.Second), 10), "evt_1", "evt_2") // due at or before
		wantEvents(t, pending(t, e, t0.Add(10*time.Second), 2), "evt_1", "evt_2")
		wantEvents(t, pending(t, e, t0, 10))
		e.view(func(tx store.Tx) error {
			_, err := tx.PendingInbox(t0, 0)
			wantCode(t, err, pay.EINVALID)
			return nil
		})
	})

	t.Run("DeferInbox", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error {
			if err := putInbox(tx, ev("evt_1", paymentID(1), t0)); err != nil {
				return err
			}
			return putInbox(tx, ev("evt_2", paymentID(1), t0.Add(time.Second)))
		})
		e.update(func(tx store.Tx) error { return tx.DeferInbox("mock", "evt_1", t0.Add(time.Minute), "lease held") })
		e.update(func(tx store.Tx) error {
			return tx.DeferInbox("mock", "evt_1", t0.Add(2*time.Minute), "lease held again")
		})
		e.view(func(tx store.Tx) error {
			got, err := tx.InboxEvent("mock", "evt_1")
			if err != nil {
				return err
			}
			if got, want := got.Attempts, 2; got != want {
				t.Fatalf("Attempts=%d, want %d", got, want)
			}
			if got, want := got.LastError, "lease held again"; got != want {
				t.Fatalf("LastError=%q, want %q", got, want)
			}
			if got, want := got.NextAttemptAt, t0.Add(2*time.Minute); !got.Equal(want) {
				t.Fatalf("NextAttemptAt=%s, want %s", got, want)
			}
			if got.Processed {
				t.Fatal("Processed=true, want false")
			}
			return nil
		})
		wantEvents(t, pending(t, e, t0.Add(time.Minute), 10), "evt_2")
		wantEvents(t, pending(t, e, t0.Add(2*time.Minute), 10), "evt_2", "evt_1")

		wantCode(t, e.tryUpdate(func(tx store.Tx) error {
			return tx.DeferInbox("mock", "evt_9", t0.Add(time.Minute), "x")
		}), pay.ENOTFOUND)
	})

	t.Run("MarkProcessed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error {
			if err := putInbox(tx, ev("evt_1", paymentID(1), t0)); err != nil {
				return err
			}
			return putInbox(tx, ev("evt_2", paymentID(1), t0))
		})
		e.clock.Add(time.Minute)
		e.update(func(tx store.Tx) error { return tx.MarkProcessed("mock", "evt_1") })
		e.update(func(tx store.Tx) error { return tx.MarkProcessed("mock", "evt_1") }) // again: no harm
		e.view(func(tx store.Tx) error {
			if ok, err := tx.IsProcessed("mock", "evt_1"); err != nil || !ok {
				t.Fatalf("IsProcessed(evt_1)=%t, %v; want true", ok, err)
			}
			if ok, err := tx.IsProcessed("mock", "evt_2"); err != nil || ok {
				t.Fatalf("IsProcessed(evt_2)=%t, %v; want false", ok, err)
			}
			if ok, err := tx.IsProcessed("stripe", "evt_1"); err != nil || ok {
				t.Fatalf("IsProcessed(stripe, evt_1)=%t, %v; want false", ok, err)
			}
			got, err := tx.InboxEvent("mock", "evt_1")
			if err != nil {
				return err
			}
			if !got.Processed {
				t.Fatal("Processed=false, want true")
			}
			// Still archived for the payment.
			evs, err := tx.InboxForPayment(paymentID(1))
			if err != nil {
				return err
			}
			if got, want := len(evs), 2; got != want {
				t.Fatalf("len(InboxForPayment)=%d, want %d", got, want)
			}
			return nil
		})
		wantEvents(t, pending(t, e, t0.Add(time.Hour), 10), "evt_2")

		// Deferring a processed event leaves it processed.
		e.update(func(tx store.Tx) error { return tx.DeferInbox("mock", "evt_1", t0.Add(time.Hour), "late") })
		wantEvents(t, pending(t, e, t0.Add(2*time.Hour), 10), "evt_2")
	})

	t.Run("MarkProcessedNotInInbox", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error { return tx.MarkProcessed("mock", "evt_1") })
		e.view(func(tx store.Tx) error {
			if ok, err := tx.IsProcessed("mock", "evt_1"); err != nil || !ok {
				t.Fatalf("IsProcessed=%t, %v; want true", ok, err)
			}
			_, err := tx.InboxEvent("mock", "evt_1")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})

		// The event arrives later: archived as processed, not pending.
		var stored bool
		e.update(func(tx store.Tx) (err error) { stored, err = tx.PutInbox(ev("evt_1", paymentID(1), t0)); return err })
		if !stored {
			t.Fatal("PutInbox=false, want true")
		}
		e.view(func(tx store.Tx) error {
			got, err := tx.InboxEvent("mock", "evt_1")
			if err != nil {
				return err
			}
			if !got.Processed {
				t.Fatal("Processed=false, want true")
			}
			return nil
		})
		wantEvents(t, pending(t, e, t0.Add(time.Hour), 10))
	})
}

func testLease(t *testing.T, open Opener) {
	const ttl = 30 * time.Second
	acquire := func(e *env, id, holder string) (pay.Lease, error) {
		var l pay.Lease
		err := e.tryUpdate(func(tx store.Tx) (err error) { l, err = tx.AcquireLease(id, holder, ttl); return err })
		return l, err
	}
	lease := func(t *testing.T, e *env, id string) pay.Lease {
		t.Helper()
		var l pay.Lease
		e.view(func(tx store.Tx) (err error) { l, err = tx.Lease(id); return err })
		return l
	}
	id := paymentID(1)

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		got, err := acquire(e, id, "sweeper")
		if err != nil {
			t.Fatal(err)
		}
		want := pay.Lease{PaymentID: id, Holder: "sweeper", Token: 1, ExpiresAt: t0.Add(ttl)}
		for _, l := range []pay.Lease{got, lease(t, e, id)} {
			if l.PaymentID != want.PaymentID || l.Holder != want.Holder || l.Token != want.Token || !l.ExpiresAt.Equal(want.ExpiresAt) {
				t.Fatalf("Lease=%+v, want %+v", l, want)
			}
			if !l.Held(t0) {
				t.Fatal("Held=false, want true")
			}
		}
	})

	t.Run("NeverTaken", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		l := lease(t, e, id)
		if got, want := l.Token, uint64(0); got != want {
			t.Fatalf("Token=%d, want %d", got, want)
		}
		if got, want := l.PaymentID, id; got != want {
			t.Fatalf("PaymentID=%s, want %s", got, want)
		}
		if l.Held(t0) {
			t.Fatal("Held=true, want false")
		}
	})

	t.Run("ErrLeaseHeld", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		if _, err := acquire(e, id, "sweeper"); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(ttl - time.Microsecond)
		_, err := acquire(e, id, "webhook")
		wantCode(t, err, pay.ELEASEHELD)
		_, err = acquire(e, id, "sweeper") // its own holder too
		wantCode(t, err, pay.ELEASEHELD)
		if got, want := lease(t, e, id).Token, uint64(1); got != want {
			t.Fatalf("Token=%d, want %d", got, want)
		}
		// Leases are per payment.
		if l, err := acquire(e, paymentID(2), "webhook"); err != nil || l.Token != 1 {
			t.Fatalf("AcquireLease(other payment)=%+v, %v; want token 1", l, err)
		}
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		first, err := acquire(e, id, "sweeper")
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Add(ttl) // exactly at ExpiresAt: no longer held
		second, err := acquire(e, id, "webhook")
		if err != nil {
			t.Fatal(err)
		}
		if second.Token <= first.Token {
			t.Fatalf("Token=%d after %d, want higher", second.Token, first.Token)
		}
		if got, want := second.Holder, "webhook"; got != want {
			t.Fatalf("Holder=%s, want %s", got, want)
		}
		if got, want := second.ExpiresAt, t0.Add(2*ttl); !got.Equal(want) {
			t.Fatalf("ExpiresAt=%s, want %s", got, want)
		}

		// The old holder's release is stale and changes nothing.
		e.update(func(tx store.Tx) error { return tx.ReleaseLease(id, first.Token) })
		_, err = acquire(e, id, "sweeper")
		wantCode(t, err, pay.ELEASEHELD)
		if got := lease(t, e, id); got.Token != second.Token || got.Holder != "webhook" || !got.Held(e.clock.Now()) {
			t.Fatalf("Lease=%+v, want the webhook's lease in force", got)
		}
	})

	t.Run("ReleaseLease", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		l, err := acquire(e, id, "sweeper")
		if err != nil {
			t.Fatal(err)
		}
		e.update(func(tx store.Tx) error { return tx.ReleaseLease(id, l.Token+1) }) // not a token given out
		if got := lease(t, e, id); !got.Held(t0) {
			t.Fatal("a wrong token released the lease")
		}
		e.update(func(tx store.Tx) error { return tx.ReleaseLease(id, l.Token) })
		got := lease(t, e, id)
		if got.Held(t0) {
			t.Fatalf("Lease=%+v still held after release", got)
		}
		if got.Token != l.Token {
			t.Fatalf("Token=%d after release, want %d (the counter is kept)", got.Token, l.Token)
		}
		next, err := acquire(e, id, "webhook")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := next.Token, l.Token+1; got != want {
			t.Fatalf("Token=%d, want %d", got, want)
		}
		// Releasing a payment never leased is no error.
		e.update(func(tx store.Tx) error { return tx.ReleaseLease(paymentID(9), 1) })
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error {
			_, err := tx.AcquireLease(id, "sweeper", 0)
			wantCode(t, err, pay.EINVALID)
			_, err = tx.AcquireLease(id, "", ttl)
			wantCode(t, err, pay.EINVALID)
			_, err = tx.AcquireLease("", "sweeper", ttl)
			wantCode(t, err, pay.EINVALID)
			return nil
		})
	})
}

func testOutbox(t *testing.T, open Opener) {
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		a, b := paymentID(1), paymentID(2)
		rec := func(id, event string, s pay.Status, v uint64) pay.OutboxRecord {
			return pay.OutboxRecord{
				Seq: 99, ID: event, Type: pay.EventType(s), PaymentID: id, Status: s, From: pay.Processing,
				Version: v, OrderID: "order-1", Amount: 1200, Currency: "EUR",
				Customer: pay.Customer{ID: "cus_1", Email: "ada@example.com"}, Provider: "mock",
			}
		}
		updateEach(e, []pay.OutboxRecord{
			rec(a, "evt_a1", pay.RequiresAction, 2),
			rec(b, "evt_b1", pay.Failed, 2),
		}, store.Tx.AppendOutbox)
		e.clock.Add(time.Minute)
		e.update(func(tx store.Tx) error { return tx.AppendOutbox(rec(a, "evt_a2", pay.Captured, 3)) })

		var ra, rb []pay.OutboxRecord
		e.view(func(tx store.Tx) (err error) {
			if ra, err = tx.OutboxForPayment(a); err != nil {
				return err
			}
			rb, err = tx.OutboxForPayment(b)
			return err
		})
		if got, want := len(ra), 2; got != want {
			t.Fatalf("len(OutboxForPayment(a))=%d, want %d", got, want)
		}
		if got, want := len(rb), 1; got != want {
			t.Fatalf("len(OutboxForPayment(b))=%d, want %d", got, want)
		}
		if ra[0].ID != "evt_a1" || ra[1].ID != "evt_a2" {
			t.Fatalf("ids=%s,%s, want evt_a1,evt_a2", ra[0].ID, ra[1].ID)
		}
		// Seq grows over the whole outbox, in append order.
		if !(ra[0].Seq > 0 && ra[0].Seq < rb[0].Seq && rb[0].Seq < ra[1].Seq) {
			t.Fatalf("Seq a1=%d b1=%d a2=%d, want increasing from 1", ra[0].Seq, rb[0].Seq, ra[1].Seq)
		}
		want := rec(a, "evt_a2", pay.Captured, 3)
		got := ra[1]
		if !got.CreatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("CreatedAt=%s, want %s (Tx.Now)", got.CreatedAt, t0.Add(time.Minute))
		}
		got.Seq, got.CreatedAt, want.Seq = 0, time.Time{}, 0
		if got != want {
			t.Fatalf("OutboxRecord=%+v, want %+v", got, want)
		}

		e.view(func(tx store.Tx) error {
			rs, err := tx.OutboxForPayment(paymentID(3))
			if err != nil {
				return err
			}
			if got, want := len(rs), 0; got != want {
				t.Fatalf("len(OutboxForPayment(unknown))=%d, want %d", got, want)
			}
			return nil
		})
	})
}

func testLedger(t *testing.T, open Opener) {
	balances := func(t *testing.T, e *env) []pay.Balance {
		t.Helper()
		var bs []pay.Balance
		e.view(func(tx store.Tx) (err error) { bs, err = tx.LedgerBalances(); return err })
		return bs
	}

	t.Run("Balances", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		if got := balances(t, e); len(got) != 0 {
			t.Fatalf("LedgerBalances=%v, want none", got)
		}
		first := posting(paymentID(1), "EUR", 1000)
		e.update(func(tx store.Tx) error { return tx.AppendLedger(first) })
		if first[0].Seq == 0 || first[1].Seq <= first[0].Seq {
			t.Fatalf("Seq=%d,%d, want assigned and increasing", first[0].Seq, first[1].Seq)
		}
		e.update(func(tx store.Tx) error {
			if err := tx.AppendLedger(posting(paymentID(2), "EUR", 250)); err != nil {
				return err
			}
			if err := tx.AppendLedger(posting(paymentID(3), "USD", 99)); err != nil {
				return err
			}
			return tx.AppendLedger(posting(paymentID(1), "EUR", -1000)) // refund
		})
		want := []pay.Balance{
			{Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -250},
			{Account: pay.AccountMerchantRevenue, Currency: "USD", Amount: -99},
			{Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 250},
			{Account: pay.AccountPSPReceivable, Currency: "USD", Amount: 99},
		}
		if got := balances(t, e); !slices.Equal(got, want) {
			t.Fatalf("LedgerBalances=%v, want %v", got, want)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		for name, entries := range map[string][]pay.LedgerEntry{
			"Unbalanced": {
				{Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1000},
				{Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -999},
			},
			"CurrenciesMixed": {
				{Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1000},
				{Account: pay.AccountMerchantRevenue, Currency: "USD", Amount: -1000},
			},
			"NoAccount": {
				{Currency: "EUR", Amount: 1000},
				{Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1000},
			},
		} {
			err := e.tryUpdate(func(tx store.Tx) error { return tx.AppendLedger(entries) })
			if got, want := pay.ErrorCode(err), pay.EINVALID; got != want {
				t.Fatalf("%s: error %v: code=%q, want %q", name, err, got, want)
			}
		}
		// A failed posting inside a transaction that commits leaves nothing.
		e.update(func(tx store.Tx) error {
			err := tx.AppendLedger([]pay.LedgerEntry{{Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1}})
			wantCode(t, err, pay.EINVALID)
			return nil
		})
		if got := balances(t, e); len(got) != 0 {
			t.Fatalf("LedgerBalances=%v, want none", got)
		}
	})

	t.Run("Entries", func(t *testing.T) {
		// The journal, paged by Seq: every line once, in order, with its
		// fields and time as written.
		t.Parallel()
		e := newEnv(t, open)
		var want []pay.LedgerEntry
		for i := range 5 {
			lines := posting(paymentID(i), "EUR", int64(100+i))
			for j := range lines {
				lines[j].At = t0.Add(time.Duration(i) * time.Hour)
			}
			e.update(func(tx store.Tx) error { return tx.AppendLedger(lines) })
			want = append(want, lines...)
		}
		var got []pay.LedgerEntry
		for after := uint64(0); ; {
			var page []pay.LedgerEntry
			e.view(func(tx store.Tx) (err error) { page, err = tx.LedgerEntries(after, 3); return err })
			if len(page) > 3 {
				t.Fatalf("LedgerEntries(%d, 3) returned %d lines", after, len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1].Seq
		}
		if len(got) != len(want) {
			t.Fatalf("%d journal lines, want %d", len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Seq != w.Seq || g.PaymentID != w.PaymentID || g.EventID != w.EventID || g.Account != w.Account ||
				g.Currency != w.Currency || g.Amount != w.Amount || !g.At.Equal(w.At) || g.At.Location() != time.UTC {
				t.Fatalf("line %d: %+v, want %+v", i, g, w)
			}
		}
		e.view(func(tx store.Tx) error {
			if rest, err := tx.LedgerEntries(want[len(want)-1].Seq, 10); err != nil || len(rest) != 0 {
				t.Fatalf("LedgerEntries after the last line: %v, %v; want none", rest, err)
			}
			if rest, err := tx.LedgerEntries(math.MaxUint64, 10); err != nil || len(rest) != 0 {
				t.Fatalf("LedgerEntries(MaxUint64): %v, %v; want none", rest, err)
			}
			_, err := tx.LedgerEntries(0, 0)
			wantCode(t, err, pay.EINVALID)
			return nil
		})
	})

	t.Run("ErrOverflow", func(t *testing.T) {
		// A posting that would take a balance past the int64 range is
		// refused, naming the account and currency, and writes none of
		// its lines (the revenue line alone would still fit).
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error { return tx.AppendLedger(posting(paymentID(1), "EUR", math.MaxInt64)) })
		want := balances(t, e)
		for _, amount := range []int64{1, math.MaxInt64} {
			err := e.tryUpdate(func(tx store.Tx) error { return tx.AppendLedger(posting(paymentID(2), "EUR", amount)) })
			wantCode(t, err, pay.EINVALID)
			for _, part := range []string{pay.AccountPSPReceivable, "EUR"} {
				if !strings.Contains(pay.ErrorMessage(err), part) {
					t.Errorf("overflow of %d: %q does not name %q", amount, pay.ErrorMessage(err), part)
				}
			}
		}
		// Inside a transaction that commits: nothing of it either.
		lines := posting(paymentID(3), "EUR", 1)
		e.update(func(tx store.Tx) error {
			wantCode(t, tx.AppendLedger(lines), pay.EINVALID)
			return tx.AppendLedger(posting(paymentID(4), "USD", 5))
		})
		if lines[0].Seq != 0 || lines[1].Seq != 0 {
			t.Errorf("a refused posting got Seq %d,%d, want none", lines[0].Seq, lines[1].Seq)
		}
		want = append(want, pay.Balance{Account: pay.AccountMerchantRevenue, Currency: "USD", Amount: -5}, pay.Balance{Account: pay.AccountPSPReceivable, Currency: "USD", Amount: 5})
		slices.SortFunc(want, func(a, b pay.Balance) int { return strings.Compare(a.Account+" "+a.Currency, b.Account+" "+b.Currency) })
		if got := balances(t, e); !slices.Equal(got, want) {
			t.Fatalf("LedgerBalances=%v, want %v", got, want)
		}
	})
}

func testReview(t *testing.T, open Opener) {
	list := func(t *testing.T, e *env) []string {
		t.Helper()
		var out []string
		e.view(func(tx store.Tx) error {
			items, err := tx.ListReview()
			for _, it := range items {
				out = append(out, it.ID)
			}
			return err
		})
		return out
	}

	t.Run("CRUD", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		a := pay.ReviewItem{
			ID: paymentID(1), PaymentID: paymentID(1), Reason: pay.ReasonConflictingTerminal, Provider: "mock",
			ProviderRef: "pi_1", EventID: "evt_1", Observed: pay.Failed, Note: "captured, then failed", LastPSP: "succeeded",
			CreatedAt: t0.Add(time.Minute),
		}
		orphan := pay.ReviewItem{ID: "orphan_mock_evt_2", Reason: pay.ReasonOrphan, Provider: "mock", EventID: "evt_2", CreatedAt: t0}
		e.update(func(tx store.Tx) error {
			if err := tx.PutReview(a); err != nil {
				return err
			}
			return tx.PutReview(orphan)
		})
		if got, want := list(t, e), []string{orphan.ID, a.ID}; !slices.Equal(got, want) {
			t.Fatalf("ListReview=%v, want %v (oldest first)", got, want)
		}
		e.view(func(tx store.Tx) error {
			got, err := tx.Review(a.ID)
			if err != nil {
				return err
			}
			if !got.CreatedAt.Equal(a.CreatedAt) {
				t.Fatalf("CreatedAt=%s, want %s", got.CreatedAt, a.CreatedAt)
			}
			got.CreatedAt = a.CreatedAt
			if got != a {
				t.Fatalf("Review=%+v, want %+v", got, a)
			}
			return nil
		})

		// Replace; a zero CreatedAt keeps the stored one.
		e.clock.Add(time.Hour)
		b := a
		b.Note, b.LastPSP, b.CreatedAt = "asked again", "canceled", time.Time{}
		e.update(func(tx store.Tx) error { return tx.PutReview(b) })
		if got, want := list(t, e), []string{orphan.ID, a.ID}; !slices.Equal(got, want) {
			t.Fatalf("ListReview=%v, want %v", got, want)
		}
		e.view(func(tx store.Tx) error {
			got, err := tx.Review(a.ID)
			if err != nil {
				return err
			}
			if got.Note != b.Note || got.LastPSP != b.LastPSP || !got.CreatedAt.Equal(a.CreatedAt) {
				t.Fatalf("Review=%+v, want note %q, last PSP %q, created %s", got, b.Note, b.LastPSP, a.CreatedAt)
			}
			return nil
		})

		// Replace with a new time: the order follows.
		c := orphan
		c.CreatedAt = t0.Add(2 * time.Minute)
		e.update(func(tx store.Tx) error { return tx.PutReview(c) })
		if got, want := list(t, e), []string{a.ID, orphan.ID}; !slices.Equal(got, want) {
			t.Fatalf("ListReview=%v, want %v", got, want)
		}

		e.update(func(tx store.Tx) error { return tx.DeleteReview(a.ID) })
		if got, want := list(t, e), []string{orphan.ID}; !slices.Equal(got, want) {
			t.Fatalf("ListReview=%v, want %v", got, want)
		}
		e.view(func(tx store.Tx) error {
			_, err := tx.Review(a.ID)
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.DeleteReview(a.ID) }), pay.ENOTFOUND)
	})

	t.Run("CreatedAtDefault", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error { return tx.PutReview(pay.ReviewItem{ID: "r1", Reason: pay.ReasonUnresolved}) })
		e.view(func(tx store.Tx) error {
			got, err := tx.Review("r1")
			if err != nil {
				return err
			}
			if !got.CreatedAt.Equal(t0) {
				t.Fatalf("CreatedAt=%s, want %s (Tx.Now)", got.CreatedAt, t0)
			}
			return nil
		})
	})
}

func testIdemKey(t *testing.T, open Opener) {
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		const key = "create_payment:3f2a:order-1-try"
		e.view(func(tx store.Tx) error {
			_, err := tx.IdemKey(key)
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})

		inFlight := pay.IdemRecord{
			Key: key, Fingerprint: "ab12", State: pay.IdemInFlight, Owner: "host-1",
			LockedUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(24 * time.Hour),
		}
		e.update(func(tx store.Tx) error { return tx.PutIdemKey(inFlight) })
		e.view(func(tx store.Tx) error {
			got, err := tx.IdemKey(key)
			if err != nil {
				return err
			}
			if got.State != pay.IdemInFlight || got.Owner != "host-1" || got.Fingerprint != "ab12" ||
				!got.LockedUntil.Equal(inFlight.LockedUntil) || !got.ExpiresAt.Equal(inFlight.ExpiresAt) || !got.CreatedAt.Equal(t0) {
				t.Fatalf("IdemKey=%+v, want %+v created at %s", got, inFlight, t0)
			}
			return nil
		})

		done := inFlight
		done.State, done.PaymentID, done.StatusCode, done.Body, done.CreatedAt = pay.IdemDone, paymentID(1), 201, []byte(`{"id":"pay_1"}`), t0
		e.update(func(tx store.Tx) error { return tx.PutIdemKey(done) })
		e.view(func(tx store.Tx) error {
			got, err := tx.IdemKey(key)
			if err != nil {
				return err
			}
			if got.State != pay.IdemDone || got.PaymentID != done.PaymentID || got.StatusCode != 201 || !bytes.Equal(got.Body, done.Body) {
				t.Fatalf("IdemKey=%+v, want %+v", got, done)
			}
			_, err = tx.IdemKey(key + "x")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.PutIdemKey(pay.IdemRecord{}) }), pay.EINVALID)
	})
}

// testClaimIdemKey: a claim stores a record for a free key only and
// otherwise returns the record there, unchanged; a claim rolled back
// leaves the key free; of concurrent claims of one key, one wins and the
// others find its record.
func testClaimIdemKey(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	rec := func(key, owner string) pay.IdemRecord {
		return pay.IdemRecord{Key: key, Fingerprint: "fp", State: pay.IdemInFlight, Owner: owner,
			LockedUntil: t0.Add(time.Minute), PaymentID: paymentID(1), ExpiresAt: t0.Add(24 * time.Hour)}
	}
	claim := func(r pay.IdemRecord) (stored pay.IdemRecord, claimed bool, err error) {
		err = e.tryUpdate(func(tx store.Tx) (err error) {
			stored, claimed, err = tx.ClaimIdemKey(r)
			return err
		})
		return stored, claimed, err
	}
	rolledBack := e.tryUpdate(func(tx store.Tx) error {
		if _, ok, err := tx.ClaimIdemKey(rec("create:merchant:k0", "rolled-back")); err != nil || !ok {
			return fmt.Errorf("claim of a free key: claimed=%v, %v", ok, err)
		}
		return pay.Errorf(pay.EINVALID, "roll back")
	})
	wantCode(t, rolledBack, pay.EINVALID)
	if _, ok, err := claim(rec("create:merchant:k0", "first")); err != nil || !ok {
		t.Fatalf("claim of a key whose claim rolled back: claimed=%v, %v; want claimed", ok, err)
	}
	stored, ok, err := claim(rec("create:merchant:k0", "second"))
	if err != nil || ok || stored.Owner != "first" || stored.PaymentID != paymentID(1) || !stored.CreatedAt.Equal(t0) {
		t.Fatalf("claim of a claimed key: claimed=%v stored=%+v (%v), want the first claim's record", ok, stored, err)
	}
	_, _, err = claim(pay.IdemRecord{})
	wantCode(t, err, pay.EINVALID)

	// At the same time: one claim wins, the others find its record.
	const n = 8
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		owners []string
		start  = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stored, ok, err := claim(rec("create:merchant:k1", fmt.Sprint("owner-", i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("claim %d: %v", i, err)
			case ok:
				owners = append(owners, fmt.Sprint("owner-", i))
			case stored.Owner == "":
				t.Errorf("claim %d lost and found no record", i)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(owners) != 1 {
		t.Fatalf("%d concurrent claims of one key: %v stored it, want one", n, owners)
	}
	e.view(func(tx store.Tx) error {
		r, err := tx.IdemKey("create:merchant:k1")
		if err == nil && r.Owner != owners[0] {
			t.Fatalf("record after the claims: owner %q, want the winner %q", r.Owner, owners[0])
		}
		return err
	})
}
