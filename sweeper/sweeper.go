// Package sweeper reconciles paystate with the PSPs and keeps the database
// tidy. The main path (the synchronous answer and the webhook) settles most
// payments; the sweeper settles the rest — a worker that crashed after
// sending the charge, an answer lost on the network, a lease that ran out
// while the PSP was slow — and makes drift visible.
//
// One pass (RunOnce) does, in order:
//
//  1. Expiry: payments in created, processing or requires_action whose
//     updated_at is older than payment.expire_after are finalized as
//     expired, or, if their provider can cancel (Provider.Cancel does not
//     answer EUNSUPPORTED), cancelled at the PSP and finalized with what
//     the PSP answers. A payment is
//     expired once: if the PSP later says it is still open, it moves back
//     and waits for the PSP or for give_up_after.
//  2. Reconciliation: payments in finalize_pending, expired, processing or
//     requires_action whose updated_at is older than sweeper.min_age are
//     checked against the provider's status API (rate-limited per
//     provider, retried with backoff), under the payment's lease, and the
//     answer is finalized with source sweeper: a final status always; an
//     open one (processing, requires_action, created) only if it moves the
//     payment. A finalize_pending payment the PSP holds open (created or
//     requires_action: its create's answer was lost, and with it the
//     client secret or the hosted page's URL, so nobody can pay it) is
//     cancelled at the PSP instead, where the provider can cancel, and
//     finalized with what the PSP answers (canceled → failed, paid
//     meanwhile → captured). A PSP that does not know the payment, answers something
//     unknown, or is still open (or unreachable) past sweeper.give_up_after
//     puts the payment on the review queue as unresolved: paystate never
//     captures or fails a payment without PSP evidence. A provider without
//     a status API (EUNSUPPORTED, the standard provider) is answered from
//     the archived webhook history instead: the latest final status among
//     the payment's webhooks.
//  3. Housekeeping in bounded batches: expired idempotency keys, processed
//     event ids and their archived webhooks past
//     webhook_inbox.processed_retention, and past ripple.retention done
//     ripple deliveries and delivered outbox records with their effects'
//     dedupe keys (a record with a delivery pending is never purged; the
//     store keeps the purge horizon, so paystate verify does not ask for
//     a purged record).
//  4. The review queue: unresolved items whose payment has become final
//     since (a late webhook, a later pass) are taken off the queue
//     (finalize.DropSettled); the queue gauges are set.
//  5. Drift: a pass whose corrections exceed max(3, 3 × the average of the
//     previous passes) logs a warning and raises paystate_sweeper_drift_alert
//     to 1; a normal pass lowers it to 0.
//
// Candidates are found through the status+time index and paged with
// Tx.CandidatesAfter, so a pass costs O(candidates), not
// O(payments). Up to Parallel candidates are handled at once, each under
// its own lease: their PSP calls overlap (still within the provider's
// rate_per_second) and their writes share the store's group commits. A
// correction writes three transactions: the lease, the finalize (with the
// PSP's answer) and the release. A second pass over the same records changes nothing and
// publishes nothing: open PSP answers that do not move the payment are not
// written, a payment already on the review queue is not queued again, and a
// PSP answer equal to the stored one is not stored again.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Defaults of the Sweeper's fields; the durations are the configuration's
// defaults.
const (
	DefaultInterval           = time.Minute         // sweeper.interval
	DefaultGiveUpAfter        = 24 * time.Hour      // sweeper.give_up_after
	DefaultExpireAfter        = time.Hour           // payment.expire_after
	DefaultProcessedRetention = 30 * 24 * time.Hour // webhook_inbox.processed_retention
	DefaultOutboxRetention    = 30 * 24 * time.Hour // ripple.retention
	DefaultBatch              = 500                 // candidates per page, records per purge transaction
	DefaultRetries            = 3                   // tries of a PSP call per pass
	DefaultRetryBackoff       = 500 * time.Millisecond
	DefaultParallel           = 8 // payments handled at once (PSP calls in flight)
	// driftWindow is how many previous passes the drift average covers.
	driftWindow = 10
)

// Statuses the two candidate scans look at.
var (
	expiring    = []pay.Status{pay.Created, pay.Processing, pay.RequiresAction}
	reconciling = []pay.Status{pay.FinalizePending, pay.Expired, pay.Processing, pay.RequiresAction}
)

// Metrics. The gauges are set at the end of every pass.
var (
	candidatesTotal = metrics.GetOrCreateCounter(`paystate_sweeper_candidates_total`)
	expiredTotal    = metrics.GetOrCreateCounter(`paystate_sweeper_expired_total`)
	leaseHeldTotal  = metrics.GetOrCreateCounter(`paystate_sweeper_lease_held_total`)
	errorsTotal     = metrics.GetOrCreateCounter(`paystate_sweeper_errors_total`)
	reviewedTotal   = metrics.GetOrCreateCounter(`paystate_sweeper_reviewed_total`)
	unresolvedGauge = metrics.GetOrCreateGauge(`paystate_sweeper_unresolved`, nil)
	alertGauge      = metrics.GetOrCreateGauge(`paystate_sweeper_drift_alert`, nil)
	passSeconds     = metrics.GetOrCreatePrometheusHistogramExt(`paystate_sweeper_pass_duration_seconds`,
		[]float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 120, 300, 600})
)

func init() {
	// The final outcomes are exported from the start, at 0.
	for _, st := range []pay.Status{pay.Captured, pay.Failed, pay.Refunded} {
		correctedTotal(st)
	}
}

func correctedTotal(to pay.Status) *metrics.Counter {
	return metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_sweeper_drift_corrected_total{to=%q}`, to))
}

func purgedTotal(what string) *metrics.Counter {
	return metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_sweeper_purged_total{what=%q}`, what))
}

// Sweeper reconciles payments with their PSPs and does the housekeeping.
// Store, Finalizer and Leases are required; the rest have defaults.
type Sweeper struct {
	Store     store.Store
	Finalizer *finalize.Finalizer
	Providers map[string]pay.Provider
	// Leases takes each payment's lease before a PSP call (holder
	// "sweeper/<process>").
	Leases *finalize.Leases
	// Now is the clock of the age checks; default time.Now.
	Now    func() time.Time
	Logger zerolog.Logger

	// MinAge is sweeper.min_age: how long a payment stays untouched before
	// the sweeper asks the PSP about it. Zero means no minimum.
	MinAge time.Duration
	// GiveUpAfter is sweeper.give_up_after, counted from the payment's
	// creation: past it, a payment the PSP still reports open (or cannot
	// report on) goes on the review queue. Default DefaultGiveUpAfter.
	GiveUpAfter time.Duration
	// ExpireAfter is payment.expire_after, counted from the last update of
	// a payment in created, processing or requires_action. Default
	// DefaultExpireAfter.
	ExpireAfter time.Duration
	// ProcessedRetention is webhook_inbox.processed_retention: how long
	// processed event ids and their archived webhooks are kept. Default
	// DefaultProcessedRetention.
	ProcessedRetention time.Duration
	// OutboxRetention is ripple.retention: how long done deliveries and
	// delivered outbox records, with their effects' dedupe keys, are
	// kept. Default DefaultOutboxRetention.
	OutboxRetention time.Duration
	// RatePerSecond is sweeper.rate_per_second: PSP calls per second, per
	// provider. Zero or less means no limit.
	RatePerSecond float64
	// Interval is the time between two passes of Run. Default
	// DefaultInterval.
	Interval time.Duration
	// Batch is the page size of the candidate scans and the number of
	// records one housekeeping transaction removes. Default DefaultBatch.
	Batch int
	// Retries is how often a failing PSP call is tried in one pass.
	// Default DefaultRetries.
	Retries int
	// RetryBackoff is the first wait between two tries of a PSP call; it
	// doubles with each try. Default DefaultRetryBackoff.
	RetryBackoff time.Duration
	// Parallel is how many candidates a pass handles at once, each under
	// its own lease: the PSP calls overlap, within RatePerSecond per
	// provider, and their commits share group commits. Default
	// DefaultParallel; 1 handles them one after the other.
	Parallel int

	mu      sync.Mutex // one pass at a time; guards history
	history []int      // corrections of the previous passes, oldest first

	rmu   sync.Mutex // guards alert and last, read while a pass runs
	alert bool
	last  Report

	lmu      sync.Mutex
	limiters finalize.RateLimiters
	lacking  map[pspAPI]bool // provider APIs that answered EUNSUPPORTED

	lastRun atomic.Int64 // unix ns of Run's last pass (Heartbeat)
}

// Heartbeat returns when Run last finished a pass, on Now's clock (zero
// before the first), and the interval between passes: /readyz counts the
// sweeper stuck when three intervals pass without one.
func (s *Sweeper) Heartbeat() (last time.Time, interval time.Duration) {
	if ns := s.lastRun.Load(); ns != 0 {
		last = time.Unix(0, ns).UTC()
	}
	return last, defaults.Or(s.Interval, DefaultInterval)
}

// now reads the injected clock, time.Now if none.
func (s *Sweeper) now() time.Time {
	return defaults.Clock(s.Now)()
}

// Report is what one pass did.
type Report struct {
	Candidates int // payments looked at (expiry and reconciliation)
	Corrected  int // reconciliations that moved a payment (drift corrected)
	Expired    int // payments expired or cancelled at the PSP
	Reviewed   int // payments put on the review queue
	Dropped    int // unresolved review items taken off the queue (payment final since)
	Skipped    int // payments whose lease was held by another worker
	Errors     int // payments that failed (logged, retried next pass)

	PurgedIdemKeys   int
	PurgedProcessed  int
	PurgedDeliveries int
	PurgedOutbox     int

	ReviewQueue int  // review items after the pass
	Unresolved  int  // of which unresolved
	DriftAlert  bool // this pass raised the drift alert
}

// Changes is the number of records the pass changed.
func (r Report) Changes() int {
	return r.Corrected + r.Expired + r.Reviewed + r.Dropped + r.PurgedIdemKeys + r.PurgedProcessed + r.PurgedDeliveries + r.PurgedOutbox
}

// LastReport returns the report of the last finished pass.
func (s *Sweeper) LastReport() Report {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.last
}

// DriftAlert reports whether the last pass raised the drift alert.
func (s *Sweeper) DriftAlert() bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.alert
}

// Run runs a pass at once and then every Interval until ctx is cancelled.
// A failed pass is logged and the next one runs on time. It returns nil on
// cancel.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(defaults.Or(s.Interval, DefaultInterval))
	defer t.Stop()
	for {
		if _, err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Error().Err(err).Msg("sweeper pass")
		}
		s.lastRun.Store(s.now().UnixNano())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce runs one pass and returns the number of records it changed (see
// Report.Changes). Failures of single payments are logged, counted in the
// report and retried next pass; the error is a failure of the pass itself
// (storage) or ctx's. Passes do not overlap: a second call waits for the
// first.
func (s *Sweeper) RunOnce(ctx context.Context) (int, error) {
	if s.Store == nil || s.Finalizer == nil || s.Leases == nil {
		return 0, errors.New("sweeper: Store, Finalizer and Leases are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	now := start.UTC()
	if s.Now != nil {
		now = s.Now().UTC() // the one reading of the injected clock: a pass sees one time
	}
	var rep Report

	// Expiry before reconciliation: a payment expired now is not a
	// reconciliation candidate of the same pass.
	err := s.eachCandidate(ctx, expiring, now.Add(-defaults.Or(s.ExpireAfter, DefaultExpireAfter)), &rep, func(p pay.Payment, r *Report) error {
		return s.expire(ctx, p, now, r)
	})
	if err == nil {
		err = s.eachCandidate(ctx, reconciling, now.Add(-s.MinAge), &rep, func(p pay.Payment, r *Report) error {
			return s.reconcile(ctx, p, now, r)
		})
	}
	if err == nil {
		err = s.sweepRefunds(ctx, now, &rep) // pending refunds, as payments (refunds.go)
	}
	if err == nil {
		err = s.housekeeping(ctx, now, &rep)
	}
	if err == nil {
		err = s.tidyQueue(ctx, &rep)
	}
	if err != nil {
		return rep.Changes(), err
	}
	s.drift(&rep)
	s.rmu.Lock()
	s.last, s.alert = rep, rep.DriftAlert
	s.rmu.Unlock()
	passSeconds.UpdateDuration(start)

	ev := s.Logger.Debug()
	if rep.Changes() > 0 || rep.Errors > 0 {
		ev = s.Logger.Info()
	}
	ev.Int("candidates", rep.Candidates).Int("corrected", rep.Corrected).Int("expired", rep.Expired).
		Int("reviewed", rep.Reviewed).Int("skipped", rep.Skipped).Int("errors", rep.Errors).
		Int("purged_idempotency_keys", rep.PurgedIdemKeys).Int("purged_processed", rep.PurgedProcessed).
		Int("purged_deliveries", rep.PurgedDeliveries).Int("purged_outbox", rep.PurgedOutbox).Int("review_queue", rep.ReviewQueue).
		Stringer("duration", time.Since(start).Round(time.Microsecond)).Msg("sweeper pass")
	return rep.Changes(), nil
}

// eachCandidate calls fn for every payment in statuses updated before
// bound, page by page, oldest first, up to Parallel calls at a time: the
// PSP calls of a pass overlap (each still waits for its provider's rate
// limiter), and their commits share the store's group commits. The next
// page is read while the calls of the previous one run; it starts after
// the last payment scanned, so no payment is seen twice (a payment fn
// moves also gets a new updated_at past bound). fn's error is about one
// payment: it is logged and counted, and the scan goes on. fn counts what
// it did in the Report it is handed, one per call, added to rep under a
// lock; eachCandidate returns once every call has returned.
func (s *Sweeper) eachCandidate(ctx context.Context, statuses []pay.Status, bound time.Time, rep *Report, fn func(pay.Payment, *Report) error) error {
	batch := defaults.Or(s.Batch, DefaultBatch)
	var (
		afterT  time.Time
		afterID string
		mu      sync.Mutex // guards rep while calls run
		g       errgroup.Group
	)
	g.SetLimit(defaults.Or(s.Parallel, DefaultParallel))
	// one handles one payment; its error is ctx's, which ends the scan.
	one := func(p pay.Payment) error {
		var r Report
		r.Candidates++
		candidatesTotal.Inc()
		switch err := fn(p, &r); pay.ErrorCode(err) {
		case "":
		case pay.ELEASEHELD:
			// Someone else works on it; it stays a candidate.
			r.Skipped++
			leaseHeldTotal.Inc()
		default:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Errors++
			errorsTotal.Inc()
			s.Logger.Warn().Err(err).Str("payment_id", p.ID).Str("provider", p.Provider).
				Str("status", string(p.Status)).Msg("sweeper: payment not settled this pass")
		}
		mu.Lock()
		rep.add(r)
		mu.Unlock()
		return nil
	}
	scan := func() error {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var page []pay.Payment
			err := store.View(ctx, s.Store, asTx, func(tx Tx) error {
				var err error
				page, err = tx.CandidatesAfter(statuses, bound, afterT, afterID, batch)
				return err
			})
			if err != nil {
				return fmt.Errorf("candidates: %w", err)
			}
			for _, p := range page {
				if err := ctx.Err(); err != nil {
					return err
				}
				g.Go(func() error { return one(p) }) // blocks while Parallel calls run
			}
			if len(page) < batch {
				return nil
			}
			last := page[len(page)-1]
			afterT, afterID = last.UpdatedAt, last.ID
		}
	}
	err := scan()
	if werr := g.Wait(); err == nil {
		err = werr
	}
	return err
}

// add adds the per-payment counts of r to rep.
func (rep *Report) add(r Report) {
	rep.Candidates += r.Candidates
	rep.Corrected += r.Corrected
	rep.Expired += r.Expired
	rep.Reviewed += r.Reviewed
	rep.Dropped += r.Dropped
	rep.Skipped += r.Skipped
	rep.Errors += r.Errors
}

// drift compares this pass's corrections with the previous passes and sets
// rep.DriftAlert and the gauge. It runs with s.mu held.
func (s *Sweeper) drift(rep *Report) {
	avg := 0.0
	for _, n := range s.history {
		avg += float64(n)
	}
	if len(s.history) > 0 {
		avg /= float64(len(s.history))
	}
	threshold := max(3, 3*avg)
	rep.DriftAlert = float64(rep.Corrected) > threshold
	if rep.DriftAlert {
		alertGauge.Set(1)
		s.Logger.Warn().Int("corrected", rep.Corrected).Float64("trailing_average", avg).Float64("threshold", threshold).
			Msg("sweeper corrected more payments than usual: the main path (sync answers, webhooks) is losing updates")
	} else {
		alertGauge.Set(0)
	}
	s.history = append(s.history, rep.Corrected)
	if len(s.history) > driftWindow {
		s.history = s.history[len(s.history)-driftWindow:]
	}
}

// pspAPI is one API of one provider, as the sweeper calls it.
type pspAPI struct{ provider, api string }

// The APIs the sweeper calls that a provider may lack (EUNSUPPORTED).
const (
	apiStatus = "status"
	apiCancel = "cancel"
)

// has reports whether the provider's api may work: false once it answered
// EUNSUPPORTED (it is not waited for in the rate limiter then).
func (s *Sweeper) has(provider, api string) bool {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return !s.lacking[pspAPI{provider, api}]
}

// lacks records that the provider has no such api.
func (s *Sweeper) lacks(provider, api string) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.lacking == nil {
		s.lacking = map[pspAPI]bool{}
	}
	s.lacking[pspAPI{provider, api}] = true
}

// limiter returns the rate limiter of a provider's PSP calls.
func (s *Sweeper) limiter(provider string) *rate.Limiter {
	s.lmu.Lock()
	if s.limiters.Rate == nil {
		s.limiters.Rate = func(string) float64 { return s.RatePerSecond }
	}
	s.lmu.Unlock()
	return s.limiters.Get(provider)
}

// Tx is what the sweeper uses of a storage transaction, and all that its
// functions receive: finalize's families (it queues reviews and finalizes
// through finalize) and the deliveries it purges.
type Tx interface {
	finalize.Tx
	store.Deliveries
}

// asTx is where the compiler checks that a store.Tx is the sweeper's Tx;
// its transactions are store.View and store.Update with it.
func asTx(tx store.Tx) Tx { return tx }
