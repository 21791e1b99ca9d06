package finalize_test

import (
	"testing"

	"github.com/paystate/paystate/internal/leakcheck"
	"github.com/paystate/paystate/internal/testkit/pgtest"
)

// TestMain fails the package if a test leaves a goroutine running: the
// worker's Run loop and the goroutines RunOnce starts per event must all
// have ended when their context is cancelled. The PostgreSQL the money
// tests share is stopped first.
func TestMain(m *testing.M) { leakcheck.MainThen(m, pgtest.Stop) }
