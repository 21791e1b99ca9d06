package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/store/postgres"
)

// The tests run against a real PostgreSQL 15: the one at
// PAYSTATE_TEST_PG_DSN if set, else a throwaway cluster that
// scripts/postgres.sh starts (installing PostgreSQL from Debian's packages
// if it is missing) and removes when the tests end. Each test gets a
// schema of its own (newSchema), so tests run in parallel on one database.

var (
	// testDSN is the database every test makes its schema in.
	testDSN string
	// admin creates and drops the tests' schemas.
	admin *pgxpool.Pool
	// schemas numbers the tests' schemas.
	schemas atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

// runMain finds or starts PostgreSQL, runs the tests and stops what it
// started. It fails the run, never skips it, when PostgreSQL cannot be had.
func runMain(m *testing.M) int {
	var err error
	if testDSN, err = pgtest.DSN(); err != nil {
		fmt.Fprintf(os.Stderr, "store/postgres: %v\n", err)
		return 1
	}
	defer pgtest.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if admin, err = pgxpool.New(ctx, testDSN); err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "store/postgres: connect to the test database: %v\n", err)
		return 1
	}
	defer admin.Close()
	defer dropReused()
	return m.Run()
}

// newSchema returns the DSN of a schema that holds paystate's tables and
// no rows, for tb alone: a schema that an earlier test emptied, or a new
// one. When tb ends, after the stores opened on it later are closed, the
// schema is emptied for the next test (dropped if that fails). Emptying
// tables costs a fraction of creating them, and the suite has a hundred
// tests.
func newSchema(tb testing.TB) string {
	tb.Helper()
	reuse.Lock()
	var name string
	if n := len(reuse.names); n > 0 {
		name, reuse.names = reuse.names[n-1], reuse.names[:n-1]
	}
	reuse.Unlock()
	if name == "" {
		name = createSchema(tb)
		if _, _, err := postgres.Migrate(context.Background(), withSearchPath(tb, testDSN, name)); err != nil {
			tb.Fatalf("migrate schema %s: %v", name, err)
		}
	}
	tb.Cleanup(func() {
		if err := emptySchema(name); err != nil {
			tb.Errorf("empty schema %s: %v", name, err)
			dropSchema(tb, name)
			return
		}
		reuse.Lock()
		reuse.names = append(reuse.names, name)
		reuse.Unlock()
	})
	return withSearchPath(tb, testDSN, name)
}

// reuse holds the schemas that tests emptied.
var reuse struct {
	sync.Mutex
	names []string
}

// newEmptySchema creates a schema without tables for tb and returns its
// DSN; the schema is dropped when tb ends.
func newEmptySchema(tb testing.TB) string {
	tb.Helper()
	name := createSchema(tb)
	tb.Cleanup(func() { dropSchema(tb, name) })
	return withSearchPath(tb, testDSN, name)
}

// createSchema creates a schema with a name no other test uses.
func createSchema(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), schemas.Add(1))
	if _, err := admin.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	return name
}

// dropSchema drops a schema and everything in it.
func dropSchema(tb testing.TB, name string) {
	if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
		tb.Errorf("drop schema %s: %v", name, err)
	}
}

// emptySchema deletes the rows of every table of a migrated schema but
// schema_version, and sets the counters of meta back to 0, in one
// transaction: the schema is then what Migrate makes of an empty one.
func emptySchema(name string) error {
	ctx := context.Background()
	rows, err := admin.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename NOT IN ('schema_version', 'meta')`, name)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var b pgx.Batch
	for _, table := range tables {
		b.Queue("DELETE FROM " + name + "." + table)
	}
	b.Queue("UPDATE " + name + ".meta SET value = 0")
	return pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
}

// dropReused drops the schemas that tests left for reuse.
func dropReused() {
	reuse.Lock()
	defer reuse.Unlock()
	for _, name := range reuse.names {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "store/postgres: drop schema %s: %v\n", name, err)
		}
	}
	reuse.names = nil
}

// withSearchPath returns dsn with the search_path set to schema.
func withSearchPath(tb testing.TB, dsn, schema string) string {
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("parse DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// mustOpen opens a store on dsn and closes it when the test ends.
func mustOpen(tb testing.TB, dsn string, opts *postgres.Options) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return db
}
