// Package mock is a simulated PSP inside the paystate binary, the default
// provider, so the whole flow runs with no account anywhere.
//
// Outcomes are chosen by the last two digits of the amount, like the test
// cards of a real PSP:
//
//	amount % 100   sync answer of Create             webhooks, in order                 Status afterwards
//	00             captured                          payment.captured                   captured
//	01             failed                            payment.failed                     failed
//	02             requires_action + redirect URL    payment.requires_action, .captured captured
//	03             processing + client secret        payment.processing, .captured      captured
//	04             lost: EPSP "timeout"              none                               captured
//	05             captured                          payment.captured, then             captured
//	                                                 payment.dispute.created, .closed (lost)
//	06             captured                          payment.captured                   captured
//	other          captured                          payment.captured                   captured
//
// Refunds, of part or all of a captured charge, succeed at once
// (payment.refund.succeeded follows), except for a payment whose amount
// ends in 06: its refunds are accepted as pending and fail after
// webhook_delay (payment.refund.failed), as a refund that the customer's
// bank turns down. For 05 the customer's bank opens a dispute of the whole
// amount after webhook_delay (payment.dispute.created, needs_response,
// evidence due in seven days) and closes it lost after dispute_after
// (payment.dispute.closed).
//
// For 02 and 03 the customer's action (or the bank's answer) happens after
// webhook_delay: only then does Status say captured. For 04 the PSP took the
// money but its answer never arrived and no webhook follows: drift that only
// the sweeper's Status query finds. A retry of Create with the same key is
// not lost: it answers captured, which is how a crash-resume finishes.
//
// Webhooks are signed per Standard Webhooks with providers.mock.webhook_secret
// and posted to the webhook URL (paystate's own /webhooks/mock) from
// goroutines after webhook_delay, so they race the synchronous answer: with a
// delay of 0 a webhook can land before Create returns. duplicate_rate sends
// that share of events twice with the same event id; reorder sends a
// payment's events in reverse order. A failed POST is retried a few times
// with backoff, then dropped quietly (the sweeper finds what is missing).
//
// The PSP's state lives in memory, keyed by the idempotency key
// ("charge-<payment_id>"), and, with WithStore (as paystate runs it), in the
// store too: a restart, or another instance on the same PostgreSQL, then
// answers from what was charged. Without a store a restart forgets it:
// Status answers not found and the sweeper puts such a payment on the
// review queue.
//
// The memory is bounded (a charge past the bound is read back from the
// store, if there is one): the mock remembers the last max_charges charges
// (Config.MaxCharges, 25,000 by default) and forgets the oldest charge
// first, whatever happened to it since (a refund does not renew it). A
// forgotten charge is gone as after a restart: Status answers not found,
// Refund is EINVALID (no charge), and a Create with its key is a new
// charge, as at Stripe once an idempotency key is pruned (keys are kept
// for at least 24 hours, and a key reused after it was pruned makes a new
// request). Only a payment that many charges old is affected; but a load
// that makes more than max_charges charges within sweeper.min_age leaves
// the sweeper, as a restart does, no charge to find for a payment that
// drifted, and such a payment goes to the review queue. The default covers
// the default sweeper.min_age (10 minutes) at about 40 charges a second;
// raise max_charges for longer runs at a higher rate (about 400 bytes
// each).
package mock

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store"
)

// Name is the provider's name, in configuration and in /webhooks/mock.
const Name = "mock"

// Defaults of the webhook delivery retries.
const (
	DefaultAttempts     = 5
	DefaultRetryBackoff = 200 * time.Millisecond
	maxRetryBackoff     = 5 * time.Second
)

// DefaultMaxCharges is how many charges the mock remembers when
// Config.MaxCharges is 0 (see Config.MaxCharges).
const DefaultMaxCharges = 25_000

// DefaultDisputeAfter is Config.DisputeAfter when it is 0
// (providers.mock.dispute_after).
const DefaultDisputeAfter = 2 * time.Second

// disputeEvidenceWindow is how long after a dispute opens its evidence is
// due.
const disputeEvidenceWindow = 7 * 24 * time.Hour

// Config is the [providers.mock] section of the configuration, plus the
// webhook tolerance of [webhook_inbox].
type Config struct {
	// WebhookSecret signs the mock's webhooks and verifies them in
	// ParseWebhook ("whsec_" + base64). Empty: a random secret for this
	// process, which is enough while the mock posts to its own paystate.
	WebhookSecret string
	// WebhookURL receives the webhooks. Empty until SetWebhookURL: the server
	// learns its own address after binding.
	WebhookURL string
	// WebhookDelay is the wait between an event and its webhook.
	WebhookDelay time.Duration
	// DuplicateRate is the share of webhooks sent twice, from 0 to 1.
	DuplicateRate float64
	// Reorder sends a payment's events in reverse order.
	Reorder bool
	// WebhookFirstRate is the share of charges whose first webhook is
	// delivered (and acknowledged) before Create returns, so the webhook
	// can be applied before the synchronous answer: the other order of the
	// race. From 0 to 1.
	WebhookFirstRate float64
	// Tolerance is how far a webhook's timestamp may be from now in
	// ParseWebhook; 0 means stdwebhook.DefaultTolerance.
	Tolerance time.Duration
	// DisputeAfter is how long after it opens the dispute of an amount
	// ending in 05 closes (lost); 0 means DefaultDisputeAfter.
	DisputeAfter time.Duration
	// MaxCharges bounds the charges the mock remembers; 0 means
	// DefaultMaxCharges. Past it, each new charge makes the mock forget
	// its oldest one: Status of that payment answers not found, Refund is
	// EINVALID, and a Create with its key charges anew (a real PSP's
	// pruned idempotency key; see the package documentation). The mock's
	// memory is then about MaxCharges times 350 to 420 bytes (a charge,
	// its strings and its share of the maps, BenchmarkChargeMemory on
	// amd64): some 10 MB at the default.
	MaxCharges int
}

// slowAnswer is how long a synchronous answer takes after a webhook that
// was sent first (WebhookFirstRate): long enough for paystate to apply the
// webhook before the answer, most of the time.
const slowAnswer = 50 * time.Millisecond

// Option changes a Provider built by New.
type Option func(*Provider)

// WithNow sets the clock that stamps webhooks and events.
func WithNow(now func() time.Time) Option { return func(p *Provider) { p.Now = now } }

// WithLogger sets the logger; New adds component=psp_mock.
func WithLogger(l zerolog.Logger) Option { return func(p *Provider) { p.Logger = l } }

// WithStore keeps the PSP's charges in s (store.Tx.PutPSPCharge) as well as
// in memory: a restart, or another paystate instance on the same
// database, answers Status, Refund and a replayed Create from what was
// charged, and a charge forgotten from memory (MaxCharges) is read back
// from s.
func WithStore(s store.Store) Option { return func(p *Provider) { p.store = s } }

// WithRand sets the random source behind duplicates and client secrets, so
// a test or a simulation can be seeded.
func WithRand(r *rand.Rand) Option { return func(p *Provider) { p.rnd = r } }

// WithRetry sets how often a webhook POST is tried (at least 1) and the
// first wait between tries, which doubles up to five seconds.
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(p *Provider) {
		p.attempts = max(attempts, 1)
		p.backoff = max(backoff, 0)
	}
}

// Provider is the simulated PSP. It implements pay.Provider and is safe for
// concurrent use.
type Provider struct {
	// Now stamps webhooks and events; time.Now by default.
	Now func() time.Time
	// Logger logs webhook deliveries; zerolog.Nop() by default. New adds
	// component=psp_mock to it; a logger assigned here after New should
	// carry that field itself. No line holds a secret or a signature.
	Logger zerolog.Logger
	// Client posts the webhooks. By default it has a 15 s timeout and its
	// own transport, so no other user of http.DefaultTransport can break a
	// delivery by closing its idle connections (which would turn into a
	// redelivery of an event already received).
	Client *http.Client

	cfg      Config
	signer   *stdwebhook.Signer
	verifier *stdwebhook.Verifier
	attempts int
	backoff  time.Duration

	// ctx is canceled by Close: pending webhooks stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	idle       *sync.Cond // broadcast when inflight drops to 0
	inflight   int        // webhook goroutines running
	closed     bool
	webhookURL string
	rnd        *rand.Rand
	byKey      map[string]*charge
	byRef      map[string]*charge
	refunds    map[string]*refund // by refund key; forgotten with their charge
	// disputed holds the keys of the charges the customer's bank
	// disputed (amounts ending 05): like Stripe (charge_disputed), the
	// mock refunds none of them. Kept in memory only.
	disputed map[string]bool
	// order holds the remembered charges in the order they were made; once
	// it holds maxCharges it is a ring whose oldest charge is at
	// order[oldest], replaced by the next charge. (A slice of pointers
	// costs 8 bytes a charge; container/list would cost an element of 48.)
	order      []*charge
	oldest     int
	maxCharges int
	store      store.Store // WithStore: the charges are kept there too
	stats      Stats
}

// Stats counts what the simulated PSP did, for tests and `paystate simulate`.
type Stats struct {
	Charges            int // charges taken: the first Create of each key
	Replays            int // Create calls answered from an earlier charge of the same key
	LostAnswers        int // synchronous answers dropped (amount ending in 04)
	Refunds            int // refunds made
	Forgotten          int // charges forgotten to stay within Config.MaxCharges
	WebhooksSent       int // webhook deliveries answered 2xx, duplicates included
	WebhooksDuplicated int // extra copies of an event scheduled by duplicate_rate
	WebhooksFailed     int // deliveries dropped after every attempt failed
	Attempts           int // webhook POST attempts
}

// Charge is the PSP's record of one charge.
type Charge struct {
	Key         string // the idempotency key of the charge
	PaymentID   string
	ProviderRef string
	Amount      int64
	Currency    string
	Status      pay.Status // the PSP's current status
	Charges     int        // times money was taken for the key: 1
	Calls       int        // Create calls with the key, replays included
	Refunds     int        // refunds made, failed ones included
	// AmountRefunded is what was refunded so far (refunds pending at the
	// PSP included, failed ones not); Status is refunded once it is the
	// whole amount.
	AmountRefunded int64
}

// charge is the in-memory state of one charge, guarded by Provider.mu.
type charge struct {
	Charge
	clientSecret string
	redirectURL  string
	refundKey    string
}

// result is the PSP's answer about c.
func (c *charge) result() pay.PSPResult {
	r := pay.PSPResult{
		Status:      c.Status,
		ProviderRef: c.ProviderRef,
		Found:       true,
		Raw:         fmt.Sprintf("mock status=%s ref=%s", c.Status, c.ProviderRef),
		Amount:      c.Amount,
		Currency:    c.Currency,
	}
	if c.Status.ShowsSecrets() {
		r.ClientSecret = c.clientSecret
	}
	if c.Status == pay.RequiresAction {
		r.RedirectURL = c.redirectURL
	}
	return r
}

// New returns a simulated PSP. Configuration errors name their key
// (providers.mock.*).
func New(cfg Config, opts ...Option) (*Provider, error) {
	if cfg.WebhookSecret == "" {
		secret, err := stdwebhook.GenerateSecret()
		if err != nil {
			return nil, err
		}
		cfg.WebhookSecret = secret
	}
	signer, err := stdwebhook.NewSigner(cfg.WebhookSecret)
	if err != nil {
		return nil, fmt.Errorf("providers.mock.webhook_secret: %w", err)
	}
	verifier, err := stdwebhook.NewVerifier(cfg.WebhookSecret, cfg.Tolerance)
	if err != nil {
		return nil, fmt.Errorf("providers.mock.webhook_secret: %w", err)
	}
	if cfg.WebhookURL != "" {
		if err := checkURL(cfg.WebhookURL); err != nil {
			return nil, fmt.Errorf("providers.mock.webhook_url: %w", err)
		}
	}
	if cfg.WebhookDelay < 0 {
		return nil, fmt.Errorf("providers.mock.webhook_delay: must not be negative, got %s", cfg.WebhookDelay)
	}
	if math.IsNaN(cfg.DuplicateRate) || cfg.DuplicateRate < 0 || cfg.DuplicateRate > 1 {
		return nil, fmt.Errorf("providers.mock.duplicate_rate: must be between 0 and 1, got %v", cfg.DuplicateRate)
	}
	if cfg.MaxCharges < 0 {
		return nil, fmt.Errorf("providers.mock.max_charges: must not be negative, got %d", cfg.MaxCharges)
	}
	if cfg.DisputeAfter < 0 {
		return nil, fmt.Errorf("providers.mock.dispute_after: must not be negative, got %s", cfg.DisputeAfter)
	}
	if cfg.DisputeAfter == 0 {
		cfg.DisputeAfter = DefaultDisputeAfter
	}

	ctx, cancel := context.WithCancel(context.Background())
	p := &Provider{
		Now:        time.Now,
		Logger:     zerolog.Nop(),
		Client:     &http.Client{Timeout: 15 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		cfg:        cfg,
		signer:     signer,
		verifier:   verifier,
		attempts:   DefaultAttempts,
		backoff:    DefaultRetryBackoff,
		ctx:        ctx,
		cancel:     cancel,
		webhookURL: cfg.WebhookURL,
		byKey:      make(map[string]*charge),
		byRef:      make(map[string]*charge),
		refunds:    make(map[string]*refund),
		disputed:   make(map[string]bool),
		maxCharges: cmp.Or(cfg.MaxCharges, DefaultMaxCharges),
	}
	p.idle = sync.NewCond(&p.mu)
	for _, opt := range opts {
		opt(p)
	}
	p.Logger = p.Logger.With().Str("component", "psp_mock").Logger()
	if p.rnd == nil {
		p.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return p, nil
}

// checkURL accepts an absolute http or https URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http or https URL, got %q", s)
	}
	return nil
}

var _ pay.Provider = (*Provider)(nil)

// Name returns "mock".
func (p *Provider) Name() string { return Name }

// SetWebhookURL sets where webhooks go, for a server that learns its own
// address after binding. Webhooks not yet posted use the new URL.
func (p *Provider) SetWebhookURL(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.webhookURL = u
}

// Create charges p with the outcome chosen by its amount (see the package
// documentation). A second call with the same key charges nothing and sends
// no webhook: it answers the charge's current status. The same key with
// another payment, amount or currency is an EPSP error, as at a real PSP.
func (p *Provider) Create(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if err := ctx.Err(); err != nil {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "mock: %v", err)
	}
	switch {
	case key == "":
		return pay.PSPResult{}, pay.Errorf(pay.EINVALID, "mock: idempotency key is required")
	case pm.ID == "":
		return pay.PSPResult{}, pay.Errorf(pay.EINVALID, "mock: payment id is required")
	}
	if err := pay.ValidateAmount(pm.Amount); err != nil {
		return pay.PSPResult{}, err
	}

	p.mu.Lock()
	if _, ok := p.byKey[key]; !ok && p.store != nil {
		p.mu.Unlock()
		if err := p.load(ctx, key); err != nil {
			return pay.PSPResult{}, err
		}
		p.mu.Lock()
	}
	// A replay of the key answers from the recorded charge.
	if c, ok := p.byKey[key]; ok {
		if c.PaymentID != pm.ID || c.Amount != pm.Amount || c.Currency != pm.Currency {
			p.mu.Unlock()
			return pay.PSPResult{}, pay.Errorf(pay.EPSP, "mock: idempotency key %s was used with other parameters", key)
		}
		c.Calls++
		p.stats.Replays++
		res := c.result()
		p.mu.Unlock()
		return res, nil
	}

	// A new charge: its outcome follows the amount.
	ref := "mock_pi_" + digest(key)
	c := &charge{Charge: Charge{
		Key:         key,
		PaymentID:   pm.ID,
		ProviderRef: ref,
		Amount:      pm.Amount,
		Currency:    pm.Currency,
		Charges:     1,
		Calls:       1,
	}}
	var (
		events   []string   // webhook types, in the order they happen
		final    pay.Status // the status reached after the delay, if it changes
		lost     bool       // the answer to this call is dropped
		disputed bool       // the customer's bank disputes it later
	)
	switch pm.Amount % 100 {
	case 1:
		c.Status = pay.Failed
		events = []string{stdwebhook.TypeFailed}
	case 2:
		c.Status = pay.RequiresAction
		c.clientSecret = p.clientSecretLocked(ref)
		c.redirectURL = "https://mock-psp.invalid/3ds/" + ref
		events = []string{stdwebhook.TypeRequiresAction, stdwebhook.TypeCaptured}
		final = pay.Captured
	case 3:
		c.Status = pay.Processing
		c.clientSecret = p.clientSecretLocked(ref)
		events = []string{stdwebhook.TypeProcessing, stdwebhook.TypeCaptured}
		final = pay.Captured
	case 4:
		c.Status = pay.Captured
		lost = true
		p.stats.LostAnswers++
	case 5:
		c.Status = pay.Captured
		events = []string{stdwebhook.TypeCaptured}
		disputed = true
	default:
		c.Status = pay.Captured
		events = []string{stdwebhook.TypeCaptured}
	}
	p.rememberLocked(c)
	p.stats.Charges++
	res := c.result()
	first := len(events) > 0 && !lost && p.rnd.Float64() < p.cfg.WebhookFirstRate
	rec := c.record()
	p.mu.Unlock()
	if err := p.save(ctx, rec); err != nil {
		return pay.PSPResult{}, err
	}

	// The first webhook may arrive before this answer does: it is
	// delivered, and the answer then takes a while on the network.
	if first {
		p.deliver(p.event(c, events[0]))
		events = events[1:]
		p.sleep(slowAnswer)
	}
	// The webhooks race the answer returned below.
	p.schedule(c, events, res.Status, final)
	if disputed {
		p.scheduleDispute(c)
	}
	if lost {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "mock: timeout waiting for the PSP's answer")
	}
	return res, nil
}

// Refund refunds r, part or all of a captured charge, under key
// ("refund-<refund id>"). It succeeds at once and payment.refund.succeeded
// follows, except for a payment whose amount ends in 06: the refund is
// accepted as pending and fails after webhook_delay
// (payment.refund.failed). A second call with the same key refunds nothing
// and answers the refund as it is now. A payment unknown to the PSP or not
// captured there, and a refund of more than is left, are EINVALID.
func (p *Provider) Refund(ctx context.Context, pm pay.Payment, r pay.Refund, key string) (pay.RefundResult, error) {
	if err := ctx.Err(); err != nil {
		return pay.RefundResult{}, pay.Errorf(pay.EPSP, "mock: %v", err)
	}
	switch {
	case key == "":
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mock: idempotency key is required")
	case r.Amount <= 0:
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mock: refund amount must be positive, got %d", r.Amount)
	}
	if err := p.loadRefund(ctx, key); err != nil {
		return pay.RefundResult{}, err
	}
	c, err := p.lookup(ctx, pm)
	if err != nil {
		return pay.RefundResult{}, err
	}
	if rf, ok := p.refunds[key]; ok {
		res := rf.result()
		p.mu.Unlock()
		return res, nil
	}
	switch {
	case c == nil:
		p.mu.Unlock()
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mock: the PSP has no charge for payment %s", pm.ID)
	case c.Status != pay.Captured:
		status := c.Status
		p.mu.Unlock()
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mock: payment %s cannot be refunded: it is %s at the PSP", pm.ID, status)
	case p.disputed[c.Key]:
		p.mu.Unlock()
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mock: payment %s is disputed at the PSP: a disputed charge cannot be refunded", pm.ID)
	case r.Amount > c.Amount-c.AmountRefunded:
		left := c.Amount - c.AmountRefunded
		p.mu.Unlock()
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mock: refund of %s exceeds what is left of payment %s: %s", pay.FormatAmount(r.Amount, c.Currency), pm.ID, pay.FormatAmount(left, c.Currency))
	}
	rf := &refund{key: key, id: r.ID, paymentID: c.PaymentID, ref: "mock_re_" + digest(key), amount: r.Amount, currency: c.Currency, status: pay.RefundSucceeded}
	if c.Amount%100 == 6 {
		rf.status = pay.RefundPending // the bank turns it down later
	}
	c.AmountRefunded += r.Amount
	if c.AmountRefunded == c.Amount {
		c.Status = pay.Refunded
	}
	c.refundKey = key
	c.Refunds++
	p.refunds[key] = rf
	p.stats.Refunds++
	res := rf.result()
	recs := []store.PSPCharge{c.record(), rf.record()}
	p.mu.Unlock()
	for _, rec := range recs {
		if err := p.save(ctx, rec); err != nil {
			return pay.RefundResult{}, err
		}
	}
	p.scheduleRefund(c, rf)
	return res, nil
}

// RefundStatus answers the PSP's status of a refund, found by its key
// ("refund-<refund id>"); one the PSP does not know is Found false.
func (p *Provider) RefundStatus(ctx context.Context, pm pay.Payment, r pay.Refund) (pay.RefundResult, error) {
	if err := ctx.Err(); err != nil {
		return pay.RefundResult{}, pay.Errorf(pay.EPSP, "mock: %v", err)
	}
	key := pay.RefundKey(r.ID)
	if err := p.loadRefund(ctx, key); err != nil {
		return pay.RefundResult{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rf, ok := p.refunds[key]
	if !ok {
		return pay.RefundResult{Found: false, Raw: "mock refund=" + r.ID + " not found"}, nil
	}
	return rf.result(), nil
}

// Status answers the PSP's current status of a payment, found by its
// provider reference or else by its charge key ("charge-<payment_id>"). A
// payment the PSP does not know is Found false with a nil error.
func (p *Provider) Status(ctx context.Context, pm pay.Payment) (pay.PSPResult, error) {
	if err := ctx.Err(); err != nil {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "mock: %v", err)
	}
	c, err := p.lookup(ctx, pm)
	if err != nil {
		return pay.PSPResult{}, err
	}
	defer p.mu.Unlock()
	if c == nil {
		return pay.PSPResult{Found: false, Raw: "mock status=not_found"}, nil
	}
	return c.result(), nil
}

// Cancel is EUNSUPPORTED: the mock has no cancel API, so the sweeper
// expires an open payment itself.
func (p *Provider) Cancel(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	return pay.NoCancel(Name)
}

// Flow accepts only "": the mock takes payments one way.
func (p *Provider) Flow(pm pay.Payment) (string, error) { return pay.OneFlow(Name, pm) }

// ParseWebhook verifies a webhook with the mock's secret and parses it (see
// stdwebhook.Verifier.Parse).
func (p *Provider) ParseWebhook(body []byte, header http.Header, now time.Time) (pay.WebhookEvent, error) {
	return p.verifier.Parse(body, header, now)
}

// Charge returns the PSP's record of the charge made with key.
func (p *Provider) Charge(key string) (Charge, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.byKey[key]
	if !ok {
		return Charge{}, false
	}
	return c.Charge, true
}

// Charges returns how often money was taken with key: 1 once a Create with
// the key went through (replays included), 0 for an unknown key.
func (p *Provider) Charges(key string) int {
	c, _ := p.Charge(key)
	return c.Charges
}

// Stats returns what the PSP did so far.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Wait blocks until every webhook scheduled so far is delivered or dropped.
func (p *Provider) Wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.inflight > 0 {
		p.idle.Wait()
	}
}

// Close stops pending webhook deliveries and waits for their goroutines.
// Afterwards the PSP still answers Create, Refund and Status but sends no
// webhook. Close always returns nil.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.Wait()
	p.Client.CloseIdleConnections()
	return nil
}

// Len returns how many charges the PSP remembers: at most
// Config.MaxCharges.
func (p *Provider) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byKey)
}

// rememberLocked records a new charge, forgetting the oldest one if the
// PSP already remembers MaxCharges.
func (p *Provider) rememberLocked(c *charge) {
	if len(p.order) < p.maxCharges {
		p.order = append(p.order, c)
	} else {
		old := p.order[p.oldest]
		delete(p.byKey, old.Key)
		delete(p.disputed, old.Key)
		delete(p.byRef, old.ProviderRef)
		for k, rf := range p.refunds {
			if rf.paymentID == old.PaymentID {
				delete(p.refunds, k)
			}
		}
		p.order[p.oldest] = c
		p.oldest = (p.oldest + 1) % p.maxCharges
		p.stats.Forgotten++
	}
	p.byKey[c.Key] = c
	p.byRef[c.ProviderRef] = c
}

// lookup is lookupLocked that, with a store, reads a charge it does not
// remember from the store. It returns with p.mu held, whatever it returns.
func (p *Provider) lookup(ctx context.Context, pm pay.Payment) (*charge, error) {
	p.mu.Lock()
	c := p.lookupLocked(pm)
	if c != nil || p.store == nil || pm.ID == "" {
		return c, nil
	}
	p.mu.Unlock()
	err := p.load(ctx, "charge-"+pm.ID)
	p.mu.Lock()
	if err != nil {
		return nil, err
	}
	return p.lookupLocked(pm), nil
}

// stored reads the record of key (a charge or a refund, what) from the
// store; ok is false if the store has none.
func (p *Provider) stored(ctx context.Context, key, what string) (rec store.PSPCharge, ok bool, err error) {
	err = p.store.View(ctx, func(tx store.Tx) (err error) { rec, err = tx.PSPCharge(key); return err })
	switch {
	case pay.ErrorCode(err) == pay.ENOTFOUND:
		return rec, false, nil
	case err != nil:
		return rec, false, pay.Errorf(pay.EPSP, "mock: read %s %s: %s", what, key, pay.ErrorMessage(err))
	}
	return rec, true, nil
}

// load reads the charge of key from the store into memory, if the store
// has it and memory does not.
func (p *Provider) load(ctx context.Context, key string) error {
	rec, ok, err := p.stored(ctx, key, "charge")
	if err != nil || !ok {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byKey[key]; !ok {
		p.rememberLocked(&charge{
			Charge: Charge{
				Key: rec.Key, PaymentID: rec.PaymentID, ProviderRef: rec.ProviderRef, Amount: rec.Amount,
				Currency: rec.Currency, Status: rec.Status, Charges: 1, Calls: rec.Calls, Refunds: rec.Refunds,
				AmountRefunded: rec.AmountRefunded,
			},
			clientSecret: rec.ClientSecret, redirectURL: rec.RedirectURL, refundKey: rec.RefundKey,
		})
	}
	return nil
}

// save writes a charge to the store, if there is one. A charge the store
// did not take is an error of the PSP's: the caller does not know whether
// it was made, as with a real PSP that timed out, and a retry with the
// same key answers it from memory.
func (p *Provider) save(ctx context.Context, rec store.PSPCharge) error {
	if p.store == nil {
		return nil
	}
	if err := p.store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error { return tx.PutPSPCharge(rec) }); err != nil {
		return pay.Errorf(pay.EPSP, "mock: record charge %s: %s", rec.Key, pay.ErrorMessage(err))
	}
	return nil
}

// record is c as the store keeps it. p.mu must be held.
func (c *charge) record() store.PSPCharge {
	return store.PSPCharge{
		Key: c.Key, PaymentID: c.PaymentID, ProviderRef: c.ProviderRef, Amount: c.Amount, Currency: c.Currency,
		Status: c.Status, ClientSecret: c.clientSecret, RedirectURL: c.redirectURL, RefundKey: c.refundKey,
		Calls: c.Calls, Refunds: c.Refunds, AmountRefunded: c.AmountRefunded,
	}
}

// lookupLocked finds a payment's charge by provider reference, else by its
// charge key.
func (p *Provider) lookupLocked(pm pay.Payment) *charge {
	if c, ok := p.byRef[pm.ProviderRef]; ok && pm.ProviderRef != "" {
		return c
	}
	if pm.ID == "" {
		return nil
	}
	return p.byKey["charge-"+pm.ID]
}

// clientSecretLocked makes a client secret the way Stripe does: the
// reference, "_secret_" and a random part.
func (p *Provider) clientSecretLocked(ref string) string {
	return fmt.Sprintf("%s_secret_%016x", ref, p.rnd.Uint64())
}

// digest returns 24 hex digits of the SHA-256 of s: stable ids derived from
// business data.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}
