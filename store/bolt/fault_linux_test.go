//go:build linux

package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// Disk faults under a real file system: a tmpfs that fills up (a write
// refused for want of space), and ext4 on a loop device that fails its
// writes (EIO after a file system shutdown) or its fsyncs (a loop device
// whose backing file has no room: the kernel took the write into its page
// cache, and fsync reports that it could not keep it). They need root
// (CI runs as root) and skip elsewhere.

// needRoot skips the test unless it runs as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("disk-fault tests mount file systems and need root")
	}
}

// mountExt4 makes an ext4 file system without a journal in a sparse
// image of 64 MiB in imageDir, attaches it to a free loop device and
// mounts it on a new directory, which it returns. The database files of
// a test must be closed before it ends (cleanup runs in reverse order).
func mountExt4(t *testing.T, imageDir string) string {
	t.Helper()
	needRoot(t)
	for _, tool := range []string{"losetup", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	img := filepath.Join(imageDir, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-O", "^has_journal", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	dir := filepath.Join(t.TempDir(), "ext4")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dev, dir, "ext4", 0, ""); err != nil {
		t.Skipf("cannot mount ext4 on %s: %v", dev, err)
	}
	t.Cleanup(func() {
		err := syscall.Unmount(dir, 0)
		if err == syscall.EBUSY {
			// The kernel may still hold the file system for a moment
			// after the test's last close (seen under load): detach it
			// now, and the kernel frees it when its last user is gone.
			t.Logf("unmount %s: %v; detaching it lazily", dir, err)
			err = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fatalRecorder is an Options.OnFatal that records its calls.
type fatalRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *fatalRecorder) onFatal(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *fatalRecorder) calls() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// bigEvent is a webhook with a body of n bytes, to grow the file fast.
func bigEvent(i, n int) pay.InboxEvent {
	return pay.InboxEvent{Provider: "mock", EventID: fmt.Sprintf("evt_%06d", i), Type: "payment.captured", Body: noise(n), ReceivedAt: t0}
}

// writeUntilError stores big webhooks until a commit fails, and returns
// how many commits succeeded and the error of the one that failed. It
// fails the test if 500 commits succeed.
func writeUntilError(t *testing.T, db *bolt.DB, from int) (int, error) {
	t.Helper()
	for i := from; i < from+500; i++ {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			_, err := tx.PutInbox(bigEvent(i, 256<<10))
			return err
		})
		if err != nil {
			return i - from, err
		}
	}
	t.Fatal("500 commits of 256 KiB succeeded on a file system that should fail them")
	return 0, nil
}

// TestDB_DiskFull: a write refused for want of space is EDISKFULL, not
// fatal: nothing of the transaction is in force, reads go on, and writes
// succeed again once space is freed.
func TestDB_DiskFull(t *testing.T) {
	t.Parallel()
	dir := testkit.MountTmpfs(t, "8m")
	var rec fatalRecorder
	db := open(t, filepath.Join(dir, "paystate.db"), &bolt.Options{OnFatal: rec.onFatal})
	ctx := context.Background()
	p := payment(1, pay.Processing, t0)
	insertPayments(t, db, p)

	filler := filepath.Join(dir, "filler")
	testkit.FillUp(t, filler)
	_, err := writeUntilError(t, db, 0)
	if got, want := pay.ErrorCode(err), pay.EDISKFULL; got != want {
		t.Fatalf("commit on a full disk: %v: code=%q, want %q", err, got, want)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("error %v does not wrap ENOSPC", err)
	}
	if calls := rec.calls(); len(calls) != 0 {
		t.Fatalf("OnFatal called for a full disk: %v", calls)
	}
	if err := db.View(ctx, func(tx store.Tx) error { _, err := tx.Payment(p.ID); return err }); err != nil {
		t.Fatalf("read on a full disk: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx store.Tx) error { _, err := tx.PutInbox(bigEvent(9999, 1<<10)); return err }); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
}

// ext4IOCShutdown is EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)); with
// EXT4_GOING_FLAGS_NOLOGFLUSH the file system fails every later write and
// fsync with EIO, as after a dying disk.
const (
	ext4IOCShutdown          = 0x8004587d
	ext4GoingFlagsNoLogFlush = 0x2
)

// shutdown shuts down the file system holding dir.
func shutdown(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags := uint32(ext4GoingFlagsNoLogFlush)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ext4IOCShutdown, uintptr(unsafe.Pointer(&flags))); errno != 0 {
		t.Skipf("EXT4_IOC_SHUTDOWN: %v", errno)
	}
}

// wantStopped checks that OnFatal was called once with cause and that the
// store refuses every transaction since.
func wantStopped(t *testing.T, db *bolt.DB, rec *fatalRecorder, commitErr error) {
	t.Helper()
	calls := rec.calls()
	if len(calls) != 1 {
		t.Fatalf("OnFatal called %d times, want once (commit error %v)", len(calls), commitErr)
	}
	if msg := calls[0].Error(); !strings.Contains(msg, db.Path()) {
		t.Errorf("OnFatal(%q) does not name the file", msg)
	}
	t.Logf("OnFatal: %v", calls[0])
	if got, want := pay.ErrorCode(commitErr), pay.EUNAVAILABLE; got != want {
		t.Errorf("the failed commit: %v: code=%q, want %q", commitErr, got, want)
	}
	ctx := context.Background()
	ran := false
	err := db.Update(ctx, func(tx store.Tx) error { ran = true; return nil })
	if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want || ran {
		t.Errorf("Update after the fatal error: %v (fn ran: %v): code=%q, want %q", err, ran, got, want)
	}
	err = db.View(ctx, func(tx store.Tx) error { ran = true; return nil })
	if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want || ran {
		t.Errorf("View after the fatal error: %v (fn ran: %v): code=%q, want %q", err, ran, got, want)
	}
	if n := len(rec.calls()); n != 1 {
		t.Errorf("OnFatal called %d times, want once", n)
	}
}

// TestDB_FatalIOError: a commit whose write fails with EIO stops the
// store: OnFatal is called once with the cause, and every later
// transaction is refused.
func TestDB_FatalIOError(t *testing.T) {
	t.Parallel()
	dir := mountExt4(t, t.TempDir())
	var rec fatalRecorder
	db := open(t, filepath.Join(dir, "paystate.db"), &bolt.Options{OnFatal: rec.onFatal})
	// Room in the file, so that the next commit only writes pages.
	ctx := context.Background()
	for i := range 8 {
		if err := db.Update(ctx, func(tx store.Tx) error { _, err := tx.PutInbox(bigEvent(i, 256<<10)); return err }); err != nil {
			t.Fatal(err)
		}
	}

	shutdown(t, dir)
	err := db.Update(ctx, func(tx store.Tx) error { return tx.InsertPayment(payment(1, pay.Processing, t0)) })
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit after the shutdown: %v, want an error wrapping EIO", err)
	}
	wantStopped(t, db, &rec, err)
}

// TestDB_FatalFsync: a commit whose fsync fails stops the store, even
// when the errno is ENOSPC: the data had been taken into the page cache,
// and the kernel could not keep it. Only a write refused up front is a
// full disk.
func TestDB_FatalFsync(t *testing.T) {
	t.Parallel()
	backing := testkit.MountTmpfs(t, "6m")
	dir := mountExt4(t, backing)
	var rec fatalRecorder
	db := open(t, filepath.Join(dir, "paystate.db"), &bolt.Options{OnFatal: rec.onFatal})

	// ext4 sees 64 MiB; the tmpfs under it has room for a few.
	n, err := writeUntilError(t, db, 0)
	t.Logf("%d commits of 256 KiB before: %v", n, err)
	if got := pay.ErrorCode(err); got == pay.EDISKFULL {
		t.Fatalf("a failed fsync was taken for a full disk: %v", err)
	}
	wantStopped(t, db, &rec, err)
}
