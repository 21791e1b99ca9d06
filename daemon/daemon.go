// Package daemon wires paystate together: it opens the store, builds the
// providers, the application layer (finalize: payments, the webhook inbox,
// leases, review, idempotency keys), the workers (inbox, sweeper, ripple)
// and the HTTP server from a config.Config, and shuts them down in order.
// `paystate serve` (cli/serve.go) runs it; end-to-end tests boot it on
// 127.0.0.1:0 with a temporary database (internal/testkit/daemontest) and
// drive it over HTTP only.
//
// It lives in its own package rather than in the command so that the
// command stays a thin front and others can boot the same daemon: the
// simulation (internal/simulate) and the tests of other packages.
package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/mollie"
	"github.com/paystate/paystate/psp/paypal"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/reconcile"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/sweeper"
)

// Main is one running paystate.
type Main struct {
	Config config.Config
	// Now is the clock of the store and the workers; default time.Now.
	Now    func() time.Time
	Logger zerolog.Logger
	// HTTPReadTimeout bounds reading one request (slow clients); 0 keeps
	// the HTTP server's default. Tests set it to exercise slow bodies.
	HTTPReadTimeout time.Duration
	// OnFatal is called once when a database write or fsync failed in a way
	// that may have lost data (EIO): the default logs it and exits 1, as
	// etcd and PostgreSQL do, rather than serve state that may not be on
	// disk. A full disk is not fatal (503, and recovery).
	OnFatal func(error)

	// Store is the storage of every component, Backend.Store; Backend
	// says what its backend (storage.backend) can do besides.
	Store     store.Store
	Backend   *store.Backend
	Server    *httpd.Server
	Finalizer *finalize.Finalizer
	Payments  *finalize.Payments
	Inbox     *finalize.Inbox
	Pull      *finalize.Pull
	Review    *finalize.Review
	Sweeper   *sweeper.Sweeper
	Ripple    *ripple.Service
	Mock      *mock.Provider
	Providers map[string]pay.Provider

	cancel  context.CancelFunc
	g       *errgroup.Group
	running atomic.Bool
	relay   *ripple.NATSRelay // [relay.nats], if its url is set; closed after the workers
}

// New returns a Main for cfg; Open starts it.
func New(cfg config.Config, logger zerolog.Logger) *Main {
	return &Main{Config: cfg, Logger: logger, Now: time.Now}
}

// Open opens the database, binds the HTTP listener and starts the workers.
func (m *Main) Open() (err error) {
	cfg := m.Config
	m.Now = defaults.Clock(m.Now)
	defer func() {
		if err != nil {
			m.Close(context.Background())
		}
	}()
	owner := newOwner()

	// Storage first, closed last.
	if m.OnFatal == nil {
		m.OnFatal = m.exit
	}
	openCtx, cancelOpen := context.WithTimeout(context.Background(), 30*time.Second)
	m.Backend, err = store.Open(openCtx, cfg.Storage.StoreConfig(store.Config{Now: m.Now, OnFatal: m.OnFatal, Logger: m.component(cfg.Storage.Backend)}))
	cancelOpen()
	if err != nil {
		return err // it names the database already
	}
	m.Store = m.Backend.Store
	// A store this process alone uses: leases in force are those of a
	// process that died. Several instances share the others: a lease in
	// force may be a live instance's, so leases only expire (lease.ttl),
	// and an in-flight idempotency key of another instance is left to it.
	if m.Backend.EndLeases != nil {
		if n, err := m.Backend.EndLeases(context.Background()); err != nil {
			return fmt.Errorf("end leases of a previous process: %w", err)
		} else if n > 0 {
			m.Logger.Warn().Int("leases", n).Msg("ended the leases of a previous process that stopped without releasing them")
		}
	}

	// Providers: exactly those the configuration has (config.Providers).
	m.Providers = map[string]pay.Provider{}
	tol := cfg.WebhookInbox.Tolerance.Duration
	if mc := cfg.Providers.Mock; mc != nil {
		m.Mock, err = mock.New(mock.Config{
			WebhookSecret: mc.WebhookSecret, WebhookURL: mc.WebhookURL,
			WebhookDelay: mc.WebhookDelay.Duration, DuplicateRate: mc.DuplicateRate, WebhookFirstRate: mc.WebhookFirstRate, MaxCharges: mc.MaxCharges,
			Reorder: mc.Reorder, Tolerance: tol, DisputeAfter: mc.DisputeAfter.Duration,
		}, mock.WithStore(m.Store))
		if err != nil {
			return err
		}
		m.Mock.Logger = m.component("psp_mock")
		m.Mock.Now = m.Now
		m.Providers["mock"] = m.Mock
	}
	if cfg.Providers.Standard != nil {
		sp, err := standard.New(standard.Config{WebhookSecret: cfg.Providers.Standard.WebhookSecret, Tolerance: tol})
		if err != nil {
			return err
		}
		m.Providers["standard"] = sp
	}
	if sc := cfg.Providers.Stripe; sc != nil {
		sp, err := stripe.New(stripe.Config{
			SecretKey: sc.SecretKey, WebhookSecret: sc.WebhookSecret, APIBase: sc.APIBase, Tolerance: tol,
			Flow: sc.Flow, ExpireAfter: cfg.Payment.ExpireAfter.Duration,
			Checkout: stripe.CheckoutConfig{
				SuccessURL: sc.Checkout.SuccessURL, CancelURL: sc.Checkout.CancelURL,
				AdoptPaymentLinks: sc.Checkout.AdoptPaymentLinks,
			},
		}, stripe.WithLogger(m.Logger))
		if err != nil {
			return err
		}
		m.Providers[stripe.Name] = sp
	}
	// pspLinks: the address of a payment in its PSP's own dashboard,
	// where the server (not the dashboard's script) must say it.
	pspLinks := map[string]func(pay.Payment) string{}
	if pc := cfg.Providers.PayPal; pc != nil {
		pp, err := paypal.New(paypal.Config{
			ClientID: pc.ClientID, Secret: pc.Secret, APIBase: pc.APIBase, WebhookID: pc.WebhookID,
			Verify: pc.Verify, CertHosts: pc.CertHosts, CAFile: pc.CAFile,
			ReturnURL: pc.ReturnURL, CancelURL: pc.CancelURL, BrandName: pc.BrandName, Tolerance: tol,
		}, paypal.WithLogger(m.Logger), paypal.WithNow(m.Now))
		if err != nil {
			return err
		}
		m.Providers[paypal.Name] = pp
		pspLinks[paypal.Name] = pp.ActivityURL
	}
	pullLimits := map[string]finalize.PullLimits{}
	if mc := cfg.Providers.Mollie; mc != nil {
		mp, err := mollie.New(mollie.Config{
			APIKey: mc.APIKey, APIBase: mc.APIBase, RedirectURL: mc.RedirectURL,
			WebhookURL: mc.WebhookURL, WebhookSecret: mc.WebhookSecret,
		}, nil)
		if err != nil {
			return err
		}
		m.Providers[mollie.Name] = mp
		pullLimits[mollie.Name] = finalize.PullLimits{RatePerSecond: mc.RatePerSecond, UnknownIDBackoff: mc.UnknownIDBackoff.Duration}
	}
	if _, ok := m.Providers[cfg.Payment.Provider]; !ok {
		return fmt.Errorf("payment.provider %q is not configured", cfg.Payment.Provider)
	}

	// The application layer: finalize and every path that feeds it.
	m.Finalizer = finalize.New(m.Store)
	m.Finalizer.Logger = m.component("finalize")
	leases := func(holder string) *finalize.Leases {
		return &finalize.Leases{Store: m.Store, Holder: holder + "/" + owner, TTL: cfg.Lease.TTL.Duration, Logger: m.component("lease")}
	}
	idem := &finalize.Idempotency{Store: m.Store, TTL: cfg.Idempotency.TTL.Duration, Owner: owner, Exclusive: !m.Backend.Shared, Logger: m.component("idempotency")}
	m.Payments = &finalize.Payments{
		Store: m.Store, Finalizer: m.Finalizer, Providers: m.Providers, Idempotency: idem,
		DefaultProvider: cfg.Payment.Provider, Logger: m.component("payments"),
	}
	// The pull path: webhooks that are triggers (Mollie's) are fetched
	// under the payment's lease.
	m.Pull = &finalize.Pull{
		Store: m.Store, Finalizer: m.Finalizer, Providers: m.Providers, Now: m.Now,
		Leases: leases("pull"), Limits: pullLimits, Logger: m.component("pull"),
	}
	m.Inbox = &finalize.Inbox{
		Store: m.Store, Finalizer: m.Finalizer, Providers: m.Providers, Now: m.Now, Pull: m.Pull,
		MaxAttempts: cfg.WebhookInbox.MaxAttempts, Logger: m.component("inbox"),
		WriteFirst: m.Backend.CheapEmptyCommit,
	}
	m.Pull.Wake = m.Inbox.Wake
	m.Review = &finalize.Review{Finalizer: m.Finalizer, Leases: leases("review"), Logger: m.component("review")}

	// The sweeper: reconciliation against the PSPs, expiry, housekeeping.
	m.Sweeper = &sweeper.Sweeper{
		Store: m.Store, Finalizer: m.Finalizer, Providers: m.Providers, Now: m.Now,
		Leases:   leases("sweeper"),
		Interval: cfg.Sweeper.Interval.Duration, MinAge: cfg.Sweeper.MinAge.Duration,
		GiveUpAfter: cfg.Sweeper.GiveUpAfter.Duration, RatePerSecond: cfg.Sweeper.RatePerSecond, Parallel: cfg.Sweeper.Parallel,
		ExpireAfter: cfg.Payment.ExpireAfter.Duration, ProcessedRetention: cfg.WebhookInbox.ProcessedRetention.Duration,
		OutboxRetention: cfg.Ripple.Retention.Duration,
		Logger:          m.component("sweeper"),
	}

	// Ripple: the outbox workers, woken by every commit that appended a record.
	if err := m.openRipple(); err != nil {
		return err
	}

	// HTTP: bind now, so a port in use fails the start.
	m.Server = &httpd.Server{
		Addr: cfg.Server.Listen, APIKeys: cfg.Auth.APIKeys, MaxBody: cfg.Server.MaxBody,
		AllowedHosts: cfg.Server.AllowedHosts, SessionTTL: cfg.Auth.SessionTTL.Duration, Pprof: cfg.Server.Pprof,
		Payments: m.Payments, Events: m.Payments, Ledger: m.Payments, Webhooks: m.Inbox, Review: m.Review,
		Deliveries: m.Ripple, Customers: m.Ripple, Reconciliation: reconcile.Runs{Store: m.Store, SettleWithin: cfg.Reconcile.SettleWithin.Duration},
		PSPLinks: pspLinks,
		Counts:   m.Payments, Ready: m.readyChecks(m.Now()), Now: m.Now, Logger: m.component("httpd"),
		ReadTimeout: m.HTTPReadTimeout,
	}
	if m.Backend.Backup != nil {
		m.Server.Backup = m.Backend.Backup
	}
	if err := m.Server.Open(); err != nil {
		return err
	}
	if m.Mock != nil && cfg.Providers.Mock.WebhookURL == "" {
		m.Mock.SetWebhookURL(m.Server.URL() + "/webhooks/mock")
	}

	// Workers.
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.g, ctx = errgroup.WithContext(ctx)
	m.g.Go(func() error { return m.Inbox.Run(ctx) })
	m.g.Go(func() error { return m.Pull.Run(ctx) })
	m.g.Go(func() error { return m.Sweeper.Run(ctx) })
	m.g.Go(func() error { return m.Ripple.Run(ctx) })
	m.running.Store(true)
	// The address bound (a wildcard one as it is) and how to reach it;
	// the database really used, a DSN with its password masked.
	m.Logger.Info().Str("listen", m.Server.BoundAddr()).Str("url", m.Server.URL()).
		Str("backend", cfg.Storage.Backend).Str("db", cfg.Masked().Storage.Where()).Msg("paystate started")
	return nil
}

// readyChecks are the parts of GET /readyz: storage answers a write
// transaction, and each worker loop (inbox, ripple, sweeper) turned
// within three of its intervals, counted from started before its first
// turn. The NATS relay, when configured, is reported without failing the
// check: NATS being away stops no payment (its deliveries wait in the
// outbox and paystate_relay_nats_connected says so), and a 503 from every
// instance at once would take the whole API out of its load balancer.
func (m *Main) readyChecks(started time.Time) []httpd.ReadyCheck {
	probe := &writeProbe{store: m.Store, logger: m.component("httpd")}
	checks := []httpd.ReadyCheck{{Name: "storage", Check: probe.check}}
	for _, w := range []struct {
		name      string
		heartbeat func() (time.Time, time.Duration)
	}{
		{"inbox", m.Inbox.Heartbeat},
		{"pull", m.Pull.Heartbeat},
		{"ripple", m.Ripple.Heartbeat},
		{"sweeper", m.Sweeper.Heartbeat},
	} {
		wc := httpd.WorkerCheck(w.name, w.heartbeat, m.Now, started)
		beat := wc.Check
		wc.Check = func(ctx context.Context) error {
			if !m.running.Load() {
				return errors.New("not running")
			}
			return beat(ctx)
		}
		checks = append(checks, wc)
	}
	if r := m.relay; r != nil {
		checks = append(checks, httpd.ReadyCheck{Name: "relay", Advisory: true, Check: func(context.Context) error {
			if !r.Connected() {
				return errors.New("not connected to NATS: reconnecting; its deliveries wait and are retried")
			}
			return nil
		}})
	}
	return checks
}

// writeProbe is the storage part of readiness: one small write
// transaction (store.Tx.WriteProbe) at a time. A check waits for the write
// until its context ends; a write that is stuck (a disk that hangs, a
// database that does not answer) stays the one in flight, and the checks
// after it wait for that one rather than pile up more.
type writeProbe struct {
	store  store.Store
	logger zerolog.Logger

	mu  sync.Mutex
	cur *probeWrite // the write in flight, nil if none
}

// probeWrite is one write of a writeProbe; err is set before done is
// closed.
type probeWrite struct {
	done chan struct{}
	err  error
}

// check makes a write, or joins the one in flight, and waits for it
// until ctx ends. The answer names no file and quotes no internal error
// (/readyz needs no key): those are logged.
func (p *writeProbe) check(ctx context.Context) error {
	if p.store == nil {
		return errors.New("not open")
	}
	p.mu.Lock()
	w := p.cur
	if w == nil {
		w = &probeWrite{done: make(chan struct{})}
		p.cur = w
		go func() {
			// Not ctx: the write ends on its own, and so does its wait.
			wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			w.err = p.store.Update(wctx, func(tx store.Tx) error { return tx.WriteProbe() })
			cancel()
			if w.err != nil {
				p.logger.Warn().Err(w.err).Msg("readiness: the storage probe's write failed")
			}
			p.mu.Lock()
			p.cur = nil
			p.mu.Unlock()
			close(w.done)
		}()
	}
	p.mu.Unlock()
	select {
	case <-w.done:
		if w.err != nil {
			return fmt.Errorf("a write transaction failed: %s", pay.ErrorMessage(w.err))
		}
		return nil
	case <-ctx.Done():
		return errors.New("a write transaction did not commit within " + httpd.ReadyTimeout.String())
	}
}

// Close shuts down in order: the HTTP server (in-flight requests finish),
// then the workers (at a step boundary), and the database last; the mock
// PSP's webhook senders stop first. ctx bounds the whole shutdown.
func (m *Main) Close(ctx context.Context) error {
	var errs []error
	m.running.Store(false)
	if m.Mock != nil {
		// The simulated PSP stops sending first; what it did not send is
		// what a real PSP would redeliver later (or the sweeper finds).
		m.Mock.Close()
	}
	if m.Server != nil {
		if err := m.Server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if m.cancel != nil {
		m.cancel()
		if err := m.g.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.relay != nil {
		m.relay.Close()
	}
	if m.Store != nil {
		if err := m.Store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close database: %w", err))
		}
	}
	return errors.Join(errs...)
}

// exit is the default OnFatal: one log line, then exit status 1.
func (m *Main) exit(err error) {
	m.Logger.Error().Err(err).Msg("database write failed: stopping so that nothing is served that may not be on disk")
	os.Exit(1)
}

func (m *Main) component(name string) zerolog.Logger {
	return m.Logger.With().Str("component", name).Logger()
}

// newOwner names this process on leases and idempotency keys.
func newOwner() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// openRipple builds the ripple workers from the [ripple], [loyalty],
// [receipt], [[webhooks]] and [relay.nats] sections and has finalize wake
// them.
func (m *Main) openRipple() error {
	cfg := m.Config
	receipt, err := cfg.Receipt.ReceiptConfig()
	if err != nil {
		return err
	}
	rc := ripple.Config{
		Shared:  m.Backend.Shared, // several instances: claim before an attempt
		FanOut:  m.Backend.FanOut,
		Workers: cfg.Ripple.Workers, MaxAttempts: cfg.Ripple.MaxAttempts,
		// A dead instance's claims end three lease TTLs after they were
		// taken (90 s by default, ripple.ClaimFor), as its leases end.
		ClaimTTL:    3 * cfg.Lease.TTL.Duration,
		BackoffBase: cfg.Ripple.BackoffBase.Duration, BackoffCap: cfg.Ripple.BackoffCap.Duration,
		PointsPerUnit: cfg.Loyalty.PointsPerUnit,
		Receipt:       receipt,
	}
	for _, w := range cfg.Webhooks {
		rc.Webhooks = append(rc.Webhooks, ripple.EndpointConfig{
			URL: w.URL, Secrets: w.SigningSecrets(), Events: w.Events,
			Timeout: w.Timeout.Duration, MaxInFlight: w.MaxInFlight,
		})
	}
	r, err := ripple.New(m.Store, rc)
	if err != nil {
		return err
	}
	r.Now, r.Logger = m.Now, m.component("ripple")
	m.Ripple = r
	if n := cfg.Relay.NATS; n.Enabled() {
		// Connects within a bounded time; a NATS that is down is retried
		// in the background while its deliveries wait.
		if m.relay, err = r.AddNATS(ripple.NATSConfig{URL: n.URL, Stream: n.Stream, SubjectPrefix: n.SubjectPrefix}); err != nil {
			return err
		}
	}
	m.Finalizer.Notify = r.Notify
	return nil
}
