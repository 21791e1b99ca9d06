// Package backends lists the storage backends that tests of the layers
// above the store run against: a bbolt file in the test's directory and a
// schema of its own on a real PostgreSQL (internal/testkit/pgtest). A
// package that uses it stops the shared PostgreSQL in its TestMain
// (pgtest.Stop).
package backends

import (
	"context"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/postgres"
)

// Backend opens a fresh store of one kind for a test, with the clock now;
// the test's cleanup closes it.
type Backend struct {
	Name string
	Open func(t *testing.T, now func() time.Time) store.Store
}

// All are the two backends, bbolt first.
var All = []Backend{
	{"bolt", func(t *testing.T, now func() time.Time) store.Store {
		return bolttest.MustOpen(t, &bolt.Options{Now: now})
	}},
	{"postgres", func(t *testing.T, now func() time.Time) store.Store {
		db, err := postgres.Open(context.Background(), pgtest.Schema(t), &postgres.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}},
}
