package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// TestBackup_DuringWriteLoad takes backups of a running paystate while
// clients create payments, and checks that each copy opens and verifies.
func TestBackup_DuringWriteLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "live.db")
	in := daemontest.Boot(t, func(c *config.Config) { c.Storage.Path = dbPath })
	base := in.Base

	var stop atomic.Bool
	var wg sync.WaitGroup
	var made atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				r, err := in.Send("POST", "/v1/payments", fmt.Appendf(nil, `{"order_id":"w%d-%d","amount":%d,"currency":"EUR"}`, w, i, 1000+i%4),
					map[string]string{"Idempotency-Key": fmt.Sprintf("w%d-%d", w, i)})
				if err != nil {
					t.Error(err)
				} else if r.Status == 201 {
					made.Add(1)
				}
			}
		}()
	}
	testkit.WaitFor(t, 30*time.Second, func() error {
		if n := made.Load(); n < 50 {
			return fmt.Errorf("%d payments made", n)
		}
		return nil
	})
	outs := []string{filepath.Join(dir, "b1.db"), filepath.Join(dir, "b2.db")}
	// The file is locked by the running server: the CLI streams the copy
	// from it, once found through -url and once through the lock.
	if out, err := runCmd("backup", "-db", dbPath, "-o", outs[0], "-url", base, "-api-key", daemontest.APIKey); err != nil {
		t.Fatalf("backup -url: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(dir, "paystate.toml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("[server]\nlisten = %q\n[auth]\napi_keys = [%q]\n[providers.mock]\nallow_public = true\nwebhook_secret = \"whsec_bW9jay1zZWNyZXQtbW9jay1zZWNyZXQtbW9jay0wMDA=\"\n", strings.TrimPrefix(base, "http://"), daemontest.APIKey)), 0o600)
	if out, err := runCmd("backup", "-db", dbPath, "-o", outs[1], "-config", cfgPath, "-api-key", daemontest.APIKey); err != nil {
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

// TestBackup_Stopped copies a stopped database, which then verifies.
func TestBackup_Stopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "stopped.db")
	daemontest.History(t, dbPath)
	out := filepath.Join(dir, "copy.db")
	if o, err := runCmd("backup", "-db", dbPath, "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	if o, err := runCmd("verify", "-db", out); err != nil || !strings.Contains(o, "20 payments") {
		t.Fatalf("copy: %v\n%s", err, o)
	}
}

// archiveWebhooks stores n processed webhooks of size bytes each, one
// commit each, to grow the database file (processed: no worker touches
// them).
func archiveWebhooks(db store.Store, prefix string, n, size int) error {
	for i := range n {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			id := fmt.Sprintf("evt_%s_%d", prefix, i)
			if err := tx.MarkProcessed("standard", id); err != nil {
				return err
			}
			_, err := tx.PutInbox(pay.InboxEvent{Provider: "standard", EventID: id, Type: "payment.captured", Body: make([]byte, size)})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// TestBackup_SlowClient: GET /admin/backup of a 24 MiB database read by a
// client that takes its headers and 1 KiB, then stops reading, holds up
// neither a create nor writes that grow the file past bbolt's mapping;
// the copy, read to its end afterwards, opens, passes Check and holds what
// was committed before the backup began and nothing after. The deadline
// on the writes is the failure signal, not a measure.
func TestBackup_SlowClient(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "live.db")
	in := daemontest.Boot(t, func(c *config.Config) { c.Storage.Path = dbPath })
	base := in.Base
	if r := in.Create(`{"order_id":"before","amount":1000,"currency":"EUR"}`, "before"); r.Status != 201 {
		t.Fatalf("create: %d", r.Status)
	}
	if err := archiveWebhooks(in.Main.Store, "fill", 24, 1<<20); err != nil {
		t.Fatal(err)
	}

	// The client takes the headers and 1 KiB. (What the kernel buffers
	// for it on both ends, a few MiB, is far less than the copy.)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest("GET", base+"/admin/backup", nil)
	req.Header.Set("Authorization", "Bearer "+daemontest.APIKey)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("backup: %s %s", res.Status, b)
	}
	head := make([]byte, 1024)
	if _, err := io.ReadFull(res.Body, head); err != nil {
		t.Fatal(err)
	}

	// Meanwhile: a create and 16 MiB more. The deadline is well below the
	// server's write timeout (35 s), which ends a stuck download.
	done := make(chan error, 1)
	go func() {
		r, err := in.Send("POST", "/v1/payments", []byte(`{"order_id":"during","amount":1000,"currency":"EUR"}`), map[string]string{"Idempotency-Key": "during"})
		if err == nil && r.Status != 201 {
			err = fmt.Errorf("create during the backup: %d", r.Status)
		}
		if err != nil {
			done <- err
			return
		}
		done <- archiveWebhooks(in.Main.Store, "more", 16, 1<<20)
	}()
	deadline, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline.Done():
		conn.Close() // the backup ends, and the writes with it
		<-done
		t.Fatal("writes waited for a backup client that stopped reading")
	}

	// The rest of the copy.
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	f, err := os.Create(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(head)
	n, err := io.Copy(f, res.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("read the copy: %v", err)
	}
	if got, want := n+int64(len(head)), res.ContentLength; got != want {
		t.Fatalf("copy of %d bytes, Content-Length %d", got, want)
	}
	cp, err := bolt.Open(copyPath, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.Check(); err != nil {
		t.Fatalf("Check of the copy: %v", err)
	}
	var orders []string
	err = cp.View(context.Background(), func(tx store.Tx) error {
		ps, _, err := tx.ListPayments(pay.PaymentFilter{Limit: 10})
		for _, p := range ps {
			orders = append(orders, p.OrderID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(orders) != 1 || orders[0] != "before" {
		t.Fatalf("the copy holds orders %v, want only the one created before the backup", orders)
	}
}
