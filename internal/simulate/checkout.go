package simulate

// The checkout mode: the stripe provider in flow "checkout" against an
// in-process Stripe API (stripefake.Fake on 127.0.0.1), each payment a
// Checkout Session whose outcome arrives as Stripe would send it: the
// session's events and its PaymentIntent's, signed with the webhook secret
// by stripe-go, duplicated and shuffled together, some delivered at once;
// some sessions are left to the sweeper, on a clock moved past
// payment.expire_after.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/store"
)

// Modes of a simulation (Options.Mode).
const (
	ModeMock     = "mock"     // the mock PSP in chaos mode
	ModeCheckout = "checkout" // Stripe Checkout Sessions against an in-process Stripe API
)

// outcome is what happens to one checkout payment at Stripe.
type outcome int

const (
	paidNow        outcome = iota // completed, paid
	asyncSucceeded                // completed unpaid, then async_payment_succeeded
	asyncFailed                   // completed unpaid, then async_payment_failed
	expiredByEvent                // checkout.session.expired
	leftOpen                      // no event: the sweeper expires it past expire_after
	paidSilently                  // paid at Stripe, no event: the sweeper finds it paid
)

// outcomes are the checkout outcomes with their share of the load.
var outcomes = []struct {
	o      outcome
	weight int
}{{paidNow, 30}, {asyncSucceeded, 15}, {asyncFailed, 15}, {expiredByEvent, 15}, {leftOpen, 15}, {paidSilently, 10}}

// checkout is the state of a checkout run.
type checkout struct {
	fake   *stripefake.Fake
	secret string       // the Stripe webhook secret
	offset atomic.Int64 // the daemon's clock: the wall clock plus offset (ns)

	mu     sync.Mutex
	want   map[string]pay.Status // payment id → the final status Stripe's truth says
	byHook []string              // payments whose outcome comes by events
}

// now is the daemon's injected clock.
func (c *checkout) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// configure points cfg at a new Fake with the stripe provider in flow
// checkout, payment.expire_after at its minimum.
func (c *checkout) configure(cfg *config.Config) {
	c.fake = stripefake.Start()
	c.secret = "whsec_" + base64.StdEncoding.EncodeToString(randBytes(32))
	c.want = map[string]pay.Status{}
	cfg.Payment.Provider = stripe.Name
	cfg.Payment.ExpireAfter = config.Duration{Duration: time.Minute}
	cfg.Providers.Stripe = &config.Stripe{
		SecretKey: "sk_test_simulate" + base64.RawURLEncoding.EncodeToString(randBytes(12)), WebhookSecret: c.secret,
		APIBase: c.fake.URL(), Flow: pay.FlowCheckout,
		Checkout: config.StripeCheckout{SuccessURL: "https://shop.example/paid", CancelURL: "https://shop.example/cart"},
	}
}

// expireLeftOpen moves the daemon's clock past payment.expire_after, so
// the sweeper expires the sessions nobody paid.
func (c *checkout) expireLeftOpen(expireAfter time.Duration) {
	c.offset.Add(int64(2 * expireAfter))
}

func (s *sim) pickOutcome() outcome {
	n := s.intn(100)
	for _, o := range outcomes {
		if n < o.weight {
			return o.o
		}
		n -= o.weight
	}
	return paidNow
}

// oneCheckout creates checkout payment i, sets its session at the Fake as
// Stripe would after the customer acted, and delivers its events. It
// returns the payment id and the create latency.
func (s *sim) oneCheckout(ctx context.Context, i int) (string, time.Duration) {
	c := s.co
	amount := int64(100 * (10 + s.intn(90)))
	body := []byte(fmt.Sprintf(`{"order_id":"sim-co-%d","amount":%d,"currency":"EUR","customer":{"id":"cus_%d","email":"c%d@example.com"}}`, i, amount, i%40, i%40))
	start := time.Now()
	a, err := s.do(ctx, "POST", "/v1/payments", body, fmt.Sprintf("sim-co-%d", i))
	lat := time.Since(start)
	s.mu.Lock()
	s.report.Creates++
	s.mu.Unlock()
	if err != nil || a.status != 201 || a.str("status") != string(pay.RequiresAction) {
		s.problem("create answered %v %d %s, want 201 requires_action", err, a.status, a.raw)
		return "", lat
	}
	id, session := a.str("id"), a.str("provider_ref")
	s.observe(a)
	intent := fmt.Sprintf("pi_sim_%d_%s", i, base64.RawURLEncoding.EncodeToString(randBytes(6)))

	o := s.pickOutcome()
	sev := func(typ, payStatus, pi string) event {
		obj := map[string]any{
			"id": session, "object": "checkout.session", "amount_total": amount, "currency": "eur",
			"status": "complete", "payment_status": payStatus, "payment_intent": nil, "payment_link": nil,
			"client_reference_id": id, "metadata": map[string]string{stripe.MetadataPaymentID: id},
		}
		if pi != "" {
			obj["payment_intent"] = pi
		}
		if typ == stripe.TypeSessionExpired {
			obj["status"] = "expired"
		}
		return event{typ: typ, obj: obj}
	}
	pev := func(typ, status string) event {
		return event{typ: typ, obj: map[string]any{
			"id": intent, "object": "payment_intent", "amount": amount, "currency": "eur", "status": status,
			"metadata": map[string]string{stripe.MetadataPaymentID: id},
		}}
	}
	var events []event
	want := pay.Captured
	switch o {
	case paidNow:
		c.fake.SetSession(session, "complete", "paid", intent)
		events = []event{sev(stripe.TypeSessionCompleted, "paid", intent), pev(stripe.TypeSucceeded, "succeeded")}
	case asyncSucceeded:
		c.fake.SetSession(session, "complete", "paid", intent)
		events = []event{sev(stripe.TypeSessionCompleted, "unpaid", intent), pev(stripe.TypeProcessing, "processing"),
			sev(stripe.TypeSessionAsyncSucceeded, "paid", intent), pev(stripe.TypeSucceeded, "succeeded")}
	case asyncFailed:
		c.fake.SetSession(session, "complete", "unpaid", intent)
		events = []event{sev(stripe.TypeSessionCompleted, "unpaid", intent), pev(stripe.TypeProcessing, "processing"),
			sev(stripe.TypeSessionAsyncFailed, "unpaid", intent), pev(stripe.TypePaymentFailed, "requires_payment_method")}
		want = pay.Failed
	case expiredByEvent:
		c.fake.SetSession(session, "expired", "unpaid", "")
		events = []event{sev(stripe.TypeSessionExpired, "unpaid", "")}
		want = pay.Failed
	case leftOpen:
		want = pay.Failed
	case paidSilently:
		c.fake.SetSession(session, "complete", "paid", intent)
	}
	c.mu.Lock()
	c.want[id] = want
	if len(events) > 0 {
		c.byHook = append(c.byHook, id)
	}
	c.mu.Unlock()
	s.mu.Lock()
	*s.report.outcomeCount(o) += 1
	s.mu.Unlock()

	// Each event once or more, all of them shuffled together: the
	// session's and the PaymentIntent's in any order; some sent at once.
	var seq [][]byte
	for k, ev := range events {
		b := ev.body(fmt.Sprintf("evt_sim_%s_%d", id, k))
		for range 1 + s.intn(3) {
			seq = append(seq, b)
		}
	}
	s.rndMu.Lock()
	s.rnd.Shuffle(len(seq), func(a, b int) { seq[a], seq[b] = seq[b], seq[a] })
	s.rndMu.Unlock()
	if s.intn(3) == 0 {
		var wg sync.WaitGroup
		for _, b := range seq {
			wg.Go(func() { s.stripeWebhook(ctx, id, b) })
		}
		wg.Wait()
	} else {
		for _, b := range seq {
			s.stripeWebhook(ctx, id, b)
		}
	}
	return id, lat
}

// event is a Stripe event about to be sent: its type and data.object.
type event struct {
	typ string
	obj map[string]any
}

// body is the event as Stripe sends it, with id evID.
func (e event) body(evID string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": evID, "object": "event", "api_version": stripe.APIVersion, "created": time.Now().Unix(),
		"livemode": false, "type": e.typ, "data": map[string]any{"object": e.obj},
	})
	return b
}

// stripeWebhook posts one event to /webhooks/stripe, signed now with the
// webhook secret by stripe-go; anything but 200 is a lost update.
func (s *sim) stripeWebhook(ctx context.Context, id string, body []byte) {
	req, err := http.NewRequestWithContext(ctx, "POST", s.base+"/webhooks/stripe", bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", stripefake.Sign(s.co.secret, body, time.Now()))
		var res *http.Response
		if res, err = s.hc.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				err = fmt.Errorf("answered %d", res.StatusCode)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.StripeEvents++
	if err != nil {
		s.report.LostUpdates++
		s.problemLocked("stripe webhook of %s: %v", id, err)
	}
}

// checkCheckout compares a checkout payment with Stripe's truth: its
// status is the one its outcome says, and its capture, announced by the
// session and by its PaymentIntent, counted once.
func (s *sim) checkCheckout(tx store.Tx, p pay.Payment, steps []pay.Step, postings map[string]map[string]int) error {
	r := &s.report
	s.co.mu.Lock()
	want := s.co.want[p.ID]
	s.co.mu.Unlock()
	if got := p.Status; got != want && (got != pay.Refunded || want != pay.Captured) {
		r.LostUpdates++
		s.problem("%s: paystate says %s, Stripe's session says %s", p.ID, p.Status, want)
	}
	s.checkIntent(p)
	return s.countCaptures(tx, p, steps, postings)
}

// countCaptures checks that a payment captured once has exactly one
// transition to captured, one payment.captured outbox record and one
// ledger posting of its capture (postings: payment id → outbox event →
// its lines on merchant_revenue), and one that never was captured none.
func (s *sim) countCaptures(tx store.Tx, p pay.Payment, steps []pay.Step, postings map[string]map[string]int) error {
	want := 0
	if p.Status == pay.Captured || p.Status == pay.Refunded {
		want = 1
	}
	transitions := 0
	for _, st := range steps {
		if st.Kind == pay.StepTransition && st.To == pay.Captured {
			transitions++
		}
	}
	recs, err := tx.OutboxForPayment(p.ID)
	if err != nil {
		return err
	}
	outbox := 0
	for _, rec := range recs {
		if rec.Type == "payment.captured" {
			outbox++
		}
	}
	ledger := 0
	for _, rec := range recs {
		if rec.Type == "payment.captured" {
			ledger += postings[p.ID][rec.ID]
		}
	}
	if transitions != want || outbox != want || ledger != want {
		s.mu.Lock()
		s.report.CapturedTwice++
		s.mu.Unlock()
		s.problem("%s (%s): %d transitions to captured, %d payment.captured records, %d capture postings; want %d of each",
			p.ID, p.Status, transitions, outbox, ledger, want)
	}
	return nil
}

// capturePostings reads the ledger: payment id → outbox event → its
// lines on merchant_revenue.
func capturePostings(tx store.Tx) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	var after uint64
	for {
		es, err := tx.LedgerEntries(after, 1000)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			after = e.Seq
			if e.Account != pay.AccountMerchantRevenue {
				continue
			}
			if out[e.PaymentID] == nil {
				out[e.PaymentID] = map[string]int{}
			}
			out[e.PaymentID][e.EventID]++
		}
		if len(es) < 1000 {
			return out, nil
		}
	}
}

// outcomeCount is the report's count of an outcome.
func (r *Report) outcomeCount(o outcome) *int {
	switch o {
	case asyncSucceeded:
		return &r.CheckoutAsyncSucceeded
	case asyncFailed:
		return &r.CheckoutAsyncFailed
	case expiredByEvent:
		return &r.CheckoutExpired
	case leftOpen:
		return &r.CheckoutLeftOpen
	case paidSilently:
		return &r.CheckoutPaidSilently
	}
	return &r.CheckoutPaid
}

// refundCaptured refunds some of the captured checkout payments through
// the API, as onePayment does in the mock mode: in full, or in parts sent
// at once whose amounts may add up to more than the payment. The refunds
// go to the session's PaymentIntent at the Fake.
func (s *sim) refundCaptured(ctx context.Context, ids []string) error {
	captured, err := s.payments(ctx, ids, func(p pay.Payment) bool { return p.Status == pay.Captured })
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.Concurrency)
	for _, p := range captured {
		n := s.intn(3)
		if n == 2 {
			continue
		}
		parts := 1
		if n == 1 {
			parts = 2 + s.intn(3)
		}
		for j := range parts {
			var body []byte // the rest
			if n == 1 {
				part := p.Amount/4 + int64(s.intn(int(p.Amount/4)+1))
				body = []byte(fmt.Sprintf(`{"amount":%d,"reason":"sim part %d"}`, part, j))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				s.refund(ctx, p.ID, body, fmt.Sprintf("refund-%s-%d", p.ID, j))
			}()
		}
	}
	wg.Wait()
	return nil
}

// checkIntent compares a checkout payment's refunds with its PaymentIntent
// at the Fake.
func (s *sim) checkIntent(p pay.Payment) {
	if p.SecondRef == "" {
		return
	}
	pi, ok := s.co.fake.Intent(p.SecondRef)
	if !ok {
		return
	}
	s.pspRefunded(p, "Stripe", pi.Amount, pi.AmountRefunded)
}
