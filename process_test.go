package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paystate/paystate/cli"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

// buildBinary builds paystate once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "paystate-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "paystate")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
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
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "paystate.toml")
	toml = strings.ReplaceAll(toml, "DBPATH", filepath.Join(dir, "paystate.db"))
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "-config", cfg)
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
				started <- m["listen"].(string)
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
	// A client's request id is kept and appears in the log; a hostile one
	// is replaced.
	res, _ := do("GET", "/v1/payments", "", map[string]string{"X-Request-Id": "trace-abc-123"})
	if got, want := res.Header.Get("X-Request-Id"), "trace-abc-123"; got != want {
		t.Fatalf("X-Request-Id=%q, want %q", got, want)
	}
	res, _ = do("GET", "/v1/payments", "", map[string]string{"X-Request-Id": "bad id <script>"})
	if got := res.Header.Get("X-Request-Id"); got == "" || strings.ContainsAny(got, " <>") {
		t.Fatalf("hostile X-Request-Id reflected: %q", got)
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
