// Package lease runs slow work on a payment (PSP calls, webhook processing,
// review resolution) under the payment's lease, and watches how long that
// work takes against the lease TTL.
//
// A lease is taken in its own short transaction, the work runs outside any
// transaction, and the lease is released afterwards. The fencing token is
// handed to the work so that its finalize call is refused (lease_lost) if
// the lease ran out and another worker took it over meanwhile.
package lease

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/pay"
)

// window is how many recent durations the p99 is computed over.
const window = 512

// Runner takes leases for one kind of worker.
type Runner struct {
	Store  pay.Store
	Holder string        // who holds the lease: "inbox", "sweeper", "review", plus a process id
	TTL    time.Duration // lease.ttl
	// Now measures how long work under a lease takes; default time.Now.
	Now    func() time.Time
	Logger zerolog.Logger

	mu     sync.Mutex
	recent []time.Duration // ring of the last `window` durations
	next   int
	warned bool
}

// Headroom is 1 while the p99 of work under a lease is past half the TTL.
var headroom = metrics.NewGauge(`paystate_lease_ttl_headroom_low`, nil)

var (
	acquired  = metrics.NewCounter(`paystate_lease_acquisitions_total`)
	contended = metrics.NewCounter(`paystate_lease_contention_total`)
	lost      = metrics.NewCounter(`paystate_lease_lost_total`)
)

// Do takes the lease of paymentID, runs fn with its fencing token, and
// releases it. If another holder has the lease it returns ELEASEHELD
// without running fn; the caller defers the work.
func (r *Runner) Do(ctx context.Context, paymentID string, fn func(ctx context.Context, token uint64) error) error {
	var l pay.Lease
	err := r.Store.Update(ctx, func(tx pay.Tx) error {
		var err error
		l, err = tx.AcquireLease(paymentID, r.Holder, r.TTL)
		return err
	})
	if pay.ErrorCode(err) == pay.ELEASEHELD {
		contended.Inc()
		return err
	} else if err != nil {
		return err
	}
	acquired.Inc()

	// The work may not outlive the lease.
	wctx, cancel := context.WithTimeout(ctx, r.TTL)
	now := r.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	err = fn(wctx, l.Token)
	cancel()
	r.observe(now().Sub(start))
	if pay.ErrorCode(err) == pay.ELEASELOST {
		lost.Inc()
	}

	// Release with a context of its own: the work's may be cancelled.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if rerr := r.Store.Update(rctx, func(tx pay.Tx) error { return tx.ReleaseLease(paymentID, l.Token) }); rerr != nil && err == nil {
		// The lease runs out by itself; a failed release only delays the next holder.
		r.Logger.Warn().Err(rerr).Str("payment_id", paymentID).Msg("release lease")
	}
	return err
}

// observe records one duration of work under a lease and raises the
// headroom alarm when the p99 passes half the TTL.
func (r *Runner) observe(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recent) < window {
		r.recent = append(r.recent, d)
	} else {
		r.recent[r.next] = d
		r.next = (r.next + 1) % window
	}
	p99 := r.p99Locked()
	low := p99 > r.TTL/2
	if low && !r.warned {
		r.Logger.Warn().Dur("p99", p99).Dur("ttl", r.TTL).Str("holder", r.Holder).
			Msg("work under a lease takes more than half the lease TTL at p99: raise lease.ttl or look at the PSP's latency")
	}
	r.warned = low
	setLow(r, low)
}

// lowRunners are the runners whose p99 is past half their TTL; the gauge
// is 1 while any is (the sweeper's and the review's runners share it).
var (
	lowMu      sync.Mutex
	lowRunners = map[*Runner]bool{}
)

func setLow(r *Runner, low bool) {
	lowMu.Lock()
	defer lowMu.Unlock()
	if low {
		lowRunners[r] = true
	} else {
		delete(lowRunners, r)
	}
	if len(lowRunners) > 0 {
		headroom.Set(1)
	} else {
		headroom.Set(0)
	}
}

// P99 returns the 99th percentile of the recent work durations.
func (r *Runner) P99() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p99Locked()
}

func (r *Runner) p99Locked() time.Duration {
	if len(r.recent) == 0 {
		return 0
	}
	s := slices.Clone(r.recent)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}
