package inbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/inbox"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripetest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/storetest"
)

// acceptBody signs body as a Standard Webhooks sender would and hands it to
// the inbox.
func (f *fixture) acceptBody(t *testing.T, evID string, body []byte) {
	t.Helper()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(evID, f.clock.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", evID)
	h.Set("webhook-timestamp", fmt.Sprint(f.clock.Now().Unix()))
	h.Set("webhook-signature", sig)
	if _, _, err := f.in.Accept(context.Background(), "standard", body, h); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) reviews(t *testing.T) []pay.ReviewItem {
	t.Helper()
	var items []pay.ReviewItem
	if err := f.db.View(context.Background(), func(tx pay.Tx) (err error) { items, err = tx.ListReview(); return err }); err != nil {
		t.Fatal(err)
	}
	return items
}

func (f *fixture) pending(t *testing.T) []pay.InboxEvent {
	t.Helper()
	var evs []pay.InboxEvent
	if err := f.db.View(context.Background(), func(tx pay.Tx) (err error) {
		evs, err = tx.PendingInbox(f.clock.Now().Add(24*time.Hour), 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestInbox_AmountMismatch: a correctly signed payment.captured that says
// "amount": 1 for a 100 EUR payment does not capture it: the webhook is
// handled (processed, off the pending list) and the payment is on the
// review queue as amount_mismatch with the event.
func TestInbox_AmountMismatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.payment(t, "pay_m") // 100 EUR
	f.acceptBody(t, "evt_m", []byte(fmt.Sprintf(`{"id":"evt_m","type":"payment.captured","created":%d,"data":{"payment_id":"pay_m","amount":1,"currency":"EUR"}}`, f.clock.Now().Unix())))
	if n, err := f.in.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("n=%d err=%v, want the event handled", n, err)
	}
	if got, want := f.get(t, "pay_m").Status, pay.Created; got != want {
		t.Fatalf("Status=%s, want %s: a forged amount captured the payment", got, want)
	}
	items := f.reviews(t)
	if len(items) != 1 || items[0].Reason != pay.ReasonAmountMismatch || items[0].EventID != "evt_m" || items[0].PaymentID != "pay_m" {
		t.Fatalf("review=%+v, want pay_m as amount_mismatch with evt_m", items)
	}
	if p := f.pending(t); len(p) != 0 {
		t.Fatalf("pending=%+v, want the event acknowledged and not retried", p)
	}
}

// TestInbox_ProviderRefConflict: an event whose provider_ref belongs to
// another payment used to fail its transaction on the store's unique
// reference index and be retried every few seconds forever; it goes to
// review once and leaves the pending list.
func TestInbox_ProviderRefConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.payment(t, "pay_owner")
	f.payment(t, "pay_victim")
	if _, err := f.in.Finalizer.Finalize(ctx, pay.Observation{PaymentID: "pay_owner", Source: pay.SourceReport, Status: pay.Processing, ProviderRef: "psp_taken"}); err != nil {
		t.Fatal(err)
	}
	f.accept(t, "evt_c", "payment.captured", "pay_victim", "psp_taken")
	n, err := f.in.RunOnce(ctx)
	if err != nil || n != 1 {
		t.Fatalf("n=%d err=%v, want the event handled", n, err)
	}
	if p := f.get(t, "pay_victim"); p.Status != pay.Created || p.ProviderRef != "" {
		t.Fatalf("victim=%s ref %q, want untouched", p, p.ProviderRef)
	}
	items := f.reviews(t)
	if len(items) != 1 || items[0].Reason != pay.ReasonProviderRefConflict || items[0].PaymentID != "pay_victim" ||
		items[0].EventID != "evt_c" || !strings.Contains(items[0].Note, "pay_owner") {
		t.Fatalf("review=%+v, want pay_victim as provider_ref_conflict naming pay_owner and evt_c", items)
	}
	if p := f.pending(t); len(p) != 0 {
		t.Fatalf("pending=%+v, want nothing left to retry", p)
	}
}

// TestInbox_MaxAttempts: an event that cannot be applied (here: another
// worker holds the payment's lease for good) is tried MaxAttempts times,
// lease-held deferrals included, then goes to review as inbox_exhausted with
// its last error and leaves the pending list.
func TestInbox_MaxAttempts(t *testing.T) {
	t.Parallel()
	if got, want := inbox.DefaultMaxAttempts, 20; got != want {
		t.Fatalf("DefaultMaxAttempts=%d, want %d (webhook_inbox.max_attempts)", got, want)
	}
	for _, max := range []int{0, 3} { // 0: the default
		t.Run(fmt.Sprint("MaxAttempts=", max), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.in.MaxAttempts = max
			tries := max
			if tries == 0 {
				tries = inbox.DefaultMaxAttempts
			}
			ctx := context.Background()
			f.payment(t, "pay_x")
			if err := f.db.Update(ctx, func(tx pay.Tx) error {
				_, err := tx.AcquireLease("pay_x", "stuck", 1000*time.Hour)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			f.accept(t, "evt_x", "payment.captured", "pay_x", "")
			for i := 1; i <= tries; i++ {
				n, err := f.in.RunOnce(ctx)
				if err != nil {
					t.Fatal(err)
				}
				last := i == tries
				if got, want := n, map[bool]int{false: 0, true: 1}[last]; got != want {
					t.Fatalf("try %d: handled=%d, want %d", i, got, want)
				}
				if got, want := len(f.reviews(t)), map[bool]int{false: 0, true: 1}[last]; got != want {
					t.Fatalf("try %d: review items=%d, want %d", i, got, want)
				}
				f.clock.Add(time.Hour) // past any backoff
			}
			items := f.reviews(t)
			if it := items[0]; it.Reason != pay.ReasonInboxExhausted || it.PaymentID != "pay_x" || it.EventID != "evt_x" ||
				!strings.Contains(it.Note, pay.ELEASEHELD) || !strings.Contains(it.Note, fmt.Sprint(tries)) {
				t.Fatalf("review item=%+v, want inbox_exhausted with the event, its last error and the tries", it)
			}
			if p := f.pending(t); len(p) != 0 {
				t.Fatalf("pending=%+v, want none after the last try", p)
			}
			if n, err := f.in.RunOnce(ctx); n != 0 || err != nil {
				t.Fatalf("after exhaustion: n=%d err=%v, want nothing to do", n, err)
			}
			if got, want := f.get(t, "pay_x").Status, pay.Created; got != want {
				t.Fatalf("Status=%s, want %s", got, want)
			}
			// verify's rule: a processed webhook has its timeline step.
			var steps []pay.Step
			f.db.View(ctx, func(tx pay.Tx) (err error) { steps, err = tx.Steps("pay_x"); return err })
			if len(steps) != 1 || steps[0].Kind != pay.StepReview || steps[0].EventID != "evt_x" {
				t.Fatalf("timeline=%+v, want the review step of evt_x", steps)
			}
		})
	}
}

// TestInbox_LateReferenceWithinWindow: a standard-provider event that names
// only a provider_ref which a /sync report records minutes later still
// applies: it is retried within MaxAttempts and the backoff window, not
// sent to review as an orphan after three quick tries.
func TestInbox_LateReferenceWithinWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.payment(t, "pay_slow")
	f.accept(t, "evt_s", "payment.captured", "", "psp_slow")
	for i := range 5 {
		if n, err := f.in.RunOnce(ctx); err != nil || n != 0 {
			t.Fatalf("try %d: n=%d err=%v, want a deferral", i+1, n, err)
		}
		f.clock.Add(10 * time.Second)
	}
	if items := f.reviews(t); len(items) != 0 {
		t.Fatalf("review=%+v, want the event still waiting for its payment", items)
	}
	// The merchant's report records the reference.
	if _, err := f.in.Finalizer.Finalize(ctx, pay.Observation{PaymentID: "pay_slow", Source: pay.SourceReport, Status: pay.Processing, ProviderRef: "psp_slow"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Hour)
	if n, err := f.in.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("n=%d err=%v, want the event applied", n, err)
	}
	if got, want := f.get(t, "pay_slow").Status, pay.Captured; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
}

// stripeFixture is an inbox with the stripe provider.
func stripeFixture(t *testing.T) (*fixture, *stripe.Provider) {
	t.Helper()
	clock := storetest.NewClock(time.Now().UTC())
	db := storetest.MustOpen(t, &store.Options{Now: clock.Now})
	sp, err := stripe.New(stripe.Config{SecretKey: "sk_test_inbox", WebhookSecret: stripeSecret, APIBase: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	in := &inbox.Inbox{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"stripe": sp}, Now: clock.Now}
	return &fixture{db: db, clock: clock, in: in}, sp
}

const stripeSecret = "whsec_inbox_test_0123456789abcdef"

// TestInbox_StripeNotOurs: a Stripe event about a PaymentIntent paystate
// did not create (no metadata.paystate_payment_id, unknown id) is
// acknowledged, counted in paystate_webhooks_ignored_total and not stored,
// so it never becomes an orphan on the review queue. One without metadata
// whose PaymentIntent is a known provider_ref is paystate's and applies.
func TestInbox_StripeNotOurs(t *testing.T) {
	t.Parallel()
	f, _ := stripeFixture(t)
	ctx := context.Background()
	ignored := metrics.GetOrCreateCounter(`paystate_webhooks_ignored_total{provider="stripe",reason="not_ours"}`)
	before := ignored.Get()

	body := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, ID: "evt_foreign", Created: time.Now(), PaymentIntent: "pi_someone_elses", NoPaymentID: true})
	ev, dup, err := f.in.Accept(ctx, "stripe", body, stripetest.Header(stripeSecret, body, time.Now()))
	if err != nil || dup || !ev.Ignore {
		t.Fatalf("Accept: ev=%+v dup=%v err=%v, want acknowledged and ignored", ev, dup, err)
	}
	if got := ignored.Get(); got != before+1 {
		t.Fatalf("paystate_webhooks_ignored_total{reason=not_ours}=%d, want %d", got, before+1)
	}
	if err := f.db.View(ctx, func(tx pay.Tx) error { _, err := tx.InboxEvent("stripe", "evt_foreign"); return err }); pay.ErrorCode(err) != pay.ENOTFOUND {
		t.Fatalf("InboxEvent: err=%v, want not stored", err)
	}
	for range 4 {
		f.in.RunOnce(ctx)
		f.clock.Add(time.Hour)
	}
	if items := f.reviews(t); len(items) != 0 {
		t.Fatalf("review=%+v, want no orphan", items)
	}

	// charge.refunded of paystate's PaymentIntent carries no metadata: it
	// is found by the reference and applied.
	now := f.clock.Now()
	p := pay.Payment{ID: "pay_ours", OrderID: "o", Amount: 2500, Currency: "EUR", Provider: "stripe", ProviderRef: "pi_ours", Status: pay.Captured, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.db.Update(ctx, func(tx pay.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
	body = stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, ID: "evt_ours", Created: time.Now(), PaymentIntent: "pi_ours", NoPaymentID: true})
	if ev, _, err := f.in.Accept(ctx, "stripe", body, stripetest.Header(stripeSecret, body, time.Now())); err != nil || ev.Ignore {
		t.Fatalf("Accept: ev=%+v err=%v, want stored", ev, err)
	}
	if n, err := f.in.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if got, want := f.get(t, "pay_ours").Status, pay.Refunded; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	if got := ignored.Get(); got != before+1 {
		t.Fatalf("ignored=%d, want %d", got, before+1)
	}
}

// TestInbox_ProviderLabel: webhooks posted to providers that are not
// configured add no metric series: they all count as provider="unknown".
func TestInbox_ProviderLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	series := func() map[string]bool {
		var buf bytes.Buffer
		metrics.WritePrometheus(&buf, false)
		out := map[string]bool{}
		for _, m := range regexp.MustCompile(`paystate_webhooks[a-z_]*\{provider="([^"]*)"`).FindAllStringSubmatch(buf.String(), -1) {
			out[m[1]] = true
		}
		return out
	}
	for i := range 50 {
		name := fmt.Sprintf("zq%02dacee2af38a", i)
		if _, _, err := f.in.Accept(ctx, name, []byte(`{}`), http.Header{}); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Fatalf("provider %s: err=%v, want not_found", name, err)
		}
	}
	got := series()
	for name := range got {
		if strings.HasPrefix(name, "zq") {
			t.Fatalf("metric series with provider=%q: a label taken from the request path", name)
		}
	}
	if !got["unknown"] {
		t.Fatalf("providers %v, want the unknown ones counted as \"unknown\"", got)
	}
}
