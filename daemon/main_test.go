package daemon_test

import (
	"testing"

	"github.com/paystate/paystate/internal/leakcheck"
	"github.com/paystate/paystate/internal/testkit/pgtest"
)

// TestMain fails the package if goroutines outlive its tests: every server
// a test opens is shut down by its cleanup (see package leakcheck).
// The PostgreSQL that pgtest may have started is removed after the tests.
func TestMain(m *testing.M) { leakcheck.MainThen(m, pgtest.Stop) }
