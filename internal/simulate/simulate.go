// Package simulate runs a complete paystate on a temporary database against
// the mock PSP in chaos mode — webhooks racing the sync answer in both
// orders, duplicated and reordered webhooks, lost sync answers, duplicate
// client requests, partial refunds racing each other on one payment
// (several at once whose amounts add up to more than the payment),
// refunds that fail after they were accepted, disputes opened and lost,
// the sweeper on a short clock — drives it over
// HTTP only, and checks the invariants paystate promises: no secret for a
// final payment, no effect applied twice, no lost update, and a history
// that verifies. Its checkout mode (ModeCheckout, checkout.go) runs the
// stripe provider's Checkout Sessions against stripefake.Fake, a Stripe
// API served inside the process. It is the engine of `paystate simulate`
// (cli/simulate.go); its merchant endpoint (Merchant) serves the crash
// loop too.
package simulate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Options of a simulation.
type Options struct {
	// Mode is ModeMock (the default) or ModeCheckout.
	Mode        string
	N           int   // payments; default 1000
	Concurrency int   // client goroutines; default 32
	Seed        int64 // 0: random
	// Settle bounds the wait for webhooks, the sweeper and the ripple
	// workers after the load; default 2 minutes.
	Settle time.Duration
	Logger zerolog.Logger
	// Progress, if set, is called as the simulation goes: with stage
	// "payments" after each payment created (done of total = N), then
	// with stage "settle" at each look at how many of them are final or
	// on the review queue. It may be called from several goroutines at
	// once.
	Progress func(stage string, done, total int)
}

// Report is what a simulation measured. The invariant fields must be zero.
type Report struct {
	Mode               string
	Payments           int
	Creates            int // create requests sent, duplicates included
	Races              int // payments whose webhook was applied before their sync answer
	VersionConflicts   int // version conflicts resolved by a re-read
	DuplicatesAbsorbed int // duplicate webhooks, replayed requests and duplicate observations absorbed
	DriftCorrected     int // payments the sweeper corrected against the PSP
	Refunds            int // refunds accepted (201), partial ones included
	PartialRefunds     int // refunds of part of a payment accepted
	RefundsRefused     int // refunds answered 409 refund_exceeds_amount: they did not fit
	RefundsFailed      int // refunds the PSP failed after accepting them (amounts ending 06)
	RefundsDisputed    int // refunds answered 409 charge_disputed: the payment's dispute is open or lost
	NullAmounts        int // refunds with "amount": null answered 400 naming amount
	Disputes           int // disputes opened (amounts ending 05)
	DisputesLost       int
	ReviewQueue        int // payments left for a human

	// The checkout mode's outcomes at Stripe, and the Stripe events sent
	// (duplicates included).
	CheckoutPaid           int // completed, paid
	CheckoutAsyncSucceeded int // completed unpaid, then async_payment_succeeded
	CheckoutAsyncFailed    int // completed unpaid, then async_payment_failed
	CheckoutExpired        int // checkout.session.expired
	CheckoutLeftOpen       int // no event: expired by the sweeper
	CheckoutPaidSilently   int // paid without an event: found by the sweeper
	StripeEvents           int

	SecretsForFinal int // invariant: client secrets or redirect URLs returned for final payments
	EffectsTwice    int // invariant: effects applied more than once
	LostUpdates     int // invariant: final states that disagree with the PSP, versions that went back, verify mismatches
	Unsettled       int // invariant: payments still open after the settle time
	// RefundedTooMuch counts payments whose succeeded and pending
	// refunds exceed their amount, here or at the PSP (invariant).
	RefundedTooMuch int
	// PaidBackTooMuch counts payments whose succeeded and pending
	// refunds and open or lost disputes together exceed their amount,
	// from the stored refunds and disputes (invariant): the customer
	// would have been paid back by the merchant and by the bank.
	PaidBackTooMuch int
	// WrongRefundAnswers counts refund answers against the rules: a
	// refund of a payment whose dispute is open or lost, or with a null
	// amount, that was not refused as it must be (invariant).
	WrongRefundAnswers int
	// LedgerUnbalanced counts ledger figures that are off: a currency
	// whose accounts do not sum to zero, revenue other than what was
	// captured less what was refunded, losses other than the lost
	// disputes (invariant).
	LedgerUnbalanced int
	// CapturedTwice counts payments whose capture (announced by a
	// Checkout Session and its PaymentIntent, each perhaps twice) is not
	// exactly one transition to captured, one payment.captured outbox
	// record and one ledger posting, or a payment never captured that has
	// any (invariant).
	CapturedTwice int
	Problems      []string

	Duration   time.Duration
	Throughput float64 // payments per second during the load
	P50        time.Duration
	P95        time.Duration
	P99        time.Duration
}

// OK reports whether every invariant held.
func (r Report) OK() bool {
	return r.SecretsForFinal == 0 && r.EffectsTwice == 0 && r.LostUpdates == 0 && r.Unsettled == 0 &&
		r.RefundedTooMuch == 0 && r.LedgerUnbalanced == 0 && r.PaidBackTooMuch == 0 && r.WrongRefundAnswers == 0 &&
		r.CapturedTwice == 0
}

// Print writes the report as a table.
func (r Report) Print(w io.Writer) {
	row := func(name string, v any, must string) {
		fmt.Fprintf(w, "  %-44s %12v  %s\n", name, v, must)
	}
	fmt.Fprintln(w, "paystate simulate", r.Mode)
	row("payments", r.Payments, "")
	if r.Mode == ModeCheckout {
		row("sessions completed, paid", r.CheckoutPaid, "")
		row("sessions completed unpaid, async succeeded", r.CheckoutAsyncSucceeded, "")
		row("sessions completed unpaid, async failed", r.CheckoutAsyncFailed, "")
		row("sessions expired (event)", r.CheckoutExpired, "")
		row("sessions left open (expired by the sweeper)", r.CheckoutLeftOpen, "")
		row("sessions paid without an event (sweeper)", r.CheckoutPaidSilently, "")
		row("stripe events sent (with duplicates)", r.StripeEvents, "")
	}
	row("create requests (with duplicates)", r.Creates, "")
	row("refunds", r.Refunds, "")
	row("partial refunds", r.PartialRefunds, "")
	row("refunds refused (would exceed the amount)", r.RefundsRefused, "")
	row("refunds failed after acceptance", r.RefundsFailed, "")
	row("refunds refused (charge disputed)", r.RefundsDisputed, "")
	row("refunds with a null amount refused", r.NullAmounts, "")
	row("disputes (lost)", fmt.Sprintf("%d (%d)", r.Disputes, r.DisputesLost), "")
	row("races (webhook before sync answer)", r.Races, "")
	row("version conflicts resolved", r.VersionConflicts, "")
	row("duplicates absorbed", r.DuplicatesAbsorbed, "")
	row("drift corrected by the sweeper", r.DriftCorrected, "")
	row("left on the review queue", r.ReviewQueue, "")
	row("secrets returned for final payments", r.SecretsForFinal, "(must be 0)")
	row("effects applied twice", r.EffectsTwice, "(must be 0)")
	row("lost updates", r.LostUpdates, "(must be 0)")
	row("payments not settled", r.Unsettled, "(must be 0)")
	row("refunded more than captured", r.RefundedTooMuch, "(must be 0)")
	row("refunded or charged back more than captured", r.PaidBackTooMuch, "(must be 0)")
	row("refunds answered against the rules", r.WrongRefundAnswers, "(must be 0)")
	row("ledger unbalanced", r.LedgerUnbalanced, "(must be 0)")
	row("captures announced twice counted twice", r.CapturedTwice, "(must be 0)")
	row("throughput (payments/s)", fmt.Sprintf("%.0f", r.Throughput), "")
	row("create latency p50", r.P50.Round(time.Microsecond), "")
	row("create latency p95", r.P95.Round(time.Microsecond), "")
	row("create latency p99", r.P99.Round(time.Microsecond), "")
	row("wall time", r.Duration.Round(time.Millisecond), "")
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  problem:", p)
	}
	if r.OK() {
		fmt.Fprintln(w, "every invariant held")
	} else {
		fmt.Fprintln(w, "INVARIANT BROKEN")
	}
}

// sim is one run.
type sim struct {
	opts   Options
	m      *daemon.Main
	base   string
	key    string
	hc     *http.Client
	rnd    *mrand.Rand
	rndMu  sync.Mutex
	report Report
	mu     sync.Mutex

	// What the clients saw, per payment: every version answered, in order.
	seen map[string][]seenState
	// The merchant's endpoint for paystate's webhooks.
	merchant *Merchant
	// Expected loyalty points per customer.
	refunded map[string]bool
	// dupBase is the inbox's duplicate counter before the run (metrics are
	// process-wide).
	dupBase uint64
	// co is the checkout mode's state, nil in the mock mode.
	co *checkout
}

type seenState struct {
	version uint64
	status  pay.Status
}

// Run runs one simulation.
func Run(ctx context.Context, opts Options) (Report, error) {
	opts.N = defaults.Or(opts.N, 1000)
	opts.Concurrency = defaults.Or(opts.Concurrency, 32)
	opts.Settle = defaults.Or(opts.Settle, 2*time.Minute)
	switch opts.Mode {
	case "":
		opts.Mode = ModeMock
	case ModeMock, ModeCheckout:
	default:
		return Report{}, fmt.Errorf("simulate: mode %q: want %q or %q", opts.Mode, ModeMock, ModeCheckout)
	}
	seed := uint64(opts.Seed)
	if seed == 0 {
		seed = mrand.Uint64()
	}
	s := &sim{
		opts: opts, rnd: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		seen:     map[string][]seenState{},
		refunded: map[string]bool{},
		hc:       &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: opts.Concurrency * 2}},
	}
	defer s.hc.CloseIdleConnections()
	s.report.Mode = opts.Mode
	if opts.Mode == ModeCheckout {
		s.co = &checkout{}
	}
	s.dupBase = s.duplicates().Get()
	start := time.Now()

	dir, err := os.MkdirTemp("", "paystate-simulate-")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(dir)

	// The merchant's webhook endpoint.
	whSecret := "whsec_" + base64.StdEncoding.EncodeToString(randBytes(32))
	if s.merchant, err = NewMerchant(whSecret); err != nil {
		return Report{}, err
	}
	merchant := httptest.NewServer(s.merchant)
	defer merchant.Close()

	// A complete paystate in chaos mode.
	s.key = "sim_" + base64.RawURLEncoding.EncodeToString(randBytes(24))
	cfg := config.DefaultConfig()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Path = filepath.Join(dir, "paystate.db")
	cfg.Auth.APIKeys = []string{s.key}
	// An API key is production: the mock must be allowed, and no
	// provider may keep the public development secret.
	cfg.Providers.Mock.AllowPublic = true
	cfg.Providers.Mock.WebhookSecret = "whsec_" + base64.StdEncoding.EncodeToString(randBytes(32))
	cfg.Providers.Standard = nil
	cfg.Providers.Mock.WebhookDelay = config.Duration{}
	cfg.Providers.Mock.DuplicateRate = 0.3
	cfg.Providers.Mock.Reorder = true
	cfg.Providers.Mock.WebhookFirstRate = 0.3
	cfg.Providers.Mock.DisputeAfter = config.Duration{Duration: 200 * time.Millisecond}
	cfg.Sweeper.Interval = config.Duration{Duration: 200 * time.Millisecond}
	cfg.Sweeper.MinAge = config.Duration{Duration: 500 * time.Millisecond}
	cfg.Sweeper.RatePerSecond = 500
	cfg.Ripple.BackoffBase = config.Duration{Duration: 20 * time.Millisecond}
	cfg.Ripple.BackoffCap = config.Duration{Duration: 500 * time.Millisecond}
	cfg.Webhooks = []config.Webhook{{URL: merchant.URL + "/paystate", Secret: whSecret,
		Events: []string{"payment.captured", "payment.failed", "payment.refunded", "payment.requires_action", "payment.processing", "payment.finalize_pending", "payment.expired"}}}
	if s.co != nil {
		s.co.configure(&cfg)
		defer s.co.fake.Close()
	}
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	s.m = daemon.New(cfg, opts.Logger)
	if s.co != nil {
		s.m.Now = s.co.now
	}
	if err := s.m.Open(); err != nil {
		return Report{}, err
	}
	s.base = s.m.Server.URL()
	closed := false
	closeDaemon := func() error {
		if closed {
			return nil
		}
		closed = true
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return s.m.Close(cctx)
	}
	defer closeDaemon()

	// The load.
	ids, latencies := s.load(ctx)
	loadTime := time.Since(start)
	s.report.Payments = len(ids)
	if loadTime > 0 {
		s.report.Throughput = float64(len(ids)) / loadTime.Seconds()
	}
	s.report.P50, s.report.P95, s.report.P99 = percentile(latencies, 50), percentile(latencies, 95), percentile(latencies, 99)

	// Settle, try to refund what is disputed, settle again, then check
	// everything. Checkout sessions nobody paid wait for the sweeper: the
	// others settle first, then the clock passes payment.expire_after.
	if s.co != nil {
		if err := s.settle(ctx, s.co.byHook); err != nil {
			return s.report, err
		}
		if err := s.refundCaptured(ctx, s.co.byHook); err != nil {
			return s.report, err
		}
		s.co.expireLeftOpen(cfg.Payment.ExpireAfter.Duration)
	}
	if err := s.settle(ctx, ids); err != nil {
		return s.report, err
	}
	if err := s.refundDisputed(ctx, ids); err != nil {
		return s.report, err
	}
	if err := s.settle(ctx, ids); err != nil {
		return s.report, err
	}
	if err := s.check(ctx, ids); err != nil {
		return s.report, err
	}
	if err := closeDaemon(); err != nil {
		return s.report, err
	}
	s.report.Duration = time.Since(start)
	return s.report, nil
}

// duplicates is the inbox's counter of duplicate webhooks of the run's
// provider.
func (s *sim) duplicates() *metrics.Counter {
	provider := "mock"
	if s.co != nil {
		provider = "stripe"
	}
	return metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_webhooks_total{provider=%q,outcome="duplicate"}`, provider))
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func (s *sim) intn(n int) int {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.rnd.IntN(n)
}

func (s *sim) absorbed() {
	s.mu.Lock()
	s.report.DuplicatesAbsorbed++
	s.mu.Unlock()
}

func (s *sim) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problemLocked(format, args...)
}

// problemLocked is problem with s.mu held.
func (s *sim) problemLocked(format string, args ...any) {
	if len(s.report.Problems) < 20 {
		s.report.Problems = append(s.report.Problems, fmt.Sprintf(format, args...))
	}
}

// answer is a decoded API response.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (a answer) str(k string) string { v, _ := a.body[k].(string); return v }

func (s *sim) do(ctx context.Context, method, path string, body []byte, idemKey string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	res, err := s.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &a.body)
	return a, nil
}

// observe checks one payment answer: no secret for a final payment; it
// records the version seen and returns it.
func (s *sim) observe(a answer) uint64 {
	id := a.str("id")
	if id == "" {
		return 0
	}
	st := pay.Status(a.str("status"))
	if !st.ShowsSecrets() {
		for _, k := range []string{"client_secret", "redirect_url"} {
			if _, ok := a.body[k]; ok {
				s.mu.Lock()
				s.report.SecretsForFinal++
				s.mu.Unlock()
				s.problem("%s returned for %s payment %s", k, st, id)
			}
		}
	}
	v, _ := a.body["version"].(float64)
	s.mu.Lock()
	s.seen[id] = append(s.seen[id], seenState{version: uint64(v), status: st})
	s.mu.Unlock()
	return uint64(v)
}

// monotonic checks that one client's successive answers about a payment
// never go back in version.
func (s *sim) monotonic(id string, prev, next uint64) uint64 {
	if next < prev {
		s.mu.Lock()
		s.report.LostUpdates++
		s.mu.Unlock()
		s.problem("%s: version went back from %d to %d", id, prev, next)
		return prev
	}
	return next
}

// suffixes are the mock's outcomes by the amount's last two digits, with
// their share of the load.
var suffixes = []struct {
	suffix int
	weight int
}{{0, 30}, {1, 10}, {2, 15}, {3, 15}, {4, 10}, {5, 5}, {6, 5}, {57, 10}}

func (s *sim) amount() int64 {
	n := s.intn(100)
	for _, sf := range suffixes {
		if n < sf.weight {
			return int64(100*(10+s.intn(90)) + sf.suffix)
		}
		n -= sf.weight
	}
	return 1057
}

// load creates opts.N payments from opts.Concurrency clients: some
// requests sent twice at once with one key, some refunds, and reads racing
// the writes. It returns the payment ids and the create latencies.
func (s *sim) load(ctx context.Context) ([]string, []time.Duration) {
	var (
		next      atomic.Int64
		created   atomic.Int64
		mu        sync.Mutex
		ids       []string
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	for range s.opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= s.opts.N {
					return
				}
				var id string
				var lat time.Duration
				if s.co != nil {
					id, lat = s.oneCheckout(ctx, i)
				} else {
					id, lat = s.onePayment(ctx, i)
				}
				if s.opts.Progress != nil {
					s.opts.Progress("payments", int(created.Add(1)), s.opts.N)
				}
				if id == "" {
					continue
				}
				mu.Lock()
				ids = append(ids, id)
				latencies = append(latencies, lat)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ids, latencies
}

func (s *sim) onePayment(ctx context.Context, i int) (string, time.Duration) {
	body := []byte(fmt.Sprintf(`{"order_id":"sim-%d","amount":%d,"currency":"EUR","customer":{"id":"cus_%d"}}`, i, s.amount(), i%40))
	key := fmt.Sprintf("sim-%d", i)
	dup := s.intn(10) == 0

	var dupAnswer answer
	var dupErr error
	var dupWG sync.WaitGroup
	if dup {
		dupWG.Add(1)
		go func() {
			defer dupWG.Done()
			dupAnswer, dupErr = s.do(ctx, "POST", "/v1/payments", body, key)
		}()
	}
	start := time.Now()
	a, err := s.do(ctx, "POST", "/v1/payments", body, key)
	lat := time.Since(start)
	dupWG.Wait()
	s.mu.Lock()
	s.report.Creates++
	if dup {
		s.report.Creates++
	}
	s.mu.Unlock()
	if err != nil {
		s.problem("create: %v", err)
		return "", 0
	}
	if a.status == 409 { // the duplicate holds the key: retry, as a client would
		a, err = s.do(ctx, "POST", "/v1/payments", body, key)
		if err != nil || a.status != 201 {
			s.problem("create retry: %v %d", err, a.status)
			return "", lat
		}
	} else if a.status != 201 {
		s.problem("create answered %d %s", a.status, a.raw)
		return "", lat
	}
	if dup && dupErr == nil {
		switch {
		case dupAnswer.status == 409:
			s.absorbed()
		case dupAnswer.status == 201 && dupAnswer.str("id") == a.str("id"):
			s.observe(dupAnswer)
			if dupAnswer.header.Get("Idempotent-Replayed") == "true" || a.header.Get("Idempotent-Replayed") == "true" {
				s.absorbed()
			}
		default:
			s.problem("one idempotency key made two answers: %d %s and %d %s", a.status, a.raw, dupAnswer.status, dupAnswer.raw)
			s.mu.Lock()
			s.report.LostUpdates++
			s.mu.Unlock()
		}
	}
	id := a.str("id")
	version := s.observe(a)

	// A read racing the webhooks.
	if r, err := s.do(ctx, "GET", "/v1/payments/"+id, nil, ""); err == nil && r.status == 200 {
		version = s.monotonic(id, version, s.observe(r))
	}
	// Some captured payments are refunded: in full, or in parts sent at
	// once whose amounts may add up to more than the payment.
	if a.str("status") == "captured" {
		switch n := s.intn(10); {
		case n == 0:
			s.refund(ctx, id, nil, "refund-"+key)
		case n == 3:
			// Only an absent amount means the rest: null is refused.
			body := `{"amount":null}`
			if s.intn(2) == 0 {
				body = `{"amount":null,"reason":"sim null"}`
			}
			s.refundNull(ctx, id, []byte(body), "refund-null-"+key)
		case n <= 2:
			amount := int64(a.body["amount"].(float64))
			var wg sync.WaitGroup
			for j := range 2 + s.intn(3) {
				part := amount/4 + int64(s.intn(int(amount/4)+1))
				body := []byte(fmt.Sprintf(`{"amount":%d,"reason":"sim part %d"}`, part, j))
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.refund(ctx, id, body, fmt.Sprintf("refund-%s-%d", key, j))
				}()
			}
			wg.Wait()
		}
		if r, err := s.do(ctx, "GET", "/v1/payments/"+id, nil, ""); err == nil && r.status == 200 {
			s.monotonic(id, version, s.observe(r))
		}
	}
	return id, lat
}

// refund asks for a refund of payment id (body nil: what is left) and
// counts the answer: 201 accepted, 409 refund_exceeds_amount refused.
func (s *sim) refund(ctx context.Context, id string, body []byte, key string) {
	s.askRefund(ctx, id, body, key, func(r answer) string {
		switch {
		case r.status == 201:
			s.report.Refunds++
			if body != nil {
				s.report.PartialRefunds++
			}
			s.refunded[id] = true
		case r.status == 409 && (bytes.Contains(r.raw, []byte(pay.ERefundExceeds)) || bytes.Contains(r.raw, []byte(`"code":"conflict"`))):
			// It did not fit, or the parts before it refunded the payment in full.
			s.report.RefundsRefused++
		case r.status == 409 && bytes.Contains(r.raw, []byte(`"code":"`+pay.EChargeDisputed+`"`)):
			// The mock's bank disputed it (05) before this refund.
			s.report.RefundsDisputed++
		case r.status == 400 && bytes.Contains(r.raw, []byte("disputed at the PSP")):
			// The PSP knew of the dispute before paystate did: it refused,
			// and the refund failed.
			s.report.RefundsDisputed++
		default:
			return "unexpected"
		}
		return ""
	})
}

// refundNull asks for a refund with "amount": null, which must be 400
// naming amount, with nothing refunded.
func (s *sim) refundNull(ctx context.Context, id string, body []byte, key string) {
	s.refundRefused(ctx, id, body, key, &s.report.NullAmounts, "400 naming amount", func(r answer) bool {
		return r.status == 400 && bytes.Contains(r.raw, []byte(`"param":"amount"`))
	})
}

// refundRefused asks for a refund the rules refuse: an answer refused
// reports as the refusal counts in *count, any other is a wrong answer
// (want says what was expected).
func (s *sim) refundRefused(ctx context.Context, id string, body []byte, key string, count *int, want string, refused func(answer) bool) {
	s.askRefund(ctx, id, body, key, func(r answer) string {
		if refused(r) {
			*count++
			return ""
		}
		s.report.WrongRefundAnswers++
		if r.status == 201 {
			s.refunded[id] = true
		}
		return "want " + want
	})
}

// askRefund sends a refund request and hands its answer to count, under
// s.mu: count counts it and returns "" or what is wrong with it, a
// problem.
func (s *sim) askRefund(ctx context.Context, id string, body []byte, key string, count func(answer) string) {
	r, err := s.do(ctx, "POST", "/v1/payments/"+id+"/refund", body, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.problemLocked("refund %s: %v", id, err)
		return
	}
	if wrong := count(r); wrong != "" {
		s.problemLocked("refund %s with %q answered %d %s: %s", id, body, r.status, r.raw, wrong)
	}
}

// refundDisputed asks for refunds of every captured payment whose dispute
// is open or lost, as the store says (verify checks the payment's field
// against its disputes): each must be 409 charge_disputed.
func (s *sim) refundDisputed(ctx context.Context, ids []string) error {
	disputed, err := s.payments(ctx, ids, func(p pay.Payment) bool { return p.Status == pay.Captured && p.RefundBlocked() })
	if err != nil {
		return err
	}
	for i, p := range disputed {
		body := []byte(nil) // the rest
		if i%2 == 1 {
			body = []byte(`{"amount":1,"reason":"sim after a dispute"}`)
		}
		s.refundRefused(ctx, p.ID, body, "refund-disputed-"+p.ID, &s.report.RefundsDisputed, "409 "+pay.EChargeDisputed, func(r answer) bool {
			return r.status == 409 && bytes.Contains(r.raw, []byte(`"code":"`+pay.EChargeDisputed+`"`))
		})
	}
	return nil
}

// settle waits until every payment is final or on the review queue and
// the inbox and the ripple workers have nothing left.
func (s *sim) settle(ctx context.Context, ids []string) error {
	deadline := time.Now().Add(s.opts.Settle)
	for {
		open, err := s.openPayments(ctx, ids)
		if err != nil {
			return err
		}
		pending, err := s.pendingWork(ctx)
		if err != nil {
			return err
		}
		if s.opts.Progress != nil {
			s.opts.Progress("settle", len(ids)-len(open), len(ids))
		}
		if len(open) == 0 && pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			s.report.Unsettled = len(open)
			for _, id := range open[:min(len(open), 5)] {
				s.problem("payment %s still open after %s", id, s.opts.Settle)
			}
			if pending > 0 {
				s.problem("%d webhooks or deliveries still pending after %s", pending, s.opts.Settle)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// payments reads the payments of ids, in their order, and returns those
// keep accepts.
func (s *sim) payments(ctx context.Context, ids []string, keep func(pay.Payment) bool) ([]pay.Payment, error) {
	var out []pay.Payment
	err := s.m.Store.View(ctx, func(tx store.Tx) error {
		for _, id := range ids {
			p, err := tx.Payment(id)
			if err != nil {
				return err
			}
			if keep(p) {
				out = append(out, p)
			}
		}
		return nil
	})
	return out, err
}

// openPayments lists payments neither final nor on the review queue.
func (s *sim) openPayments(ctx context.Context, ids []string) ([]string, error) {
	var open []string
	review := map[string]bool{}
	err := s.m.Store.View(ctx, func(tx store.Tx) error {
		items, err := tx.ListReview()
		if err != nil {
			return err
		}
		for _, it := range items {
			review[it.PaymentID] = true
		}
		for _, id := range ids {
			p, err := tx.Payment(id)
			if err != nil {
				return err
			}
			if review[id] {
				continue
			}
			if !p.Status.Terminal() || p.AmountRefundPending > 0 {
				open = append(open, id)
				continue
			}
			// A payment the mock disputes (05) settles when its dispute
			// is closed.
			if p.Status == pay.Captured && p.Amount%100 == 5 {
				ds, err := tx.DisputesForPayment(id)
				if err != nil {
					return err
				}
				if len(ds) == 0 || !ds[0].Status.Closed() {
					open = append(open, id)
				}
			}
		}
		return nil
	})
	return open, err
}

// pendingWork counts webhooks not yet applied, outbox records not yet
// fanned out and deliveries not yet done.
func (s *sim) pendingWork(ctx context.Context) (int, error) {
	n := 0
	err := s.m.Store.View(ctx, func(tx store.Tx) error {
		in, err := tx.PendingInbox(time.Now().Add(24*time.Hour), 1000)
		if err != nil {
			return err
		}
		ds, _, err := tx.ListDeliveries(pay.DeliveryFilter{State: pay.DeliveryPending, Limit: 1000})
		if err != nil {
			return err
		}
		cur, err := tx.RippleCursor()
		if err != nil {
			return err
		}
		recs, err := tx.OutboxAfter(cur, 1000)
		if err != nil {
			return err
		}
		n = len(in) + len(ds) + len(recs)
		return nil
	})
	return n, err
}

// check computes the report's counts and invariants from what the clients
// saw, the PSP's truth, the merchant's endpoint and the database.
func (s *sim) check(ctx context.Context, ids []string) error {
	r := &s.report
	points := map[string]int64{}
	var revenue, lost int64 // what merchant_revenue and dispute_losses must hold (EUR)
	err := s.m.Store.View(ctx, func(tx store.Tx) error {
		items, err := tx.ListReview()
		if err != nil {
			return err
		}
		inReview := map[string]bool{}
		for _, it := range items {
			inReview[it.PaymentID] = true
		}
		r.ReviewQueue = len(inReview)
		postings, err := capturePostings(tx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			p, err := tx.Payment(id)
			if err != nil {
				return err
			}
			steps, err := tx.Steps(id)
			if err != nil {
				return err
			}
			if s.co != nil {
				s.countSteps(steps)
				if err := s.checkCheckout(tx, p, steps, postings); err != nil {
					return err
				}
			} else {
				s.checkPayment(p, steps, inReview[id])
				if err := s.countCaptures(tx, p, steps, postings); err != nil {
					return err
				}
			}
			if p.Customer.ID != "" {
				points[p.Customer.ID] += 0
				if p.Status == pay.Captured || p.Status == pay.Refunded {
					// The capture's points less the refunds' exact share.
					full := p.Amount / 100
					points[p.Customer.ID] += full - full*p.AmountRefunded/p.Amount
				}
			}
			if p.Status == pay.Captured || p.Status == pay.Refunded {
				revenue -= p.Amount - p.AmountRefunded
			}
			if err := s.checkMoney(tx, p, &lost); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	// One version is one state: two answers with the same version and
	// different statuses would be a lost update.
	for id, seen := range s.seen {
		last := map[uint64]pay.Status{}
		for _, st := range seen {
			if prev, ok := last[st.version]; ok && prev != st.status {
				r.LostUpdates++
				s.problem("%s: version %d answered as %s and as %s", id, st.version, prev, st.status)
			}
			last[st.version] = st.status
		}
	}

	// Effects: every merchant webhook event arrived at most once, and one
	// event per (payment, type); loyalty points match the captures.
	for _, p := range s.merchant.Twice() {
		r.EffectsTwice++
		s.problem("%s", p)
	}
	for _, why := range s.merchant.Rejected() {
		s.problem("merchant webhook failed verification: %s", why)
	}
	for cus, want := range points {
		a, err := s.do(ctx, "GET", "/v1/customers/"+cus, nil, "")
		if err != nil {
			return err
		}
		got, _ := a.body["points"].(float64)
		if int64(got) != want {
			r.EffectsTwice++
			s.problem("customer %s has %v loyalty points, captures and refunds say %d", cus, got, want)
		}
	}

	// The ledger: every currency sums to zero; revenue is what was
	// captured less what was refunded, losses the lost disputes.
	err = s.m.Store.View(ctx, func(tx store.Tx) error {
		bs, err := tx.LedgerBalances()
		if err != nil {
			return err
		}
		sums := map[string]int64{}
		var gotRevenue, gotLost int64
		for _, b := range bs {
			sums[b.Currency] += b.Amount
			if b.Currency == "EUR" && b.Account == pay.AccountMerchantRevenue {
				gotRevenue = b.Amount
			}
			if b.Currency == "EUR" && b.Account == pay.AccountDisputeLosses {
				gotLost = b.Amount
			}
		}
		for cur, sum := range sums {
			if sum != 0 {
				r.LedgerUnbalanced++
				s.problem("ledger in %s sums to %d", cur, sum)
			}
		}
		if gotRevenue != revenue {
			r.LedgerUnbalanced++
			s.problem("merchant_revenue is %d, captures less refunds say %d", gotRevenue, revenue)
		}
		if gotLost != lost {
			r.LedgerUnbalanced++
			s.problem("dispute_losses is %d, the lost disputes say %d", gotLost, lost)
		}
		return nil
	})
	if err != nil {
		return err
	}

	r.DuplicatesAbsorbed += int(s.duplicates().Get() - s.dupBase)

	// The database agrees with its own history.
	rep, err := verify.Run(ctx, s.m.Store)
	if err != nil {
		return err
	}
	for _, m := range rep.Mismatches {
		r.LostUpdates++
		s.problem("verify: %s", m)
	}
	return nil
}

// checkPayment compares a payment with the PSP's truth and counts what its
// timeline shows.
func (s *sim) checkPayment(p pay.Payment, steps []pay.Step, inReview bool) {
	r := &s.report
	s.countSteps(steps)
	if inReview {
		return
	}
	c, ok := s.m.Mock.Charge("charge-" + p.ID)
	if !ok {
		r.LostUpdates++
		s.problem("%s: the PSP has no charge for it", p.ID)
		return
	}
	if c.Status != p.Status {
		r.LostUpdates++
		s.problem("%s: paystate says %s, the PSP says %s", p.ID, p.Status, c.Status)
	}
	if c.Charges != 1 {
		r.LostUpdates++
		s.problem("%s: charged %d times at the PSP", p.ID, c.Charges)
	}
}

// countSteps counts what a payment's timeline shows: version conflicts,
// duplicates, corrections by the sweeper, webhooks before the sync answer.
func (s *sim) countSteps(steps []pay.Step) {
	r := &s.report
	syncSeen := false
	for _, st := range steps {
		switch {
		case st.Kind == pay.StepConflict:
			r.VersionConflicts++
		case st.Kind == pay.StepDuplicate:
			r.DuplicatesAbsorbed++
		case st.Kind == pay.StepTransition && st.Source == pay.SourceSweeper && st.To.Terminal():
			r.DriftCorrected++
		}
		if st.Source == pay.SourceSync {
			syncSeen = true
		}
		if st.Source == pay.SourceWebhook && st.Kind == pay.StepTransition && !syncSeen {
			r.Races++
		}
	}
}

// pspRefunded checks what the PSP (named psp) refunded of a payment's
// charge of amount: no more than the charge, and what paystate says.
func (s *sim) pspRefunded(p pay.Payment, psp string, amount, refunded int64) {
	r := &s.report
	if refunded > amount {
		r.RefundedTooMuch++
		s.problem("%s: %s refunded %s of %s", p.ID, psp, pay.FormatAmount(refunded, p.Currency), pay.FormatAmount(amount, p.Currency))
	}
	if refunded != p.AmountRefunded {
		r.LostUpdates++
		s.problem("%s: paystate refunded %s, %s %s", p.ID, pay.FormatAmount(p.AmountRefunded, p.Currency), psp, pay.FormatAmount(refunded, p.Currency))
	}
}

// checkMoney counts a payment's refunds and disputes and checks that its
// refunds fit in its amount, here and at the PSP; it adds its lost
// disputes to lost.
func (s *sim) checkMoney(tx store.Tx, p pay.Payment, lost *int64) error {
	r := &s.report
	refunds, err := tx.RefundsForPayment(p.ID)
	if err != nil {
		return err
	}
	var held int64
	for _, f := range refunds {
		switch f.Status {
		case pay.RefundFailed:
			r.RefundsFailed++
		default:
			held += f.Amount
		}
	}
	if held > p.Amount || p.AmountRefunded+p.AmountRefundPending > p.Amount {
		r.RefundedTooMuch++
		s.problem("%s: refunds hold %s of an amount of %s", p.ID, pay.FormatAmount(held, p.Currency), pay.FormatAmount(p.Amount, p.Currency))
	}
	if c, ok := s.m.Mock.Charge("charge-" + p.ID); ok {
		s.pspRefunded(p, "the PSP", c.Amount, c.AmountRefunded)
	}
	ds, err := tx.DisputesForPayment(p.ID)
	if err != nil {
		return err
	}
	paidBack := held
	for _, d := range ds {
		r.Disputes++
		if d.Status == pay.DisputeLost {
			r.DisputesLost++
			*lost += d.Amount
		}
		if d.Status.BlocksRefund() {
			paidBack += d.Amount
		}
	}
	if paidBack > p.Amount {
		r.PaidBackTooMuch++
		s.problem("%s: refunds hold %s and disputes %s of an amount of %s", p.ID, pay.FormatAmount(held, p.Currency),
			pay.FormatAmount(paidBack-held, p.Currency), pay.FormatAmount(p.Amount, p.Currency))
	}
	return nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ErrInvariant is returned when a report is not OK.
var ErrInvariant = errors.New("simulate: an invariant broke")
