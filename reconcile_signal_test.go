package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/pgtest"
)

// TestBinary_ReconcileImportSignals runs `paystate reconcile import` of a
// report on PostgreSQL and stops it with SIGINT, then SIGTERM, while it
// is inside a transaction: the test holds an uncommitted settlement row
// of the report's 1001st line (then its 2001st), so the import's claim
// of that line waits in its third (then fifth) transaction of 500 lines
// (pg_locks shows it waiting for the test's transaction). The signal arrives while it
// waits; the test then rolls its row back, that transaction commits, and
// the import stops before the next one: exit 130, then 143, after
// exactly 1500 (then 2500) lines, verify clean. A third run finishes the
// report, posting only the lines the first two did not.
func TestBinary_ReconcileImportSignals(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.Schema(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "paystate.toml")
	toml := fmt.Sprintf("[storage]\nbackend = \"postgres\"\ndsn = %q\n[providers.standard]\nwebhook_secret = %q\n", dsn,
		"whsec_c3RhbmRhcmQtc2VjcmV0LXN0YW5kYXJkLXNlY3JldC0wMQ==")
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runBinary(t, bin, nil, "migrate", "-config", cfg); code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	const lines = 5000
	var report bytes.Buffer
	report.WriteString("id,provider_ref,type,amount,fee,currency,payout_id\n")
	for i := range lines {
		fmt.Fprintf(&report, "txn_%06d,,fee,0,0.01,EUR,po_%d\n", i, i/1000)
	}
	file := filepath.Join(dir, "long.csv")
	if err := os.WriteFile(file, report.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"reconcile", "import", "-format", "generic", "-provider", "standard", "-config", cfg, file}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	for _, c := range []struct {
		sig  syscall.Signal
		hold int // the index of the line the test holds
		done int // the lines before the transaction that waits for it
	}{{syscall.SIGINT, 1000, 1000}, {syscall.SIGTERM, 2000, 2000}} {
		// The row the import will wait for, uncommitted.
		hold, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hold.Exec(ctx, `INSERT INTO settlements (provider, id, kind, payment_id, provider_ref, amount, fee, currency, payout_id, run_id, created_at, updated_at)
			VALUES ('standard', $1, 'fee', '', '', 0, 1, 'EUR', 'po_x', 'rr_test', 1, 1)`, fmt.Sprintf("txn_%06d", c.hold)); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		testkit.WaitFor(t, 60*time.Second, func() error {
			select {
			case <-exited:
				t.Fatalf("%s: the import ended before it waited for line %d: exit %d\n%s%s", c.sig, c.hold, cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
			default:
			}
			var n int
			// Waiting for the test's own transaction (other tests' waits on
			// the same server do not count).
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks w WHERE NOT w.granted AND w.locktype = 'transactionid'
				AND w.transactionid = (SELECT transactionid FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'transactionid' AND granted)`).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("the import does not wait for line %d yet", c.hold)
			}
			return nil
		})
		if err := cmd.Process.Signal(c.sig); err != nil {
			t.Fatal(err)
		}
		if err := hold.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		<-exited
		if got, want := cmd.ProcessState.ExitCode(), 128+int(c.sig); got != want {
			t.Fatalf("%s: exit %d, want %d\n%s%s", c.sig, got, want, stdout.String(), stderr.String())
		}
		want := fmt.Sprintf("interrupted after %d of %d lines", c.done+500, lines)
		if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "interrupted by "+c.sig.String()) {
			t.Fatalf("%s: stderr lacks %q and the signal\n%s", c.sig, want, stderr.String())
		}
		if out, errOut, code := runBinary(t, bin, nil, "verify", "-config", cfg); code != 0 {
			t.Fatalf("verify after %s: exit %d\n%s%s", c.sig, code, out, errOut)
		}
	}

	out, errOut, code := runBinary(t, bin, nil, args...)
	if code != 0 {
		t.Fatalf("the import again: exit %d\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`(?m)^(\d+)\s+(\d+)\s+(\d+)\s+0\s+0\s+0$`).FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(lines) || m[2] != strconv.Itoa(lines) {
		t.Fatalf("the import again:\n%s", out)
	}
	if rest, _ := strconv.Atoi(m[3]); rest != lines-2500 {
		t.Fatalf("the import again posted %d lines, want the %d the interrupted runs did not", rest, lines-2500)
	}
	if out, errOut, code := runBinary(t, bin, nil, "verify", "-config", cfg); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
}
