package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// commitInsert returns an Update function that inserts payment i.
func commitInsert(i int) func(store.Tx) error {
	return func(tx store.Tx) error { return tx.InsertPayment(payment(i, pay.Created, t0)) }
}

// commitStored reports whether payment i is stored.
func commitStored(t *testing.T, db *bolt.DB, i int) bool {
	t.Helper()
	err := db.View(context.Background(), func(tx store.Tx) error { _, err := tx.Payment(payment(i, "", t0).ID); return err })
	if err != nil && pay.ErrorCode(err) != pay.ENOTFOUND {
		t.Fatal(err)
	}
	return err == nil
}

// holdCommit starts an Update whose function blocks until release is
// closed, and returns once it runs: writes made meanwhile queue up and
// form the next group. wait waits for that Update and checks its error.
func holdCommit(t *testing.T, db *bolt.DB, i int) (release func(), wait func()) {
	t.Helper()
	started, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Update(context.Background(), func(tx store.Tx) error {
			close(started)
			<-hold
			return commitInsert(i)(tx)
		})
	}()
	<-started
	return func() { close(hold) }, func() {
		if err := <-done; err != nil {
			t.Errorf("held Update: %v", err)
		}
	}
}

// waitQueued waits until n writes have queued behind a running commit.
func waitQueued(t *testing.T, db *bolt.DB, n int) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, func() error {
		if got := bolt.CommitStats(db).Queued; got != n {
			return fmt.Errorf("%d writes queued, want %d", got, n)
		}
		return nil
	})
}

// TestDB_UpdateConcurrent: many concurrent Updates all commit, in fewer
// commits than writes.
func TestDB_UpdateConcurrent(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	const goroutines, each = 32, 20
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for j := range each {
				if err := db.Update(context.Background(), commitInsert(g*each+j)); err != nil {
					t.Errorf("Update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for i := range goroutines * each {
		if !commitStored(t, db, i) {
			t.Fatalf("payment %d was not committed", i)
		}
	}
	s := bolt.CommitStats(db)
	if got, want := s.Writes, goroutines*each; got != want {
		t.Fatalf("Writes=%d, want %d", got, want)
	}
	if s.Commits != s.Txs || s.Commits > s.Writes {
		t.Fatalf("stats %+v: want Commits = Txs <= Writes", s)
	}
	t.Logf("%d writes in %d commits (%d queued)", s.Writes, s.Commits, s.Queued)
}

// TestDB_UpdateGroup: writes that arrive while a commit runs are committed
// together, in one transaction, once that commit ends.
func TestDB_UpdateGroup(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	release, wait := holdCommit(t, db, 0)
	const n = 10
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { errs <- db.Update(context.Background(), commitInsert(i)) }()
	}
	waitQueued(t, db, n)
	release()
	wait()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n + 1 {
		if !commitStored(t, db, i) {
			t.Fatalf("payment %d was not committed", i)
		}
	}
	s := bolt.CommitStats(db)
	if got, want := s.Writes, n+1; got != want {
		t.Fatalf("Writes=%d, want %d", got, want)
	}
	if got, want := s.Commits, 2; got != want {
		t.Fatalf("Commits=%d, want %d (the held one, then one for the %d queued)", got, want, n)
	}
}

// TestDB_UpdateDrain: groups that keep forming commit one after the
// other without the write that found the committer idle: its Update
// returns once its own commit is done, while the group queued behind it
// is still running, and the writes that queue behind that group form a
// third one, committed in one commit.
func TestDB_UpdateDrain(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	release, wait := holdCommit(t, db, 0)

	// Payment 1 queues behind the held commit and, once its own group
	// runs, blocks there until holdSecond is closed.
	started, holdSecond, second := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		second <- db.Update(context.Background(), func(tx store.Tx) error {
			once.Do(func() { close(started) })
			<-holdSecond
			return commitInsert(1)(tx)
		})
	}()
	waitQueued(t, db, 1)
	release()
	wait() // the first Update returned: it does not lead the next group
	<-started

	const n = 5
	errs := make(chan error, n)
	for i := 2; i < 2+n; i++ {
		go func() { errs <- db.Update(context.Background(), commitInsert(i)) }()
	}
	waitQueued(t, db, 1+n)
	close(holdSecond)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 + n {
		if !commitStored(t, db, i) {
			t.Fatalf("payment %d was not committed", i)
		}
	}
	if got, want := bolt.CommitStats(db).Commits, 3; got != want {
		t.Fatalf("Commits=%d, want %d (the held one, the second alone, then one for the %d queued behind it)", got, want, n)
	}
}

// TestDB_UpdateLone: a write that finds the committer idle commits at
// once, alone: it never queues (there is no timer to wait for), and each
// lone Update is one transaction and one commit.
func TestDB_UpdateLone(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	for i := range 5 {
		if err := db.Update(context.Background(), commitInsert(i)); err != nil {
			t.Fatal(err)
		}
		want := struct{ Writes, Queued, Txs, Commits int }{i + 1, 0, i + 1, i + 1}
		s := bolt.CommitStats(db)
		if got := (struct{ Writes, Queued, Txs, Commits int }{s.Writes, s.Queued, s.Txs, s.Commits}); got != want {
			t.Fatalf("after lone Update %d: stats %+v, want %+v", i, got, want)
		}
	}
}

// TestDB_UpdateGroupFailure: a function that fails, or panics, fails only
// its own Update: the rest of its group commits, each of their OnCommit
// callbacks runs once although their functions ran again, and the
// failing caller gets its own error (or panic) back.
func TestDB_UpdateGroupFailure(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	release, wait := holdCommit(t, db, 0)
	errBoom := errors.New("boom")
	var (
		mu        sync.Mutex
		runs      = map[int]int{}
		callbacks = map[int]int{}
	)
	fn := func(i int) func(store.Tx) error {
		return func(tx store.Tx) error {
			mu.Lock()
			runs[i]++
			mu.Unlock()
			if err := commitInsert(i)(tx); err != nil {
				return err
			}
			tx.OnCommit(func() { mu.Lock(); callbacks[i]++; mu.Unlock() })
			switch i {
			case 2:
				return errBoom
			case 4:
				panic("panic in 4")
			}
			return nil
		}
	}
	type result struct {
		i       int
		err     error
		panicky any
	}
	results := make(chan result, 4)
	for i := 1; i <= 4; i++ {
		go func() {
			defer func() {
				if p := recover(); p != nil {
					results <- result{i: i, panicky: p}
				}
			}()
			err := db.Update(context.Background(), fn(i))
			results <- result{i: i, err: err}
		}()
	}
	waitQueued(t, db, 4)
	release()
	wait()
	for range 4 {
		r := <-results
		switch r.i {
		case 2:
			if r.err != errBoom {
				t.Errorf("Update 2: error %v, want its own %v", r.err, errBoom)
			}
		case 4:
			if got, want := r.panicky, any("panic in 4"); got != want {
				t.Errorf("Update 4: panic %v, want %v (err %v)", got, want, r.err)
			}
		default:
			if r.err != nil || r.panicky != nil {
				t.Errorf("Update %d failed with its group: %v %v", r.i, r.err, r.panicky)
			}
		}
	}
	for i, want := range map[int]bool{1: true, 2: false, 3: true, 4: false} {
		if got := commitStored(t, db, i); got != want {
			t.Errorf("payment %d stored=%t, want %t", i, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, want := range map[int]int{1: 1, 2: 0, 3: 1, 4: 0} {
		if got := callbacks[i]; got != want {
			t.Errorf("write %d: OnCommit ran %d times (fn ran %d times), want %d", i, got, runs[i], want)
		}
	}
	if s := bolt.CommitStats(db); s.Commits != 2 || s.Txs != 4 {
		t.Errorf("stats %+v: want 4 transactions (held, group, group without each failure) and 2 commits", s)
	}
}

// TestDB_UpdateOnCommitOrder: OnCommit callbacks run after the commit
// (they see the write from a new transaction), in the order registered,
// for a lone write and for each write of a group; none run when fn fails.
func TestDB_UpdateOnCommitOrder(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	run := func(i int, fail bool) ([]string, error) {
		var (
			mu  sync.Mutex
			got []string
		)
		err := db.Update(context.Background(), func(tx store.Tx) error {
			mu.Lock()
			got = got[:0]
			mu.Unlock()
			if err := commitInsert(i)(tx); err != nil {
				return err
			}
			for _, name := range []string{"a", "b", "c"} {
				tx.OnCommit(func() {
					seen := commitStored(t, db, i)
					mu.Lock()
					got = append(got, fmt.Sprintf("%s:%t", name, seen))
					mu.Unlock()
				})
			}
			if fail {
				return errors.New("fail")
			}
			return nil
		})
		mu.Lock()
		defer mu.Unlock()
		return got, err
	}
	want := fmt.Sprint([]string{"a:true", "b:true", "c:true"})
	if got, err := run(1, false); err != nil || fmt.Sprint(got) != want {
		t.Fatalf("lone write: callbacks %v (err %v), want %v", got, err, want)
	}
	if got, err := run(2, true); err == nil || len(got) != 0 {
		t.Fatalf("failed write: callbacks %v (err %v), want none", got, err)
	}

	release, wait := holdCommit(t, db, 100)
	const n = 5
	type result struct {
		got []string
		err error
	}
	results := make(chan result, n)
	for i := 10; i < 10+n; i++ {
		go func() { got, err := run(i, false); results <- result{got, err} }()
	}
	waitQueued(t, db, n)
	release()
	wait()
	for range n {
		if r := <-results; r.err != nil || fmt.Sprint(r.got) != want {
			t.Fatalf("grouped write: callbacks %v (err %v), want %v", r.got, r.err, want)
		}
	}
}
