package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of the given size on a new directory and
// unmounts it when the test ends: cleanups run in reverse order, so one
// registered later (a database's Close) runs first. It skips the test
// unless it runs as root with the right to mount (CI does).
func MountTmpfs(tb testing.TB, size string) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("disk-fault tests mount file systems and need root")
	}
	dir := filepath.Join(tb.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		tb.Skipf("cannot mount a tmpfs here (%v): disk-fault tests need root with CAP_SYS_ADMIN", err)
	}
	tb.Cleanup(func() { unmount(tb, dir) })
	return dir
}

// unmount unmounts the tmpfs at dir. EBUSY with no file of this process
// open in dir is a child process that another test started at that
// instant (os/exec's fork holds a copy of every descriptor until the
// child's exec closes them): the mount is then detached, and the kernel
// frees it when the child has exec'd. A file of this process still open
// in dir is an error of the test.
func unmount(tb testing.TB, dir string) {
	err := syscall.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) {
		if open := openIn(dir); len(open) > 0 {
			tb.Errorf("unmount %s: files still open in it: %v", dir, open)
			return
		}
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	if err != nil {
		tb.Errorf("unmount %s: %v", dir, err)
	}
}

// openIn returns the files under dir that this process has open.
func openIn(dir string) []string {
	fds, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, target)
		}
	}
	return out
}

// FillUp writes a file at path until its file system is full, down to the
// last byte.
func FillUp(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for _, n := range []int{64 << 10, 4 << 10, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); errors.Is(err, syscall.ENOSPC) {
				break
			} else if err != nil {
				tb.Fatal(err)
			}
		}
	}
}
