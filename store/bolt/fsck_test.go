package bolt_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// openChecked opens path, checks the whole database and returns it with
// the pages the check at open read.
func openChecked(t *testing.T, path string, opts *bolt.Options) (*bolt.DB, int) {
	t.Helper()
	db, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); err != nil {
		db.Close()
		t.Fatalf("Check: %v", err)
	}
	return db, bolt.CheckedPages(db)
}

// mustClose closes db.
func mustClose(t *testing.T, db *bolt.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpen_CleanShutdown: after a clean Close the next Open reads a few
// pages, not the file; after a crash (a copy taken while the database was
// open), or once anything has written the file since, it reads every page
// again. The data and bbolt's freelist stay sound either way (DB.Check).
func TestOpen_CleanShutdown(t *testing.T) {
	t.Parallel()
	const few, many = 4, 150 // pages: the 3,000 payments take ~220
	dir := t.TempDir()
	path := filepath.Join(dir, "paystate.db")
	db, _ := openChecked(t, path, nil)
	err := db.Update(context.Background(), func(tx store.Tx) error {
		for i := range 3000 {
			if err := tx.InsertPayment(payment(i, pay.Captured, t0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)

	db, n := openChecked(t, path, nil)
	if n > few {
		t.Fatalf("open after a clean Close read %d pages, want at most %d", n, few)
	}
	// Written while open, then copied: the copy is a crash.
	if err := db.Update(context.Background(), commitInsert(5000)); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "crashed.db")
	testkit.CopyFile(t, path, crashed)
	mustClose(t, db)

	db, n = openChecked(t, crashed, nil)
	if n < many {
		t.Fatalf("open after a crash read %d pages, want every page (at least %d)", n, many)
	}
	if !commitStored(t, db, 5000) || !commitStored(t, db, 1999) {
		t.Fatal("the crashed copy lost committed payments")
	}
	mustClose(t, db)

	for _, ro := range []bool{false, true} {
		db, n = openChecked(t, path, &bolt.Options{ReadOnly: ro})
		if n > few {
			t.Fatalf("ReadOnly=%t: open after a clean Close read %d pages, want at most %d", ro, n, few)
		}
		mustClose(t, db)
	}

	// A file touched since its clean Close gets the full check.
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	db, n = openChecked(t, path, nil)
	if n < many {
		t.Fatalf("open of a file changed after its clean Close read %d pages, want every page (at least %d)", n, many)
	}
	mustClose(t, db)
}
