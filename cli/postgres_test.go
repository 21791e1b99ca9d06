package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
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

// startLine runs serve with args until it logs "paystate started", stops
// it, and returns that line's fields.
func startLine(t *testing.T, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testkit.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- Run(ctx, args, &stdout, &stderr) }()
	var fields map[string]any
	testkit.WaitFor(t, 30*time.Second, func() error {
		for line := range strings.Lines(stderr.String()) {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "paystate started" {
				fields = m
				return nil
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve %q ended: %v\n%s", args, err, stderr.String())
		default:
		}
		return errors.New("not started")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	return fields
}

// TestServe_StartLog: the start line names the address really bound (a
// wildcard one as it is, with the loopback URL that reaches it) and the
// database really used: the bbolt file, or on PostgreSQL the DSN with its
// password masked.
func TestServe_StartLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "p.db")
	bolt := filepath.Join(dir, "bolt.toml")
	if err := os.WriteFile(bolt, []byte(fmt.Sprintf("[server]\nlisten = \"0.0.0.0:0\"\n[auth]\napi_keys = [\"start-log-key-0123456789\"]\n[storage]\npath = %q\n[log]\nformat = \"json\"\n[providers.standard]\nwebhook_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n", db)), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startLine(t, "serve", "-config", bolt)
	listen, _ := m["listen"].(string)
	_, port, err := net.SplitHostPort(listen)
	if err != nil || !strings.HasPrefix(listen, "0.0.0.0:") && !strings.HasPrefix(listen, "[::]:") {
		t.Errorf("listen=%q, want the wildcard address bound", listen)
	}
	if got, want := m["url"], "http://127.0.0.1:"+port; got != want {
		t.Errorf("url=%v, want %s", got, want)
	}
	if got := m["db"]; got != db {
		t.Errorf("db=%v, want %s", got, db)
	}

	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "start-log-password") // the test cluster trusts local connections
	pg := filepath.Join(dir, "pg.toml")
	if err := os.WriteFile(pg, []byte(fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n[storage]\nbackend = \"postgres\"\ndsn = %q\n[log]\nformat = \"json\"\n[providers.standard]\nwebhook_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n", u.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	m = startLine(t, "serve", "-config", pg)
	got, _ := m["db"].(string)
	if !strings.HasPrefix(got, "postgres://") || strings.Contains(got, "start-log-password") || !strings.Contains(got, u.Host) {
		t.Errorf("db=%q, want the DSN with its password masked", got)
	}
	if m["backend"] != "postgres" {
		t.Errorf("backend=%v, want postgres", m["backend"])
	}
}
