package finalize_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: the
// worker's Run loop and the goroutines RunOnce starts per event must all
// have ended when their context is cancelled.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
