package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/backoff"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 13: time.Hour, 40: time.Hour} {
		for range 50 {
			d := backoff.Delay(time.Second, time.Hour, n)
			if d < want/2 || d > want {
				t.Fatalf("Delay(1s, 1h, %d)=%s, want in [%s, %s]", n, d, want/2, want)
			}
		}
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	if err := backoff.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v, want nil", err)
	}
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := backoff.Sleep(ctx, time.Hour); !errors.Is(err, cause) {
		t.Fatalf("Sleep on an ended context = %v, want its cause", err)
	}
}
