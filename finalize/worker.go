package finalize

import (
	"sync"

	"golang.org/x/time/rate"
)

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
