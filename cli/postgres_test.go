package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paystate/paystate/internal/testkit/pgtest"
)

// The PostgreSQL that pgtest may have started is removed after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestCommands_Postgres: migrate, verify and backup with a config whose
// storage.backend is "postgres": migrate applies the schema once and says
// so, verify checks the (empty) database, backup refuses and names
// pg_dump with exit status 2.
func TestCommands_Postgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	cfg := filepath.Join(t.TempDir(), "pg.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[storage]\nbackend = \"postgres\"\ndsn = %q\n[providers.standard]\nwebhook_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n", dsn)), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"migrated from 0", "nothing to migrate"} {
		out, err := runCmd("migrate", "-config", cfg)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("migrate %d: %v\n%s\nwant %q", i+1, err, out, want)
		}
	}
	if out, err := runCmd("verify", "-config", cfg); err != nil || !strings.Contains(out, "0 payments") || !strings.Contains(out, " 0 mismatches") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	out, err := runCmd("backup", "-config", cfg, "-o", filepath.Join(t.TempDir(), "x.db"))
	if code := ExitCode(err); code != 2 || err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("backup on postgres: exit %d, %v\n%s", code, err, out)
	}
}
