package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runCmd runs a command as main does, with stdout and stderr together.
func runCmd(args ...string) (string, error) {
	var out bytes.Buffer
	err := Run(context.Background(), args, &out, &out)
	return out.String(), err
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("[auth]\napi_keys = [\"a-very-secret-key-123456\"]\n[providers.mock]\nallow_public = true\nwebhook_secret = \"whsec_bW9jay1zZWNyZXQtbW9jay1zZWNyZXQtbW9jay0wMDA=\"\n"), 0o600)
	out, err := runCmd("check", "-config", good)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "a-very-secret-key-123456") || !strings.Contains(out, "***") {
		t.Fatalf("check printed a secret or no mask:\n%s", out)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[server]\nlisten = \"nowhere\"\nmax_bdy = 3\n"), 0o600)
	out, err = runCmd("check", "-config", bad)
	if err == nil || !strings.Contains(err.Error(), "server.max_bdy") {
		t.Fatalf("bad config: err=%v\n%s", err, out)
	}
	if out, err := runCmd("version"); err != nil || !strings.HasPrefix(out, "paystate ") {
		t.Fatalf("version: %v %s", err, out)
	}
	if _, err := runCmd("frobnicate"); err == nil {
		t.Fatal("unknown command accepted")
	}
}

// TestCheck_PublicRefusesDevelopmentParts: off loopback, serve and check
// refuse the public development secret and a mock without allow_public,
// with exit status 2 and one line naming the key.
func TestCheck_PublicRefusesDevelopmentParts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const head = "[server]\nlisten = \"0.0.0.0:0\"\n[auth]\napi_keys = [\"a-very-secret-key-123456\"]\n"
	for _, tt := range []struct {
		name, toml, key string
	}{
		{"StandardDevSecret", "[providers.standard]\n", "providers.standard.webhook_secret"},
		{"MockWithoutAllowPublic", "[providers.mock]\nwebhook_secret = \"whsec_bW9jay1zZWNyZXQtbW9jay1zZWNyZXQtbW9jay0wMDA=\"\n", "providers.mock.allow_public"},
		{"NoProviders", "", "providers"},
		{"LeaseTTLTiny", "[providers.standard]\nwebhook_secret = \"whsec_bW9jay1zZWNyZXQtbW9jay1zZWNyZXQtbW9jay0wMDA=\"\n[lease]\nttl = \"1ns\"\n", "lease.ttl"},
	} {
		path := filepath.Join(dir, tt.name+".toml")
		if err := os.WriteFile(path, []byte(head+tt.toml), 0o600); err != nil {
			t.Fatal(err)
		}
		assertConfigRefused(t, tt.name, path, "config: "+tt.key+": ")
	}
}

// TestCheck_ProductionBehindProxy: the shipped config.example.toml on its
// loopback listener, with the API key only in the environment (a TLS
// proxy in front, the systemd unit's way), is production: serve and check
// exit 2 naming the mock and the development secret (deploy's
// TestExampleConfig_ProductionEdits checks the file after the edits
// docs/production.md names).
func TestCheck_ProductionBehindProxy(t *testing.T) {
	t.Setenv("PAYSTATE_AUTH_API_KEYS", "a-very-secret-key-123456")
	example, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := strings.Replace(string(example), `path = "./paystate.db"`, `path = "`+filepath.Join(dir, "p.db")+`"`, 1)
	doc = strings.Replace(doc, `listen = "127.0.0.1:8080"`, `listen = "127.0.0.1:0"`, 1)
	path := filepath.Join(dir, "paystate.toml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve, if it started, would stop at once
	for _, cmd := range []string{"check", "serve"} {
		var out bytes.Buffer
		err := Run(ctx, []string{cmd, "-config", path}, &out, &out)
		if got, want := ExitCode(err), 2; got != want {
			t.Fatalf("%s: exit code %d, want %d (%v)\n%s", cmd, got, want, err, out.String())
		}
		for _, key := range []string{"providers.mock.allow_public", "providers.standard.webhook_secret"} {
			if !strings.Contains(err.Error(), "config: "+key+": ") {
				t.Errorf("%s: err=%q, want a line naming %s", cmd, err, key)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "p.db")); err == nil {
		t.Error("serve opened the database of a refused configuration")
	}
}

// TestExitCode_MissingConfig: a -config file that does not exist is a
// configuration error (exit 2) for every command that takes -config, with
// the file named, as docs/cli.md's list of exit codes says.
func TestExitCode_MissingConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such.toml")
	for _, args := range [][]string{
		{"serve", "-config", missing}, {"check", "-config", missing}, {"verify", "-config", missing},
		{"backup", "-config", missing, "-o", missing + ".db"}, {"migrate", "-config", missing},
		{"review", "list", "-config", missing}, {"copy", "-from-db", missing + ".db", "-config", missing},
	} {
		_, err := runCmd(args...)
		if got, want := ExitCode(err), ExitUsage; got != want || !strings.Contains(fmt.Sprint(err), missing) {
			t.Errorf("%s: exit code %d, want %d, naming the file (%v)", args[0], got, want, err)
		}
	}
	doc, err := os.ReadFile("../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, codes, _ := strings.Cut(string(doc), "**Exit codes.**")
	codes, _, _ = strings.Cut(codes, "· 3")
	_, two, _ := strings.Cut(codes, "· 2")
	if !strings.Contains(strings.Join(strings.Fields(two), " "), "`-config` file that is missing") {
		t.Errorf("docs/cli.md's exit code 2 does not list a missing -config file:%s", two)
	}
}

// TestCheck_WebhookEvents: [[webhooks]] events are the merchant event
// types; a stray space, a typo or an unknown type is a configuration
// error of check and serve (exit 2) naming the key and the event.
func TestCheck_WebhookEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ name, event string }{
		{"StraySpace", "payment.captured "},
		{"Typo", "payment.refund_succeeded"},
		{"Unknown", "payment.nope"},
	} {
		path := filepath.Join(dir, tt.name+".toml")
		toml := "[providers.mock]\n[[webhooks]]\nurl = \"http://127.0.0.1:9000/paystate\"\n" +
			"secret = \"whsec_bW9jay1zZWNyZXQtbW9jay1zZWNyZXQtbW9jay0wMDA=\"\n" +
			"events = [\"payment.captured\", " + strconv.Quote(tt.event) + "]\n"
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		assertConfigRefused(t, tt.name, path, "config: webhooks[0].events[1]: "+strconv.Quote(tt.event)+" is not a merchant event type")
	}
}

// assertConfigRefused runs check and serve on the configuration file at
// path and fails unless each exits 2 with one line containing want.
func assertConfigRefused(t *testing.T, name, path, want string) {
	t.Helper()
	for _, cmd := range []string{"check", "serve"} {
		out, err := runCmd(cmd, "-config", path)
		if err == nil {
			t.Fatalf("%s %s: accepted\n%s", cmd, name, out)
		}
		if got, want := ExitCode(err), 2; got != want {
			t.Errorf("%s %s: exit code %d, want %d (%v)", cmd, name, got, want, err)
		}
		if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%s %s: err=%q, want one line containing %q", cmd, name, msg, want)
		}
	}
}
