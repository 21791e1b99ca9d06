package ripple

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/defaults"
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
	// DefaultGrace is Config.Grace's default: five passes of Run at the
	// default interval, far longer than an instance takes to claim what
	// its own transitions wrote, short beside the lag a dead instance's
	// deliveries may have (its leases last 30 s).
	DefaultGrace = 5 * time.Second

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
	// fan-out and the service's adopt, several instances then share no
	// fan-out cursor, each instance's passes claim by id the deliveries
	// its own transitions wrote, and the workers claim the records
	// appended without it (ClaimUnfanned) and their batches of deliveries
	// (ClaimDeliveries). nil: the workers fan out from the cursor (bbolt).
	FanOut func(fanOut func(rec pay.OutboxRecord, now time.Time) []pay.Delivery, committed func([]pay.Delivery))
	// Grace is, with FanOut, how long after it was written a delivery
	// that was never attempted is left to the instance whose transition
	// wrote it: Run's passes of the other instances read the due index
	// past it until then, so instances neither read nor collide on each
	// other's fresh work, and a delivery whose instance died (after its
	// commit, before its delivery) is taken by any instance once Grace
	// has passed. Default DefaultGrace.
	Grace time.Duration
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

	pass  sync.Mutex // one fan-out and dispatch at a time
	wake  chan struct{}
	freed chan struct{} // capacity 1: an attempt was recorded

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

	// own are the deliveries that this process's transitions wrote
	// (adopt), by target, which a pass claims by id when their target's
	// lane has room (claims only), ownN of them, at most ownCap; rescan
	// says that Run's next pass reads the due index too, not only own
	// (claims only: see Run).
	ownMu  sync.Mutex
	own    map[string][]pay.Delivery
	ownN   int
	rescan atomic.Bool

	// skip is the Seq of the last outbox record that fan-out found no
	// target for and has not stored as the cursor yet: the next write
	// transaction of ripple moves the cursor there (advanceCursor), so a
	// record that wants no delivery costs no commit of its own.
	skip atomic.Uint64

	recMu    sync.Mutex
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
	return last, s.interval()
}

// interval is Run's interval: Interval or DefaultInterval.
func (s *Service) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultInterval
}

// New returns a Service over store for cfg, with its effects built:
// loyalty and retention always, receipts if cfg.Receipt.Addr is set, one
// webhook target per endpoint. Errors name the endpoint by position and
// never quote a secret.
func New(store store.Store, cfg Config) (*Service, error) {
	cfg.Workers = defaults.Or(cfg.Workers, DefaultWorkers)
	cfg.MaxAttempts = defaults.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.BackoffBase = defaults.Or(cfg.BackoffBase, DefaultBackoffBase)
	cfg.BackoffCap = defaults.Or(cfg.BackoffCap, DefaultBackoffCap)
	if cfg.BackoffCap < cfg.BackoffBase {
		return nil, fmt.Errorf("ripple: backoff cap %s is below the base %s", cfg.BackoffCap, cfg.BackoffBase)
	}
	if cfg.PointsPerUnit < 0 {
		return nil, fmt.Errorf("ripple: points per unit must not be negative, got %d", cfg.PointsPerUnit)
	}
	cfg.ClaimTTL = defaults.Or(cfg.ClaimTTL, ClaimFor)
	cfg.Grace = defaults.Or(cfg.Grace, DefaultGrace)
	s := &Service{
		Store: store, Config: cfg, Logger: zerolog.Nop(), effects: map[string]effect{},
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1), lanes: map[string]*lane{}, inflight: map[string]*job{},
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
		cfg.FanOut(s.deliveriesOf, s.adopt)
		s.claims = true
	}
	return s, nil
}

// add makes e a target of which at most inFlight deliveries run at once.
func (s *Service) add(e effect, inFlight int) {
	s.effects[target(e)] = e
	s.order = append(s.order, e)
	_, inStore := e.(storeEffect)
	s.lanes[target(e)] = &lane{max: inFlight, inStore: inStore}
}

// target is the delivery target of an effect (pay.Delivery.Target).
func target(e effect) string {
	return pay.Delivery{Effect: e.name(), Endpoint: e.endpoint()}.Target()
}

func (s *Service) now() time.Time {
	return defaults.Clock(s.Now)().UTC()
}

func (s *Service) batch() int {
	if s.Batch > 0 {
		return s.Batch
	}
	return DefaultBatch
}

// ownCap bounds Service.own: the deliveries written past it are left to
// the passes' reads of the due index.
const ownCap = 4 * DefaultBatch

// adopt takes the deliveries that a transaction of this process wrote and
// committed (Config.FanOut's committed) for the next pass to claim by id,
// and wakes the workers. It never blocks on the store.
func (s *Service) adopt(ds []pay.Delivery) {
	s.keepOwn(time.Time{}, ds...)
	s.Notify()
}

// takeOwn returns the own deliveries of the targets for which room
// reports true, and forgets them.
func (s *Service) takeOwn(room func(target string) bool) []pay.Delivery {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	var out []pay.Delivery
	for tgt, ds := range s.own {
		if room(tgt) {
			out = append(out, ds...)
			s.ownN -= len(ds)
			delete(s.own, tgt)
		}
	}
	return out
}

// keepOwn keeps ds as own deliveries (adopted, or given back by a pass
// that could not start them: their target was full, or they were not
// first in line yet), but not those written before cutoff (Config.Grace
// ago: every instance's passes take those) nor past ownCap.
func (s *Service) keepOwn(cutoff time.Time, ds ...pay.Delivery) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	if s.own == nil {
		s.own = map[string][]pay.Delivery{}
	}
	for _, d := range ds {
		if s.ownN < ownCap && !d.CreatedAt.Before(cutoff) {
			s.own[d.Target()] = append(s.own[d.Target()], d)
			s.ownN++
		}
	}
}

// graceCutoff is when the deliveries that are no longer only their
// instance's to claim were written: Config.Grace ago.
func (s *Service) graceCutoff() time.Time { return s.now().Add(-s.Config.Grace) }

// Notify wakes the workers: there are new outbox records. It never blocks;
// finalize calls it after a commit that appended one.
func (s *Service) Notify() {
	select {
	case s.wake <- struct{}{}:
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
// target that is slow to answer holds up only its own deliveries. With
// Config.FanOut, a pass claims the deliveries that this process's
// transitions wrote by id, reads the due index only on the first pass,
// every Interval and when the last read left due deliveries behind, and
// reads past the other instances' deliveries younger than Config.Grace
// that were never attempted. Errors are logged and the loop goes on. On
// cancel it waits for the running attempts to end (they end with ctx) and
// returns nil.
func (s *Service) Run(ctx context.Context) error {
	var attempts sync.WaitGroup
	defer s.Close()
	defer attempts.Wait()
	t := time.NewTicker(s.interval())
	defer t.Stop()
	gauges := true // on the first pass and every Interval, not on every attempt
	for {
		// With claims, a pass woken by a commit or an attempt claims this
		// process's own deliveries by id; the due index is read on the
		// first pass, every Interval and when the last read left due
		// deliveries behind or an operator retried some (rescan).
		scan := !s.claims || gauges || s.rescan.Swap(false)
		_, _, err := s.dispatch(ctx, &attempts, true, scan, true)
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
		case <-s.wake:
		case <-s.freed:
		}
	}
}

// RunOnce runs one pass: it fans new outbox records out to deliveries,
// attempts the deliveries that are due (other instances' fresh ones too:
// RunOnce knows no Config.Grace) and whose target has room (up to
// Config.Workers at once for each effect, EndpointConfig.MaxInFlight for
// each merchant endpoint), waits for them and for the attempts that were
// already running, and refreshes the gauges. It returns how many of those
// deliveries were attempted, successful or not, and the first error of
// the attempts it started. Passes do not overlap; their waits do.
func (s *Service) RunOnce(ctx context.Context) (int, error) {
	return s.runOnce(ctx, false)
}

// runOnce is RunOnce; grace says that the pass leaves the other
// instances' fresh deliveries to them, as Run's do.
func (s *Service) runOnce(ctx context.Context, grace bool) (int, error) {
	var attempts sync.WaitGroup
	s.lastClaim.Store(0)
	started, running, first := s.dispatch(ctx, &attempts, false, true, grace)
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
