package httpd_test

import (
	"os"
	"testing"

	"github.com/paystate/paystate/internal/leakcheck"
)

// TestMain fails the package if goroutines outlive its tests: every server
// a test opens is shut down by its cleanup (see package leakcheck). Started
// as a benchmark's client process (clientProcessEnv set), the binary runs
// that instead of tests.
func TestMain(m *testing.M) {
	if addr := os.Getenv(clientProcessEnv); addr != "" {
		os.Exit(runClientProcess(addr))
	}
	leakcheck.Main(m)
}
