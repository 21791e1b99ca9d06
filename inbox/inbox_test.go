package inbox_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/inbox"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/storetest"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type fixture struct {
	db    *store.DB
	clock *storetest.Clock
	in    *inbox.Inbox
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := storetest.NewClock(time.Now().UTC())
	db := storetest.MustOpen(t, &store.Options{Now: clock.Now})
	sp, err := standard.New(standard.Config{WebhookSecret: secret, Tolerance: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	in := &inbox.Inbox{
		Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"standard": sp},
		Now: clock.Now,
	}
	return &fixture{db: db, clock: clock, in: in}
}

func (f *fixture) payment(t *testing.T, id string) {
	t.Helper()
	now := f.clock.Now()
	p := pay.Payment{ID: id, OrderID: "o", Amount: 100, Currency: "EUR", Provider: "standard", Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.db.Update(context.Background(), func(tx pay.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
}

// accept signs an event with the svix library, as a PSP bridge would, and
// hands it to the inbox.
func (f *fixture) accept(t *testing.T, evID, typ, paymentID, ref string) bool {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"provider_ref":%q,"amount":100,"currency":"EUR"}}`,
		evID, typ, f.clock.Now().Unix(), paymentID, ref))
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
	_, dup, err := f.in.Accept(context.Background(), "standard", body, h)
	if err != nil {
		t.Fatal(err)
	}
	return dup
}

func (f *fixture) get(t *testing.T, id string) pay.Payment {
	t.Helper()
	var p pay.Payment
	if err := f.db.View(context.Background(), func(tx pay.Tx) (err error) { p, err = tx.Payment(id); return err }); err != nil {
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
	if err := f.db.Update(ctx, func(tx pay.Tx) error {
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
	if err := f.db.View(ctx, func(tx pay.Tx) (err error) {
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
	for i := range inbox.DefaultMaxAttempts {
		if _, err := f.in.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		f.clock.Add(time.Hour) // past any backoff
		var items []pay.ReviewItem
		if err := f.db.View(ctx, func(tx pay.Tx) (err error) { items, err = tx.ListReview(); return err }); err != nil {
			t.Fatal(err)
		}
		last := i == inbox.DefaultMaxAttempts-1
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
	if err := f.db.View(ctx, func(tx pay.Tx) (err error) { done, err = tx.IsProcessed("standard", "evt_o"); return err }); err != nil {
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
	out := string(inbox.Redact(in))
	for _, secret := range []string{"pi_1_secret_abc", "x_secret", "bank.invalid", "r.invalid"} {
		if strings.Contains(out, secret) {
			t.Fatalf("%s kept: %s", secret, out)
		}
	}
	if !strings.Contains(out, `"amount":100`) || !strings.Contains(out, `"id":"pi_1"`) {
		t.Fatalf("content lost: %s", out)
	}
	plain := []byte(`{"id":"evt_2",  "type":"payment.captured"}`)
	if got := inbox.Redact(plain); string(got) != string(plain) {
		t.Fatalf("a body without secrets changed: %s", got)
	}
}
