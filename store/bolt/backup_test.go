package bolt_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// noise returns n bytes that do not compress, so that a body of n bytes
// stores as n bytes (a body is packed where that makes it smaller).
func noise(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

// TestDB_WriteTo_SlowReader: while a backup is taken by a reader that
// reads a few bytes and stops, writes that grow the file (so bbolt must
// map it again, which waits for every read transaction) complete; the
// copy, read to the end afterwards, opens, passes Check and holds what was
// committed before the backup began, and nothing after. The deadline on
// the writes is the failure signal, not a measure: with the read
// transaction held for the reader, they never complete.
func TestDB_WriteTo_SlowReader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "paystate.db")
	db := open(t, path, nil)
	ctx := context.Background()
	before := payment(1, pay.Captured, t0)
	insertPayments(t, db, before)

	// The reader takes 16 bytes, then stops.
	pr, pw := io.Pipe()
	backupDone := make(chan error, 1)
	go func() {
		_, err := db.WriteTo(pw)
		pw.CloseWithError(err)
		backupDone <- err
	}()
	head := make([]byte, 16)
	if _, err := io.ReadFull(pr, head); err != nil {
		t.Fatal(err)
	}

	// 16 MiB of webhooks, one commit each, and a payment.
	writesDone := make(chan error, 1)
	go func() {
		for i := range 16 {
			err := db.Update(ctx, func(tx store.Tx) error {
				_, err := tx.PutInbox(pay.InboxEvent{Provider: "mock", EventID: fmt.Sprintf("evt_%d", i), Type: "payment.captured", Body: noise(1 << 20), ReceivedAt: t0})
				return err
			})
			if err != nil {
				writesDone <- err
				return
			}
		}
		writesDone <- db.Update(ctx, func(tx store.Tx) error { return tx.InsertPayment(payment(2, pay.Created, t0)) })
	}()
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case err := <-writesDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline.Done():
		pr.CloseWithError(io.ErrClosedPipe) // let the backup, then the writes, end
		<-backupDone
		<-writesDone
		t.Fatal("writes that grow the file waited for a backup reader that stopped reading")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() < 16<<20 {
		t.Fatalf("the database did not grow past 16 MiB: %v, %v", fi, err)
	}

	// The rest of the copy.
	rest, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-backupDone; err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	copyPath := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(copyPath, append(head, rest...), 0o600); err != nil {
		t.Fatal(err)
	}
	backup := open(t, copyPath, &bolt.Options{ReadOnly: true})
	if err := backup.Check(); err != nil {
		t.Fatalf("Check of the copy: %v", err)
	}
	err = backup.View(ctx, func(tx store.Tx) error {
		if _, err := tx.Payment(before.ID); err != nil {
			return fmt.Errorf("payment committed before the backup: %w", err)
		}
		if _, err := tx.Payment(payment(2, "", t0).ID); pay.ErrorCode(err) != pay.ENOTFOUND {
			return fmt.Errorf("payment committed after the backup began: %v, want not found", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The snapshot file is gone.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "paystate.db" {
			t.Errorf("%s left behind in the database's directory", e.Name())
		}
	}
}

// TestDB_Snapshot: the copy is as long as it says, opens, and its file is
// removed when the copy is closed, read or not.
func TestDB_Snapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := open(t, filepath.Join(dir, "paystate.db"), nil)
	insertPayments(t, db, payment(1, pay.Captured, t0))
	r, size, err := db.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if n, err := io.Copy(&b, r); err != nil || n != size {
		t.Fatalf("read %d bytes of a %d-byte copy: %v", n, size, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	unread, _, err := db.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := unread.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %v, want only the database", entries)
	}
}
