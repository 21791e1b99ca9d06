package store_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paystate/paystate/store"
	_ "github.com/paystate/paystate/store/bolt"
	_ "github.com/paystate/paystate/store/postgres"
)

// TestOpen_Unknown: a backend no package registered is refused before
// anything is opened, with an error naming storage.backend and the
// backends the build has.
func TestOpen_Unknown(t *testing.T) {
	t.Parallel()
	if got, want := store.Backends(), []string{"bolt", "postgres"}; !slices.Equal(got, want) {
		t.Fatalf("Backends()=%q, want %q", got, want)
	}
	_, err := store.Open(context.Background(), store.Config{Backend: "sqlite", Path: filepath.Join(t.TempDir(), "x.db")})
	if err == nil || !strings.Contains(err.Error(), `storage.backend "sqlite"`) || !strings.Contains(err.Error(), "bolt, postgres") {
		t.Fatalf("Open(sqlite): %v, want an error naming storage.backend and the backends", err)
	}
}

// TestOpen_Bolt: the bbolt backend declares what it can do, and what it
// cannot: a file one process uses, with a backup, checks and an export,
// and no import.
func TestOpen_Bolt(t *testing.T) {
	t.Parallel()
	d, err := store.Lookup("bolt")
	if err != nil || !d.File || d.CopyInto || d.NoBackup != "" {
		t.Fatalf("Lookup(bolt)=%+v, %v", d, err)
	}
	b, err := store.Open(context.Background(), store.Config{Backend: "bolt", Path: filepath.Join(t.TempDir(), "x.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Store.Close()
	if b.Name != "bolt" || b.Shared || b.CheapEmptyCommit || b.Backup == nil || b.Check == nil || b.CheckLedger == nil ||
		b.Export == nil || b.Import != nil || b.EndLeases == nil || !strings.Contains(b.Migration, "schema version") {
		t.Fatalf("bolt backend: %+v", b)
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestLookup_Postgres: PostgreSQL is shared, copied into, and backed up
// with its own tools, which is known without a connection.
func TestLookup_Postgres(t *testing.T) {
	t.Parallel()
	d, err := store.Lookup("postgres")
	if err != nil || d.File || !d.CopyInto || !strings.Contains(d.NoBackup, "pg_dump") {
		t.Fatalf("Lookup(postgres)=%+v, %v", d, err)
	}
}
