package defaults_test

import (
	"testing"
	"time"

	"github.com/paystate/paystate/internal/defaults"
)

func TestOr(t *testing.T) {
	for _, c := range []struct{ v, def, want time.Duration }{
		{0, time.Second, time.Second},
		{-time.Minute, time.Second, time.Second},
		{time.Minute, time.Second, time.Minute},
	} {
		if got := defaults.Or(c.v, c.def); got != c.want {
			t.Errorf("Or(%s, %s) = %s, want %s", c.v, c.def, got, c.want)
		}
	}
	if got := defaults.Or(0, 7); got != 7 {
		t.Errorf("Or(0, 7) = %d, want 7", got)
	}
}
