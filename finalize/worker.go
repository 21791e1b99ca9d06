package finalize

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// loop is what the Run of Inbox and Pull share: the waker, the time of
// the last turn (Heartbeat) and the loop of turns itself.
type loop struct {
	waker   waker
	lastRun atomic.Int64 // unix ns of Run's last turn
}

// run calls once at once, then on every tick of interval and every wake,
// until ctx is cancelled, and logs a failed turn as what. With drain, a
// turn that did some work and did not fail is followed by the next at
// once (there may be more). It returns nil on cancel.
func (l *loop) run(ctx context.Context, interval time.Duration, now func() time.Time, logger zerolog.Logger,
	what string, drain bool, once func(context.Context) (int, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := once(ctx)
		l.lastRun.Store(clock(now).UnixNano())
		if err != nil && ctx.Err() == nil {
			logger.Error().Err(err).Msg(what)
		}
		if drain && n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.waker.ch():
		}
	}
}

// heartbeat returns when run last finished a turn (zero before the
// first) and interval.
func (l *loop) heartbeat(interval time.Duration) (last time.Time, _ time.Duration) {
	if ns := l.lastRun.Load(); ns != 0 {
		last = time.Unix(0, ns).UTC()
	}
	return last, interval
}

// waker wakes a worker's loop: a channel of capacity 1 and a send that
// never blocks (STYLE: notifications from OnCommit). Its zero value is
// ready to use.
type waker struct {
	once sync.Once
	c    chan struct{}
}

// ch is the channel the loop selects on.
func (w *waker) ch() chan struct{} {
	w.once.Do(func() { w.c = make(chan struct{}, 1) })
	return w.c
}

// wake asks the loop for a turn now. It never blocks.
func (w *waker) wake() {
	select {
	case w.ch() <- struct{}{}:
	default:
	}
}

// RateLimiters hands out one rate limiter per provider, made on first
// use with the rate Rate gives for it, in calls per second (zero or less,
// or a nil Rate: no limit). Its zero value with Rate set is ready to use,
// and it is safe for concurrent use.
type RateLimiters struct {
	Rate func(provider string) float64

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// Get returns the provider's limiter.
func (r *RateLimiters) Get(provider string) *rate.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*rate.Limiter{}
	}
	l, ok := r.m[provider]
	if !ok {
		l = rate.NewLimiter(rate.Inf, 1)
		if r.Rate != nil {
			if perSecond := r.Rate(provider); perSecond > 0 {
				l = rate.NewLimiter(rate.Limit(perSecond), 1)
			}
		}
		r.m[provider] = l
	}
	return l
}
