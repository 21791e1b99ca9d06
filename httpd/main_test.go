package httpd_test

import (
	"testing"

	"github.com/paystate/paystate/internal/leakcheck"
)

// TestMain fails the package if goroutines outlive its tests: every server
// a test opens is shut down by its cleanup (see package leakcheck).
func TestMain(m *testing.M) { leakcheck.Main(m) }
