package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/cli"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// binDir holds the binaries the tests build; TestMain removes it.
var (
	binDir     = sync.OnceValues(func() (string, error) { binDirMade.Store(true); return os.MkdirTemp("", "paystate-bin-") })
	binDirMade atomic.Bool
)

// TestMain runs the tests, then removes the binaries they built and the
// PostgreSQL that pgtest may have started (TestScaleOut).
func TestMain(m *testing.M) {
	code := m.Run()
	if binDirMade.Load() {
		if dir, err := binDir(); err == nil {
			os.RemoveAll(dir)
		}
	}
	pgtest.Stop()
	os.Exit(code)
}

// build builds paystate into binDir as name with extra go build flags.
// -buildvcs=auto stamps the commit when the tree is a git checkout and git
// is there (GOFLAGS may say -buildvcs=false).
func build(name string, flags ...string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"build", "-buildvcs=auto", "-o", bin}, flags...)
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// buildBinary builds paystate once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) { return build("paystate") })

// releaseVersion is the version buildRelease injects, as a release build
// does (.goreleaser.yaml).
const releaseVersion = "v9.8.7-test"

// buildRelease builds paystate with its version injected.
var buildRelease = sync.OnceValues(func() (string, error) {
	return build("paystate-release", "-ldflags", "-X github.com/paystate/paystate/cli.version="+releaseVersion)
})

// runCmd runs a command in this process, as the binary would, with
// stdout and stderr together.
func runCmd(args ...string) (string, error) {
	var out bytes.Buffer
	err := cli.Run(context.Background(), args, &out, &out)
	return out.String(), err
}

// proc is a running paystate process with its JSON log lines.
type proc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs []string
	done chan error
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}

func (p *proc) waitLog(t *testing.T, substr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(p.logText(), substr) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("log line %q not seen; log:\n%s", substr, p.logText())
}

// startProcess runs `paystate serve -config` with the given TOML in a new
// temporary directory.
func startProcess(t *testing.T, toml string) *proc {
	t.Helper()
	return startProcessIn(t, t.TempDir(), toml)
}

// startProcessIn runs `paystate serve -config` with the given TOML, its
// DBPATH placeholder naming paystate.db in dir, and waits until it serves.
func startProcessIn(t *testing.T, dir, toml string) *proc {
	t.Helper()
	return startProcessWith(t, dir, toml, nil)
}

// startProcessWith is startProcessIn with more environment variables
// ("NAME=value") and serve flags after -config.
func startProcessWith(t *testing.T, dir, toml string, env []string, flags ...string) *proc {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return startBinary(t, bin, dir, toml, env, flags...)
}

// startBinary is startProcessWith of the binary bin.
func startBinary(t *testing.T, bin, dir, toml string, env []string, flags ...string) *proc {
	t.Helper()
	cfg := filepath.Join(dir, "paystate.toml")
	toml = strings.ReplaceAll(toml, "DBPATH", filepath.Join(dir, "paystate.db"))
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "-config", cfg}, flags...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	started := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs = append(p.logs, line)
			p.mu.Unlock()
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "paystate started" {
				started <- m["url"].(string)
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case p.url = <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("paystate did not start:\n%s", p.logText())
	}
	return p
}

// serveTOML is a configuration of the binary: DBPATH as its database, a
// free port on 127.0.0.1, the test API key and JSON logs at info, and then
// rest.
func serveTOML(rest string) string {
	return `
[server]
listen = "127.0.0.1:0"
[storage]
path = "DBPATH"
[auth]
api_keys = ["` + daemontest.APIKey + `"]
[log]
level = "info"
format = "json"
` + rest
}

// viewDB reads a stopped process's bbolt database in one read
// transaction; an error fails the test.
func viewDB(t *testing.T, path string, read func(store.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(context.Background(), read); err != nil {
		t.Fatal(err)
	}
}

const procConfig = `
[server]
listen = "127.0.0.1:0"
shutdown_timeout = "10s"
[storage]
path = "DBPATH"
[auth]
api_keys = ["` + daemontest.APIKey + `"]
[log]
level = "debug"
format = "json"
[providers.mock]
allow_public = true # an API key is production: the tests drive the mock
webhook_secret = "whsec_c2VjcmV0LW1vY2stc2VjcmV0LW1vY2stc2VjcmV0LW1vY2s="
webhook_delay = "0s"
duplicate_rate = 0.5
[providers.standard]
webhook_secret = "whsec_c3RhbmRhcmQtc2VjcmV0LXN0YW5kYXJkLXNlY3JldC0wMQ=="
`

// TestProcess_ShutdownAndLogs runs the real binary: a request in flight
// when SIGTERM arrives is finished, the process exits 0 with its database
// closed and consistent, every response carries an X-Request-Id, and no
// secret (API key, webhook secrets, client secrets) reaches the log.
func TestProcess_ShutdownAndLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	p := startProcess(t, procConfig)

	var secrets []string
	secrets = append(secrets, daemontest.APIKey, "c2VjcmV0LW1vY2stc2VjcmV0LW1vY2stc2VjcmV0LW1vY2s=", "c3RhbmRhcmQtc2VjcmV0LXN0YW5kYXJkLXNlY3JldC0wMQ==")
	do := func(method, path, body string, hdr map[string]string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+daemontest.APIKey)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		b, _ := io.ReadAll(res.Body)
		json.Unmarshal(b, &m)
		return res, m
	}

	// Payments of every mock outcome; collect the client secrets handed out.
	for i, amount := range []int{1000, 1001, 1002, 1003, 1004, 1099} {
		res, m := do("POST", "/v1/payments", fmt.Sprintf(`{"order_id":"p-%d","amount":%d,"currency":"EUR"}`, i, amount), map[string]string{"Idempotency-Key": fmt.Sprint("k", i)})
		if res.StatusCode != 201 {
			t.Fatalf("create: %d %v", res.StatusCode, m)
		}
		if s, ok := m["client_secret"].(string); ok {
			secrets = append(secrets, s)
		}
		if rid := res.Header.Get("X-Request-Id"); rid == "" {
			t.Fatal("no X-Request-Id on a response")
		}
	}
	if len(secrets) < 4 {
		t.Fatalf("expected client secrets from the requires_action and processing payments")
	}
	// A client's request id is kept and appears in the log; one that is
	// not printable ASCII, or longer than 128 characters, is replaced.
	res, _ := do("GET", "/v1/payments", "", map[string]string{"X-Request-Id": "trace-abc-123"})
	if got, want := res.Header.Get("X-Request-Id"), "trace-abc-123"; got != want {
		t.Fatalf("X-Request-Id=%q, want %q", got, want)
	}
	for _, bad := range []string{"caf\u00e9-\u202e-id", strings.Repeat("x", 129)} {
		res, _ = do("GET", "/v1/payments", "", map[string]string{"X-Request-Id": bad})
		if got := res.Header.Get("X-Request-Id"); got == "" || got == bad {
			t.Fatalf("X-Request-Id %.20q... reflected: %q", bad, got)
		}
	}
	p.waitLog(t, `"request_id":"trace-abc-123"`)

	// A request in flight when SIGTERM arrives: headers and half the body
	// are sent, then the signal, then the rest.
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"order_id":"in-flight","amount":1000,"currency":"EUR"}`
	fmt.Fprintf(conn, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nIdempotency-Key: in-flight\r\nContent-Length: %d\r\n\r\n%s", daemontest.APIKey, len(body), body[:10])
	time.Sleep(50 * time.Millisecond) // let the server start reading this request (not a timing assertion)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "shutting down")
	if _, err := io.WriteString(conn, body[10:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight request lost: %v\n%s", err, p.logText())
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, 201; got != want {
		t.Fatalf("in-flight request: status=%d, want %d", got, want)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, p.logText())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("process did not exit within the shutdown timeout")
	}
	if got := p.cmd.ProcessState.ExitCode(); got != 0 {
		t.Fatalf("exit code=%d, want 0", got)
	}
	p.waitLog(t, `"message":"stopped"`)

	// The database was closed: it opens and verifies.
	dbPath := filepath.Join(filepath.Dir(p.cmd.Args[3]), "paystate.db")
	if out, err := runCmd("verify", "-db", dbPath); err != nil || !strings.Contains(out, "7 payments") {
		t.Fatalf("verify after shutdown: %v\n%s", err, out)
	}

	logs := p.logText()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a secret reached the log: %.12s...", s)
		}
	}
	if !strings.Contains(logs, `"payment_id":"pay_`) {
		t.Errorf("log lines carry no payment_id")
	}
}

// runBinary runs the binary bin with args and the extra environment,
// and returns its stdout, stderr and exit code.
func runBinary(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%q: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestBinary_ExitCodesAndStreams runs the real binary: help on stdout
// with exit 0; a usage or configuration error on stderr with exit 2, the
// message printed once; a runtime failure 1; a verify mismatch 3.
func TestBinary_ExitCodesAndStreams(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.db")
	daemontest.History(t, clean)
	bad := filepath.Join(dir, "bad.db")
	testkit.CopyFile(t, clean, bad)
	bdb, err := bbolt.Open(bad, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bbolt.Tx) error { // an index entry lost: a finding
		c := tx.Bucket([]byte("payments_by_created")).Cursor()
		k, _ := c.First()
		return c.Bucket().Delete(k)
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	badCfg := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(badCfg, []byte("[server]\nlisten = \"nowhere\"\n[providers.mock]\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		args      []string
		env       []string
		code      int
		stdout    string // contained in stdout ("" : stdout empty)
		stderr    string // contained in stderr once ("" : stderr empty)
		stderrToo string // also in stderr
	}{
		{args: []string{"-h"}, code: 0, stdout: "usage: paystate <command>"},
		{args: []string{"--help"}, code: 0, stdout: "usage: paystate <command>"},
		{args: []string{"help"}, code: 0, stdout: "usage: paystate <command>"},
		{args: []string{"serve", "--help"}, code: 0, stdout: "usage: paystate serve"},
		{args: []string{"review", "-h"}, code: 0, stdout: "paystate review list"},
		{args: []string{"verify", "-h"}, code: 0, stdout: "usage: paystate verify"},
		{args: []string{"frobnicate"}, code: 2, stderr: `paystate: unknown command "frobnicate"`, stderrToo: "usage: paystate <command>"},
		{args: []string{"--version-x"}, code: 2, stderr: "flag provided but not defined: -version-x", stderrToo: "usage: paystate serve"},
		{args: []string{"review"}, code: 2, stderr: "paystate: review: list or resolve?"},
		{args: []string{"check", "-config", badCfg}, code: 2, stderr: "config: server.listen: "},
		{args: []string{"check", "-config", badCfg}, env: []string{"PAYSTATE_SERVER_LISTEN=127.0.0.1:7070"}, code: 0, stdout: "listen = \"127.0.0.1:7070\" # from PAYSTATE_SERVER_LISTEN"},
		{args: []string{"check", "-config", badCfg}, env: []string{"PAYSTATE_SERVER_MAX_BODY=huge", "PAYSTATE_SERVER_LISTEN=127.0.0.1:7070"}, code: 2, stderr: "PAYSTATE_SERVER_MAX_BODY (server.max_body)"},
		{args: []string{"verify", "-db", clean}, code: 0, stdout: "0 mismatches", stderr: "verify: 20/20 payments (100%) in "},
		{args: []string{"verify", "-db", filepath.Join(dir, "none", "x.db")}, code: 1, stderr: "paystate: "},
		{args: []string{"verify", "-db", bad}, code: 3, stdout: "MISMATCH", stderr: "paystate: verify: the database does not match its own history"},
	} {
		stdout, stderr, code := runBinary(t, bin, tt.env, tt.args...)
		name := strings.Join(append(tt.env, tt.args...), " ")
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", name, code, tt.code, stdout, stderr)
		}
		if tt.stdout == "" && stdout != "" || !strings.Contains(stdout, tt.stdout) {
			t.Errorf("%s: stdout %q, want %q", name, stdout, tt.stdout)
		}
		var rest []string // stderr but the configuration's warnings
		for line := range strings.Lines(stderr) {
			if !strings.HasPrefix(line, "warning: ") {
				rest = append(rest, line)
			}
		}
		if tt.stderr == "" && len(rest) > 0 || tt.stderr != "" && strings.Count(stderr, tt.stderr) != 1 {
			t.Errorf("%s: stderr %q, want %q once", name, stderr, tt.stderr)
		}
		if !strings.Contains(stderr, tt.stderrToo) {
			t.Errorf("%s: stderr %q, want %q", name, stderr, tt.stderrToo)
		}
	}
}

// TestBinary_Version: version and --version print the same: the injected
// version of a release build, else the module version, the commit the
// build info stamps (go version -m shows it) and the Go version.
func TestBinary_Version(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, _, code := runBinary(t, bin, nil, "version")
	again, _, code2 := runBinary(t, bin, nil, "--version")
	if code != 0 || code2 != 0 || out != again {
		t.Fatalf("version (exit %d):\n%s\n--version (exit %d):\n%s", code, out, code2, again)
	}
	if !strings.HasPrefix(out, "paystate ") || !strings.Contains(out, "go       "+runtime.Version()+" ") {
		t.Fatalf("version:\n%s", out)
	}
	// What the toolchain stamped is what version says.
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	stamped := map[string]string{}
	for line := range strings.Lines(string(meta)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "build" {
			k, v, _ := strings.Cut(f[1], "=")
			stamped[k] = v
		}
	}
	if rev := stamped["vcs.revision"]; rev != "" {
		want := "revision " + rev
		if stamped["vcs.modified"] == "true" {
			want += " (modified)"
		}
		if !strings.Contains(out, want+"\n") {
			t.Fatalf("version does not say %q:\n%s", want, out)
		}
		if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && strings.TrimSpace(string(head)) != rev {
			t.Fatalf("stamped revision %s is not HEAD %s", rev, head)
		}
	} else {
		t.Logf("the build has no VCS stamp (not a git checkout, or no git): %s", out)
		if strings.Contains(out, "revision") {
			t.Fatalf("version shows a revision the build does not have:\n%s", out)
		}
	}

	rel, err := buildRelease()
	if err != nil {
		t.Fatal(err)
	}
	out, _, code = runBinary(t, rel, nil, "--version")
	if code != 0 || !strings.HasPrefix(out, "paystate "+releaseVersion+"\n") {
		t.Fatalf("release build --version (exit %d):\n%s", code, out)
	}
	// The daemon's paystate_build_info says the same version.
	p := startBinary(t, rel, t.TempDir(), procConfig, nil)
	req, _ := http.NewRequest("GET", p.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+daemontest.APIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(metrics), `version="`+releaseVersion+`"`) {
		t.Fatalf("/metrics (%d) has no paystate_build_info with version %q:\n%.2000s", res.StatusCode, releaseVersion, metrics)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		t.Fatalf("exit: %v\n%s", err, p.logText())
	}
}

// TestProcess_ListenOverrides runs the real binary: PAYSTATE_SERVER_LISTEN
// wins over the file, and serve -listen over both.
func TestProcess_ListenOverrides(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	// The file's port 1 is never what the server ends up on.
	toml := strings.Replace(procConfig, `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:1"`, 1)
	for _, tt := range []struct {
		name  string
		env   []string
		flags []string
	}{
		{"Env", []string{"PAYSTATE_SERVER_LISTEN=127.0.0.1:0"}, nil},
		{"Flag", nil, []string{"-listen", "127.0.0.1:0"}},
		{"FlagOverEnv", []string{"PAYSTATE_SERVER_LISTEN=127.0.0.1:1"}, []string{"-listen", "127.0.0.1:0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startProcessWith(t, t.TempDir(), toml, tt.env, tt.flags...)
			if strings.HasSuffix(p.url, ":1") {
				t.Fatalf("listening on %s, the file's address", p.url)
			}
			res, err := http.Get(p.url + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("/healthz: %d", res.StatusCode)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			if err := <-p.done; err != nil {
				t.Fatalf("exit: %v\n%s", err, p.logText())
			}
		})
	}
}
