package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// archiveWebhooks stores n processed webhooks of size bytes each, one
// commit each, to grow the database file (processed: no worker touches
// them).
func archiveWebhooks(db *store.DB, prefix string, n, size int) error {
	for i := range n {
		err := db.Update(context.Background(), func(tx pay.Tx) error {
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
	m, base := bootDaemon(t, dbPath)
	defer m.Close(context.Background())
	if st := post(t, base+"/v1/payments", "before", `{"order_id":"before","amount":1000,"currency":"EUR"}`); st != 201 {
		t.Fatalf("create: %d", st)
	}
	if err := archiveWebhooks(m.DB, "fill", 24, 1<<20); err != nil {
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
	req.Header.Set("Authorization", "Bearer "+testKey)
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
		if st := post(t, base+"/v1/payments", "during", `{"order_id":"during","amount":1000,"currency":"EUR"}`); st != 201 {
			done <- fmt.Errorf("create during the backup: %d", st)
			return
		}
		done <- archiveWebhooks(m.DB, "more", 16, 1<<20)
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
	cp, err := store.Open(copyPath, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.Check(); err != nil {
		t.Fatalf("Check of the copy: %v", err)
	}
	var orders []string
	err = cp.View(context.Background(), func(tx pay.Tx) error {
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

// damage makes the database file at path damaged: truncated to half of
// the pages it uses, or a page with a byte flipped (the page id in the
// header of the payments bucket's root).
func damage(t *testing.T, path, how string) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var used, root int64
	err = bdb.View(func(tx *bolt.Tx) error {
		used, root = tx.Size(), int64(tx.Bucket([]byte("payments")).Root())
		return nil
	})
	pageSize := int64(bdb.Info().PageSize)
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "truncated":
		err = os.Truncate(path, used/2)
	case "flipped":
		var f *os.File
		if f, err = os.OpenFile(path, os.O_RDWR, 0); err == nil {
			b := []byte{0}
			f.ReadAt(b, root*pageSize)
			b[0] ^= 0x40
			_, err = f.WriteAt(b, root*pageSize)
			f.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestBinary_DamagedFile: verify and backup, the real binary, refuse a
// damaged file with one line on stderr that names the file once and says
// to restore from a backup, and a non-zero exit; never a crash (today:
// SIGBUS and a stack dump).
func TestBinary_DamagedFile(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	clean := filepath.Join(t.TempDir(), "clean.db")
	history(t, clean)
	for _, how := range []string{"truncated", "flipped"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "paystate.db")
			copyFile(t, clean, path)
			damage(t, path, how)
			for _, args := range [][]string{
				{"verify", "-db", path},
				{"backup", "-db", path, "-o", filepath.Join(dir, "out.db")},
			} {
				var stdout, stderr bytes.Buffer
				cmd := exec.Command(bin, args...)
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
					t.Fatalf("%s: %v, want a non-zero exit\nstdout: %s\nstderr: %s", args[0], err, stdout.String(), stderr.String())
				}
				msg := strings.TrimSuffix(stderr.String(), "\n")
				if strings.Contains(msg, "\n") || !strings.Contains(msg, "restore from a backup") || strings.Count(msg, path) != 1 {
					t.Fatalf("%s: stderr is not one line naming the file once and saying to restore from a backup:\n%s", args[0], stderr.String())
				}
				t.Logf("%s: exit %d: %s", args[0], exit.ExitCode(), msg)
			}
		})
	}
}

// TestVerify_DamagedIndex: an index that disagrees with its records is a
// finding of verify (exit 3: errMismatch), reported as a MISMATCH, unlike
// a damaged file, which is refused.
func TestVerify_DamagedIndex(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "paystate.db")
	history(t, path)
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("payments_by_created")).Cursor()
		k, _ := c.First()
		return c.Bucket().Delete(k)
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCmd("verify", "-db", path)
	if !errors.Is(err, errMismatch) {
		t.Fatalf("verify of a damaged index: %v, want errMismatch\n%s", err, out)
	}
	if !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "payments_by_created") {
		t.Fatalf("verify does not report the index:\n%s", out)
	}

	damage(t, path, "truncated")
	if _, err := runCmd("verify", "-db", path); !errors.Is(err, store.ErrDamaged) || errors.Is(err, errMismatch) {
		t.Fatalf("verify of a damaged file: %v, want ErrDamaged, not a mismatch", err)
	}
}
