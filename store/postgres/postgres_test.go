package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/postgres"
	"github.com/paystate/paystate/store/storetest"
)

// TestDB runs the conformance suite, each test on an empty schema of its
// own.
func TestDB(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return mustOpen(t, newSchema(t), &postgres.Options{Now: now, MaxConns: 4})
	})
}

// rendezvous returns a function that the n sides of a race call when
// their transactions have begun: the first call of each side blocks until
// every side made its first call, later calls (a retried transaction)
// return at once. A side must not hold a lock that another side needs
// before its own first call: that side would wait for the lock, never
// reach the rendezvous.
func rendezvous(n int) func(side int) {
	var wg sync.WaitGroup
	wg.Add(n)
	once := make([]sync.Once, n)
	return func(side int) {
		once[side].Do(func() {
			wg.Done()
			wg.Wait()
		})
	}
}

// race runs fn(side, db) for each of the stores at once and returns their
// errors, by side.
func race(dbs []*postgres.DB, fn func(side int, db *postgres.DB) error) []error {
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() { errs[i] = fn(i, db) })
	}
	wg.Wait()
	return errs
}

// pools opens n stores, each with its own connection pool, on one new
// schema: n instances of paystate sharing a database.
func pools(t *testing.T, n int, now func() time.Time) []*postgres.DB {
	dsn := newSchema(t)
	var dbs []*postgres.DB
	for range n {
		dbs = append(dbs, mustOpen(t, dsn, &postgres.Options{Now: now, MaxConns: 2}))
	}
	return dbs
}

// winners checks that exactly one error is nil and the others carry code,
// and returns the winner's side.
func winners(t *testing.T, errs []error, code string) int {
	t.Helper()
	won := -1
	for i, err := range errs {
		switch got := pay.ErrorCode(err); {
		case err == nil && won < 0:
			won = i
		case err == nil:
			t.Fatalf("sides %d and %d both won", won, i)
		case got != code:
			t.Fatalf("side %d: error %v: code=%q, want %q", i, err, got, code)
		}
	}
	if won < 0 {
		t.Fatalf("no side won: %v", errs)
	}
	return won
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// TestMigrate_Concurrent: three instances that start at once on an empty
// database apply the migrations once, under the advisory lock, and all
// open.
func TestMigrate_Concurrent(t *testing.T) {
	t.Parallel()
	dsn := newEmptySchema(t)
	dbs := make([]*postgres.DB, 3)
	var wg sync.WaitGroup
	errs := make([]error, len(dbs))
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = postgres.Open(context.Background(), dsn, nil) })
	}
	wg.Wait()
	applied := 0
	for i, db := range dbs {
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
		defer db.Close()
		applied += db.Migrated()
		v, err := db.SchemaVersion(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := v, postgres.SchemaVersion; got != want {
			t.Fatalf("SchemaVersion=%d, want %d", got, want)
		}
	}
	if got, want := applied, postgres.SchemaVersion; got != want {
		t.Fatalf("migrations applied by the three Opens=%d, want %d (each once)", got, want)
	}
	var rows int
	if err := dbs[0].View(context.Background(), func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM `+schemaOf(t, dsn)+`.schema_version`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if got, want := rows, postgres.SchemaVersion; got != want {
		t.Fatalf("rows of schema_version=%d, want %d", got, want)
	}

	// Again: nothing to do.
	from, to, err := postgres.Migrate(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if from != postgres.SchemaVersion || to != postgres.SchemaVersion {
		t.Fatalf("Migrate=%d→%d, want %d→%d", from, to, postgres.SchemaVersion, postgres.SchemaVersion)
	}
}

// schemaOf returns the search_path that newSchema put in dsn.
func schemaOf(t *testing.T, dsn string) string {
	_, after, ok := strings.Cut(dsn, "search_path=")
	if !ok {
		t.Fatalf("no search_path in %s", dsn)
	}
	name, _, _ := strings.Cut(after, "&")
	return name
}

// TestMigrate_Newer: a database with a newer schema is refused, and so is
// a schema that holds tables of something else.
func TestMigrate_Newer(t *testing.T) {
	t.Parallel()
	dsn := newEmptySchema(t)
	from, to, err := postgres.Migrate(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if from != 0 || to != postgres.SchemaVersion {
		t.Fatalf("Migrate of an empty schema=%d→%d, want 0→%d", from, to, postgres.SchemaVersion)
	}
	if _, err := admin.Exec(context.Background(), `INSERT INTO `+schemaOf(t, dsn)+`.schema_version (version, name) VALUES ($1, 'from_the_future')`,
		postgres.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(context.Background(), dsn, nil); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want an error that says it is newer", err)
	}

	other := newEmptySchema(t)
	if _, err := admin.Exec(context.Background(), `CREATE TABLE `+schemaOf(t, other)+`.orders (id int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(context.Background(), other, nil); err == nil || !strings.Contains(err.Error(), "not a paystate database") {
		t.Fatalf("Open of a foreign schema: %v, want not a paystate database", err)
	}
}

// TestDB_CASRace: two instances compare-and-set the same payment, in
// transactions that run at once, from the version both read before: exactly
// one wins, the other gets ECONFLICT, and the payment has the winner's
// write.
func TestDB_CASRace(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	dbs := pools(t, 2, clock.Now)
	p := pay.Payment{ID: "pay_1", OrderID: "order-1", Amount: 1000, Currency: "EUR", Provider: "mock",
		Status: pay.Created, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := dbs[0].Update(context.Background(), func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
	meet := rendezvous(2)
	outcome := []pay.Status{pay.Captured, pay.Failed}
	errs := race(dbs, func(side int, db *postgres.DB) error {
		var read pay.Payment
		if err := db.View(context.Background(), func(tx store.Tx) (err error) { read, err = tx.Payment(p.ID); return err }); err != nil {
			return err
		}
		return db.Update(context.Background(), func(tx store.Tx) error {
			meet(side) // both have read version 1, and both transactions run
			next := read
			next.Status, next.Version, next.UpdatedAt = outcome[side], 2, tx.Now()
			return tx.UpdatePayment(next, 1)
		})
	})
	won := winners(t, errs, pay.ECONFLICT)
	var got pay.Payment
	if err := dbs[1-won].View(context.Background(), func(tx store.Tx) (err error) { got, err = tx.Payment(p.ID); return err }); err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Status != outcome[won] {
		t.Fatalf("payment after the race: version %d, %s; want version 2, %s (the winner's)", got.Version, got.Status, outcome[won])
	}
}

// TestDB_LeaseRace: two instances take the same payment's lease at once:
// one gets token 1, the other ELEASEHELD.
func TestDB_LeaseRace(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	dbs := pools(t, 2, clock.Now)
	meet := rendezvous(2)
	leases := make([]pay.Lease, 2)
	errs := race(dbs, func(side int, db *postgres.DB) error {
		return db.Update(context.Background(), func(tx store.Tx) error {
			meet(side) // both transactions run
			var err error
			leases[side], err = tx.AcquireLease("pay_1", fmt.Sprintf("instance-%d", side), time.Minute)
			return err
		})
	})
	won := winners(t, errs, pay.ELEASEHELD)
	if got, want := leases[won].Token, uint64(1); got != want {
		t.Fatalf("Token=%d, want %d", got, want)
	}
	var l pay.Lease
	if err := dbs[0].View(context.Background(), func(tx store.Tx) (err error) { l, err = tx.Lease("pay_1"); return err }); err != nil {
		t.Fatal(err)
	}
	if l.Holder != fmt.Sprintf("instance-%d", won) || l.Token != 1 {
		t.Fatalf("Lease=%+v, want the winner's, token 1", l)
	}
}

// TestDB_IdemKeyRace: two instances claim the same idempotency key at once
// (ClaimIdemKey, no lock taken before): one claims it, the other finds
// the first one's claim and gets EKEYINUSE. Then both find the record
// expired and take it over at once (ClaimIdemKey reads it with its row
// locked, then PutIdemKey): the second finds the first one's take-over.
func TestDB_IdemKeyRace(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	dbs := pools(t, 2, clock.Now)
	const key = "create:merchant:order-1"
	claim := func(side int, db *postgres.DB, meet func(int)) error {
		return db.Update(context.Background(), func(tx store.Tx) error {
			meet(side) // both transactions run
			r := pay.IdemRecord{
				Key: key, Fingerprint: "ab12", State: pay.IdemInFlight, Owner: fmt.Sprintf("instance-%d", side),
				LockedUntil: tx.Now().Add(time.Minute), ExpiresAt: tx.Now().Add(24 * time.Hour),
			}
			stored, claimed, err := tx.ClaimIdemKey(r)
			switch {
			case err != nil || claimed:
				return err
			case tx.Now().Before(stored.ExpiresAt):
				return pay.Errorf(pay.EKEYINUSE, "key in flight at %s", stored.Owner)
			}
			return tx.PutIdemKey(r) // expired: taken over
		})
	}
	owner := func() string {
		var r pay.IdemRecord
		if err := dbs[0].View(context.Background(), func(tx store.Tx) (err error) { r, err = tx.IdemKey(key); return err }); err != nil {
			t.Fatal(err)
		}
		return r.Owner
	}
	for _, round := range []string{"claim", "take-over of the expired key"} {
		meet := rendezvous(2)
		errs := race(dbs, func(side int, db *postgres.DB) error { return claim(side, db, meet) })
		won := winners(t, errs, pay.EKEYINUSE)
		if got, want := owner(), fmt.Sprintf("instance-%d", won); got != want {
			t.Fatalf("%s: Owner=%s, want %s (the winner)", round, got, want)
		}
		clock.Add(25 * time.Hour)
	}
}

// TestDB_DueDeliveriesSkipLocked: while one instance's write transaction
// holds the due delivery it took, another instance's gets the next one,
// never the same, nor one that waits behind it in its payment's line; a
// read transaction locks nothing and sees them all.
func TestDB_DueDeliveriesSkipLocked(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	dbs := pools(t, 2, clock.Now)
	dlv := func(i int, payment string, seq uint64) pay.Delivery {
		return pay.Delivery{
			ID: fmt.Sprintf("dlv_%d", i), Effect: pay.EffectLoyalty, EventID: fmt.Sprintf("evt_%d", seq), EventType: "payment.captured",
			EventSeq: seq, EventAt: t0, PaymentID: payment, State: pay.DeliveryPending, NextAttemptAt: t0.Add(time.Duration(i) * time.Second),
		}
	}
	err := dbs[0].Update(context.Background(), func(tx store.Tx) error {
		// 1 and 3 are records of payment a (3 waits for 1), 2 of b.
		for _, d := range []pay.Delivery{dlv(1, "pay_a", 1), dlv(2, "pay_b", 2), dlv(3, "pay_a", 3)} {
			if err := tx.InsertDelivery(d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	ids := func(ds []pay.Delivery) string {
		var s []string
		for _, d := range ds {
			s = append(s, d.ID)
		}
		return strings.Join(s, ",")
	}

	took, release := make(chan string, 1), make(chan struct{})
	var firstErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		firstErr = dbs[0].Update(context.Background(), func(tx store.Tx) error {
			ds, err := tx.DueDeliveries(tx.Now(), 1)
			if err != nil {
				return err
			}
			took <- ids(ds)
			<-release
			return nil
		})
	})
	if got, want := <-took, "dlv_1"; got != want {
		close(release)
		wg.Wait()
		t.Fatalf("first instance took %q, want %q", got, want)
	}
	var second, seen string
	err = dbs[1].Update(context.Background(), func(tx store.Tx) error {
		ds, err := tx.DueDeliveries(tx.Now(), 10)
		second = ids(ds)
		return err
	})
	if err == nil {
		err = dbs[1].View(context.Background(), func(tx store.Tx) error {
			ds, err := tx.DueDeliveries(tx.Now(), 10)
			seen = ids(ds)
			return err
		})
	}
	close(release)
	wg.Wait()
	if err != nil || firstErr != nil {
		t.Fatalf("second instance: %v; first: %v", err, firstErr)
	}
	if want := "dlv_2"; second != want {
		t.Fatalf("second instance took %q, want %q (not the locked one, nor the one behind it)", second, want)
	}
	if want := "dlv_1,dlv_2"; seen != want {
		t.Fatalf("View saw %q, want %q", seen, want)
	}

	// Skipping: the same, in pages.
	err = dbs[1].Update(context.Background(), func(tx store.Tx) error {
		ds, err := tx.DueDeliveriesSkipping(tx.Now(), 10, func(id string) bool { return id == "dlv_1" })
		second = ids(ds)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "dlv_2"; second != want {
		t.Fatalf("DueDeliveriesSkipping=%q, want %q", second, want)
	}
}

// TestDB_Unavailable: a closed store and a server that does not answer
// are EUNAVAILABLE, with a message that names no host.
func TestDB_Unavailable(t *testing.T) {
	t.Parallel()
	db, err := postgres.Open(context.Background(), newSchema(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for name, err := range map[string]error{
		"Update": db.Update(context.Background(), func(tx store.Tx) error { return nil }),
		"View":   db.View(context.Background(), func(tx store.Tx) error { return nil }),
	} {
		if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want {
			t.Fatalf("%s after Close: error %v: code=%q, want %q", name, err, got, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, "postgres://paystate:secret@127.0.0.1:1/paystate?sslmode=disable&connect_timeout=5", nil)
	if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want {
		t.Fatalf("Open of a closed port: error %v: code=%q, want %q", err, got, want)
	}
	if msg := pay.ErrorMessage(err); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "secret") {
		t.Fatalf("client message %q names the server or the password", msg)
	}
}

// TestDB_Retry: two transactions that take the locks of two records in
// opposite orders deadlock; PostgreSQL ends one of them (after its
// deadlock_timeout, 1 s by default), whose function runs again on a fresh
// read, and both commit, each OnCommit callback once, with no update lost.
func TestDB_Retry(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	dbs := pools(t, 2, clock.Now)
	customers := []string{"cus_1", "cus_2"}
	if err := dbs[0].Update(context.Background(), func(tx store.Tx) error {
		for _, id := range customers {
			if err := tx.PutCustomerAccount(store.CustomerAccount{ID: id}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	meet := rendezvous(2)
	var mu sync.Mutex
	runs, commits := map[int]int{}, map[int]int{}
	credit := func(tx store.Tx, id string) error {
		c, err := tx.CustomerAccount(id)
		if err != nil {
			return err
		}
		c.Points += 10
		return tx.PutCustomerAccount(c)
	}
	errs := race(dbs, func(side int, db *postgres.DB) error {
		first, second := customers[side], customers[1-side]
		return db.Update(context.Background(), func(tx store.Tx) error {
			mu.Lock()
			runs[side]++
			mu.Unlock()
			if err := credit(tx, first); err != nil {
				return err
			}
			tx.OnCommit(func() { mu.Lock(); commits[side]++; mu.Unlock() })
			// Each holds its first record's lock, which the other wants
			// next: a deadlock. (A retry passes at once.)
			meet(side)
			return credit(tx, second)
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("side %d: %v", i, err)
		}
	}
	for _, id := range customers {
		var c store.CustomerAccount
		if err := dbs[0].View(context.Background(), func(tx store.Tx) (err error) { c, err = tx.CustomerAccount(id); return err }); err != nil {
			t.Fatal(err)
		}
		if got, want := c.Points, int64(20); got != want {
			t.Fatalf("%s: Points=%d, want %d (no lost update)", id, got, want)
		}
	}
	if runs[0]+runs[1] < 3 {
		t.Fatalf("runs=%v, want one side run again", runs)
	}
	a, b := dbs[0].Stats(), dbs[1].Stats()
	if got, want := a.Commits+b.Commits, int64(3); got != want {
		t.Fatalf("Commits=%d, want %d", got, want)
	}
	if got, want := a.Retries+b.Retries, int64(runs[0]+runs[1]-2); got != want {
		t.Fatalf("Retries=%d, want %d (the runs after the first of each side)", got, want)
	}
	if commits[0] != 1 || commits[1] != 1 {
		t.Fatalf("OnCommit calls=%v, want one per side", commits)
	}
}
