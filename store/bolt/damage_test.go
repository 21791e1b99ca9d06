package bolt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// damagedDB writes a database of n payments with the store and closes it.
// It returns the file's path and its bbolt page size.
func damagedDB(t *testing.T, n int) (string, int) {
	t.Helper()
	ps := make([]pay.Payment, n)
	for i := range ps {
		ps[i] = payment(i, pay.Captured, t0)
	}
	path := newFile(t, ps...)
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	return path, bdb.Info().PageSize
}

// bucketRoot returns the page id of a bucket's root page.
func bucketRoot(t *testing.T, path string, bucket []byte) uint64 {
	t.Helper()
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var root uint64
	err = bdb.View(func(tx *bbolt.Tx) error {
		root = uint64(tx.Bucket(bucket).Root())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// usedSize returns the bytes of the pages a database file uses (bbolt
// grows the file ahead of them).
func usedSize(t *testing.T, path string) int64 {
	t.Helper()
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var n int64
	if err := bdb.View(func(tx *bbolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Offsets in a bbolt page (bbolt's internal/common/page.go): a 16-byte
// header (id, flags, count, overflow), then 16-byte elements. A branch
// element is pos, ksize (uint32 each) and the child's page id; a leaf
// element is flags, pos, ksize, vsize. pos counts from the element.
const (
	pageHeader = 16
	elemSize   = 16
)

// patch changes the file at off with fn.
func patch(t *testing.T, path string, off int64, n int, fn func(b []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	fn(b)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestOpen_DamagedFile: a damaged file is refused at open with one line
// that names the file, says what is wrong and to restore from a backup,
// for the daemon's open and the tools' read-only one. None of these may
// crash the process (today: SIGBUS for a truncated file, a panic in a
// goroutine bbolt starts to rebuild the freelist for a bad page).
func TestOpen_DamagedFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, pageSize int)
		want   string // in the error
	}{
		{"Truncated", func(t *testing.T, path string, pageSize int) {
			// Half of the pages in use (the file may be longer).
			if err := os.Truncate(path, usedSize(t, path)/2); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"TruncatedToMetaPages", func(t *testing.T, path string, pageSize int) {
			if err := os.Truncate(path, int64(2*pageSize)); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"TruncatedMidMetaPage", func(t *testing.T, path string, pageSize int) {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"PageHeader", func(t *testing.T, path string, pageSize int) {
			// The page id in the header of the payments bucket's root.
			root := bucketRoot(t, path, []byte("payments"))
			patch(t, path, int64(root)*int64(pageSize), 1, func(b []byte) { b[0] ^= 0x40 })
		}, "page"},
		{"PageType", func(t *testing.T, path string, pageSize int) {
			root := bucketRoot(t, path, []byte("payments"))
			patch(t, path, int64(root)*int64(pageSize)+8, 1, func(b []byte) { b[0] ^= 0x20 })
		}, "type"},
		{"BranchChild", func(t *testing.T, path string, pageSize int) {
			// The second child of the payments root points at the first:
			// one page used twice, which bbolt's freelist rebuild panics
			// on in a goroutine of its own.
			root := bucketRoot(t, path, []byte("payments"))
			off := int64(root) * int64(pageSize)
			patch(t, path, off, pageHeader+2*elemSize, func(b []byte) {
				if got := binary.LittleEndian.Uint16(b[8:]); got != 0x01 {
					t.Fatalf("payments root is not a branch page (flags %#x): store more payments", got)
				}
				first := b[pageHeader+8 : pageHeader+16]
				copy(b[pageHeader+elemSize+8:pageHeader+elemSize+16], first)
			})
		}, "page"},
		{"KeyOrder", func(t *testing.T, path string, pageSize int) {
			// The first key of the payments root made greater than the
			// second.
			root := bucketRoot(t, path, []byte("payments"))
			off := int64(root) * int64(pageSize)
			var pos uint32
			patch(t, path, off, pageHeader+elemSize, func(b []byte) { pos = binary.LittleEndian.Uint32(b[pageHeader:]) })
			patch(t, path, off+pageHeader+int64(pos), 1, func(b []byte) { b[0] = 0xff })
		}, "key"},
		{"ElementOutOfPage", func(t *testing.T, path string, pageSize int) {
			root := bucketRoot(t, path, []byte("payments"))
			off := int64(root) * int64(pageSize)
			patch(t, path, off+pageHeader, 4, func(b []byte) { binary.LittleEndian.PutUint32(b, 1<<30) })
		}, "page"},
		{"MetaPage", func(t *testing.T, path string, pageSize int) {
			// The root bucket's page id in meta page 0, checksum untouched.
			patch(t, path, pageHeader+16, 1, func(b []byte) { b[0] ^= 0x01 })
		}, "meta page 0"},
		{"MetaPages", func(t *testing.T, path string, pageSize int) {
			patch(t, path, 0, 2*pageSize, func(b []byte) {
				for i := range b {
					b[i] = 'x'
				}
			})
		}, "meta page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, pageSize := damagedDB(t, 2000)
			tc.damage(t, path, pageSize)
			for _, opts := range []*bolt.Options{nil, {ReadOnly: true}} {
				db, err := bolt.Open(path, opts)
				if err == nil {
					db.Close()
					t.Fatalf("Open(ReadOnly=%v) accepted a damaged file", opts != nil)
				}
				msg := err.Error()
				if opts == nil {
					t.Log(msg)
				}
				for _, want := range []string{path, tc.want, "restore from a backup"} {
					if !strings.Contains(msg, want) {
						t.Errorf("Open(ReadOnly=%v): %q does not say %q", opts != nil, msg, want)
					}
				}
				if strings.Contains(msg, "\n") {
					t.Errorf("Open(ReadOnly=%v): the error is more than one line: %q", opts != nil, msg)
				}
				if strings.Count(msg, path) != 1 {
					t.Errorf("Open(ReadOnly=%v): %q names the file %d times, want once", opts != nil, msg, strings.Count(msg, path))
				}
				if !errors.Is(err, bolt.ErrDamaged) {
					t.Errorf("Open(ReadOnly=%v): %v is not ErrDamaged", opts != nil, err)
				}
			}
		})
	}
}

// TestOpen_NotDatabase: a file that is not a paystate database at all -
// empty where it must be read, or another kind of file (an executable) -
// is refused as such, in one line naming the file, not called damaged (a
// backup would not help: the path is wrong), and left as it was. A
// writable open of an empty file still creates the database.
func TestOpen_NotDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := dir + "/empty.db"
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	elf, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	binary := dir + "/binary.db"
	if err := os.WriteFile(binary, elf, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		opts []*bolt.Options
		want string
	}{
		{empty, []*bolt.Options{{ReadOnly: true}}, "empty"},
		{binary, []*bolt.Options{nil, {ReadOnly: true}}, "not a bbolt file"},
	} {
		for _, o := range tc.opts {
			db, err := bolt.Open(tc.path, o)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%s, ReadOnly=%v) succeeded", tc.path, o != nil)
			}
			msg := err.Error()
			if !errors.Is(err, bolt.ErrNotDatabase) || errors.Is(err, bolt.ErrDamaged) {
				t.Errorf("Open(%s, ReadOnly=%v): %v, want ErrNotDatabase, not ErrDamaged", tc.path, o != nil, err)
			}
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "not a paystate database") || strings.Contains(msg, "restore") ||
				strings.Contains(msg, "\n") || strings.Count(msg, tc.path) != 1 {
				t.Errorf("Open(%s, ReadOnly=%v): %q, want one line naming the file once, saying %q and not to restore", tc.path, o != nil, msg, tc.want)
			}
		}
	}
	if b, err := os.ReadFile(binary); err != nil || !bytes.Equal(b, elf) {
		t.Errorf("the binary was changed: %v", err)
	}
	db, err := bolt.Open(empty, nil)
	if err != nil {
		t.Fatalf("writable Open of an empty file: %v", err)
	}
	db.Close()
}

// TestOpen_SoundFile: the check at open accepts what the store writes,
// reopened and written again several times.
func TestOpen_SoundFile(t *testing.T) {
	t.Parallel()
	path, _ := damagedDB(t, 2000)
	for i := range 3 {
		db, err := bolt.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		insertPayments(t, db, payment(5000+i, pay.Created, t0))
		if err := db.Check(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpen_HeldFileNotRead: a file that a running paystate holds is
// refused as locked before any of its pages is read. Read while another
// process writes it, a file can look torn (a page that a commit in flight
// reuses, pointed to twice) and was called damaged: `paystate backup`
// of a live file failed so. Here the held file's page of the payments
// bucket is made bad on disk, as a torn read would see it; the read-only
// and the writable open both say "locked", not "damaged".
func TestOpen_HeldFileNotRead(t *testing.T) {
	t.Parallel()
	path, ps := damagedDB(t, 200)
	root := bucketRoot(t, path, []byte("payments"))
	held := open(t, path, nil) // writes the file: the next open reads every page
	var orig []byte
	patch(t, path, int64(root)*int64(ps), 2, func(b []byte) {
		orig = bytes.Clone(b)
		b[0], b[1] = 0xff, 0xff // the page's id no longer matches where it is
	})
	for _, o := range []bolt.Options{{ReadOnly: true, Timeout: 10 * time.Millisecond}, {Timeout: 10 * time.Millisecond}} {
		db, err := bolt.Open(path, &o)
		if err == nil {
			db.Close()
			t.Fatalf("Open (read-only %t) of a held file succeeded", o.ReadOnly)
		}
		if !errors.Is(err, store.ErrLocked) || errors.Is(err, bolt.ErrDamaged) {
			t.Fatalf("Open (read-only %t) of a held file: %v; want locked, not damaged", o.ReadOnly, err)
		}
	}
	patch(t, path, int64(root)*int64(ps), 2, func(b []byte) { copy(b, orig) })
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err := bolt.Open(path, &bolt.Options{ReadOnly: true}); err != nil {
		t.Fatalf("Open once the file is free: %v", err)
	} else {
		db.Close()
	}
}
