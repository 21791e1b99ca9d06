package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/postgres"
	"github.com/paystate/paystate/store/storetest"
)

// SPEC §5: no row, lock or counter is shared by the transactions of
// different payments on the request path. Each test runs one payment's
// write in a transaction of one instance and keeps it open, then another
// payment's write in a transaction of a second instance, and fails if the
// second waits for a lock of the first (pg_stat_activity: a backend of
// the second instance waiting on a Lock).

// apps numbers the application names that tell the tests' connections
// apart in pg_stat_activity.
var apps atomic.Int64

// instance is a store with one connection, named app in pg_stat_activity.
type instance struct {
	db  *postgres.DB
	app string
	pid int32
}

// twoInstances opens two stores of one connection each on one new schema,
// whose connections add to different balance shards (backend pids that
// differ modulo postgres.BalanceShards), so that the postings of one
// never wait for the other's by chance.
func twoInstances(t *testing.T) [2]instance {
	t.Helper()
	return twoInstancesOn(t, newSchema(t))
}

// twoInstancesOn is twoInstances on the database or schema at dsn.
func twoInstancesOn(t *testing.T, dsn string) [2]instance {
	t.Helper()
	for range 20 {
		var out [2]instance
		for i := range out {
			app := fmt.Sprintf("paystate-scale-%d", apps.Add(1))
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("application_name", app)
			u.RawQuery = q.Encode()
			db := mustOpen(t, u.String(), &postgres.Options{Now: storetest.NewClock(t0).Now, MaxConns: 1})
			if err := db.View(context.Background(), func(store.Tx) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if err := admin.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&out[i].pid); err != nil {
				t.Fatalf("pid of %s: %v", app, err)
			}
			out[i].db, out[i].app = db, app
		}
		if out[0].pid%postgres.BalanceShards != out[1].pid%postgres.BalanceShards {
			return out
		}
	}
	t.Fatal("20 pairs of connections, each pair on one balance shard")
	return [2]instance{}
}

// waitsBehind runs first in a transaction of ins[0] and, while that is
// open, second in a transaction of ins[1], then (if second committed
// first) during, and then lets first commit. It reports whether second
// waited for a lock; both transactions commit either way.
func waitsBehind(t *testing.T, ins [2]instance, first, second func(store.Tx) error, during func()) bool {
	t.Helper()
	ctx := context.Background()
	held, release := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		var once bool
		firstDone <- ins[0].db.Update(ctx, func(tx store.Tx) error {
			if err := first(tx); err != nil {
				return err
			}
			if !once {
				once = true
				close(held)
				<-release
			}
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-firstDone:
		t.Fatalf("first transaction: %v", err)
	}
	secondDone := make(chan error, 1)
	go func() { secondDone <- ins[1].db.Update(ctx, second) }()
	waited := false
	for !waited {
		select {
		case err := <-secondDone:
			if err != nil {
				close(release)
				t.Fatalf("second transaction: %v", err)
			}
			if during != nil {
				during()
			}
			close(release)
			if err := <-firstDone; err != nil {
				t.Fatalf("first transaction: %v", err)
			}
			return false
		default:
		}
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock')`, ins[1].app).Scan(&waited); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	for _, done := range []chan error{firstDone, secondDone} {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("transaction: %v", err)
		}
	}
	return true
}

// posting is a capture's two journal lines.
func posting(paymentID string, amount int64) []pay.LedgerEntry {
	return []pay.LedgerEntry{
		{PaymentID: paymentID, EventID: "evt_" + paymentID, Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: amount},
		{PaymentID: paymentID, EventID: "evt_" + paymentID, Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -amount},
	}
}

// TestScale_LedgerPostings: two payments' postings to the same accounts
// and currency, from two instances at once, do not wait for each other,
// and the balances are their sum.
func TestScale_LedgerPostings(t *testing.T) {
	t.Parallel()
	ins := twoInstances(t)
	if waitsBehind(t, ins,
		func(tx store.Tx) error { return tx.AppendLedger(posting("pay_1", 1000)) },
		func(tx store.Tx) error { return tx.AppendLedger(posting("pay_2", 250)) }, nil) {
		t.Error("a posting waited for another payment's posting to commit")
	}
	var bs []pay.Balance
	if err := ins[0].db.View(context.Background(), func(tx store.Tx) (err error) { bs, err = tx.LedgerBalances(); return err }); err != nil {
		t.Fatal(err)
	}
	want := []pay.Balance{{Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1250}, {Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1250}}
	if fmt.Sprint(bs) != fmt.Sprint(want) {
		t.Fatalf("LedgerBalances=%v, want %v", bs, want)
	}
}

// TestScale_Outbox: two payments' transitions append outbox records from
// two instances at once without waiting for each other, and a reader that
// follows OutboxAfter while the older transaction is still open is not
// shown the younger one's record, so that its cursor can never pass a
// record that commits later (the snapshot-safe cursor).
func TestScale_Outbox(t *testing.T) {
	t.Parallel()
	// A database of its own: OutboxAfter waits for every older
	// transaction of its database, and the other tests' transactions
	// would hold the records back for as long as they run.
	ins := twoInstancesOn(t, pgtest.Schema(t))
	ctx := context.Background()
	record := func(id, paymentID string) func(store.Tx) error {
		return func(tx store.Tx) error {
			if err := tx.AppendOutbox(pay.OutboxRecord{ID: id, Type: "payment.captured", PaymentID: paymentID, Status: pay.Captured}); err != nil {
				return err
			}
			// A read sends the queued append now, as the statements
			// after it in a transition do: the transaction has written
			// its record when it is held open.
			_, err := tx.OutboxForPayment(paymentID)
			return err
		}
	}
	read := func(after uint64) []pay.OutboxRecord {
		var recs []pay.OutboxRecord
		if err := ins[1].db.View(ctx, func(tx store.Tx) (err error) { recs, err = tx.OutboxAfter(after, 100); return err }); err != nil {
			t.Fatal(err)
		}
		return recs
	}
	var cursor uint64
	if waitsBehind(t, ins, record("evt_old", "pay_1"), record("evt_young", "pay_2"), func() {
		for _, r := range read(0) {
			if r.ID == "evt_young" {
				t.Errorf("OutboxAfter showed evt_young (Seq %d) while evt_old's transaction, which began before it, was open", r.Seq)
			}
			cursor = max(cursor, r.Seq)
		}
	}) {
		t.Error("an outbox append waited for another payment's append to commit")
	}
	// Both committed now: the reader finds both after its cursor. Its own
	// database has no other transaction but a passing autovacuum's, so a
	// few reads at most.
	var got []string
	for range 10000 {
		got = got[:0]
		for _, r := range read(cursor) {
			got = append(got, r.ID)
		}
		if len(got) == 2 {
			break
		}
	}
	if fmt.Sprint(got) != "[evt_old evt_young]" {
		t.Fatalf("OutboxAfter(cursor)=%v, want [evt_old evt_young]: a record appeared behind the cursor", got)
	}
}

// TestScale_OutboxPaymentOrder: a transaction that wrote before it took
// the payment holds a transaction id, and so outbox Seqs, from before a
// transition that commits first; the payment's records and their
// deliveries still go in the order of its versions.
func TestScale_OutboxPaymentOrder(t *testing.T) {
	t.Parallel()
	ins := twoInstances(t)
	ctx := context.Background()
	record := func(tx store.Tx, id string, version uint64) error {
		return tx.AppendOutbox(pay.OutboxRecord{ID: id, Type: "payment.captured", PaymentID: "pay_1", Status: pay.Captured, Version: version})
	}
	wrote, appended := make(chan struct{}), make(chan struct{})
	later := make(chan error, 1)
	go func() {
		var once bool
		later <- ins[0].db.Update(ctx, func(tx store.Tx) error {
			// A write first: the transaction's id is taken here.
			if err := tx.PutPSPAnswer(pay.PSPAnswer{PaymentID: "pay_1", Provider: "mock", Status: pay.Captured, Found: true}); err != nil {
				return err
			}
			if !once {
				once = true
				close(wrote)
				<-appended
			}
			return record(tx, "evt_v3", 3)
		})
	}()
	<-wrote
	if err := ins[1].db.Update(ctx, func(tx store.Tx) error { return record(tx, "evt_v2", 2) }); err != nil {
		t.Fatal(err)
	}
	close(appended)
	if err := <-later; err != nil {
		t.Fatal(err)
	}
	var recs []pay.OutboxRecord
	if err := ins[0].db.View(ctx, func(tx store.Tx) (err error) { recs, err = tx.OutboxForPayment("pay_1"); return err }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != "evt_v2" || recs[1].ID != "evt_v3" {
		t.Fatalf("OutboxForPayment=%+v, want evt_v2, evt_v3", recs)
	}
	if recs[1].Seq > recs[0].Seq {
		t.Fatalf("Seqs of v2, v3 = %d, %d: want v3's below (its transaction's id is the older)", recs[0].Seq, recs[1].Seq)
	}
	err := ins[0].db.Update(ctx, func(tx store.Tx) error {
		for i, r := range recs {
			if err := tx.InsertDelivery(pay.Delivery{ID: fmt.Sprintf("dlv_%d", i), Effect: pay.EffectLoyalty, EventID: r.ID, EventType: r.Type,
				EventSeq: r.Seq, PaymentID: r.PaymentID, State: pay.DeliveryPending}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var due []pay.Delivery
	if err := ins[0].db.View(ctx, func(tx store.Tx) (err error) { due, err = tx.DueDeliveries(t0.Add(time.Hour), 10); return err }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].EventID != "evt_v2" {
		t.Fatalf("DueDeliveries=%+v, want evt_v2's alone (first in line)", due)
	}
}

// TestDB_CustomerRace: two instances credit one customer at once, each
// reading the account and writing it back, for a customer that does not
// exist yet (the later insert finds the row and its transaction runs
// again) and for one that does (its row lock): no credit is lost. The
// same for loyalty's record of a payment (an effect record read and
// written back).
func TestDB_CustomerRace(t *testing.T) {
	t.Parallel()
	dbs := pools(t, 2, storetest.NewClock(t0).Now)
	credit := func(id string) {
		meet := rendezvous(2)
		errs := race(dbs, func(side int, db *postgres.DB) error {
			return db.Update(context.Background(), func(tx store.Tx) error {
				meet(side) // both transactions run
				c, err := tx.CustomerAccount(id)
				if pay.ErrorCode(err) == pay.ENOTFOUND {
					c, err = store.CustomerAccount{ID: id}, nil
				}
				if err != nil {
					return err
				}
				c.Points++
				return tx.PutCustomerAccount(c)
			})
		})
		for side, err := range errs {
			if err != nil {
				t.Fatalf("side %d: %v", side, err)
			}
		}
	}
	credit("cus_1") // created by the race
	credit("cus_1") // updated by the race
	var c store.CustomerAccount
	if err := dbs[0].View(context.Background(), func(tx store.Tx) (err error) { c, err = tx.CustomerAccount("cus_1"); return err }); err != nil {
		t.Fatal(err)
	}
	if c.Points != 4 {
		t.Fatalf("points=%d after four credits, want 4", c.Points)
	}

	const key = "loyalty_payment:pay_1"
	add := func() {
		meet := rendezvous(2)
		errs := race(dbs, func(side int, db *postgres.DB) error {
			return db.Update(context.Background(), func(tx store.Tx) error {
				meet(side)
				r, _, err := tx.Effect(key)
				if err != nil {
					return err
				}
				r.Key, r.Points = key, r.Points+1
				return tx.PutEffect(r)
			})
		})
		for side, err := range errs {
			if err != nil {
				t.Fatalf("side %d: %v", side, err)
			}
		}
	}
	add() // created by the race
	add() // updated by the race
	var r store.EffectRecord
	if err := dbs[0].View(context.Background(), func(tx store.Tx) (err error) { r, _, err = tx.Effect(key); return err }); err != nil {
		t.Fatal(err)
	}
	if r.Points != 4 {
		t.Fatalf("effect record points=%d after four additions, want 4", r.Points)
	}
}

// claimer is what the ripple workers use of a transaction on PostgreSQL
// to claim work (package ripple: claimTx, claimDeliveriesTx).
type claimer interface {
	ClaimUnfanned(limit int) ([]pay.OutboxRecord, error)
	MarkFanned(seqs []uint64) error
	ClaimDeliveries(ids []string) ([]pay.Delivery, error)
}

// TestScale_RippleClaims: two instances' ripple workers claim outbox
// records to fan out and due deliveries to apply at once without waiting
// for each other: what one holds, the other skips (SKIP LOCKED) and takes
// the rest; no cursor row or lock is shared.
func TestScale_RippleClaims(t *testing.T) {
	t.Parallel()
	ins := twoInstances(t)
	ctx := context.Background()
	if err := ins[0].db.Update(ctx, func(tx store.Tx) error {
		for i := 1; i <= 2; i++ {
			p := fmt.Sprintf("pay_%d", i)
			if err := tx.AppendOutbox(pay.OutboxRecord{ID: "evt_" + p, Type: "payment.captured", PaymentID: p, Status: pay.Captured, Version: 2}); err != nil {
				return err
			}
			if err := tx.InsertDelivery(pay.Delivery{ID: fmt.Sprintf("dlv_%d", i), Effect: pay.EffectLoyalty, EventID: "evt_" + p,
				EventType: "payment.captured", EventSeq: uint64(i), PaymentID: p, State: pay.DeliveryPending}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var firstRecs, secondRecs []pay.OutboxRecord
	if waitsBehind(t, ins,
		func(tx store.Tx) (err error) { firstRecs, err = tx.(claimer).ClaimUnfanned(1); return err },
		func(tx store.Tx) (err error) {
			secondRecs, err = tx.(claimer).ClaimUnfanned(10)
			if err == nil && len(secondRecs) > 0 {
				err = tx.(claimer).MarkFanned([]uint64{secondRecs[0].Seq})
			}
			return err
		}, nil) {
		t.Error("a claim of outbox records waited for another instance's claim")
	}
	if len(firstRecs) != 1 || len(secondRecs) != 1 || firstRecs[0].PaymentID == secondRecs[0].PaymentID {
		t.Fatalf("claimed %v, then %v while the first was held; want one record each, of different payments", firstRecs, secondRecs)
	}
	var firstDs, secondDs []pay.Delivery
	if waitsBehind(t, ins,
		func(tx store.Tx) (err error) {
			firstDs, err = tx.(claimer).ClaimDeliveries([]string{"dlv_1"})
			return err
		},
		func(tx store.Tx) (err error) {
			secondDs, err = tx.(claimer).ClaimDeliveries([]string{"dlv_1", "dlv_2"})
			return err
		}, nil) {
		t.Error("a claim of deliveries waited for another instance's claim")
	}
	if len(firstDs) != 1 || len(secondDs) != 1 || secondDs[0].ID != "dlv_2" {
		t.Fatalf("claimed %v, then %v while the first was held; want dlv_1, then dlv_2 alone", firstDs, secondDs)
	}
}

// TestDB_EffectClaimRace: three instances claim the same effect key at
// once, each in a transaction that is open while the others claim: exactly
// one stores its record, the others find it; a claim in the winner's own
// transaction finds it too, and a claim rolled back leaves the key free.
func TestDB_EffectClaimRace(t *testing.T) {
	t.Parallel()
	dbs := pools(t, 3, storetest.NewClock(t0).Now)
	const key = pay.EffectLoyalty + ":evt_1"
	claim := func(tx store.Tx, dlv string) (bool, error) {
		return tx.ClaimEffect(store.EffectRecord{Key: key, DeliveryID: dlv, Points: 12})
	}
	err := dbs[0].Update(context.Background(), func(tx store.Tx) error {
		if ok, err := claim(tx, "dlv_rolled_back"); err != nil || !ok {
			return fmt.Errorf("claim of a free key: claimed=%v, %v", ok, err)
		}
		return pay.Errorf(pay.EINVALID, "roll back")
	})
	if pay.ErrorCode(err) != pay.EINVALID {
		t.Fatalf("rolled back claim: %v", err)
	}
	meet := rendezvous(len(dbs))
	errs := race(dbs, func(side int, db *postgres.DB) error {
		return db.Update(context.Background(), func(tx store.Tx) error {
			meet(side) // every transaction runs
			ok, err := claim(tx, fmt.Sprintf("dlv_%d", side))
			if err != nil {
				return err
			} else if !ok {
				return pay.Errorf(pay.ECONFLICT, "claimed by another instance")
			}
			if again, err := claim(tx, "dlv_again"); err != nil || again {
				return fmt.Errorf("second claim in the winner's transaction: claimed=%v, %v", again, err)
			}
			return nil
		})
	})
	won := winners(t, errs, pay.ECONFLICT)
	var (
		r     store.EffectRecord
		found bool
	)
	if err := dbs[0].View(context.Background(), func(tx store.Tx) (err error) { r, found, err = tx.Effect(key); return err }); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("dlv_%d", won); !found || r.DeliveryID != want || r.Points != 12 || !r.At.Equal(t0) {
		t.Fatalf("Effect=%+v, %v; want the winner's record (%s, 12 points, at %s)", r, found, want, t0)
	}
}

// TestDB_EventRace: two instances take the same new webhook event at once,
// as finalize's Accept does: each reads the inbox (not there) without
// waiting for the other, locks the payment by its row, checks the processed
// id, applies and marks it processed, and stores the event. The unique keys
// decide, not a lock: exactly one applies and stores it; the other finds
// it processed and its PutInbox stores nothing (a duplicate).
func TestDB_EventRace(t *testing.T) {
	t.Parallel()
	dbs := pools(t, 2, storetest.NewClock(t0).Now)
	p := pay.Payment{ID: "pay_1", OrderID: "order-1", Amount: 1000, Currency: "EUR", Provider: "mock",
		Status: pay.Created, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := dbs[0].Update(context.Background(), func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
	ev := pay.InboxEvent{Provider: "mock", EventID: "evt_1", Type: "payment.captured", PaymentID: p.ID, Status: pay.Captured}
	meet := rendezvous(len(dbs))
	var applied atomic.Int32
	errs := race(dbs, func(side int, db *postgres.DB) error {
		return db.Update(context.Background(), func(tx store.Tx) error {
			if _, err := tx.InboxEvent(ev.Provider, ev.EventID); pay.ErrorCode(err) != pay.ENOTFOUND {
				return fmt.Errorf("InboxEvent of a new event: %v, want ENOTFOUND", err)
			}
			meet(side) // both have read the inbox, and both transactions run
			cur, err := tx.Payment(p.ID)
			if err != nil {
				return err
			}
			done, err := tx.IsProcessed(ev.Provider, ev.EventID)
			if err != nil {
				return err
			}
			if !done {
				applied.Add(1)
				next := cur
				next.Status, next.Version = pay.Captured, cur.Version+1
				if err := tx.UpdatePayment(next, cur.Version); err != nil {
					return err
				}
				if err := tx.MarkProcessed(ev.Provider, ev.EventID); err != nil {
					return err
				}
			}
			inserted, err := tx.PutInbox(ev)
			switch {
			case err != nil:
				return err
			case inserted == done:
				return fmt.Errorf("processed before %t but PutInbox inserted %t", done, inserted)
			case !inserted:
				return pay.Errorf(pay.ECONFLICT, "a duplicate")
			}
			return nil
		})
	})
	winners(t, errs, pay.ECONFLICT)
	if n := applied.Load(); n != 1 {
		t.Fatalf("applied by %d instances, want 1", n)
	}
	var (
		got  pay.Payment
		e    pay.InboxEvent
		done bool
	)
	if err := dbs[1].View(context.Background(), func(tx store.Tx) (err error) {
		if got, err = tx.Payment(p.ID); err != nil {
			return err
		}
		if e, err = tx.InboxEvent(ev.Provider, ev.EventID); err != nil {
			return err
		}
		done, err = tx.IsProcessed(ev.Provider, ev.EventID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Status != pay.Captured || !e.Processed || !done {
		t.Fatalf("payment version %d %s, inbox processed %t, processed id %t; want version 2 captured, both processed",
			got.Version, got.Status, e.Processed, done)
	}
}

// TestScale_NoAdvisoryLock: the store methods of the request and worker
// paths (a webhook's transition, ripple's loyalty and retention, leases,
// disputes, the review queue, the PSP's answer, settlements and
// endpoints) take no advisory lock: each record is locked by its own row
// or decided by a unique key. Checked in pg_locks while the transaction
// that called them all is open.
func TestScale_NoAdvisoryLock(t *testing.T) {
	t.Parallel()
	ins := twoInstances(t)
	ctx := context.Background()
	p := pay.Payment{ID: "pay_1", OrderID: "order-1", Amount: 1000, Currency: "EUR", Provider: "mock",
		Customer: pay.Customer{ID: "cus_1"}, Status: pay.Created, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	d := pay.Delivery{ID: "dlv_1", Effect: pay.EffectLoyalty, EventID: "evt_0", EventType: "payment.captured", PaymentID: p.ID,
		State: pay.DeliveryPending}
	if err := ins[0].db.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertPayment(p); err != nil {
			return err
		}
		return tx.InsertDelivery(d)
	}); err != nil {
		t.Fatal(err)
	}
	var advisory []string
	if err := ins[0].db.Update(ctx, func(tx store.Tx) error {
		advisory = nil
		// A webhook's transition.
		cur, err := tx.Payment(p.ID)
		if err != nil {
			return err
		}
		if _, err := tx.InboxEvent("mock", "evt_1"); pay.ErrorCode(err) != pay.ENOTFOUND {
			return fmt.Errorf("InboxEvent: %v, want ENOTFOUND", err)
		}
		if _, err := tx.Lease(p.ID); err != nil {
			return err
		}
		if _, err := tx.IsProcessed("mock", "evt_1"); err != nil {
			return err
		}
		next := cur
		next.Status, next.Version = pay.Captured, cur.Version+1
		if err := tx.UpdatePayment(next, cur.Version); err != nil {
			return err
		}
		if err := tx.AppendStep(pay.Step{PaymentID: p.ID, Kind: "transition", From: pay.Created, To: pay.Captured, Version: 2}); err != nil {
			return err
		}
		if err := tx.AppendOutbox(pay.OutboxRecord{ID: "evt_1", Type: "payment.captured", PaymentID: p.ID, Status: pay.Captured, Version: 2}); err != nil {
			return err
		}
		if err := tx.AppendLedger(posting(p.ID, 1000)); err != nil {
			return err
		}
		if err := tx.MarkProcessed("mock", "evt_1"); err != nil {
			return err
		}
		if _, err := tx.PutInbox(pay.InboxEvent{Provider: "mock", EventID: "evt_1", Type: "payment.captured", PaymentID: p.ID}); err != nil {
			return err
		}
		// Ripple's loyalty and retention.
		if _, err := tx.Delivery(d.ID); err != nil {
			return err
		}
		if _, _, err := tx.Effect("loyalty_payment:" + p.ID); err != nil {
			return err
		}
		if _, err := tx.ClaimEffect(store.EffectRecord{Key: "loyalty:evt_1", DeliveryID: d.ID, Points: 10}); err != nil {
			return err
		}
		if _, err := tx.CustomerAccount("cus_1"); pay.ErrorCode(err) != pay.ENOTFOUND {
			return fmt.Errorf("CustomerAccount: %v, want ENOTFOUND", err)
		}
		if err := tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_1", Points: 10}); err != nil {
			return err
		}
		if err := tx.PutEffect(store.EffectRecord{Key: "loyalty_payment:" + p.ID, DeliveryID: d.ID, Points: 10}); err != nil {
			return err
		}
		d.State = pay.DeliveryDone
		if err := tx.UpdateDelivery(d); err != nil {
			return err
		}
		// Leases, disputes, review, the PSP's answer, settlements,
		// endpoints.
		l, err := tx.AcquireLease("pay_2", "sweeper", time.Minute)
		if err != nil {
			return err
		}
		if err := tx.ReleaseLease("pay_2", l.Token); err != nil {
			return err
		}
		if err := tx.PutDispute(pay.Dispute{Provider: "mock", ID: "dp_1", PaymentID: p.ID, Amount: 1000, Status: pay.DisputeNeedsResponse,
			CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.PutReview(pay.ReviewItem{ID: p.ID, PaymentID: p.ID, Reason: "amount_mismatch"}); err != nil {
			return err
		}
		if _, err := tx.Review(p.ID); err != nil {
			return err
		}
		if err := tx.DeleteReview(p.ID); err != nil {
			return err
		}
		if err := tx.PutPSPAnswer(pay.PSPAnswer{PaymentID: p.ID, Provider: "mock", Status: pay.Captured, Found: true}); err != nil {
			return err
		}
		if _, err := tx.PSPAnswer(p.ID); err != nil {
			return err
		}
		if err := tx.PutSettlement(pay.Settlement{Provider: "mock", ID: "txn_1", Kind: pay.SettleCharge, PaymentID: p.ID,
			Amount: 1000, Currency: "EUR", CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		ep, err := tx.WebhookEndpoint("ep_1")
		if err != nil {
			return err
		}
		ep.URL = "https://merchant.example/hook"
		if err := tx.PutWebhookEndpoint(ep); err != nil {
			return err
		}
		// A read sends the queued writes; then the locks are looked at.
		if _, err := tx.CustomerAccount("cus_1"); err != nil {
			return err
		}
		rows, err := admin.Query(ctx, `SELECT objid::text FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, ins[0].pid)
		if err != nil {
			return err
		}
		advisory, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(advisory) > 0 {
		t.Fatalf("the transaction held %d advisory locks (%v), want none", len(advisory), advisory)
	}
}

// TestDB_BatchStatements counts the statements of a ripple batch on
// PostgreSQL: ten loyalty deliveries of three customers claimed and
// applied in one transaction, as ripple's in-store lane does (claim the
// deliveries, lock their effect records, then for each: claim its dedupe
// key, read the payment's loyalty record, read and write the customer,
// write the record, record the delivery done). The records, the
// customers and the effect records are read once for the batch (locked
// in the order of their keys), and the writes of each kind go in one
// statement: a statement per delivery more for any of them fails it.
func TestDB_BatchStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var count pgtest.Counter
	db := mustOpen(t, newSchema(t), &postgres.Options{Now: storetest.NewClock(t0).Now, Tracer: &count})
	const n = 10
	var ids []string
	if err := db.Update(ctx, func(tx store.Tx) error {
		ids = nil
		if err := tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_0", Points: 5}); err != nil {
			return err
		}
		for i := range n {
			p := fmt.Sprintf("pay_%d", i)
			if err := tx.AppendOutbox(pay.OutboxRecord{ID: "evt_" + p, Type: "payment.captured", PaymentID: p, Status: pay.Captured,
				Version: 2, Amount: 1000, Currency: "EUR", Customer: pay.Customer{ID: fmt.Sprintf("cus_%d", i%3)}}); err != nil {
				return err
			}
			recs, err := tx.OutboxForPayment(p)
			if err != nil {
				return err
			}
			d := pay.Delivery{ID: "dlv_" + p, Effect: pay.EffectLoyalty, EventID: "evt_" + p, EventType: "payment.captured",
				EventSeq: recs[0].Seq, PaymentID: p, State: pay.DeliveryPending}
			if err := tx.InsertDelivery(d); err != nil {
				return err
			}
			ids = append(ids, d.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	count.On.Store(true)
	err := db.Update(ctx, func(tx store.Tx) error {
		ds, err := tx.ClaimDeliveries(ids)
		if err != nil {
			return err
		}
		var keys []string
		for _, d := range ds {
			rec, err := tx.OutboxRecord(d.EventSeq)
			if err != nil {
				return err
			}
			keys = append(keys, "loyalty:"+rec.ID, "loyalty_payment:"+rec.PaymentID)
		}
		if err := tx.LockEffects(keys); err != nil {
			return err
		}
		for _, d := range ds {
			rec, err := tx.OutboxRecord(d.EventSeq)
			if err != nil {
				return err
			}
			if claimed, err := tx.ClaimEffect(store.EffectRecord{Key: "loyalty:" + rec.ID, DeliveryID: d.ID, Points: 10}); err != nil || !claimed {
				return fmt.Errorf("ClaimEffect: %t, %v", claimed, err)
			}
			if _, _, err := tx.Effect("loyalty_payment:" + rec.PaymentID); err != nil {
				return err
			}
			c, err := tx.CustomerAccount(rec.Customer.ID)
			if pay.ErrorCode(err) == pay.ENOTFOUND {
				c, err = store.CustomerAccount{ID: rec.Customer.ID}, nil
			}
			if err != nil {
				return err
			}
			c.Points += 10
			if err := tx.PutCustomerAccount(c); err != nil {
				return err
			}
			if err := tx.PutEffect(store.EffectRecord{Key: "loyalty_payment:" + rec.PaymentID, DeliveryID: d.ID, Points: 10}); err != nil {
				return err
			}
			d.State, d.Attempts = pay.DeliveryDone, 1
			if err := tx.UpdateDelivery(d); err != nil {
				return err
			}
		}
		return nil
	})
	count.On.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	// The claim, the records, the customers, the effect records; the
	// customers (one statement for those stored, one for those created),
	// the effect records (all created) and the deliveries. Nothing per
	// delivery.
	if got, want := count.Statements.Load(), int64(4+4); got > want {
		t.Errorf("a batch of %d deliveries sent %d statements, want at most %d", n, got, want)
	} else {
		t.Logf("a batch of %d deliveries: %d statements, %d round trips", n, got, count.RoundTrips.Load())
	}
	// What the batch wrote.
	if err := db.View(ctx, func(tx store.Tx) error {
		for i, want := range []int64{5 + 40, 30, 30} {
			c, err := tx.CustomerAccount(fmt.Sprintf("cus_%d", i))
			if err != nil {
				return err
			}
			if c.Points != want {
				return fmt.Errorf("cus_%d has %d points, want %d", i, c.Points, want)
			}
		}
		done, err := tx.CountDeliveries(pay.DeliveryDone)
		if err != nil {
			return err
		}
		if done != n {
			return fmt.Errorf("%d deliveries done, want %d", done, n)
		}
		for i := range n {
			if r, ok, err := tx.Effect(fmt.Sprintf("loyalty_payment:pay_%d", i)); err != nil || !ok || r.Points != 10 {
				return fmt.Errorf("loyalty_payment:pay_%d: %+v %t %v", i, r, ok, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDB_LockEffectsRace: a dedupe key that LockEffects found free, and
// that another instance claims and commits before this transaction's
// commit: this transaction's claim, queued with its writes, fails at the
// commit and the transaction runs again, which finds the other's record.
// One claim in all, as without LockEffects.
func TestDB_LockEffectsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbs := pools(t, 2, storetest.NewClock(t0).Now)
	const key = pay.EffectLoyalty + ":evt_1"
	var (
		runs    int
		claimed bool
	)
	err := dbs[0].Update(ctx, func(tx store.Tx) error {
		runs++
		if err := tx.LockEffects([]string{key}); err != nil {
			return err
		}
		if runs == 1 {
			// The other instance, while this transaction holds the key
			// as free.
			if err := dbs[1].Update(ctx, func(tx store.Tx) error {
				ok, err := tx.ClaimEffect(store.EffectRecord{Key: key, DeliveryID: "dlv_other"})
				if err == nil && !ok {
					err = fmt.Errorf("the other instance could not claim a free key")
				}
				return err
			}); err != nil {
				return err
			}
		}
		var err error
		claimed, err = tx.ClaimEffect(store.EffectRecord{Key: key, DeliveryID: "dlv_mine"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if claimed {
		t.Fatalf("claimed a key the other instance claimed first (%d runs)", runs)
	}
	var r store.EffectRecord
	if err := dbs[0].View(ctx, func(tx store.Tx) (err error) { r, _, err = tx.Effect(key); return err }); err != nil {
		t.Fatal(err)
	}
	if r.DeliveryID != "dlv_other" {
		t.Fatalf("the key's record is %+v, want the other instance's (dlv_other)", r)
	}
}
