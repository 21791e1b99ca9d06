package mock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: Close
// must stop every webhook sender of the simulated PSP and its HTTP client's
// connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
