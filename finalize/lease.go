package finalize

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// leaseWindow is how many recent durations the p99 is computed over.
const leaseWindow = 512

// Metrics of the leases, registered once for every Leases of the process.
var (
	leasesAcquired  = metrics.NewCounter(`paystate_lease_acquisitions_total`)
	leasesContended = metrics.NewCounter(`paystate_lease_contention_total`)
	leasesLost      = metrics.NewCounter(`paystate_lease_lost_total`)
	// leaseHeadroomLow counts the Leases (the sweeper's, the review's)
	// whose p99 is past half their TTL: 0 while every holder has headroom.
	// Each Leases adds itself when it goes low and takes itself off when it
	// recovers, so no list of holders is kept.
	leaseHeadroomLow = metrics.NewGauge(`paystate_lease_ttl_headroom_low`, nil)
)

// Leases runs slow work on a payment (a PSP call of the sweeper, a human's
// review resolution) under the payment's lease, and watches how long that
// work takes against the lease TTL. One Leases serves one kind of holder.
//
// The lease is taken in its own short transaction, the work runs outside
// any transaction, and the lease is released afterwards. The fencing token
// is handed to the work so that its finalize call is refused (lease_lost)
// if the lease ran out and another holder took it over meanwhile. Webhooks
// take no lease: the inbox applies an event in one transaction that checks
// the lease is free (LeaseFree) and finalizes.
type Leases struct {
	Store  store.Store
	Holder string        // who holds the lease: "sweeper", "review", plus a process id
	TTL    time.Duration // lease.ttl
	// Now measures how long work under a lease takes; default time.Now.
	Now    func() time.Time
	Logger zerolog.Logger

	mu     sync.Mutex
	recent []time.Duration // ring of the last leaseWindow durations
	next   int
	low    bool // the p99 is past half the TTL (counted in leaseHeadroomLow)
}

// LeaseFree returns ELEASEHELD if someone holds the payment's lease at
// tx.Now(). It is the one check that excludes a holder's work, for code
// that writes in one transaction without taking the lease (the inbox).
func LeaseFree(tx Tx, paymentID string) error {
	l, err := tx.Lease(paymentID)
	if err != nil {
		return err
	}
	if l.Held(tx.Now()) {
		return pay.Errorf(pay.ELEASEHELD, "payment %s is leased by %s", paymentID, l.Holder)
	}
	return nil
}

// Do takes the lease of paymentID, runs fn with its fencing token, and
// releases it. If another holder has the lease it returns ELEASEHELD
// without running fn; the caller defers the work.
func (r *Leases) Do(ctx context.Context, paymentID string, fn func(ctx context.Context, token uint64) error) error {
	var l pay.Lease
	err := WriteTx(ctx, r.Store, func(tx Tx) error {
		var err error
		l, err = tx.AcquireLease(paymentID, r.Holder, r.TTL)
		return err
	})
	if pay.ErrorCode(err) == pay.ELEASEHELD {
		leasesContended.Inc()
		return err
	} else if err != nil {
		return err
	}
	leasesAcquired.Inc()

	// The work may not outlive the lease.
	wctx, cancel := context.WithTimeout(ctx, r.TTL)
	start := clock(r.Now)
	err = fn(wctx, l.Token)
	cancel()
	r.observe(clock(r.Now).Sub(start))
	if pay.ErrorCode(err) == pay.ELEASELOST {
		leasesLost.Inc()
	}

	// Release with a context of its own: the work's may be cancelled.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if rerr := WriteTx(rctx, r.Store, func(tx Tx) error { return tx.ReleaseLease(paymentID, l.Token) }); rerr != nil && err == nil {
		// The lease runs out by itself; a failed release only delays the next holder.
		r.Logger.Warn().Err(rerr).Str("payment_id", paymentID).Msg("release lease")
	}
	return err
}

// observe records one duration of work under a lease and raises the
// headroom alarm when the p99 passes half the TTL.
func (r *Leases) observe(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recent) < leaseWindow {
		r.recent = append(r.recent, d)
	} else {
		r.recent[r.next] = d
		r.next = (r.next + 1) % leaseWindow
	}
	p99 := r.p99Locked()
	switch low := p99 > r.TTL/2; {
	case low && !r.low:
		r.Logger.Warn().Stringer("p99", p99).Stringer("ttl", r.TTL).Str("holder", r.Holder).
			Msg("work under a lease takes more than half the lease TTL at p99: raise lease.ttl or look at the PSP's latency")
		leaseHeadroomLow.Inc()
		r.low = true
	case !low && r.low:
		leaseHeadroomLow.Dec()
		r.low = false
	}
}

// P99 returns the 99th percentile of the recent work durations.
func (r *Leases) P99() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p99Locked()
}

func (r *Leases) p99Locked() time.Duration {
	if len(r.recent) == 0 {
		return 0
	}
	s := slices.Clone(r.recent)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}
