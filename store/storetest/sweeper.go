package storetest

// The tests of what the sweeper relies on: candidates in pages, the
// purges of idempotency keys, processed ids and delivered outbox records
// through their time indexes, and the last PSP answer per payment.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

func testCandidatesAfter(t *testing.T, open Opener) {
	sweep := []pay.Status{pay.FinalizePending, pay.Expired, pay.Processing, pay.RequiresAction}

	// setup stores payments 0..9: 0..7 updated at t0+i minutes in the
	// status listed, 8 and 9 updated at the same time as 2 (ties go by id).
	setup := func(t *testing.T) *env {
		e := newEnv(t, open)
		statuses := []pay.Status{
			pay.Processing, pay.Captured, pay.FinalizePending, pay.Created,
			pay.Expired, pay.RequiresAction, pay.Failed, pay.Processing,
			pay.Expired, pay.FinalizePending,
		}
		e.update(func(tx store.Tx) error {
			for i, s := range statuses {
				p := newPayment(i, t0)
				p.Status, p.UpdatedAt = s, t0.Add(time.Duration(i)*time.Minute)
				if i >= 8 {
					p.UpdatedAt = t0.Add(2 * time.Minute)
				}
				if err := tx.InsertPayment(p); err != nil {
					return err
				}
			}
			return nil
		})
		return e
	}
	page := func(t *testing.T, e *env, before, afterT time.Time, afterID string, limit int) []pay.Payment {
		t.Helper()
		var ps []pay.Payment
		e.view(func(tx store.Tx) (err error) {
			ps, err = tx.CandidatesAfter(sweep, before, afterT, afterID, limit)
			return err
		})
		return ps
	}

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		// From the start it is Candidates.
		wantIDs(t, page(t, e, t0.Add(time.Hour), time.Time{}, "", 100), 0, 2, 8, 9, 4, 5, 7)
		var all []pay.Payment
		e.view(func(tx store.Tx) (err error) { all, err = tx.Candidates(sweep, t0.Add(time.Hour), 100); return err })
		wantIDs(t, all, 0, 2, 8, 9, 4, 5, 7)
	})

	t.Run("Pages", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		// Pages of two, each after the last payment of the page before,
		// see every candidate once, in order, across equal times.
		var got []string
		var afterT time.Time
		afterID := ""
		for range 10 {
			ps := page(t, e, t0.Add(time.Hour), afterT, afterID, 2)
			got = append(got, ids(ps)...)
			if len(ps) < 2 {
				break
			}
			afterT, afterID = ps[len(ps)-1].UpdatedAt, ps[len(ps)-1].ID
		}
		want := []string{paymentID(0), paymentID(2), paymentID(8), paymentID(9), paymentID(4), paymentID(5), paymentID(7)}
		if !slices.Equal(got, want) {
			t.Fatalf("pages=%v, want %v", got, want)
		}
		// Strictly after: the cursor payment itself is not repeated.
		wantIDs(t, page(t, e, t0.Add(time.Hour), t0.Add(2*time.Minute), paymentID(8), 100), 9, 4, 5, 7)
		wantIDs(t, page(t, e, t0.Add(time.Hour), t0.Add(7*time.Minute), paymentID(7), 100))
	})

	t.Run("Bound", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		wantIDs(t, page(t, e, t0.Add(5*time.Minute), t0, paymentID(0), 100), 2, 8, 9, 4)
		wantIDs(t, page(t, e, t0.Add(2*time.Minute), time.Time{}, "", 100), 0)
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.view(func(tx store.Tx) error {
			_, err := tx.CandidatesAfter(sweep, t0.Add(time.Hour), time.Time{}, "", 0)
			wantCode(t, err, pay.EINVALID)
			_, err = tx.CandidatesAfter([]pay.Status{"paid"}, t0.Add(time.Hour), time.Time{}, "", 10)
			wantCode(t, err, pay.EINVALID)
			return nil
		})
	})
}

func testPurgeIdemKeys(t *testing.T, open Opener) {
	key := func(i int) string { return "create:scope:key-" + string(rune('a'+i)) }
	rec := func(i int, expires time.Time) pay.IdemRecord {
		return pay.IdemRecord{Key: key(i), Fingerprint: "fp", State: pay.IdemDone, StatusCode: 201, ExpiresAt: expires}
	}
	// present returns which of keys 0..n-1 are stored.
	present := func(t *testing.T, e *env, n int) []int {
		t.Helper()
		var out []int
		e.view(func(tx store.Tx) error {
			for i := range n {
				_, err := tx.IdemKey(key(i))
				switch pay.ErrorCode(err) {
				case "":
					out = append(out, i)
				case pay.ENOTFOUND:
				default:
					return err
				}
			}
			return nil
		})
		return out
	}
	purge := func(t *testing.T, e *env, by time.Time, limit int) int {
		t.Helper()
		var n int
		e.update(func(tx store.Tx) (err error) { n, err = tx.PurgeIdemKeys(by, limit); return err })
		return n
	}

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.update(func(tx store.Tx) error {
			for i, exp := range []time.Time{
				t0.Add(time.Hour), t0.Add(2 * time.Hour), t0.Add(3 * time.Hour), t0.Add(48 * time.Hour), t0.Add(time.Hour),
			} {
				if err := tx.PutIdemKey(rec(i, exp)); err != nil {
					return err
				}
			}
			return nil
		})
		// Key 4 is written again with a later expiry: its old index entry
		// must not remove it.
		e.update(func(tx store.Tx) error { return tx.PutIdemKey(rec(4, t0.Add(72*time.Hour))) })

		if got, want := purge(t, e, t0.Add(30*time.Minute), 100), 0; got != want {
			t.Fatalf("PurgeIdemKeys before any expiry=%d, want %d", got, want)
		}
		// At exactly ExpiresAt a key is expired (the merchant API treats it
		// as unknown from then on).
		if got, want := purge(t, e, t0.Add(2*time.Hour), 100), 2; got != want {
			t.Fatalf("PurgeIdemKeys=%d, want %d", got, want)
		}
		if got, want := present(t, e, 5), []int{2, 3, 4}; !slices.Equal(got, want) {
			t.Fatalf("keys left=%v, want %v", got, want)
		}
		if got, want := purge(t, e, t0.Add(2*time.Hour), 100), 0; got != want {
			t.Fatalf("second PurgeIdemKeys=%d, want %d (nothing left to do)", got, want)
		}
	})

	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.updateN(5, func(tx store.Tx, i int) error {
			return tx.PutIdemKey(rec(i, t0.Add(time.Duration(i)*time.Minute)))
		})
		by := t0.Add(time.Hour)
		for _, want := range []int{2, 2, 1, 0} {
			if got := purge(t, e, by, 2); got != want {
				t.Fatalf("PurgeIdemKeys(limit 2)=%d, want %d", got, want)
			}
		}
		if got := present(t, e, 5); len(got) != 0 {
			t.Fatalf("keys left=%v, want none", got)
		}
		// A key written after the purge is there until it expires.
		e.update(func(tx store.Tx) error { return tx.PutIdemKey(rec(0, by.Add(time.Hour))) })
		if got, want := purge(t, e, by, 10), 0; got != want {
			t.Fatalf("PurgeIdemKeys=%d, want %d", got, want)
		}
		if got, want := present(t, e, 1), []int{0}; !slices.Equal(got, want) {
			t.Fatalf("keys left=%v, want %v", got, want)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { _, err := tx.PurgeIdemKeys(t0, 0); return err }), pay.EINVALID)
	})
}

func testPurgeProcessed(t *testing.T, open Opener) {
	ev := func(id, paymentID string) pay.InboxEvent {
		return pay.InboxEvent{
			Provider: "mock", EventID: id, Type: "payment.captured", PaymentID: paymentID,
			Status: pay.Captured, Body: []byte(`{"id":"` + id + `"}`),
		}
	}
	purge := func(t *testing.T, e *env, before time.Time, limit int) int {
		t.Helper()
		var n int
		e.update(func(tx store.Tx) (err error) { n, err = tx.PurgeProcessed(before, limit); return err })
		return n
	}
	processed := func(t *testing.T, e *env, id string) bool {
		t.Helper()
		var ok bool
		e.view(func(tx store.Tx) (err error) { ok, err = tx.IsProcessed("mock", id); return err })
		return ok
	}
	inInbox := func(t *testing.T, e *env, id string) bool {
		t.Helper()
		var ok bool
		e.view(func(tx store.Tx) error {
			_, err := tx.InboxEvent("mock", id)
			switch pay.ErrorCode(err) {
			case "":
				ok = true
			case pay.ENOTFOUND:
			default:
				return err
			}
			return nil
		})
		return ok
	}
	history := func(t *testing.T, e *env, paymentID string) []string {
		t.Helper()
		var out []string
		e.view(func(tx store.Tx) error {
			evs, err := tx.InboxForPayment(paymentID)
			for _, e := range evs {
				out = append(out, e.EventID)
			}
			return err
		})
		return out
	}

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		a := paymentID(1)
		// At t0: evt_old archived and processed; evt_bare processed with no
		// inbox entry; evt_pending stays pending.
		e.update(func(tx store.Tx) error {
			for _, id := range []string{"evt_old", "evt_pending"} {
				if err := putInbox(tx, ev(id, a)); err != nil {
					return err
				}
			}
			if err := tx.MarkProcessed("mock", "evt_old"); err != nil {
				return err
			}
			return tx.MarkProcessed("mock", "evt_bare")
		})
		// An hour later: evt_new.
		e.clock.Add(time.Hour)
		e.update(func(tx store.Tx) error {
			if err := putInbox(tx, ev("evt_new", a)); err != nil {
				return err
			}
			return tx.MarkProcessed("mock", "evt_new")
		})
		// Processing evt_old again keeps its first time.
		e.update(func(tx store.Tx) error { return tx.MarkProcessed("mock", "evt_old") })

		if got, want := purge(t, e, t0, 100), 0; got != want {
			t.Fatalf("PurgeProcessed(t0)=%d, want %d (strictly before)", got, want)
		}
		if got, want := purge(t, e, t0.Add(30*time.Minute), 100), 2; got != want {
			t.Fatalf("PurgeProcessed=%d, want %d", got, want)
		}
		for _, tc := range []struct {
			id                 string
			processed, inInbox bool
		}{
			{"evt_old", false, false},
			{"evt_bare", false, false},
			{"evt_new", true, true},
			{"evt_pending", false, true},
		} {
			if got := processed(t, e, tc.id); got != tc.processed {
				t.Errorf("IsProcessed(%s)=%t, want %t", tc.id, got, tc.processed)
			}
			if got := inInbox(t, e, tc.id); got != tc.inInbox {
				t.Errorf("InboxEvent(%s) found=%t, want %t", tc.id, got, tc.inInbox)
			}
		}
		if got, want := history(t, e, a), []string{"evt_pending", "evt_new"}; !slices.Equal(got, want) {
			t.Fatalf("InboxForPayment=%v, want %v", got, want)
		}
		var due []pay.InboxEvent
		e.view(func(tx store.Tx) (err error) { due, err = tx.PendingInbox(e.clock.Now(), 10); return err })
		if len(due) != 1 || due[0].EventID != "evt_pending" {
			t.Fatalf("PendingInbox=%v, want evt_pending", due)
		}

		// A redelivery of a purged event is a new event.
		var inserted bool
		e.update(func(tx store.Tx) (err error) { inserted, err = tx.PutInbox(ev("evt_old", a)); return err })
		if !inserted {
			t.Fatal("PutInbox of a purged event=false, want true")
		}
		if processed(t, e, "evt_old") {
			t.Fatal("a redelivered purged event is processed, want pending")
		}
	})

	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		updateEach(e, []string{"evt_1", "evt_2", "evt_3"}, func(tx store.Tx, id string) error {
			return tx.MarkProcessed("mock", id)
		})
		for _, want := range []int{2, 1, 0} {
			if got := purge(t, e, t0.Add(time.Second), 2); got != want {
				t.Fatalf("PurgeProcessed(limit 2)=%d, want %d", got, want)
			}
		}
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { _, err := tx.PurgeProcessed(t0, 0); return err }), pay.EINVALID)
	})
}

func testPSPAnswer(t *testing.T, open Opener) {
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		id := paymentID(1)
		e.view(func(tx store.Tx) error {
			_, err := tx.PSPAnswer(id)
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})
		first := pay.PSPAnswer{PaymentID: id, Provider: "mock", Found: false, Raw: "mock status=not_found"}
		e.update(func(tx store.Tx) error { return tx.PutPSPAnswer(first) })
		e.view(func(tx store.Tx) error {
			got, err := tx.PSPAnswer(id)
			if err != nil {
				return err
			}
			if !got.At.Equal(t0) {
				t.Fatalf("At=%s, want %s (Tx.Now)", got.At, t0)
			}
			if !got.Same(first) {
				t.Fatalf("PSPAnswer=%+v, want %+v", got, first)
			}
			return nil
		})

		e.clock.Add(time.Minute)
		second := pay.PSPAnswer{PaymentID: id, Provider: "mock", Status: pay.Captured, Found: true, Raw: "mock status=captured", At: t0.Add(30 * time.Second)}
		e.update(func(tx store.Tx) error { return tx.PutPSPAnswer(second) })
		e.view(func(tx store.Tx) error {
			got, err := tx.PSPAnswer(id)
			if err != nil {
				return err
			}
			if !got.Same(second) || !got.At.Equal(second.At) {
				t.Fatalf("PSPAnswer=%+v, want %+v", got, second)
			}
			if got.Same(first) {
				t.Fatal("Same reports a different answer as the same")
			}
			return nil
		})
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.PutPSPAnswer(pay.PSPAnswer{}) }), pay.EINVALID)
	})
}

// testPurgeOutbox: delivered outbox records are purged oldest first, with
// their events' dedupe keys; a record with a pending delivery, a young
// dead letter or not fanned out yet is kept, and so is everything after a
// pending one; the horizon moves past what was purged.
func testPurgeOutbox(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	// Records, one per payment, created a second apart from t0, and their
	// deliveries: (state, when it entered the state).
	type rec struct {
		name  string
		state string // "" for no delivery
		at    time.Time
	}
	day := 24 * time.Hour
	recs := []rec{
		{"done", pay.DeliveryDone, t0.Add(time.Minute)},
		{"old-dead", pay.DeliveryDead, t0.Add(time.Hour)},
		{"young-dead", pay.DeliveryDead, t0.Add(35 * day)},
		{"pending", pay.DeliveryPending, time.Time{}},
		{"after-pending", pay.DeliveryDone, t0.Add(time.Minute)},
		{"not-fanned-out", "", time.Time{}},
	}
	seqs := map[string]uint64{}
	created := map[string]time.Time{}
	e.update(func(tx store.Tx) error {
		for i, r := range recs {
			created[r.name] = t0.Add(time.Duration(i) * time.Second)
			if err := tx.AppendOutbox(pay.OutboxRecord{
				ID: "evt_" + r.name, Type: "payment.captured", PaymentID: paymentID(i), Status: pay.Captured,
				Version: 2, Amount: 1000, Currency: "EUR", CreatedAt: created[r.name],
			}); err != nil {
				return err
			}
			os, err := tx.OutboxForPayment(paymentID(i))
			if err != nil {
				return err
			}
			seqs[r.name] = os[0].Seq
			if r.state == "" {
				continue
			}
			d := delivery(i, paymentID(i), os[0].Seq, pay.EffectLoyalty, "")
			d.EventID, d.EventAt, d.State = "evt_"+r.name, created[r.name], r.state
			if r.state != pay.DeliveryPending {
				d.UpdatedAt, d.NextAttemptAt = r.at, time.Time{}
			}
			if err := tx.InsertDelivery(d); err != nil {
				return err
			}
			for _, key := range []string{pay.EffectLoyalty + ":evt_" + r.name, "loyalty_payment:" + paymentID(i)} {
				if err := tx.PutEffect(store.EffectRecord{Key: key, DeliveryID: d.ID, Points: 10}); err != nil {
					return err
				}
			}
		}
		return tx.SetRippleCursor(seqs["after-pending"])
	})
	kept := func(t *testing.T, want ...string) {
		t.Helper()
		e.view(func(tx store.Tx) error {
			var got []string
			for i, r := range recs {
				os, err := tx.OutboxForPayment(paymentID(i))
				if err != nil {
					return err
				}
				_, rerr := tx.OutboxRecord(seqs[r.name])
				if (len(os) == 1) != (rerr == nil) {
					t.Fatalf("%s: OutboxForPayment has %d records, OutboxRecord: %v", r.name, len(os), rerr)
				}
				_, dedupe, err := tx.Effect(pay.EffectLoyalty + ":evt_" + r.name)
				if err != nil {
					return err
				}
				_, perPayment, err := tx.Effect("loyalty_payment:" + paymentID(i))
				if err != nil {
					return err
				}
				if r.state != "" && (dedupe != (len(os) == 1) || !perPayment) {
					t.Fatalf("%s: record kept %v, its dedupe key %v, the payment's key %v; want the dedupe key with the record, the payment's always",
						r.name, len(os) == 1, dedupe, perPayment)
				}
				if len(os) == 1 {
					got = append(got, r.name)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("records kept: %v, want %v", got, want)
			}
			return nil
		})
	}
	purge := func(t *testing.T, before time.Time, limit int) int {
		t.Helper()
		var n int
		e.update(func(tx store.Tx) (err error) { n, err = tx.PurgeOutbox(before, limit); return err })
		return n
	}
	horizon := func(t *testing.T) time.Time {
		t.Helper()
		var h time.Time
		e.view(func(tx store.Tx) (err error) { h, err = tx.OutboxHorizon(); return err })
		return h
	}
	all := []string{"done", "old-dead", "young-dead", "pending", "after-pending", "not-fanned-out"}

	if h := horizon(t); !h.IsZero() {
		t.Fatalf("OutboxHorizon=%s before any purge, want zero", h)
	}
	// Nothing is older than t0.
	if n := purge(t, t0, 10); n != 0 {
		t.Fatalf("PurgeOutbox(t0)=%d, want 0", n)
	}
	kept(t, all...)
	before := t0.Add(30 * day) // every record is older
	// One per call, oldest first; the young dead letter's record is
	// skipped, and the pending delivery stops the walk.
	if n := purge(t, before, 1); n != 1 {
		t.Fatalf("PurgeOutbox(limit 1)=%d, want 1", n)
	}
	kept(t, "old-dead", "young-dead", "pending", "after-pending", "not-fanned-out")
	if n := purge(t, before, 10); n != 1 {
		t.Fatalf("PurgeOutbox=%d, want 1", n)
	}
	kept(t, "young-dead", "pending", "after-pending", "not-fanned-out")
	if got, want := horizon(t), created["old-dead"].Add(time.Nanosecond); !got.Equal(want) {
		t.Fatalf("OutboxHorizon=%s, want %s (just after the last record purged)", got, want)
	}
	if n := purge(t, t0.Add(34*day), 10); n != 0 {
		t.Fatalf("PurgeOutbox with a delivery pending=%d, want 0", n)
	}

	// The pending delivery is done: its record and the one after it go;
	// the record not fanned out yet stays, whatever its age.
	e.update(func(tx store.Tx) error {
		d, err := tx.Delivery(fmt.Sprintf("dlv_%026d", 3))
		if err != nil {
			return err
		}
		d.State = pay.DeliveryDone
		return tx.UpdateDelivery(d)
	})
	if n := purge(t, before, 10); n != 2 {
		t.Fatalf("PurgeOutbox=%d, want 2", n)
	}
	kept(t, "young-dead", "not-fanned-out")
	if got, want := horizon(t), created["after-pending"].Add(time.Nanosecond); !got.Equal(want) {
		t.Fatalf("OutboxHorizon=%s, want %s", got, want)
	}

	// Fanned out, with no delivery: purged once strictly older.
	e.update(func(tx store.Tx) error { return tx.SetRippleCursor(seqs["not-fanned-out"]) })
	if n := purge(t, created["not-fanned-out"], 10); n != 0 {
		t.Fatalf("PurgeOutbox(its creation time)=%d, want 0", n)
	}
	if n := purge(t, created["not-fanned-out"].Add(time.Nanosecond), 10); n != 1 {
		t.Fatalf("PurgeOutbox(just after its creation)=%d, want 1", n)
	}
	kept(t, "young-dead")
	// The dead letter grows old: its record goes too. The horizon never
	// moves back.
	if n := purge(t, t0.Add(36*day), 10); n != 1 {
		t.Fatalf("PurgeOutbox(past the dead letter)=%d, want 1", n)
	}
	kept(t)
	if got, want := horizon(t), created["not-fanned-out"].Add(time.Nanosecond); !got.Equal(want) {
		t.Fatalf("OutboxHorizon=%s, want %s (it never moves back)", got, want)
	}
	e.update(func(tx store.Tx) error {
		_, err := tx.PurgeOutbox(before, 0)
		wantCode(t, err, pay.EINVALID)
		return nil
	})
}

// testPSPCharge: the mock PSP's charges are stored by key, replaced whole,
// and read back field for field; a missing key is ENOTFOUND, an empty one
// EINVALID.
func testPSPCharge(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	key := "charge-" + paymentID(1)
	e.view(func(tx store.Tx) error {
		_, err := tx.PSPCharge(key)
		wantCode(t, err, pay.ENOTFOUND)
		return nil
	})
	c := store.PSPCharge{
		Key: key, PaymentID: paymentID(1), ProviderRef: "mock_pi_1", Amount: 1502, Currency: "EUR",
		Status: pay.RequiresAction, ClientSecret: "mock_pi_1_secret_x", RedirectURL: "https://psp.example/3ds/1", Calls: 1,
	}
	e.update(func(tx store.Tx) error { return tx.PutPSPCharge(c) })
	want := c
	want.CreatedAt = t0 // a zero CreatedAt becomes Tx.Now
	get := func() store.PSPCharge {
		var got store.PSPCharge
		e.view(func(tx store.Tx) (err error) { got, err = tx.PSPCharge(key); return err })
		return got
	}
	if got := get(); got != want {
		t.Fatalf("PSPCharge=%+v, want %+v", got, want)
	}
	want.Status, want.RefundKey, want.Refunds, want.Calls, want.ClientSecret = pay.Refunded, "refund-"+paymentID(1), 1, 2, ""
	e.update(func(tx store.Tx) error { return tx.PutPSPCharge(want) })
	if got := get(); got != want {
		t.Fatalf("after the update PSPCharge=%+v, want %+v", got, want)
	}
	wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.PutPSPCharge(store.PSPCharge{}) }), pay.EINVALID)
}
