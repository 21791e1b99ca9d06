package postgres

// Schema migrations: the versioned SQL files of migrations/, embedded in
// the binary and applied in order, each in the one transaction that
// records it in schema_version, under an advisory lock.

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one file of migrations/: NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded files in version order: 1, 2, 3... without
// gaps. A file that does not fit is a bug of the build, so it panics.
var migrations = func() []migration {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 {
			panic(fmt.Sprintf("migration %s: name is not NNNN_name.sql", base))
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			panic(fmt.Sprintf("migration %s: version %d, want %d", m.name, m.version, i+1))
		}
	}
	return ms
}()

// SchemaVersion is the schema this package reads and writes: the version
// of its last migration. Open migrates an older database to it and refuses
// a newer one.
var SchemaVersion = len(migrations)

// Migrate connects to the database at dsn, applies the migrations it lacks
// (as Open does) and returns the schema version it found and the one it
// left. It is what `paystate migrate` runs, so that the schema can be
// moved before any instance of a new version starts.
func Migrate(ctx context.Context, dsn string) (from, to int, err error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", classify("connect", err, true))
	}
	defer pool.Close()
	from, applied, err := migrate(ctx, pool)
	if err != nil {
		return from, from, fmt.Errorf("migrate: %w", err)
	}
	return from, from + applied, nil
}

// migrate applies the missing migrations in one transaction that holds a
// transaction-level advisory lock on the schema's name: instances that
// start at once on an empty database take turns, the first applies
// everything, the others find it done. It returns the version it found and
// how many migrations it applied. A database with a newer schema than
// SchemaVersion is an error, and so is a schema that holds tables but no
// schema_version table.
func migrate(ctx context.Context, pool *pgxpool.Pool) (found, applied int, err error) {
	ptx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, 0, classify("begin", err, true)
	}
	defer func() { _ = ptx.Rollback(context.WithoutCancel(ctx)) }() // after Commit: nothing
	exec := func(op, sql string, args ...any) error {
		if _, err := ptx.Exec(ctx, sql, args...); err != nil {
			return classify(op, err, false)
		}
		return nil
	}
	// The lock is per schema (the first of the search_path), so that tests
	// that run side by side in schemas of one database do not wait for
	// each other; it ends with the transaction.
	if err := exec("lock", `SELECT pg_advisory_xact_lock(hashtextextended('paystate migrate ' || coalesce(current_schema(), ''), 0))`); err != nil {
		return 0, 0, err
	}
	var (
		schema     *string
		hasVersion bool
		tables     int
	)
	err = ptx.QueryRow(ctx, `SELECT current_schema(), to_regclass('schema_version') IS NOT NULL,
		(SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())`).Scan(&schema, &hasVersion, &tables)
	if err != nil {
		return 0, 0, classify("read schema", err, false)
	}
	if schema == nil {
		return 0, 0, fmt.Errorf("no schema of the search_path exists to create the tables in")
	}
	if !hasVersion {
		if tables > 0 {
			return 0, 0, fmt.Errorf("schema %s holds %d tables but no schema_version: not a paystate database", *schema, tables)
		}
		if err := exec("create schema_version", `CREATE TABLE schema_version (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return 0, 0, err
		}
	}
	if err := ptx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&found); err != nil {
		return 0, 0, classify("read schema version", err, false)
	}
	if found > SchemaVersion {
		return found, 0, fmt.Errorf("database schema version %d is newer than this binary knows (%d): run a newer paystate", found, SchemaVersion)
	}
	for _, m := range migrations[found:] {
		if err := exec("apply "+m.name, m.sql); err != nil {
			return found, 0, err
		}
		if err := exec("record "+m.name, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return found, 0, err
		}
		applied++
	}
	if err := ptx.Commit(ctx); err != nil {
		return found, 0, classify("commit", err, true)
	}
	return found, applied, nil
}

// SchemaVersion returns the schema version the database holds: the last
// migration recorded in schema_version.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := db.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, classify("read schema version", err, true)
	}
	return v, nil
}
