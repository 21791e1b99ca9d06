package bolt_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/paystate/paystate/store/bolt"
)

// TestRefusedWrite: of the commit failures bbolt returns, only a write or
// an extension of the file refused up front (ENOSPC, EDQUOT, EFBIG; EROFS)
// leaves nothing behind; a failed fsync, whatever its errno, and any other
// error are fatal. The errors are shaped as bbolt 1.4 returns them.
func TestRefusedWrite(t *testing.T) {
	t.Parallel()
	path := "/data/paystate.db"
	write := func(errno syscall.Errno) error { return &fs.PathError{Op: "write", Path: path, Err: errno} }
	for _, tc := range []struct {
		name          string
		err           error
		refused, full bool
	}{
		{"WriteENOSPC", write(syscall.ENOSPC), true, true},
		{"WriteEDQUOT", write(syscall.EDQUOT), true, true},
		{"WriteEFBIG", write(syscall.EFBIG), true, true},
		{"WriteEROFS", write(syscall.EROFS), true, false},
		{"WriteEIO", write(syscall.EIO), false, false},
		{"ResizeENOSPC", fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: path, Err: syscall.ENOSPC}), true, true},
		{"ResizeEIO", fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: path, Err: syscall.EIO}), false, false},
		// fdatasync's bare errno, and the sync after a resize.
		{"FsyncENOSPC", syscall.ENOSPC, false, false},
		{"FsyncEIO", syscall.EIO, false, false},
		{"GrowSync", fmt.Errorf("file sync error: %s", &fs.PathError{Op: "sync", Path: path, Err: syscall.ENOSPC}), false, false},
		{"Mmap", errors.New("mmap allocate error: cannot allocate memory"), false, false},
	} {
		refused, full := bolt.RefusedWrite(tc.err)
		if refused != tc.refused || full != tc.full {
			t.Errorf("%s (%v): refused=%v full=%v, want %v %v", tc.name, tc.err, refused, full, tc.refused, tc.full)
		}
	}
}
