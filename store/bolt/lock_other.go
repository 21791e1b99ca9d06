//go:build !unix

package bolt

import (
	"os"
	"time"
)

// lockForCheck does nothing where flock is not there: bbolt's own lock
// (LockFileEx on Windows) is taken when it opens the file, after the
// check.
func lockForCheck(*os.File, bool, time.Duration) error { return nil }
