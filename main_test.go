package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
)

const testKey = "main-test-api-key-0123456789"

// bootDaemon starts a paystate on a database in dir and returns it with its
// base URL.
func bootDaemon(t *testing.T, dbPath string) (*daemon.Main, string) {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Path = dbPath
	cfg.Auth.APIKeys = []string{testKey}
	cfg.Providers.Mock.WebhookDelay = config.Duration{}
	m := daemon.New(cfg, zerolog.Nop())
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	return m, m.Server.URL()
}

func post(t *testing.T, url, key, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// history fills a database with payments of every mock outcome, refunds
// and webhooks, and closes it.
func history(t *testing.T, dbPath string) {
	t.Helper()
	m, base := bootDaemon(t, dbPath)
	for i := range 20 {
		amount := 1000 + i%4 // captured, failed, requires_action→captured, processing→captured
		if st := post(t, base+"/v1/payments", fmt.Sprintf("h-%d", i), fmt.Sprintf(`{"order_id":"h-%d","amount":%d,"currency":"EUR"}`, i, amount)); st != 201 {
			t.Fatalf("create: %d", st)
		}
	}
	// Let the mock's webhooks land.
	deadline := time.Now().Add(10 * time.Second)
	for m.Mock.Stats().WebhooksSent < 20+10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func runCmd(args ...string) (string, error) {
	var out bytes.Buffer
	err := run(context.Background(), args, &out, &out)
	return out.String(), err
}

func TestVerify_CleanAndCorrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.db")
	history(t, clean)
	if out, err := runCmd("verify", "-db", clean); err != nil {
		t.Fatalf("clean database: %v\n%s", err, out)
	} else if !strings.Contains(out, "20 payments") || !strings.Contains(out, " 0 mismatches") {
		t.Fatalf("clean database: %s", out)
	}

	for _, tc := range []struct {
		name    string
		corrupt func(tx *bolt.Tx) error
		want    string
	}{
		{"version gap", func(tx *bolt.Tx) error {
			// Drop the last transition step in the timeline bucket.
			c := tx.Bucket([]byte("timeline")).Cursor()
			for k, v := c.Last(); k != nil; k, v = c.Prev() {
				if bytes.Contains(v, []byte(`"transition"`)) {
					return c.Bucket().Delete(k)
				}
			}
			return fmt.Errorf("no transition step")
		}, "timeline ends at version"},
		{"unbalanced ledger", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("balances"))
			k, v := b.Cursor().First()
			if k == nil {
				return fmt.Errorf("no balances")
			}
			n := int64(binary.BigEndian.Uint64(v)) + 1
			return b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n)))
		}, "ledger does not balance in EUR"},
		{"journal line changed", func(tx *bolt.Tx) error {
			// Double one journal line's amount, balances untouched.
			b := tx.Bucket([]byte("ledger"))
			k, v := b.Cursor().First()
			if k == nil {
				return fmt.Errorf("no ledger lines")
			}
			var line map[string]any
			if err := json.Unmarshal(v, &line); err != nil {
				return err
			}
			line["amount"] = line["amount"].(float64) * 2
			nv, err := json.Marshal(line)
			if err != nil {
				return err
			}
			return b.Put(k, nv)
		}, "ledger in EUR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.db")
			copyFile(t, clean, path)
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(tc.corrupt); err != nil {
				t.Fatal(err)
			}
			db.Close()
			out, err := runCmd("verify", "-db", path)
			if err == nil {
				t.Fatalf("verify passed a corrupt database:\n%s", out)
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "MISMATCH") {
				t.Fatalf("output does not report %q:\n%s", tc.want, out)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackup_DuringWriteLoad takes backups of a running paystate while
// clients create payments, and checks that each copy opens and verifies.
func TestBackup_DuringWriteLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "live.db")
	m, base := bootDaemon(t, dbPath)
	defer m.Close(context.Background())

	var stop atomic.Bool
	var wg sync.WaitGroup
	var made atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if post(t, base+"/v1/payments", fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf(`{"order_id":"w%d-%d","amount":%d,"currency":"EUR"}`, w, i, 1000+i%4)) == 201 {
					made.Add(1)
				}
			}
		}()
	}
	for made.Load() < 50 {
		time.Sleep(5 * time.Millisecond)
	}
	outs := []string{filepath.Join(dir, "b1.db"), filepath.Join(dir, "b2.db")}
	// The file is locked by the running server: the CLI streams the copy
	// from it, once found through -url and once through the lock.
	if out, err := runCmd("backup", "-db", dbPath, "-o", outs[0], "-url", base, "-api-key", testKey); err != nil {
		t.Fatalf("backup -url: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(dir, "paystate.toml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("[server]\nlisten = %q\n[auth]\napi_keys = [%q]\n[providers.mock]\n", strings.TrimPrefix(base, "http://"), testKey)), 0o600)
	if out, err := runCmd("backup", "-db", dbPath, "-o", outs[1], "-config", cfgPath); err != nil {
		t.Fatalf("backup of a locked file: %v\n%s", err, out)
	}
	stop.Store(true)
	wg.Wait()

	for _, o := range outs {
		out, err := runCmd("verify", "-db", o)
		if err != nil {
			t.Fatalf("backup %s does not verify: %v\n%s", o, err, out)
		}
		if strings.HasPrefix(out, "0 payments") {
			t.Fatalf("backup %s is empty: %s", o, out)
		}
	}
	// Without the key the endpoint is closed.
	res, err := http.Get(base + "/admin/backup")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got, want := res.StatusCode, 401; got != want {
		t.Fatalf("backup without key: status=%d, want %d", got, want)
	}
}

func TestBackup_Stopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "stopped.db")
	history(t, dbPath)
	out := filepath.Join(dir, "copy.db")
	if o, err := runCmd("backup", "-db", dbPath, "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	if o, err := runCmd("verify", "-db", out); err != nil || !strings.Contains(o, "20 payments") {
		t.Fatalf("copy: %v\n%s", err, o)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("[auth]\napi_keys = [\"a-very-secret-key-123456\"]\n[providers.mock]\n"), 0o600)
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
		for _, cmd := range []string{"check", "serve"} {
			out, err := runCmd(cmd, "-config", path)
			if err == nil {
				t.Fatalf("%s %s: accepted\n%s", cmd, tt.name, out)
			}
			if got, want := exitCode(err), 2; got != want {
				t.Errorf("%s %s: exit code %d, want %d (%v)", cmd, tt.name, got, want, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "config: "+tt.key+": ") || strings.Contains(msg, "\n") {
				t.Errorf("%s %s: err=%q, want one line naming %s", cmd, tt.name, msg, tt.key)
			}
		}
	}
}
