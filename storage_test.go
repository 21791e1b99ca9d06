package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/cli"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/store/bolt"
)

// damage makes the database file at path damaged: truncated to half of
// the pages it uses, or a page with a byte flipped (the page id in the
// header of the payments bucket's root).
func damage(t *testing.T, path, how string) {
	t.Helper()
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var used, root int64
	err = bdb.View(func(tx *bbolt.Tx) error {
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
	daemontest.History(t, clean)
	for _, how := range []string{"truncated", "flipped"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "paystate.db")
			testkit.CopyFile(t, clean, path)
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
// finding of verify (exit 3: cli.ErrMismatch), reported as a MISMATCH, unlike
// a damaged file, which is refused.
func TestVerify_DamagedIndex(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "paystate.db")
	daemontest.History(t, path)
	bdb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte("payments_by_created")).Cursor()
		k, _ := c.First()
		return c.Bucket().Delete(k)
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCmd("verify", "-db", path)
	if !errors.Is(err, cli.ErrMismatch) {
		t.Fatalf("verify of a damaged index: %v, want cli.ErrMismatch\n%s", err, out)
	}
	if got, want := cli.ExitCode(err), cli.ExitVerify; got != want {
		t.Fatalf("exit code %d, want %d", got, want)
	}
	if !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "payments_by_created") {
		t.Fatalf("verify does not report the index:\n%s", out)
	}

	damage(t, path, "truncated")
	if _, err := runCmd("verify", "-db", path); !errors.Is(err, bolt.ErrDamaged) || errors.Is(err, cli.ErrMismatch) {
		t.Fatalf("verify of a damaged file: %v, want ErrDamaged, not a mismatch", err)
	}
}
