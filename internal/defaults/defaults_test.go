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

func TestClock(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := defaults.Clock(func() time.Time { return at })(); !got.Equal(at) {
		t.Errorf("Clock(injected)() = %s, want %s", got, at)
	}
	before := time.Now()
	if got := defaults.Clock(nil)(); got.Before(before) {
		t.Errorf("Clock(nil)() = %s, before time.Now() %s", got, before)
	}
}
