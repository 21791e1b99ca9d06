package main

import (
	"bufio"
	"bytes"
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
)

// TestBinary_ReconcileImportSignals runs `paystate reconcile import` of a
// long report and stops it with SIGINT, then SIGTERM, once it has posted
// its first lines (its plain progress line on stderr says so): it stops
// between two transactions with exit 130, then 143, what it posted stays
// posted (verify is clean), and a third run finishes the report, posting
// only the lines the first two did not.
func TestBinary_ReconcileImportSignals(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "paystate.toml")
	toml := strings.ReplaceAll(procConfig, "DBPATH", filepath.Join(dir, "paystate.db"))
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runBinary(t, bin, nil, "migrate", "-config", cfg); code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	const lines = 200000
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
	progress := regexp.MustCompile(`^reconcile import: (\d+)/` + strconv.Itoa(lines) + ` lines`)

	posted := 0
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(bin, args...)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var errText strings.Builder
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			errText.WriteString(sc.Text() + "\n")
			if m := progress.FindStringSubmatch(sc.Text()); m != nil && !signalled {
				// Lines were posted: stop it between two transactions.
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				signalled = true
			}
		}
		_ = cmd.Wait()
		if !signalled {
			t.Fatalf("%s: no progress line before the end\n%s%s", sig, stdout.String(), errText.String())
		}
		if got, want := cmd.ProcessState.ExitCode(), 128+int(sig); got != want {
			t.Fatalf("%s: exit %d, want %d\n%s%s", sig, got, want, stdout.String(), errText.String())
		}
		m := regexp.MustCompile(`interrupted after (\d+) of (\d+) lines`).FindStringSubmatch(errText.String())
		if m == nil || !strings.Contains(errText.String(), "interrupted by "+sig.String()) {
			t.Fatalf("%s: stderr lacks how far it got and why\n%s", sig, errText.String())
		}
		n, _ := strconv.Atoi(m[1])
		if n == 0 || n >= lines {
			t.Fatalf("%s: interrupted after %d lines, want some of %d", sig, n, lines)
		}
		if n > posted {
			posted = n
		}
		if out, errOut, code := runBinary(t, bin, nil, "verify", "-config", cfg); code != 0 {
			t.Fatalf("verify after %s: exit %d\n%s%s", sig, code, out, errOut)
		}
	}

	start := time.Now()
	out, errOut, code := runBinary(t, bin, nil, args...)
	if code != 0 {
		t.Fatalf("the import again: exit %d\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`(?m)^(\d+)\s+(\d+)\s+(\d+)\s+0\s+0\s+0$`).FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(lines) || m[2] != strconv.Itoa(lines) {
		t.Fatalf("the import again:\n%s", out)
	}
	if rest, _ := strconv.Atoi(m[3]); rest != lines-posted {
		t.Fatalf("the import again posted %d lines, want the %d the interrupted runs did not", rest, lines-posted)
	}
	t.Logf("the rest of the report posted in %s", time.Since(start).Round(time.Millisecond))
	if out, errOut, code := runBinary(t, bin, nil, "verify", "-config", cfg); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
}
