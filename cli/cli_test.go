package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

// runSplit runs a command as main does, stdout and stderr apart.
func runSplit(args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = Run(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

// TestRun_Help: every way of asking for help prints the usage on stdout,
// nothing on stderr, and is no error (exit 0).
func TestRun_Help(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "usage: paystate <command>"},
		{[]string{"--help"}, "usage: paystate <command>"},
		{[]string{"-help"}, "usage: paystate <command>"},
		{[]string{"help"}, "usage: paystate <command>"},
		{[]string{"help", "verify"}, "usage: paystate verify"},
		{[]string{"serve", "-h"}, "-listen"},
		{[]string{"check", "--help"}, "usage: paystate check"},
		{[]string{"verify", "-h"}, "usage: paystate verify"},
		{[]string{"backup", "-h"}, "usage: paystate backup"},
		{[]string{"migrate", "-h"}, "usage: paystate migrate"},
		{[]string{"simulate", "--help"}, "usage: paystate simulate"},
		{[]string{"version", "-h"}, "usage: paystate version"},
		{[]string{"review", "-h"}, "paystate review resolve"},
		{[]string{"review", "--help"}, "paystate review resolve"},
		{[]string{"review", "list", "-h"}, "usage: paystate review list"},
		{[]string{"review", "resolve", "--help"}, "-note"},
	} {
		stdout, stderr, err := runSplit(tt.args...)
		if err != nil || ExitCode(err) != 0 {
			t.Errorf("%q: err=%v (exit %d), want nil", tt.args, err, ExitCode(err))
		}
		if !strings.Contains(stdout, tt.want) {
			t.Errorf("%q: stdout lacks %q:\n%s", tt.args, tt.want, stdout)
		}
		if stderr != "" {
			t.Errorf("%q: stderr=%q, want nothing", tt.args, stderr)
		}
	}
}

// TestRun_UsageErrors: an unknown command, an unknown flag, a stray
// argument, a missing required flag, a bad -url or configuration: exit 2,
// nothing on stdout, and the error message said by the error alone (main
// prints it, once), not also by the flag package on stderr.
func TestRun_UsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badCfg := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(badCfg, []byte("[server]\nlisten = \"nowhere\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args  []string
		msg   string // in err
		usage bool   // the usage on stderr
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`, true},
		{[]string{"--version-please"}, "flag provided but not defined: -version-please", true},
		{[]string{"--bogus"}, "serve: flag provided but not defined: -bogus", true},
		{[]string{"verify", "-nope"}, "verify: flag provided but not defined: -nope", true},
		{[]string{"verify", "extra"}, `verify: unexpected argument "extra"`, true},
		{[]string{"simulate", "-n", "many"}, `simulate: invalid value "many" for flag -n`, true},
		{[]string{"simulate", "-mode", "paypal"}, `simulate: -mode "paypal": want mock or checkout`, false},
		{[]string{"help", "nope"}, `help: unknown command "nope"`, true},
		{[]string{"check"}, "check: -config FILE is required", true},
		{[]string{"backup", "-db", filepath.Join(dir, "x.db")}, "backup: -o OUT is required", true},
		{[]string{"review"}, "review: list or resolve?", true},
		{[]string{"review", "approve"}, `review: unknown subcommand "approve"`, true},
		{[]string{"review", "list", "-wat"}, "review list: flag provided but not defined: -wat", true},
		{[]string{"review", "resolve", "-url", "127.0.0.1:1", "-api-key", "k", "-id", "pay_x", "-status", "captured"}, "-note is required", false},
		{[]string{"review", "list", "-url", "ftp://127.0.0.1:1"}, `-url "ftp://127.0.0.1:1"`, false},
		{[]string{"backup", "-o", filepath.Join(dir, "o.db"), "-url", "http://127.0.0.1:1/some/path"}, "-url", false},
		{[]string{"check", "-config", badCfg}, "config: server.listen: ", false},
		{[]string{"serve", "-config", badCfg}, "config: server.listen: ", false},
		{[]string{"check", "-config", filepath.Join(dir, "missing.toml")}, "missing.toml", false},
	} {
		stdout, stderr, err := runSplit(tt.args...)
		if got, want := ExitCode(err), ExitUsage; got != want {
			t.Errorf("%q: exit %d (err=%v), want %d", tt.args, got, err, want)
			continue
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: err=%q, want it to contain %q", tt.args, err, tt.msg)
		}
		if stdout != "" {
			t.Errorf("%q: stdout=%q, want nothing", tt.args, stdout)
		}
		if got := strings.Contains(stderr, "usage:"); got != tt.usage {
			t.Errorf("%q: usage on stderr=%v, want %v:\n%s", tt.args, got, tt.usage, stderr)
		}
		if strings.Contains(stderr, tt.msg) {
			t.Errorf("%q: the message is on stderr too (main prints it):\n%s", tt.args, stderr)
		}
	}
}

// TestRun_ExitCodes: 0 ok, 1 a runtime failure, 2 usage, 3 verify found
// a problem.
func TestRun_ExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.db")
	daemontest.History(t, clean)
	bad := filepath.Join(dir, "bad.db")
	testkit.CopyFile(t, clean, bad)
	unbalance(t, bad)

	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"version"}, 0},
		{[]string{"verify", "-db", clean}, 0},
		{[]string{"verify", "-db", filepath.Join(dir, "missing", "none.db")}, ExitFailure},
		{[]string{"review", "list", "-url", "127.0.0.1:1", "-api-key", "k"}, ExitFailure}, // nothing listens
		{[]string{"verify", "-db", clean, "-x"}, ExitUsage},
		{[]string{"verify", "-db", bad}, ExitVerify},
	} {
		_, _, err := runSplit(tt.args...)
		if got := ExitCode(err); got != tt.want {
			t.Errorf("%q: exit %d (err=%v), want %d", tt.args, got, err, tt.want)
		}
	}
	if got, want := ExitCode(errors.New("boom")), ExitFailure; got != want {
		t.Errorf("ExitCode(plain error)=%d, want %d", got, want)
	}
}

// TestRun_ServerNotReachable: a command that talks to a running paystate
// and finds nothing listening at its address says which address it
// tried and how to give another, and fails with exit 1.
func TestRun_ServerNotReachable(t *testing.T) {
	t.Parallel()
	// A port that was free a moment ago: nothing listens there now.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	for _, args := range [][]string{
		{"review", "list", "-url", addr, "-api-key", "k"},
		{"backup", "-url", addr, "-api-key", "k", "-o", filepath.Join(t.TempDir(), "copy.db")},
	} {
		_, _, err := runSplit(args...)
		if got := ExitCode(err); got != ExitFailure {
			t.Errorf("%q: exit %d (err=%v), want %d", args, got, err, ExitFailure)
		}
		want := "cannot reach paystate at http://" + addr + " (is it running there? -url sets the address)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v; want it to say %q", args, err, want)
		}
	}
}

// unbalance adds one cent to the first ledger balance of the database at
// path, a mismatch verify must find.
func unbalance(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("balances"))
		k, v := b.Cursor().First()
		if k == nil {
			return errors.New("no balances")
		}
		return b.Put(k, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(v)+1))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRun_ProgressOnStderr: verify and backup show their progress on
// stderr, and stdout has the result alone.
func TestRun_ProgressOnStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "paystate.db")
	daemontest.History(t, db)

	stdout, stderr, err := runSplit("verify", "-db", db)
	if err != nil {
		t.Fatalf("verify: %v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, "verify: 20/20 payments (100%) in ") {
		t.Errorf("verify: no progress on stderr:\n%s", stderr)
	}
	if strings.Contains(stdout, "verify:") || !strings.HasPrefix(stdout, "20 payments, ") {
		t.Errorf("verify: stdout is not the report alone:\n%s", stdout)
	}

	out := filepath.Join(dir, "copy.db")
	stdout, stderr, err = runSplit("backup", "-db", db, "-o", out)
	if err != nil {
		t.Fatalf("backup: %v\n%s%s", err, stdout, stderr)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "backup: ") || !strings.Contains(stderr, "(100%) in ") {
		t.Errorf("backup: no progress on stderr:\n%s", stderr)
	}
	if got, want := stdout, fmt.Sprintf("backup written to %s (%d bytes)\n", out, st.Size()); got != want {
		t.Errorf("backup: stdout=%q, want %q", got, want)
	}
}

// TestRun_URLForms: the commands that talk to a running paystate take
// -url as http://host:port and as host:port.
func TestRun_URLForms(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := daemontest.Boot(t, func(c *config.Config) { c.Storage.Path = filepath.Join(dir, "live.db") })
	for i, u := range []string{in.Base, strings.TrimPrefix(in.Base, "http://"), in.Base + "/"} {
		if out, err := runCmd("review", "list", "-url", u, "-api-key", daemontest.APIKey); err != nil || !strings.Contains(out, "the review queue is empty") {
			t.Errorf("review list -url %s: %v\n%s", u, err, out)
		}
		copyPath := filepath.Join(dir, fmt.Sprintf("b%d.db", i))
		if out, err := runCmd("backup", "-o", copyPath, "-url", u, "-api-key", daemontest.APIKey); err != nil || !strings.Contains(out, "backup written to") {
			t.Errorf("backup -url %s: %v\n%s", u, err, out)
		}
	}
}

// TestServe_Listen: serve -listen wins over the file and over
// PAYSTATE_SERVER_LISTEN; the environment wins over the file.
func TestServe_Listen(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "paystate.toml")
	toml := "[server]\nlisten = \"127.0.0.1:1\"\n[storage]\npath = \"" + filepath.Join(dir, "p.db") + "\"\n[log]\nformat = \"json\"\n[providers.mock]\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	started := func(t *testing.T, args ...string) string {
		t.Helper()
		listen, _ := startLine(t, args...)["listen"].(string)
		return listen
	}
	// -listen over the file.
	if got := started(t, "serve", "-config", cfg, "-listen", "127.0.0.1:0"); got == "" || strings.HasSuffix(got, ":1") {
		t.Fatalf("serve -listen 127.0.0.1:0: listening on %q", got)
	}
	// The environment over the file, and -listen over the environment.
	t.Setenv("PAYSTATE_SERVER_LISTEN", "127.0.0.1:0")
	if got := started(t, "serve", "-config", cfg); got == "" || strings.HasSuffix(got, ":1") {
		t.Fatalf("PAYSTATE_SERVER_LISTEN=127.0.0.1:0: listening on %q", got)
	}
	t.Setenv("PAYSTATE_SERVER_LISTEN", "127.0.0.1:1")
	if got := started(t, "serve", "-config", cfg, "-listen", "127.0.0.1:0"); got == "" || strings.HasSuffix(got, ":1") {
		t.Fatalf("-listen over PAYSTATE_SERVER_LISTEN: listening on %q", got)
	}
	// A bad -listen is a configuration error naming the flag.
	_, _, err := runSplit("serve", "-config", cfg, "-listen", "nowhere")
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "server.listen") || !strings.Contains(err.Error(), "-listen") {
		t.Fatalf("serve -listen nowhere: %v (exit %d)", err, ExitCode(err))
	}
}

// TestCheck_MarksEnvironment: check marks the values that came from the
// environment, keeps secrets masked, and warns of a variable that set
// nothing.
func TestCheck_MarksEnvironment(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "paystate.toml")
	if err := os.WriteFile(cfg, []byte("[server]\nlisten = \"127.0.0.1:8080\"\n[providers.mock]\nallow_public = true\nwebhook_secret = \"whsec_bW9jay1zZWNyZXQtbW9jay1zZWNyZXQtbW9jay0wMDA=\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PAYSTATE_SERVER_LISTEN", "127.0.0.1:9595")
	t.Setenv("PAYSTATE_AUTH_API_KEYS", "env-key-0123456789abcdef")
	t.Setenv("PAYSTATE_SWEEPER_INTERVAL", "45s")
	t.Setenv("PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY", "sk_test_not_configured")
	stdout, stderr, err := runSplit("check", "-config", cfg)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"listen = \"127.0.0.1:9595\" # from PAYSTATE_SERVER_LISTEN\n",
		"api_keys = [\"***\"] # from PAYSTATE_AUTH_API_KEYS\n",
		"interval = \"45s\" # from PAYSTATE_SWEEPER_INTERVAL\n",
		"max_body = 262144\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("check output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, "env-key-0123456789abcdef") || strings.Contains(stdout+stderr, "sk_test_not_configured") {
		t.Errorf("check printed a secret:\n%s\n%s", stdout, stderr)
	}
	if !strings.Contains(stderr, "warning: PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY is set, but the configuration has no [providers.stripe]") {
		t.Errorf("no warning for a variable of an absent provider:\n%s", stderr)
	}

	// A value that does not parse names the variable and the key: exit 2.
	t.Setenv("PAYSTATE_SERVER_MAX_BODY", "big")
	_, _, err = runSplit("check", "-config", cfg)
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "PAYSTATE_SERVER_MAX_BODY (server.max_body)") {
		t.Fatalf("PAYSTATE_SERVER_MAX_BODY=big: %v (exit %d)", err, ExitCode(err))
	}
}
