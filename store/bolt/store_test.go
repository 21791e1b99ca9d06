package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

func TestDB(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return bolttest.MustOpen(t, &bolt.Options{Now: now})
	})
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// payment returns payment i in status s, created at t0 and updated at
// updated.
func payment(i int, s pay.Status, updated time.Time) pay.Payment {
	return pay.Payment{
		ID: fmt.Sprintf("pay_%026d", i), OrderID: fmt.Sprintf("order-%d", i), Amount: 1000, Currency: "EUR",
		Provider: "mock", Status: s, Version: 1, CreatedAt: t0, UpdatedAt: updated,
	}
}

// open opens the database at path, closed at cleanup.
func open(t *testing.T, path string, opts *bolt.Options) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// insertPayments stores payments in one transaction.
func insertPayments(t *testing.T, db *bolt.DB, ps ...pay.Payment) {
	t.Helper()
	err := db.Update(context.Background(), func(tx store.Tx) error {
		for _, p := range ps {
			if err := tx.InsertPayment(p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newFile creates a database file holding ps, closes it and returns its
// path.
func newFile(t *testing.T, ps ...pay.Payment) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "paystate.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	insertPayments(t, db, ps...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantStatus fails the test unless db holds payment id in status want.
func wantStatus(t *testing.T, db *bolt.DB, id string, want pay.Status) {
	t.Helper()
	var got pay.Payment
	if err := db.View(context.Background(), func(tx store.Tx) (err error) { got, err = tx.Payment(id); return err }); err != nil {
		t.Fatal(err)
	}
	if got.Status != want {
		t.Fatalf("Status=%s, want %s", got.Status, want)
	}
}

func TestOpen_Reopen(t *testing.T) {
	t.Parallel()
	want := payment(1, pay.Processing, t0)
	db := open(t, newFile(t, want), nil)
	wantStatus(t, db, want.ID, want.Status)
	err := bolt.BoltDB(db).View(func(btx *bbolt.Tx) error {
		v := btx.Bucket(bolt.BucketMeta).Get(bolt.KeySchemaVersion)
		if got, want := fmt.Sprintf("%x", v), fmt.Sprintf("%016x", bolt.SchemaVersion); got != want {
			t.Fatalf("schema version=%s, want %s", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_NewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "paystate.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bolt.BoltDB(db).Update(func(btx *bbolt.Tx) error {
		return btx.Bucket(bolt.BucketMeta).Put(bolt.KeySchemaVersion, []byte{0, 0, 0, 0, 0, 0, 0, bolt.SchemaVersion + 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, ro := range []bool{false, true} {
		db, err = bolt.Open(path, &bolt.Options{ReadOnly: ro})
		if err == nil {
			db.Close()
			t.Fatalf("ReadOnly=%t: Open of a newer schema succeeded", ro)
		}
		if !strings.Contains(err.Error(), "newer") {
			t.Fatalf("ReadOnly=%t: error %q does not say the schema is newer", ro, err)
		}
	}
}

func TestOpen_NotPaystate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "other.db")
	bdb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(btx *bbolt.Tx) error { _, err := btx.CreateBucket([]byte("widgets")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err := bolt.Open(path, nil); err == nil {
		db.Close()
		t.Fatal("Open of a foreign bbolt file succeeded")
	}
}

func TestOpen_Locked(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	second, err := bolt.Open(db.Path(), &bolt.Options{Timeout: 50 * time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatal("a second Open of a held file succeeded")
	}
	if !errors.Is(err, berrors.ErrTimeout) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("error %q, want a locked database (bbolt errors.ErrTimeout)", err)
	}
}

// TestOpen_ErrLocked: a file that another process holds is refused with an
// error that wraps store.ErrLocked, so a command can say so without
// knowing bbolt's errors.
func TestOpen_ErrLocked(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	second, err := bolt.Open(db.Path(), &bolt.Options{Timeout: 10 * time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatal("a second Open of a held file succeeded")
	}
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("error %q does not wrap store.ErrLocked", err)
	}
}

func TestDB_ReadOnly(t *testing.T) {
	t.Parallel()
	db := open(t, newFile(t, payment(1, pay.Created, t0)), &bolt.Options{ReadOnly: true})
	wantStatus(t, db, payment(1, "", t0).ID, pay.Created)
	ran := false
	err := db.Update(context.Background(), func(tx store.Tx) error { ran = true; return nil })
	if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want {
		t.Fatalf("Update on a read-only database: error %v: code=%q, want %q", err, got, want)
	}
	if !errors.Is(err, berrors.ErrDatabaseReadOnly) {
		t.Fatalf("error %v does not wrap %v", err, berrors.ErrDatabaseReadOnly)
	}
	if got, want := pay.ErrorMessage(err), "storage is unavailable"; got != want {
		t.Fatalf("ErrorMessage=%q, want %q", got, want)
	}
	if ran {
		t.Fatal("fn ran on a read-only database")
	}
	if err := db.Check(); err != nil {
		t.Fatalf("Check on a read-only database: %v", err)
	}
}

func TestDB_Closed(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err := db.Update(ctx, func(tx store.Tx) error { return nil })
	if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want {
		t.Fatalf("Update after Close: error %v: code=%q, want %q", err, got, want)
	}
	err = db.View(ctx, func(tx store.Tx) error { return nil })
	if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want {
		t.Fatalf("View after Close: error %v: code=%q, want %q", err, got, want)
	}
}

// sweep is what the sweeper asks for.
var sweep = []pay.Status{pay.FinalizePending, pay.Expired, pay.Processing, pay.RequiresAction}

// fill stores n payments of which the first candidates are sweep
// candidates before bound (finalize_pending, updated before t0+1h) and the
// rest are not (captured, or processing updated after the bound), in
// transactions of 10,000.
func fill(tb testing.TB, db *bolt.DB, n, candidates int) (bound time.Time) {
	tb.Helper()
	bound = t0.Add(time.Hour)
	const batch = 10_000
	for start := 0; start < n; start += batch {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				var p pay.Payment
				switch {
				case i < candidates:
					p = payment(i, pay.FinalizePending, t0.Add(time.Duration(i)*time.Millisecond))
				case i%2 == 0:
					p = payment(i, pay.Captured, t0.Add(time.Duration(i)*time.Millisecond))
				default:
					p = payment(i, pay.Processing, bound.Add(time.Duration(i)*time.Millisecond))
				}
				if err := tx.InsertPayment(p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return bound
}

func TestDB_CandidatesMany(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	const n, candidates = 10_000, 100
	bound := fill(t, db, n, candidates)

	err := db.View(context.Background(), func(tx store.Tx) error {
		ps, err := tx.Candidates(sweep, bound, 1000)
		if err != nil {
			return err
		}
		if got, want := len(ps), candidates; got != want {
			t.Fatalf("len(Candidates)=%d, want %d", got, want)
		}
		for i, p := range ps {
			if got, want := p.ID, payment(i, "", t0).ID; got != want {
				t.Fatalf("Candidates[%d]=%s, want %s", i, got, want)
			}
		}
		// Only the candidates' index entries were read, not the 5,000
		// processing payments after the bound nor the captured ones.
		if got, want := bolt.IndexSteps(tx), candidates; got != want {
			t.Fatalf("index entries visited=%d, want %d", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDB_WriteTo(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	want := payment(1, pay.Captured, t0)
	insertPayments(t, db, want)

	path := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := db.WriteTo(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != n {
		t.Fatalf("backup is %v bytes (%v), WriteTo said %d", fi.Size(), err, n)
	}

	backup := open(t, path, nil)
	wantStatus(t, backup, want.ID, want.Status)
	if err := backup.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestDB_Check(t *testing.T) {
	t.Parallel()
	p := payment(1, pay.Processing, t0)
	db := open(t, newFile(t, p), nil)
	if err := db.Check(); err != nil {
		t.Fatalf("Check of a sound database: %v", err)
	}

	// A status index entry without its payment, and a payment without one.
	err := bolt.BoltDB(db).Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bolt.BucketPaymentsByStatus)
		k, _ := b.Cursor().First()
		if k == nil {
			return errors.New("empty status index")
		}
		if err := b.Delete(k); err != nil {
			return err
		}
		return b.Put([]byte("failed\x00\x00\x00\x00\x00\x00\x00\x00\x01pay_ghost"), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Check()
	if err == nil {
		t.Fatal("Check of a damaged index found nothing")
	}
	if !strings.Contains(err.Error(), p.ID) {
		t.Fatalf("Check error %q does not name payment %s", err, p.ID)
	}
}

func BenchmarkCandidates(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("payments=%d", n), func(b *testing.B) {
			db := bolttest.MustOpen(b, nil)
			const candidates = 100
			bound := fill(b, db, n, candidates)
			ctx := context.Background()
			for b.Loop() {
				err := db.View(ctx, func(tx store.Tx) error {
					ps, err := tx.Candidates(sweep, bound, 1000)
					if err == nil && len(ps) != candidates {
						err = fmt.Errorf("%d candidates, want %d", len(ps), candidates)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDB_EndLeases: a lease left in force by a process that died is ended
// when the file is opened again; its token is kept, so the next holder
// still fences the dead one.
func TestDB_EndLeases(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	ctx := context.Background()
	var dead pay.Lease
	err := db.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.AcquireLease("pay_old", "gone", time.Second); err != nil {
			return err
		}
		var err error
		dead, err = tx.AcquireLease("pay_held", "crashed", time.Hour)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Second) // pay_old's lease ran out by itself

	n, err := db.EndLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 1; got != want {
		t.Fatalf("ended=%d, want %d", got, want)
	}
	var next pay.Lease
	if err := db.Update(ctx, func(tx store.Tx) (err error) { next, err = tx.AcquireLease("pay_held", "new", time.Minute); return err }); err != nil {
		t.Fatalf("lease of a dead process still held: %v", err)
	}
	if got, want := next.Token, dead.Token+1; got != want {
		t.Fatalf("Token=%d, want %d", got, want)
	}
}

// TestOpen_FillsPaymentDisputes gives the payments of a file written
// before payments carried their dispute's status (or by such a binary
// since) that status at the next writable open, from their disputes: the
// refund rule reads it.
func TestOpen_FillsPaymentDisputes(t *testing.T) {
	t.Parallel()
	lost, won, open2, none := payment(1, pay.Captured, t0), payment(2, pay.Captured, t0), payment(3, pay.Captured, t0), payment(4, pay.Captured, t0)
	path := newFile(t, lost, won, open2, none)
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(context.Background(), func(tx store.Tx) error {
		for i, d := range []struct {
			p  pay.Payment
			st pay.DisputeStatus
		}{{lost, pay.DisputeLost}, {won, pay.DisputeWon}, {open2, pay.DisputeWon}, {open2, pay.DisputeUnderReview}} {
			if err := tx.PutDispute(pay.Dispute{Provider: "mock", ID: fmt.Sprintf("dp_%d", i), PaymentID: d.p.ID, Amount: 100,
				Currency: "EUR", Status: d.st, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, path, nil)
	for id, want := range map[string]pay.DisputeStatus{lost.ID: pay.DisputeLost, won.ID: pay.DisputeWon, open2.ID: pay.DisputeUnderReview, none.ID: ""} {
		var p pay.Payment
		if err := db.View(context.Background(), func(tx store.Tx) (err error) { p, err = tx.Payment(id); return err }); err != nil {
			t.Fatal(err)
		}
		if p.Dispute != want || p.Version != 1 {
			t.Errorf("payment %s: dispute %q version %d, want %q at version 1", id, p.Dispute, p.Version, want)
		}
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
}
