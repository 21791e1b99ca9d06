//go:build unix

package bolt

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/paystate/paystate/store"
)

// lockRetry is how often lockForCheck tries again, as bbolt does.
const lockRetry = 50 * time.Millisecond

// lockForCheck takes on f the lock that bbolt takes on the file (flock:
// shared for a read-only open, exclusive otherwise), waiting up to
// timeout, so that checkFile never reads pages that another process is
// writing: a file in use reads as torn, not as damaged. Closing f
// releases it, before bbolt opens the file and takes its own. A writer
// that takes the file in between makes bbolt's open wait and fail as
// locked; until then nobody can have written it. An error wraps store.ErrLocked
// (and bbolt's ErrTimeout, as bbolt's own would).
func lockForCheck(f *os.File, readOnly bool, timeout time.Duration) error {
	how := syscall.LOCK_EX
	if readOnly {
		how = syscall.LOCK_SH
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return fmt.Errorf("lock: %w", err)
		case time.Now().After(deadline):
			return fmt.Errorf("%w (waited %s): %w", store.ErrLocked, timeout, berrors.ErrTimeout)
		}
		time.Sleep(lockRetry)
	}
}
