package ripple

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/backoff"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/receipt"
	"github.com/paystate/paystate/store"
)

// Defaults of the service; the configuration's defaults are the same.
const (
	DefaultWorkers     = 4
	DefaultMaxAttempts = 15
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = time.Hour
	DefaultInterval    = time.Second
	DefaultBatch       = 256

	// AttemptTimeout bounds one attempt of any effect.
	AttemptTimeout = time.Minute
	// DefaultWebhookTimeout is how long a merchant endpoint has to answer
	// 2xx when its EndpointConfig leaves Timeout at 0.
	DefaultWebhookTimeout = 10 * time.Second
	// MinWebhookTimeout is the shortest EndpointConfig.Timeout accepted.
	MinWebhookTimeout = 100 * time.Millisecond
	// MaxWebhookTimeout is the longest EndpointConfig.Timeout accepted.
	// The Standard Webhooks sender rules count only a 2xx within 15 s, so
	// waiting longer would wait for an answer that does not count: New
	// refuses a longer timeout rather than shorten it without a word.
	MaxWebhookTimeout = 15 * time.Second
	// DefaultMaxInFlight is how many deliveries to one merchant endpoint
	// run at once when its EndpointConfig leaves MaxInFlight at 0. At 8
	// the endpoint's lane could not keep up with creates at full speed
	// (docs/benchmarks-history.md, "Ripple in batches"); its keep-alive connections
	// are as many.
	DefaultMaxInFlight = 32
	// MaxInFlightLimit is the largest EndpointConfig.MaxInFlight accepted.
	MaxInFlightLimit = 256
	// DisableAfter is how long an endpoint may fail every delivery before
	// it is disabled.
	DisableAfter = 5 * 24 * time.Hour
	// minRetryAfter is the shortest delay of a retry, whatever Retry-After
	// says.
	minRetryAfter = time.Second
)

// Config is what New builds a Service from: the [ripple], [loyalty],
// [receipt] and [[webhooks]] sections of the configuration.
type Config struct {
	Workers     int           // deliveries run at once per effect other than a webhook; default DefaultWorkers
	MaxAttempts int           // attempts before a dead letter; default DefaultMaxAttempts
	BackoffBase time.Duration // first retry delay; default DefaultBackoffBase
	BackoffCap  time.Duration // longest retry delay; default DefaultBackoffCap

	// PointsPerUnit is the loyalty points per major currency unit; 0
	// credits nothing (the deliveries still run and say so).
	PointsPerUnit int64
	// Receipt configures e-mail receipts; an empty Addr turns them off.
	Receipt receipt.Config
	// Webhooks are the merchant endpoints.
	Webhooks []EndpointConfig
	// Shared says several paystate instances work on the store
	// (PostgreSQL): before an effect outside the store (a webhook, a
	// receipt, the NATS relay) is attempted, its delivery is claimed in a
	// write transaction that moves it ClaimTTL into the future, so no
	// other instance attempts it meanwhile; an instance that dies leaves
	// a claim that expires and is taken over. Loyalty and retention need
	// none: their effect and its record are one transaction. Off (bbolt,
	// one process) the attempt reads the delivery without a write.
	Shared bool
	// ClaimTTL is how long a claim of Shared lasts; two thirds of it
	// bound one attempt of any effect (at most AttemptTimeout), so that an
	// attempt ends before its claim. Default ClaimFor.
	ClaimTTL time.Duration
	// FanOut, if set, is the store's capability to write the deliveries
	// of an outbox record in the transaction that appends it
	// (store.Backend.FanOut: PostgreSQL): New hands it the service's
	// fan-out, several instances then share no fan-out cursor, and the
	// workers claim the records appended without it (ClaimUnfanned) and
	// their batches of deliveries (ClaimDeliveries). nil: the workers fan
	// out from the cursor (bbolt).
	FanOut func(fanOut func(rec pay.OutboxRecord, now time.Time) []pay.Delivery)
}

// ClaimFor is the default Config.ClaimTTL, how long a claim of
// Config.Shared keeps a delivery from the other instances: longer than an
// attempt may take.
const ClaimFor = AttemptTimeout + 30*time.Second

// EndpointConfig is one merchant webhook endpoint.
type EndpointConfig struct {
	URL string
	// Secrets are every Standard Webhooks secret ("whsec_...") the
	// endpoint's deliveries are signed with, at least one.
	Secrets []string
	// Events are the event types sent, such as "payment.captured".
	Events []string
	// Timeout bounds one delivery, from the connection to the 2xx
	// answer; default DefaultWebhookTimeout, from MinWebhookTimeout to
	// MaxWebhookTimeout.
	Timeout time.Duration
	// MaxInFlight caps the deliveries to the endpoint that run at once,
	// so an endpoint that never answers holds at most MaxInFlight
	// connections and goroutines, and no worker of another target;
	// default DefaultMaxInFlight, at most MaxInFlightLimit.
	MaxInFlight int
}

// Service fans outbox records out to deliveries and delivers them. Make
// it with New. It is safe for concurrent use; one pass (fan-out and
// dispatch) runs at a time, the attempts that passes start run side by
// side, each target's within its own cap.
type Service struct {
	Store  store.Store
	Config Config

	// Now is the clock of schedules and webhook timestamps; default
	// time.Now.
	Now func() time.Time
	// Interval is Run's ticker; default DefaultInterval.
	Interval time.Duration
	// Batch bounds the outbox records fanned out per transaction and the
	// due deliveries a pass reads besides those it cannot start (running,
	// or their target at its cap); default DefaultBatch.
	Batch  int
	Logger zerolog.Logger

	effects  map[string]effect // by target
	order    []effect          // fan-out order
	webhooks []*webhook        // to release their connections

	// afterEffect, if set, runs after an effect's attempt and before the
	// delivery records it; an error stops there (a crash, in tests).
	afterEffect func(pay.Delivery) error

	pass     sync.Mutex // one fan-out and dispatch at a time
	wakeOnce sync.Once
	wake     chan struct{}
	freed    chan struct{} // capacity 1: an attempt was recorded

	mu       sync.Mutex
	lanes    map[string]*lane // by target
	inflight map[string]*job  // by delivery id: attempts running
	// heldIDs are the due deliveries, by id, that the last pass left to
	// their target (the value) because its lane was full; only passes
	// touch it (under pass).
	heldIDs map[string]string

	// claims says that the store fans records out as it appends them
	// (Config.FanOut): fanOut claims the others instead of following the
	// cursor, at most once per Interval in Run, on every RunOnce
	// (lastClaim: since processStart, 0 for now).
	claims    bool
	lastClaim atomic.Int64

	// skip is the Seq of the last outbox record that fan-out found no
	// target for and has not stored as the cursor yet: the next write
	// transaction of ripple moves the cursor there (advanceCursor), so a
	// record that wants no delivery costs no commit of its own.
	skip atomic.Uint64

	recMu    sync.Mutex
	recAlone bool         // write each outcome in its own Update (measurement)
	recBusy  bool         // a record batch is being written
	recQueue []*recording // attempts that wait for the next one

	lastRun atomic.Int64 // unix ns of Run's last pass (Heartbeat)
}

// Heartbeat returns when Run last finished a pass, on Now's clock (zero
// before the first), and Run's interval, the longest wait between two
// passes: /readyz counts the workers stuck when three intervals pass
// without one.
func (s *Service) Heartbeat() (last time.Time, interval time.Duration) {
	if ns := s.lastRun.Load(); ns != 0 {
		last = time.Unix(0, ns).UTC()
	}
	if interval = s.Interval; interval <= 0 {
		interval = DefaultInterval
	}
	return last, interval
}

// lane is one target's share of the workers: at most max of its
// deliveries are attempted at once, and they hold no other target's.
//
// A lane of an effect attempted outside the store (receipt, webhook) also
// keeps a queue of up to Batch deliveries claimed for it: an attempt that
// ends takes the next one from the queue on the same goroutine, so a lane
// runs at its cap without a pass per attempt, and a pass, which reads the
// due index past every delivery it cannot start, runs only when the queue
// runs short.
type lane struct {
	max     int
	running int    // goroutines attempting its deliveries
	queue   []*job // claimed, waiting for one of them
}

// job is one running attempt of a delivery. attempted and err are set
// before done is closed.
type job struct {
	d         pay.Delivery
	done      chan struct{}
	attempted bool
	err       error
}

// effect is one delivery target.
type effect interface {
	// name is the effect: pay.EffectLoyalty, ...
	name() string
	// endpoint is the webhook endpoint's id, "" for other effects.
	endpoint() string
	// wants reports whether the target receives records of this type.
	wants(rec pay.OutboxRecord) bool
	// deliver applies rec. Its error is the attempt's failure; the outcome
	// says when to retry or that retrying cannot help.
	deliver(ctx context.Context, d pay.Delivery, rec pay.OutboxRecord) (outcome, error)
}

// outcome is what an attempt reports besides its error.
type outcome struct {
	note      string    // on success: what it did
	skipped   bool      // on success: nothing to do (applied before, no customer, no e-mail)
	retryAt   time.Time // on failure: the time the target asked to be retried at
	permanent bool      // on failure: retrying cannot help; dead-letter now

	// health, if set, writes what the attempt says about a merchant
	// endpoint, in the transaction that records the delivery, and reports
	// whether it disabled the endpoint (the delivery is then dead).
	health func(tx rippleTx) (disabled bool, err error)
}

// New returns a Service over store for cfg, with its effects built:
// loyalty and retention always, receipts if cfg.Receipt.Addr is set, one
// webhook target per endpoint. Errors name the endpoint by position and
// never quote a secret.
func New(store store.Store, cfg Config) (*Service, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffCap <= 0 {
		cfg.BackoffCap = DefaultBackoffCap
	}
	if cfg.BackoffCap < cfg.BackoffBase {
		return nil, fmt.Errorf("ripple: backoff cap %s is below the base %s", cfg.BackoffCap, cfg.BackoffBase)
	}
	if cfg.PointsPerUnit < 0 {
		return nil, fmt.Errorf("ripple: points per unit must not be negative, got %d", cfg.PointsPerUnit)
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = ClaimFor
	}
	s := &Service{
		Store: store, Config: cfg, Logger: zerolog.Nop(), effects: map[string]effect{},
		freed: make(chan struct{}, 1), lanes: map[string]*lane{}, inflight: map[string]*job{},
	}
	// Loyalty and retention cost no connection: a pass applies up to Batch
	// of their deliveries in one transaction.
	s.add(&loyalty{s: s}, max(cfg.Workers, DefaultBatch))
	s.add(&retention{s: s}, max(cfg.Workers, DefaultBatch))
	if cfg.Receipt.Addr != "" {
		r, err := newReceipt(s, cfg.Receipt)
		if err != nil {
			return nil, err
		}
		s.add(r, cfg.Workers)
	}
	for i, ec := range cfg.Webhooks {
		w, err := newWebhook(s, ec)
		if err != nil {
			return nil, fmt.Errorf("ripple: webhooks[%d]: %w", i, err)
		}
		if _, dup := s.effects[target(w)]; dup {
			return nil, fmt.Errorf("ripple: webhooks[%d]: url is configured twice", i)
		}
		s.add(w, w.maxInFlight)
		s.webhooks = append(s.webhooks, w)
	}
	if cfg.FanOut != nil {
		cfg.FanOut(s.deliveriesOf)
		s.claims = true
	}
	return s, nil
}

// processStart is when the process began, for claimFanOut's throttle.
var processStart = time.Now()

// deliveriesOf returns the deliveries of rec, one per target that wants
// it, in fan-out order, due at now; their EventSeq is rec's.
func (s *Service) deliveriesOf(rec pay.OutboxRecord, now time.Time) []pay.Delivery {
	var ds []pay.Delivery
	for _, e := range s.order {
		if e.wants(rec) {
			ds = append(ds, newDelivery(e, rec, now))
		}
	}
	return ds
}

// newDelivery returns the delivery of rec to e, due at now.
func newDelivery(e effect, rec pay.OutboxRecord, now time.Time) pay.Delivery {
	return pay.Delivery{
		ID: ids.New(ids.DeliveryPrefix, now), Effect: e.name(), Endpoint: e.endpoint(),
		EventID: rec.ID, EventType: rec.Type, EventSeq: rec.Seq, EventAt: rec.CreatedAt,
		PaymentID: rec.PaymentID, State: pay.DeliveryPending, NextAttemptAt: now,
	}
}

// add makes e a target of which at most inFlight deliveries run at once.
func (s *Service) add(e effect, inFlight int) {
	s.effects[target(e)] = e
	s.order = append(s.order, e)
	s.lanes[target(e)] = &lane{max: inFlight}
}

// target is the delivery target of an effect (pay.Delivery.Target).
func target(e effect) string {
	return pay.Delivery{Effect: e.name(), Endpoint: e.endpoint()}.Target()
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) batch() int {
	if s.Batch > 0 {
		return s.Batch
	}
	return DefaultBatch
}

func (s *Service) wakeCh() chan struct{} {
	s.wakeOnce.Do(func() { s.wake = make(chan struct{}, 1) })
	return s.wake
}

// Notify wakes the workers: there are new outbox records. It never blocks;
// finalize calls it after a commit that appended one.
func (s *Service) Notify() {
	select {
	case s.wakeCh() <- struct{}{}:
	default:
	}
}

// Close releases the idle connections to merchant endpoints. Run calls it
// when it returns.
func (s *Service) Close() {
	for _, w := range s.webhooks {
		w.client.CloseIdleConnections()
	}
}

// Run runs passes until ctx is cancelled: on every Notify, every Interval
// (which also refreshes the gauges), and whenever an attempt was recorded
// (a target has room again, or a payment's next record may go). Unlike
// RunOnce, a pass of Run does not wait for the attempts it starts, so a
// target that is slow to answer holds up only its own deliveries. Errors
// are logged and the loop goes on. On cancel it waits for the running
// attempts to end (they end with ctx) and returns nil.
func (s *Service) Run(ctx context.Context) error {
	var attempts sync.WaitGroup
	defer s.Close()
	defer attempts.Wait()
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	gauges := true // on the first pass and every Interval, not on every attempt
	for {
		_, _, err := s.dispatch(ctx, &attempts, true)
		if ctx.Err() != nil {
			return nil
		}
		s.lastRun.Store(s.now().UnixNano())
		if err == nil && gauges {
			err = s.refreshGauges(ctx)
		}
		if err != nil {
			s.Logger.Error().Err(err).Msg("ripple pass")
		}
		gauges = false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			gauges = true
		case <-s.wakeCh():
		case <-s.freed:
		}
	}
}

// RunOnce runs one pass: it fans new outbox records out to deliveries,
// attempts the deliveries that are due and whose target has room (up to
// Config.Workers at once for each effect, EndpointConfig.MaxInFlight for
// each merchant endpoint), waits for them and for the attempts that were
// already running, and refreshes the gauges. It returns how many of those
// deliveries were attempted, successful or not, and the first error of
// the attempts it started. Passes do not overlap; their waits do.
func (s *Service) RunOnce(ctx context.Context) (int, error) {
	var attempts sync.WaitGroup
	s.lastClaim.Store(0)
	started, running, first := s.dispatch(ctx, &attempts, false)
	attempts.Wait()
	n := 0
	for _, j := range started {
		<-j.done // a queued job may be run by a goroutine of another pass
		if j.attempted {
			n++
		}
		if j.err != nil && first == nil {
			first = j.err
		}
	}
	for _, j := range running { // started by Run or another RunOnce, which report their errors
		select {
		case <-j.done:
		case <-ctx.Done():
			return n, ctx.Err()
		}
		if j.attempted {
			n++
		}
	}
	if first != nil {
		return n, first
	}
	return n, s.refreshGauges(ctx)
}

// dispatch fans out, reads the due deliveries and starts an attempt, on a
// goroutine counted in attempts, of each that is not running yet and
// whose target has room. It returns the jobs it started and those that
// were running before. logErrors says that no caller collects the
// attempts' errors: the attempts log them.
//
// A delivery whose target is at its cap (running and queue full) stays due
// for a later pass (the attempt that frees a place wakes Run). Those
// deliveries and the claimed ones are still due in the store, at the head
// of the due index when a target has fallen behind, so the pass reads past
// them: until it has seen every due delivery or passed over none, a
// backlog of one target never hides the others' due deliveries. The pass
// skips, by id and without reading them, the deliveries claimed already
// and those the last pass left to a lane that is still full, so a backlog
// costs a walk of the due index's keys per pass, not a read of each
// delivery in it.
func (s *Service) dispatch(ctx context.Context, attempts *sync.WaitGroup, logErrors bool) (started, running []*job, err error) {
	s.pass.Lock()
	defer s.pass.Unlock()

	if err := s.fanOut(ctx); err != nil {
		return nil, nil, err
	}
	// What the pass need not read: the deliveries claimed already, and
	// those that waited for a lane that is still full.
	s.mu.Lock()
	claimed := make(map[string]bool, len(s.inflight))
	for id, j := range s.inflight {
		running = append(running, j)
		claimed[id] = true
	}
	// A lane counts as full while it can take nothing this pass would
	// not give it anyway: an in-store lane while its batch runs (one at a
	// time, so they grow), another while its queue is not short (its
	// attempts wake a pass when it is).
	full := map[string]bool{}
	for tgt, l := range s.lanes {
		if s.inStore(tgt) && l.running > 0 || !s.inStore(tgt) && l.running >= l.max && len(l.queue) > l.max {
			full[tgt] = true
		}
	}
	batching := map[string]bool{} // in-store lanes whose batch this pass makes
	s.mu.Unlock()
	held := map[string]string{}
	skip := func(id string) bool {
		if claimed[id] {
			return true
		}
		if _, ok := held[id]; ok {
			return true // read by an earlier read of this pass
		}
		if tgt, ok := s.heldIDs[id]; ok && full[tgt] {
			held[id] = tgt
			return true
		}
		return false
	}
	defer func() { s.heldIDs = held }()
	var launch []*job // the started jobs that got a place; the others wait in a queue
	defer func() {
		var inStore []*job
		for _, j := range launch {
			if s.inStore(j.d.Target()) {
				inStore = append(inStore, j)
				continue
			}
			attempts.Add(1)
			go func() {
				defer attempts.Done()
				s.run(ctx, j, logErrors)
			}()
		}
		if len(inStore) > 0 {
			attempts.Add(1)
			go func() {
				defer attempts.Done()
				s.runInStore(ctx, inStore, logErrors)
			}()
		}
	}()
	limit := s.batch()
	for {
		var due []pay.Delivery
		err = store.View(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			var err error
			due, err = tx.DueDeliveriesSkipping(tx.Now(), limit, skip)
			return err
		})
		if err != nil {
			return started, running, fmt.Errorf("due deliveries: %w", err)
		}
		passed := 0
		s.mu.Lock()
		for _, d := range due {
			if _, ok := s.inflight[d.ID]; ok {
				continue // running, or claimed by an earlier read of this pass
			}
			l := s.laneOf(d.Target())
			j := &job{d: d, done: make(chan struct{})}
			switch {
			case s.inStore(d.Target()) && l.running > 0 && !batching[d.Target()]:
				passed++ // the lane's batch runs: wait for the next one
				held[d.ID] = d.Target()
				continue
			case l.running < l.max:
				l.running++
				batching[d.Target()] = true
				launch = append(launch, j)
			case len(l.queue) < s.batch() && !s.inStore(d.Target()):
				l.queue = append(l.queue, j)
			default:
				passed++
				held[d.ID] = d.Target()
				continue
			}
			s.inflight[d.ID] = j
			claimed[d.ID] = true
			started = append(started, j)
		}
		s.mu.Unlock()
		if len(due) < limit || passed == 0 || ctx.Err() != nil {
			return started, running, nil
		}
	}
}

// laneOf returns the lane of a target; one no longer configured gets
// Config.Workers places. s.mu must be held.
func (s *Service) laneOf(target string) *lane {
	l, ok := s.lanes[target]
	if !ok {
		l = &lane{max: max(s.Config.Workers, 1)}
		s.lanes[target] = l
	}
	return l
}

// inStore reports whether a pass applies the deliveries of target in one
// transaction (runInStore) rather than one goroutine each.
func (s *Service) inStore(target string) bool {
	_, ok := s.effects[target].(storeEffect)
	return ok && s.afterEffect == nil
}

// run makes the attempt of j and of the jobs it then takes from its
// lane's queue. Once ctx is done, queued jobs end unattempted.
func (s *Service) run(ctx context.Context, j *job, logErrors bool) {
	for j != nil {
		var (
			attempted bool
			err       = ctx.Err()
		)
		if err == nil {
			attempted, err = s.attempt(ctx, j.d)
		}
		j = s.finish(ctx, j, attempted, err, logErrors)
	}
}

// finish publishes j's outcome and frees its place, or hands the place to
// the next job of the lane's queue and returns it. If the attempt was
// recorded and the queue is short, it wakes Run.
func (s *Service) finish(ctx context.Context, j *job, attempted bool, err error, logErrors bool) (next *job) {
	s.mu.Lock()
	delete(s.inflight, j.d.ID)
	l := s.lanes[j.d.Target()]
	if len(l.queue) > 0 {
		next, l.queue = l.queue[0], l.queue[1:]
	} else {
		l.running--
	}
	short := len(l.queue) <= l.max
	s.mu.Unlock()
	j.attempted, j.err = attempted, err
	close(j.done)
	if err != nil {
		// Not recorded: the delivery stays due for the next Interval.
		if logErrors && ctx.Err() == nil {
			s.Logger.Error().Err(err).Str("payment_id", j.d.PaymentID).Str("event_id", j.d.EventID).
				Str("effect", j.d.Effect).Str("delivery_id", j.d.ID).Msg("ripple attempt")
		}
		return next
	}
	if attempted && short {
		select {
		case s.freed <- struct{}{}:
		default:
		}
	}
	return next
}

// runInStore attempts jobs of store effects (loyalty, retention) in one
// transaction that applies each effect and records each delivery, so N
// deliveries cost one commit. If that transaction fails (the store, or an
// effect that cannot be applied), each job is attempted on its own, as a
// delivery of any other effect is, and fails alone.
func (s *Service) runInStore(ctx context.Context, jobs []*job, logErrors bool) {
	recs := make([]*recording, len(jobs))
	err := store.Update(context.WithoutCancel(ctx), s.Store, asRippleTx, func(tx rippleTx) error {
		if err := s.advanceCursor(tx); err != nil {
			return err
		}
		// Several instances (claimDeliveriesTx): the batch's deliveries
		// are claimed in one statement, and those another instance holds
		// are left to it; the records of the batch are read once each.
		var (
			claimed map[string]pay.Delivery
			records map[uint64]pay.OutboxRecord
		)
		if s.claims {
			ids := make([]string, len(jobs))
			for i, j := range jobs {
				ids[i] = j.d.ID
			}
			ds, err := tx.ClaimDeliveries(ids)
			if err != nil {
				return err
			}
			claimed, records = make(map[string]pay.Delivery, len(ds)), map[uint64]pay.OutboxRecord{}
			for _, d := range ds {
				claimed[d.ID] = d
			}
		}
		for i, j := range jobs {
			recs[i] = nil // the function may run more than once (group commit)
			var (
				cur pay.Delivery
				err error
			)
			if claimed != nil {
				var ok bool
				if cur, ok = claimed[j.d.ID]; !ok {
					continue // purged meanwhile, or another instance's
				}
			} else if cur, err = tx.Delivery(j.d.ID); pay.ErrorCode(err) == pay.ENOTFOUND {
				continue // purged meanwhile: done long ago
			} else if err != nil {
				return err
			}
			if cur.State != pay.DeliveryPending || cur.Attempts != j.d.Attempts ||
				!cur.UpdatedAt.Equal(j.d.UpdatedAt) || cur.NextAttemptAt.After(tx.Now()) {
				continue // moved on since the pass read it
			}
			r := &recording{d: cur}
			rec, ok := records[cur.EventSeq]
			if !ok {
				rec, err = tx.OutboxRecord(cur.EventSeq)
				if err == nil && records != nil {
					records[cur.EventSeq] = rec
				}
			}
			switch {
			case pay.ErrorCode(err) == pay.ENOTFOUND:
				r.out.permanent, r.failure = true, fmt.Errorf("outbox record %d (%s) is gone", cur.EventSeq, cur.EventID)
				r.logErr = r.failure
			case err != nil:
				return err
			default:
				if r.out, err = s.effects[cur.Target()].(storeEffect).applyTx(tx, cur, rec); err != nil {
					return err // perhaps half applied: roll back, and try it alone
				}
			}
			if r.after, r.result, err = s.updateDelivery(tx, cur, r.out, r.failure); err != nil {
				return err
			}
			recs[i] = r
		}
		return nil
	})
	if err != nil {
		for _, j := range jobs {
			s.run(ctx, j, logErrors)
		}
		return
	}
	for i, j := range jobs {
		if recs[i] != nil {
			s.logRecord(recs[i])
		}
		s.finish(ctx, j, recs[i] != nil, nil, logErrors) // an in-store lane has no queue
	}
}

// fanOut creates the deliveries of the outbox records after the cursor and
// moves the cursor, one transaction per batch of records.
//
// Records that no target wants cost no write: the cursor moves past them
// in memory (skip) and reaches the store with the next write of ripple.
// After a restart before that write they are read again, and still want
// nothing unless the configuration changed.
func (s *Service) fanOut(ctx context.Context) error {
	if s.claims {
		return s.claimFanOut(ctx)
	}
	for {
		// Look first, without a write: most passes find nothing new, or
		// nothing any target wants.
		var recs []pay.OutboxRecord
		err := store.View(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			cur, err := s.cursor(tx)
			if err != nil {
				return err
			}
			recs, err = tx.OutboxAfter(cur, s.batch())
			return err
		})
		if err != nil || len(recs) == 0 {
			return err
		}
		if !s.wanted(recs) {
			s.skipTo(recs[len(recs)-1].Seq)
			if len(recs) < s.batch() {
				return nil
			}
			continue
		}
		var n int
		err = store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			n = 0 // the function may run more than once (group commit)
			cur, err := s.cursor(tx)
			if err != nil {
				return err
			}
			recs, err := tx.OutboxAfter(cur, s.batch())
			if err != nil {
				return err
			}
			n = len(recs)
			if n == 0 {
				return nil
			}
			if err := s.insertDeliveries(tx, recs); err != nil {
				return err
			}
			return tx.SetRippleCursor(recs[n-1].Seq)
		})
		if err != nil {
			return fmt.Errorf("fan out: %w", err)
		}
		if n < s.batch() {
			return nil
		}
	}
}

// insertDeliveries stores the deliveries of recs.
func (s *Service) insertDeliveries(tx rippleTx, recs []pay.OutboxRecord) error {
	now := tx.Now()
	for _, rec := range recs {
		for _, e := range s.order {
			if !e.wants(rec) {
				continue
			}
			if err := tx.InsertDelivery(newDelivery(e, rec, now)); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimFanOut fans out, on a fanOutStore, the records that their
// transaction did not (appended before the store knew the targets, or by
// another process): batches of them claimed (ClaimUnfanned) by whichever
// instance comes first, no cursor. Their transactions fanned nearly every
// record out, so it looks at most once per Interval.
func (s *Service) claimFanOut(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	// The process's clock, not Now: a throttle, not a schedule.
	now := time.Since(processStart)
	if last := s.lastClaim.Load(); last != 0 && int64(now)-last < int64(interval) {
		return nil
	}
	s.lastClaim.Store(max(int64(now), 1))
	for {
		var n int
		err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			recs, err := tx.ClaimUnfanned(s.batch())
			n = len(recs)
			if err != nil || n == 0 {
				return err
			}
			if err := s.insertDeliveries(tx, recs); err != nil {
				return err
			}
			seqs := make([]uint64, n)
			for i, r := range recs {
				seqs[i] = r.Seq
			}
			return tx.MarkFanned(seqs)
		})
		if err != nil {
			return fmt.Errorf("fan out: %w", err)
		}
		if n < s.batch() {
			return nil
		}
	}
}

// wanted reports whether a target wants one of recs.
func (s *Service) wanted(recs []pay.OutboxRecord) bool {
	for _, rec := range recs {
		for _, e := range s.order {
			if e.wants(rec) {
				return true
			}
		}
	}
	return false
}

// skipTo moves the unstored cursor forward to seq.
func (s *Service) skipTo(seq uint64) {
	for {
		old := s.skip.Load()
		if seq <= old || s.skip.CompareAndSwap(old, seq) {
			return
		}
	}
}

// cursor returns the fan-out cursor: the stored one or, if further, the
// one not stored yet.
func (s *Service) cursor(tx rippleTx) (uint64, error) {
	cur, err := tx.RippleCursor()
	return max(cur, s.skip.Load()), err
}

// advanceCursor stores the cursor that skip holds, if it is further than
// the stored one, in a write transaction that ripple makes anyway.
func (s *Service) advanceCursor(tx rippleTx) error {
	skip := s.skip.Load()
	if skip == 0 {
		return nil
	}
	cur, err := tx.RippleCursor()
	if err != nil || skip <= cur {
		return err
	}
	return tx.SetRippleCursor(skip)
}

// attempt runs one attempt of d and records its outcome. It reports
// whether an attempt was made: none if d moved on since the pass read it
// (an attempt that ended meanwhile recorded it). An error is a storage
// failure (the attempt is not recorded and d stays due) or the end of
// ctx.
func (s *Service) attempt(ctx context.Context, d pay.Delivery) (bool, error) {
	var (
		rec         pay.OutboxRecord
		fresh, gone bool
	)
	read := store.View[rippleTx]
	if s.Config.Shared {
		read = store.Update[rippleTx] // claim it (Config.Shared)
	}
	verr := read(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		fresh, gone = false, false
		cur, err := tx.Delivery(d.ID)
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			return nil // purged meanwhile: done long ago
		} else if err != nil {
			return err
		}
		fresh = cur.State == pay.DeliveryPending && cur.Attempts == d.Attempts &&
			cur.UpdatedAt.Equal(d.UpdatedAt) && !cur.NextAttemptAt.After(tx.Now())
		if !fresh {
			return nil
		}
		if s.Config.Shared {
			cur.NextAttemptAt = tx.Now().Add(s.Config.ClaimTTL)
			if err := tx.UpdateDelivery(cur); err != nil {
				return err
			}
		}
		rec, err = tx.OutboxRecord(d.EventSeq)
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			gone = true
			return nil
		}
		return err
	})
	switch {
	case verr != nil:
		return false, fmt.Errorf("read delivery %s: %w", d.ID, verr)
	case !fresh:
		return false, nil
	}
	var (
		out outcome
		err error
	)
	e, ok := s.effects[d.Target()]
	switch {
	case gone:
		out.permanent, err = true, fmt.Errorf("outbox record %d (%s) is gone", d.EventSeq, d.EventID)
	case !ok:
		out.permanent, err = true, fmt.Errorf("target %s is no longer configured", d.Target())
	default:
		actx, cancel := context.WithTimeout(ctx, min(AttemptTimeout, s.Config.ClaimTTL*2/3))
		out, err = e.deliver(actx, d, rec)
		cancel()
	}
	if err != nil && ctx.Err() != nil {
		// Shutting down: not the target's fault. d stays due.
		return false, ctx.Err()
	}
	if s.afterEffect != nil {
		if herr := s.afterEffect(d); herr != nil {
			return true, herr
		}
	}
	// A success is recorded even while shutting down.
	return true, s.record(context.WithoutCancel(ctx), d, out, err)
}

// recording is one attempt's outcome waiting to be written by record.
type recording struct {
	d       pay.Delivery
	out     outcome
	failure error

	// Set before done is closed.
	after  pay.Delivery
	result string // "" if stale: moved on meanwhile
	logErr error  // the failure as recorded
	err    error
	done   chan struct{}
}

// record writes the outcome of an attempt of d, then counts and logs it.
// The attempts that end while a record is written wait and are written
// together, in one transaction, by the first of them (a group commit of
// ripple's own, so that N webhook deliveries cost far fewer than N
// transactions).
func (s *Service) record(ctx context.Context, d pay.Delivery, out outcome, failure error) error {
	r := &recording{d: d, out: out, failure: failure, done: make(chan struct{})}
	if s.recAlone {
		s.writeRecords(ctx, []*recording{r})
		return r.err
	}
	s.recMu.Lock()
	s.recQueue = append(s.recQueue, r)
	if s.recBusy {
		s.recMu.Unlock()
		<-r.done
		return r.err
	}
	s.recBusy = true
	s.recMu.Unlock()
	for {
		s.recMu.Lock()
		group := s.recQueue
		s.recQueue = nil
		if len(group) == 0 {
			s.recBusy = false
			s.recMu.Unlock()
			break
		}
		s.recMu.Unlock()
		s.writeRecords(ctx, group)
	}
	<-r.done
	return r.err
}

// writeRecords writes a group of outcomes in one transaction, or, if that
// fails, each in its own, so that one that cannot be written does not hold
// up the others; then it logs them and closes their done.
func (s *Service) writeRecords(ctx context.Context, group []*recording) {
	err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		if err := s.advanceCursor(tx); err != nil {
			return err
		}
		for _, r := range group {
			if err := s.recordTx(tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && len(group) > 1 {
		for _, r := range group {
			r.err = store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error { return s.recordTx(tx, r) })
		}
	} else {
		for _, r := range group {
			r.err = err
		}
	}
	for _, r := range group {
		if r.err != nil {
			r.err = fmt.Errorf("record delivery %s: %w", r.d.ID, r.err)
		} else {
			s.logRecord(r)
		}
		close(r.done)
	}
}

// recordTx writes r's outcome in tx: the endpoint's health first, if the
// attempt changed it, then the delivery. It sets r.after and r.result
// ("" if the delivery moved on meanwhile).
func (s *Service) recordTx(tx rippleTx, r *recording) error {
	r.after, r.result, r.logErr = pay.Delivery{}, "", nil // the function may run more than once (group commit)
	cur, err := tx.Delivery(r.d.ID)
	if err != nil {
		return err
	}
	if cur.State != pay.DeliveryPending {
		return nil // moved on meanwhile (an operator); leave it
	}
	out, failure := r.out, r.failure
	if out.health != nil {
		disabled, err := out.health(tx)
		switch {
		case err != nil && failure == nil:
			// Delivered; the endpoint's health is only bookkeeping.
			s.Logger.Error().Err(err).Str("endpoint", r.d.Endpoint).Msg("record webhook endpoint success")
		case err != nil:
			failure = errors.Join(failure, fmt.Errorf("record webhook endpoint failure: %w", err))
		}
		if disabled {
			out.permanent = true
			failure = fmt.Errorf("%w; endpoint disabled after failing for %s", failure, DisableAfter)
		}
	}
	r.after, r.result, err = s.updateDelivery(tx, cur, out, failure)
	r.logErr = failure
	return err
}

// updateDelivery writes the outcome of an attempt over cur, the stored
// pending delivery, and returns it as written and the result for the
// metrics (done, skipped, dead, retry).
func (s *Service) updateDelivery(tx rippleTx, cur pay.Delivery, out outcome, failure error) (pay.Delivery, string, error) {
	var result string
	{
		cur.Attempts++
		switch {
		case failure == nil:
			cur.State, cur.Note, cur.NextAttemptAt = pay.DeliveryDone, out.note, time.Time{}
			result = "done"
			if out.skipped {
				result = "skipped"
			}
		case out.permanent || cur.Attempts >= s.Config.MaxAttempts:
			cur.State, cur.LastError, cur.NextAttemptAt = pay.DeliveryDead, failure.Error(), time.Time{}
			result = "dead"
		default:
			cur.LastError = failure.Error()
			cur.NextAttemptAt = tx.Now().Add(backoff.Delay(s.Config.BackoffBase, s.Config.BackoffCap, cur.Attempts))
			if !out.retryAt.IsZero() {
				cur.NextAttemptAt = clampTime(out.retryAt, tx.Now().Add(minRetryAfter), tx.Now().Add(s.Config.BackoffCap))
			}
			result = "retry"
		}
		if err := tx.UpdateDelivery(cur); err != nil {
			return pay.Delivery{}, "", err
		}
	}
	return cur, result, nil
}

// logRecord counts and logs a recorded attempt.
func (s *Service) logRecord(r *recording) {
	d, after, result, failure := r.d, r.after, r.result, r.logErr
	if result == "" {
		return
	}
	metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_ripple_deliveries_total{effect=%q,outcome=%q}`, d.Effect, result)).Inc()
	var ev *zerolog.Event
	switch result {
	case "dead":
		ev = s.Logger.Error()
	case "retry":
		ev = s.Logger.Warn().Time("next_attempt_at", after.NextAttemptAt)
	default:
		ev = s.Logger.Debug().Str("note", after.Note)
	}
	ev = ev.Str("payment_id", d.PaymentID).Str("event_id", d.EventID).Str("effect", d.Effect).
		Str("delivery_id", d.ID).Int("attempt", after.Attempts).Str("outcome", result)
	if d.Endpoint != "" {
		ev = ev.Str("endpoint", d.Endpoint)
	}
	if failure != nil {
		ev = ev.Err(failure)
	}
	ev.Msg("ripple delivery")
}

// refreshGauges sets the outbox lag and dead-letter gauges.
func (s *Service) refreshGauges(ctx context.Context) error {
	var (
		oldest time.Time
		dead   int
		now    time.Time
	)
	err := store.View(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		now = tx.Now()
		if d, ok, err := tx.OldestPendingDelivery(); err != nil {
			return err
		} else if ok {
			oldest = d.EventAt
		}
		cur, err := s.cursor(tx)
		if err != nil {
			return err
		}
		// A record not fanned out yet is undelivered too.
		if recs, err := tx.OutboxAfter(cur, 1); err != nil {
			return err
		} else if len(recs) == 1 && (oldest.IsZero() || recs[0].CreatedAt.Before(oldest)) {
			oldest = recs[0].CreatedAt
		}
		dead, err = tx.CountDeliveries(pay.DeliveryDead)
		return err
	})
	if err != nil {
		return fmt.Errorf("ripple gauges: %w", err)
	}
	lag := 0.0
	if !oldest.IsZero() && now.After(oldest) {
		lag = now.Sub(oldest).Seconds()
	}
	metrics.GetOrCreateGauge(`paystate_ripple_outbox_lag_seconds`, nil).Set(lag)
	metrics.GetOrCreateGauge(`paystate_ripple_dead_letters`, nil).Set(float64(dead))
	return nil
}

// Retry puts a delivery back on the schedule, due now: a dead letter
// starts over with no attempts, a pending delivery keeps its attempts. A
// retry of a webhook delivery re-enables its endpoint if it was disabled.
// ECONFLICT for a delivery that is done, ENOTFOUND for an unknown id.
func (s *Service) Retry(ctx context.Context, id string) (pay.Delivery, error) {
	var d pay.Delivery
	err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		var err error
		if d, err = tx.Delivery(id); err != nil {
			return err
		}
		if d.State == pay.DeliveryDone {
			return pay.Errorf(pay.ECONFLICT, "delivery %s is done: there is nothing to retry", id)
		}
		d, err = s.reopen(tx, d)
		return err
	})
	if err != nil {
		return pay.Delivery{}, err
	}
	s.Notify()
	s.logGauges(ctx)
	return d, nil
}

// RetryDead puts back every dead letter that died at or after since (and
// before the call), like Retry, and returns how many.
func (s *Service) RetryDead(ctx context.Context, since time.Time) (int, error) {
	const page = 500
	start := s.now()
	total, cursor := 0, ""
	for {
		var (
			n    int
			next string
			past bool
		)
		err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			n, past = 0, false
			ds, nc, err := tx.ListDeliveries(pay.DeliveryFilter{State: pay.DeliveryDead, Since: since, Limit: page, Cursor: cursor})
			if err != nil {
				return err
			}
			next = nc
			for _, d := range ds {
				if d.UpdatedAt.After(start) {
					past = true // died during this call: not asked for
					break
				}
				if _, err := s.reopen(tx, d); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if past || next == "" {
			break
		}
		cursor = next
	}
	if total > 0 {
		s.Notify()
		s.Logger.Info().Int("deliveries", total).Time("since", since).Msg("dead letters retried")
	}
	s.logGauges(ctx)
	return total, nil
}

// logGauges refreshes the gauges after an operator's retry, which has
// succeeded whatever happens here: a failure is only logged.
func (s *Service) logGauges(ctx context.Context) {
	if err := s.refreshGauges(ctx); err != nil {
		s.Logger.Warn().Err(err).Msg("ripple gauges")
	}
}

// reopen makes d pending and due now, and re-enables its webhook endpoint.
func (s *Service) reopen(tx rippleTx, d pay.Delivery) (pay.Delivery, error) {
	if d.State == pay.DeliveryDead {
		d.Attempts = 0
	}
	d.State, d.NextAttemptAt = pay.DeliveryPending, tx.Now()
	if d.Endpoint != "" {
		ep, err := tx.WebhookEndpoint(d.Endpoint)
		if err != nil {
			return pay.Delivery{}, err
		}
		if ep.Disabled {
			ep.Disabled, ep.DisabledAt, ep.DisabledReason, ep.FailingSince = false, time.Time{}, "", time.Time{}
			if err := tx.PutWebhookEndpoint(ep); err != nil {
				return pay.Delivery{}, err
			}
			id := ep.ID
			tx.OnCommit(func() {
				s.Logger.Warn().Str("endpoint", id).Str("delivery_id", d.ID).Str("payment_id", d.PaymentID).Msg("webhook endpoint re-enabled by a retry")
			})
		}
	}
	if err := tx.UpdateDelivery(d); err != nil {
		return pay.Delivery{}, err
	}
	return tx.Delivery(d.ID)
}

func clampTime(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}
