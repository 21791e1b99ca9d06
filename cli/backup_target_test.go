package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

// dirNames lists the names in dir, to see that a refused command left
// nothing behind (no temporary file).
func dirNames(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

// writeConfig writes a valid production configuration (an API key, the
// standard provider on a secret of its own) with the given [server] and
// [storage] lines.
func writeConfig(t *testing.T, dir, server, storage string) string {
	t.Helper()
	path := filepath.Join(dir, "paystate.toml")
	doc := "[server]\n" + server + "\n[storage]\n" + storage + "\n[auth]\napi_keys = [\"" + daemontest.APIKey + "\"]\n" +
		"[providers.standard]\nwebhook_secret = \"" + daemontest.StandardSecret + "\"\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBackup_ConfigStoragePath: backup -config copies the storage.path of
// the file, not ./paystate.db of the current folder.
func TestBackup_ConfigStoragePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "configured.db")
	daemontest.History(t, dbPath)
	cfg := writeConfig(t, dir, `listen = "127.0.0.1:8080"`, fmt.Sprintf("path = %q", dbPath))
	out := filepath.Join(dir, "copy.db")
	if o, err := runCmd("backup", "-config", cfg, "-o", out); err != nil {
		t.Fatalf("backup -config: %v\n%s", err, o)
	}
	if o, err := runCmd("verify", "-db", out); err != nil || !strings.Contains(o, "20 payments") {
		t.Fatalf("the copy is not the configured database: %v\n%s", err, o)
	}
}

// TestBackup_RefusesTarget: backup refuses, with exit 2 and nothing
// written, an -o that is the database of a running paystate (also when
// -db names another file), the -db it reads, a symlink, a FIFO or a
// directory; a regular file is replaced, through a temporary file that
// does not outlive the command.
func TestBackup_RefusesTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	livePath := filepath.Join(dir, "live.db")
	in := daemontest.Boot(t, func(c *config.Config) { c.Storage.Path = livePath })
	var created struct{ ID string }
	if r := in.Create(`{"order_id":"live-1","amount":1500,"currency":"EUR"}`, "live-1"); r.Status != http.StatusCreated || json.Unmarshal(r.Body, &created) != nil {
		t.Fatalf("create: HTTP %d %s", r.Status, r.Body)
	}
	id := created.ID
	stopped := filepath.Join(dir, "stopped.db")
	daemontest.History(t, stopped)

	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(filepath.Join(dir, "elsewhere.db"), link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	liveInfo, err := os.Stat(livePath)
	if err != nil {
		t.Fatal(err)
	}
	before := dirNames(t, dir)
	for _, tt := range []struct {
		name string
		args []string
		why  string
	}{
		{"LiveDatabase", []string{"-db", livePath, "-o", livePath, "-url", in.Base, "-api-key", daemontest.APIKey}, "the database being backed up"},
		{"LiveDatabaseOtherDB", []string{"-db", stopped, "-o", livePath}, "running paystate"},
		{"DB", []string{"-db", stopped, "-o", stopped}, "the database being backed up"},
		{"Symlink", []string{"-db", stopped, "-o", link}, "a symlink"},
		{"FIFO", []string{"-db", stopped, "-o", fifo}, "a FIFO"},
		{"Directory", []string{"-db", stopped, "-o", sub}, "a directory"},
	} {
		o, err := runCmd(append([]string{"backup"}, tt.args...)...)
		if got, want := ExitCode(err), ExitUsage; got != want {
			t.Errorf("%s: exit code %d, want %d (%v)\n%s", tt.name, got, want, err, o)
			continue
		}
		if !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("%s: err=%q, want one saying %q and that nothing was written", tt.name, err, tt.why)
		}
	}
	if got := dirNames(t, dir); got != before {
		t.Errorf("files after the refusals: %s, want %s", got, before)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi, err)
	}
	// The running server's file is the one it opened, and still serves.
	if fi, err := os.Stat(livePath); err != nil || !os.SameFile(fi, liveInfo) {
		t.Fatalf("the live database's file was replaced: %v", err)
	}
	if r := in.Do("GET", "/v1/payments/"+id, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("GET the live payment: HTTP %d", r.Status)
	}

	// A regular file (yesterday's copy) is replaced, with no file left over.
	old := filepath.Join(dir, "old-copy.db")
	if err := os.WriteFile(old, []byte("yesterday"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := runCmd("backup", "-db", stopped, "-o", old); err != nil {
		t.Fatalf("backup over a regular file: %v\n%s", err, o)
	}
	if o, err := runCmd("verify", "-db", old); err != nil || !strings.Contains(o, "20 payments") {
		t.Fatalf("the replaced copy: %v\n%s", err, o)
	}
	if got, want := dirNames(t, dir), before+""; !strings.Contains(got, "old-copy.db") || strings.Contains(got, ".tmp") {
		t.Errorf("files after the backup: %s (before: %s)", got, want)
	}
}

// listenPort is the port of a server at base (http://host:port).
func listenPort(t *testing.T, base string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestCLI_ProductionServer: review and backup reach a paystate that
// listens on a wildcard address with server.allowed_hosts set, through
// -config: they dial loopback with a Host the server serves, take the key
// from PAYSTATE_API_KEY (never the config's first key), and a 401 names
// -api-key and PAYSTATE_API_KEY, with no success-looking line before it.
func TestCLI_ProductionServer(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "live.db")
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Storage.Path = dbPath
		c.Server.Listen = "0.0.0.0:0"
		c.Server.AllowedHosts = []string{"pay.example.com"}
	})
	port := listenPort(t, in.Base)
	cfg := writeConfig(t, dir, `listen = "0.0.0.0:`+port+`"`+"\nallowed_hosts = [\"pay.example.com\"]", fmt.Sprintf("path = %q", dbPath))
	out := filepath.Join(dir, "copy.db")

	t.Setenv("PAYSTATE_API_KEY", "")
	before := dirNames(t, dir)
	for _, args := range [][]string{{"review", "list", "-config", cfg}, {"backup", "-config", cfg, "-o", out}} {
		o, err := runCmd(args...)
		if err == nil {
			t.Errorf("%s without a key: accepted (the config's key was used)\n%s", args[0], o)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "-api-key") || !strings.Contains(msg, "PAYSTATE_API_KEY") || !strings.Contains(msg, "401") {
			t.Errorf("%s: err=%q, want one naming -api-key and PAYSTATE_API_KEY", args[0], msg)
		}
		if strings.Contains(o, "backup: 0 B") || strings.Contains(o, "written") {
			t.Errorf("%s: a success-looking line before the error:\n%s", args[0], o)
		}
	}
	o, err := runCmd("backup", "-o", out, "-url", "127.0.0.1:"+port, "-api-key", "wrong-key-0123456789")
	if err == nil || strings.Contains(o, "backup: 0 B") || strings.Contains(o, " in ") {
		t.Errorf("backup with a wrong key: err=%v, want an error and no success-looking line before it:\n%s", err, o)
	}
	if got := dirNames(t, dir); got != before {
		t.Errorf("files after the failed backups: %s, want %s", got, before)
	}

	t.Setenv("PAYSTATE_API_KEY", daemontest.APIKey)
	if o, err := runCmd("review", "list", "-config", cfg); err != nil || !strings.Contains(o, "empty") {
		t.Fatalf("review list -config: %v\n%s", err, o)
	}
	if o, err := runCmd("backup", "-config", cfg, "-o", out); err != nil || !strings.Contains(o, "backup written") {
		t.Fatalf("backup -config: %v\n%s", err, o)
	}
}

// TestCLI_WildcardListen: with a config whose server.listen is a wildcard
// address, the CLI dials loopback and sends that address as Host.
func TestCLI_WildcardListen(t *testing.T) {
	t.Parallel()
	for _, wildcard := range []string{"0.0.0.0", "::"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(wildcard, "0"))
		if err != nil {
			t.Logf("%s: %v (skipped)", wildcard, err)
			continue
		}
		hosts := make(chan string, 1)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case hosts <- r.Host:
			default:
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"data":[]}`)
		})}
		go srv.Serve(ln)
		port := listenPort(t, "http://"+ln.Addr().String())
		cfg := writeConfig(t, t.TempDir(), "listen = \""+net.JoinHostPort(wildcard, port)+"\"", `path = "unused.db"`)
		o, err := runCmd("review", "list", "-config", cfg)
		srv.Close()
		if err != nil {
			t.Fatalf("review list, listen %s: %v\n%s", wildcard, err, o)
		}
		host := <-hosts
		h, _, err := net.SplitHostPort(host)
		if ip := net.ParseIP(h); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("listen %s: Host %q, want a loopback address", wildcard, host)
		}
	}
}
