// Package backoff computes retry delays: exponential with jitter, as the
// webhook inbox (deferred events) and the ripple workers (failed
// deliveries) use them, and waits them out (Sleep).
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d, or until ctx ends, and then returns context.Cause(ctx).
func Sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Delay returns the wait before attempt n (1-based): base·2^(n-1), capped
// at max, with jitter in its upper half, so that retries of many records
// that failed together spread out.
func Delay(base, max time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}
