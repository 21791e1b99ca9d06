//go:build unix

package cli

import (
	"errors"
	"os"
	"syscall"
)

// lockedByOther reports whether another open file holds the flock that
// bbolt takes on a database it has open (exclusive in a writer, shared in
// a reader): a running paystate's file. Locks of flock belong to an open
// file, so one taken in this process through another file counts too.
func lockedByOther(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
