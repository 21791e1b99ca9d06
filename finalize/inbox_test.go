package finalize_test

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

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type fixture struct {
	db    *bolt.DB
	clock *storetest.Clock
	in    *finalize.Inbox
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := storetest.NewClock(time.Now().UTC())
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	sp, err := standard.New(standard.Config{WebhookSecret: secret, Tolerance: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The worker's path: Accept only stores (TestInbox_AppliedOnAccept
	// covers the default, applying in Accept's transaction).
	in := &finalize.Inbox{
		Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"standard": sp},
		Now: clock.Now, ApplyLater: true,
	}
	return &fixture{db: db, clock: clock, in: in}
}

func (f *fixture) payment(t *testing.T, id string) {
	t.Helper()
	now := f.clock.Now()
	p := pay.Payment{ID: id, OrderID: "o", Amount: 100, Currency: "EUR", Provider: "standard", Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.db.Update(context.Background(), func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
}

// accept signs an event with the svix library, as a PSP bridge would, and
// hands it to the inbox.
func (f *fixture) accept(t *testing.T, evID, typ, paymentID, ref string) bool {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"provider_ref":%q,"amount":100,"currency":"EUR"}}`,
		evID, typ, f.clock.Now().Unix(), paymentID, ref))
	h := testkit.StandardHeader(t, secret, evID, f.clock.Now(), body)
	_, dup, err := f.in.Accept(context.Background(), "standard", body, h)
	if err != nil {
		t.Fatal(err)
	}
	return dup
}

func (f *fixture) get(t *testing.T, id string) pay.Payment {
	t.Helper()
	var p pay.Payment
	if err := f.db.View(context.Background(), func(tx store.Tx) (err error) { p, err = tx.Payment(id); return err }); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInbox_DeferWhileLeaseHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.payment(t, "pay_a")

	// Another worker holds the payment's lease.
	if err := f.db.Update(ctx, func(tx store.Tx) error {
		_, err := tx.AcquireLease("pay_a", "sweeper", 30*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	deferrals := metrics.GetOrCreateCounter(`paystate_inbox_deferrals_total`)
	before := deferrals.Get()

	f.accept(t, "evt_1", "payment.captured", "pay_a", "")
	n, err := f.in.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 0; got != want {
		t.Fatalf("applied=%d, want %d while the lease is held", got, want)
	}
	if got, want := f.get(t, "pay_a").Status, pay.Created; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	if deferrals.Get() <= before {
		t.Fatalf("deferral not counted")
	}
	// Deferred, not dropped: the event is still pending, later.
	var pending []pay.InboxEvent
	if err := f.db.View(ctx, func(tx store.Tx) (err error) {
		pending, err = tx.PendingInbox(f.clock.Now().Add(time.Hour), 10)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].Attempts != 1 || !pending[0].NextAttemptAt.After(f.clock.Now()) {
		t.Fatalf("pending=%+v, want one event deferred into the future", pending)
	}

	// The other worker's lease runs out; the retry applies the event.
	f.clock.Add(time.Minute)
	if n, err = f.in.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("retry: n=%d err=%v", n, err)
	}
	p := f.get(t, "pay_a")
	if p.Status != pay.Captured || p.Version != 2 {
		t.Fatalf("after retry: %s", p)
	}
}

func TestInbox_Redelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.payment(t, "pay_r")
	if dup := f.accept(t, "evt_r", "payment.captured", "pay_r", "psp_r"); dup {
		t.Fatal("first delivery reported as duplicate")
	}
	for range 4 {
		if dup := f.accept(t, "evt_r", "payment.captured", "pay_r", "psp_r"); !dup {
			t.Fatal("redelivery not reported as duplicate")
		}
	}
	if n, err := f.in.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("n=%d err=%v, want one event applied", n, err)
	}
	// Applied and processed: a later redelivery is absorbed too.
	if dup := f.accept(t, "evt_r", "payment.captured", "pay_r", "psp_r"); !dup {
		t.Fatal("redelivery after processing not reported as duplicate")
	}
	if n, _ := f.in.RunOnce(ctx); n != 0 {
		t.Fatalf("n=%d, want nothing left to apply", n)
	}
	p := f.get(t, "pay_r")
	if p.Status != pay.Captured || p.Version != 2 || p.ProviderRef != "psp_r" {
		t.Fatalf("payment=%+v", p)
	}
}

func TestInbox_Orphan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.accept(t, "evt_o", "payment.captured", "", "psp_unknown")
	for i := range finalize.DefaultInboxMaxAttempts {
		if _, err := f.in.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		f.clock.Add(time.Hour) // past any backoff
		var items []pay.ReviewItem
		if err := f.db.View(ctx, func(tx store.Tx) (err error) { items, err = tx.ListReview(); return err }); err != nil {
			t.Fatal(err)
		}
		last := i == finalize.DefaultInboxMaxAttempts-1
		if got, want := len(items), map[bool]int{false: 0, true: 1}[last]; got != want {
			t.Fatalf("attempt %d: review items=%d, want %d", i+1, got, want)
		}
		if last {
			if items[0].Reason != pay.ReasonOrphan || items[0].ProviderRef != "psp_unknown" || items[0].EventID != "evt_o" {
				t.Fatalf("review item=%+v", items[0])
			}
		}
	}
	var done bool
	if err := f.db.View(ctx, func(tx store.Tx) (err error) { done, err = tx.IsProcessed("standard", "evt_o"); return err }); err != nil {
		t.Fatal(err)
	}
	if !done {
		t.Fatal("orphan event not recorded as processed")
	}
}

// TestInbox_LateReference: an event that names only the PSP's reference
// arrives before the sync answer recorded that reference; it is applied
// once the reference is known, not sent to review.
func TestInbox_LateReference(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.payment(t, "pay_late")
	f.accept(t, "evt_l", "payment.captured", "", "psp_late")
	if n, _ := f.in.RunOnce(ctx); n != 0 {
		t.Fatalf("applied before the reference was known")
	}
	if _, err := f.in.Finalizer.Finalize(ctx, pay.Observation{PaymentID: "pay_late", Source: pay.SourceSync, Status: pay.Processing, ProviderRef: "psp_late"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Hour)
	if n, err := f.in.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if got, want := f.get(t, "pay_late").Status, pay.Captured; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	in := []byte(`{"id":"evt_1","data":{"object":{"id":"pi_1","client_secret":"pi_1_secret_abc","amount":100,` +
		`"next_action":{"redirect_to_url":{"url":"https://bank.invalid/3ds"}},"nested":[{"client_secret":"x_secret","redirect_url":"https://r.invalid"}]}}}`)
	out := string(finalize.Redact(in))
	for _, secret := range []string{"pi_1_secret_abc", "x_secret", "bank.invalid", "r.invalid"} {
		if strings.Contains(out, secret) {
			t.Fatalf("%s kept: %s", secret, out)
		}
	}
	if !strings.Contains(out, `"amount":100`) || !strings.Contains(out, `"id":"pi_1"`) {
		t.Fatalf("content lost: %s", out)
	}
	plain := []byte(`{"id":"evt_2",  "type":"payment.captured"}`)
	if got := finalize.Redact(plain); string(got) != string(plain) {
		t.Fatalf("a body without secrets changed: %s", got)
	}
}

// acceptBody signs body as a Standard Webhooks sender would and hands it to
// the inbox.
func (f *fixture) acceptBody(t *testing.T, evID string, body []byte) {
	t.Helper()
	h := testkit.StandardHeader(t, secret, evID, f.clock.Now(), body)
	if _, _, err := f.in.Accept(context.Background(), "standard", body, h); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) reviews(t *testing.T) []pay.ReviewItem {
	t.Helper()
	var items []pay.ReviewItem
	if err := f.db.View(context.Background(), func(tx store.Tx) (err error) { items, err = tx.ListReview(); return err }); err != nil {
		t.Fatal(err)
	}
	return items
}

func (f *fixture) pending(t *testing.T) []pay.InboxEvent {
	t.Helper()
	var evs []pay.InboxEvent
	if err := f.db.View(context.Background(), func(tx store.Tx) (err error) {
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
	if got, want := finalize.DefaultInboxMaxAttempts, 20; got != want {
		t.Fatalf("DefaultInboxMaxAttempts=%d, want %d (webhook_inbox.max_attempts)", got, want)
	}
	for _, max := range []int{0, 3} { // 0: the default
		t.Run(fmt.Sprint("MaxAttempts=", max), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.in.MaxAttempts = max
			tries := max
			if tries == 0 {
				tries = finalize.DefaultInboxMaxAttempts
			}
			ctx := context.Background()
			f.payment(t, "pay_x")
			if err := f.db.Update(ctx, func(tx store.Tx) error {
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
			f.db.View(ctx, func(tx store.Tx) (err error) { steps, err = tx.Steps("pay_x"); return err })
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
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	sp, err := stripe.New(stripe.Config{SecretKey: "sk_test_inbox", WebhookSecret: stripeSecret, APIBase: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	in := &finalize.Inbox{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"stripe": sp}, Now: clock.Now, ApplyLater: true}
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
	ev, dup, err := f.in.Accept(ctx, "stripe", body, stripefake.Header(stripeSecret, body, time.Now()))
	if err != nil || dup || !ev.Ignore {
		t.Fatalf("Accept: ev=%+v dup=%v err=%v, want acknowledged and ignored", ev, dup, err)
	}
	if got := ignored.Get(); got != before+1 {
		t.Fatalf("paystate_webhooks_ignored_total{reason=not_ours}=%d, want %d", got, before+1)
	}
	if err := f.db.View(ctx, func(tx store.Tx) error { _, err := tx.InboxEvent("stripe", "evt_foreign"); return err }); pay.ErrorCode(err) != pay.ENOTFOUND {
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
	if err := f.db.Update(ctx, func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
	body = stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, ID: "evt_ours", Created: time.Now(), PaymentIntent: "pi_ours", NoPaymentID: true})
	if ev, _, err := f.in.Accept(ctx, "stripe", body, stripefake.Header(stripeSecret, body, time.Now())); err != nil || ev.Ignore {
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

// TestInbox_AppliedOnAccept: by default a new webhook is applied in the
// transaction that stores it (the payment is captured when Accept returns,
// nothing is left for the worker); one whose payment's lease is held, or
// whose payment is not known yet, is stored pending and the worker applies
// it once it can.
func TestInbox_AppliedOnAccept(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.in.ApplyLater = false
	ctx := context.Background()

	f.payment(t, "pay_now")
	f.accept(t, "evt_now", "payment.captured", "pay_now", "psp_now")
	if p := f.get(t, "pay_now"); p.Status != pay.Captured || p.Version != 2 {
		t.Fatalf("after Accept: %s v%d, want captured v2", p.Status, p.Version)
	}
	if n, err := f.in.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce after an applied Accept: n=%d err=%v, want nothing left", n, err)
	}
	if f.accept(t, "evt_now", "payment.captured", "pay_now", "psp_now") != true {
		t.Fatal("redelivery not reported as duplicate")
	}

	f.payment(t, "pay_held")
	var lease pay.Lease
	if err := f.db.Update(ctx, func(tx store.Tx) (err error) {
		lease, err = tx.AcquireLease("pay_held", "sweeper", time.Minute)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f.accept(t, "evt_held", "payment.captured", "pay_held", "psp_held")
	f.accept(t, "evt_unknown", "payment.captured", "pay_unknown", "psp_unknown") // no such payment (yet)
	if p := f.get(t, "pay_held"); p.Status != pay.Created {
		t.Fatalf("applied although the lease is held: %s", p.Status)
	}
	for _, ev := range []string{"evt_held", "evt_unknown"} {
		var e pay.InboxEvent
		if err := f.db.View(ctx, func(tx store.Tx) (err error) { e, err = tx.InboxEvent("standard", ev); return err }); err != nil {
			t.Fatalf("%s not stored: %v", ev, err)
		}
		if e.Processed {
			t.Fatalf("%s is processed, want pending for the worker", ev)
		}
	}
	if err := f.db.Update(ctx, func(tx store.Tx) error { return tx.ReleaseLease("pay_held", lease.Token) }); err != nil {
		t.Fatal(err)
	}
	if n, err := f.in.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce: n=%d err=%v, want the event of pay_held applied", n, err)
	}
	if p := f.get(t, "pay_held"); p.Status != pay.Captured {
		t.Fatalf("pay_held after RunOnce: %s, want captured", p.Status)
	}
}
