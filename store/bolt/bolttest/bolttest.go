// Package bolttest opens the bbolt store of package store/bolt for a test, as
// bbolt's own btesting does: MustOpen makes a bolt.DB in tb.TempDir() and
// checks it when the test ends. It is the bbolt side of the conformance
// suite: package store/storetest knows only store.Store, and the store's
// test runs it with this opener:
//
//	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
//		return bolttest.MustOpen(t, &bolt.Options{Now: now})
//	})
//
// Tests of other packages that need a real store use MustOpen too.
package bolttest

import (
	"path/filepath"
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store/bolt"
)

// MustOpen opens a bolt.DB in tb.TempDir() and fails the test if it
// cannot. When the test ends it runs DB.Check (bbolt's tx.Check and the
// check of every record family) and fails the test on any problem, then
// closes the database; a test that closed the database itself skips the
// check (Check of a closed database is EUNAVAILABLE). opts may be nil.
func MustOpen(tb testing.TB, opts *bolt.Options) *bolt.DB {
	tb.Helper()
	db, err := bolt.Open(filepath.Join(tb.TempDir(), "paystate.db"), opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Check(); err != nil && pay.ErrorCode(err) != pay.EUNAVAILABLE {
			tb.Errorf("check store: %v", err)
		}
		if err := db.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return db
}
