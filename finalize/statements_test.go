package finalize_test

import (
	"context"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/postgres"
	"github.com/paystate/paystate/store/storetest"
)

// countedDB opens a PostgreSQL store on a clock, its statements counted.
func countedDB(t *testing.T) (*postgres.DB, *pgtest.Counter, *storetest.Clock) {
	clock := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	count := &pgtest.Counter{}
	db, err := postgres.Open(context.Background(), pgtest.Schema(t), &postgres.Options{Now: clock.Now, Tracer: count})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, count, clock
}

// maxWebhookStatements and maxWebhookRoundTrips are what one new webhook
// that captures a payment costs on PostgreSQL today, in statements and in
// round trips (BEGIN with the payment read with its lease, FOR NO KEY
// UPDATE; the inbox entry read with the processed id; the compare-and-set,
// the timeline, the outbox and the ledger in one batch; the processed id,
// the inbox entry and COMMIT in one batch): a change that adds one fails
// TestWebhookStatements (and should lower these when it removes some).
const (
	maxWebhookStatements = 8
	maxWebhookRoundTrips = 4
)

// TestWebhookStatements counts the statements of one signed webhook that
// captures a payment, accepted on PostgreSQL as the daemon accepts it
// (WriteFirst: no read transaction before the write), with a pgx tracer.
func TestWebhookStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, count, clock := countedDB(t)
	std, err := standard.New(standard.Config{WebhookSecret: moneySecret})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]pay.Provider{"standard": std}
	fin := finalize.New(db)
	svc := &finalize.Payments{Store: db, Finalizer: fin, Providers: providers, DefaultProvider: "standard"}
	inbox := &finalize.Inbox{Store: db, Finalizer: fin, Providers: providers, Now: clock.Now, WriteFirst: true}
	p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-count", Amount: 1000, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	ev := stdwebhook.Event{ID: "evt_count", Type: stdwebhook.TypeCaptured, Created: clock.Now(), PaymentID: p.ID, Amount: 1000, Currency: "EUR"}
	body, err := stdwebhook.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	count.On.Store(true)
	_, dup, err := inbox.Accept(ctx, "standard", body, testkit.StandardHeader(t, moneySecret, ev.ID, clock.Now(), body))
	count.On.Store(false)
	if err != nil || dup {
		t.Fatalf("Accept: duplicate %t, %v", dup, err)
	}
	var got pay.Payment
	if err := db.View(ctx, func(tx store.Tx) (err error) { got, err = tx.Payment(p.ID); return err }); err != nil {
		t.Fatal(err)
	}
	if got.Status != pay.Captured {
		t.Fatalf("status %s after the webhook, want captured", got.Status)
	}
	if n := count.Statements.Load(); n > maxWebhookStatements {
		t.Errorf("one webhook sent %d statements, want at most %d", n, maxWebhookStatements)
	} else {
		t.Logf("one webhook: %d statements", n)
	}
	if n := count.RoundTrips.Load(); n > maxWebhookRoundTrips {
		t.Errorf("one webhook took %d round trips, want at most %d", n, maxWebhookRoundTrips)
	} else {
		t.Logf("one webhook: %d round trips", n)
	}
	// Its redelivery is found by the write transaction: a duplicate.
	if _, dup, err := inbox.Accept(ctx, "standard", body, testkit.StandardHeader(t, moneySecret, ev.ID, clock.Now(), body)); err != nil || !dup {
		t.Fatalf("Accept of the redelivery: duplicate %t, %v; want a duplicate", dup, err)
	}
}

// maxCreateStatements is what one create under an idempotency key costs
// on PostgreSQL today, in statements: the claim of the key with the
// payment, the PSP's answer finalized with the key's answer (16 when the
// key was read and written under an advisory lock, 13 before the payment
// was read once per transaction).
const maxCreateStatements = 12

// TestCreateStatements counts the statements of one create under a new
// idempotency key on PostgreSQL (the mock PSP captures it), with a pgx
// tracer: the key is claimed by its unique key, in one statement.
func TestCreateStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, count, _ := countedDB(t)
	svc := &finalize.Payments{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"mock": newMock(t)}, DefaultProvider: "mock",
		Idempotency: &finalize.Idempotency{Store: db, Owner: "test"}}
	key := finalize.IdemKey{Key: "create:merchant:count", Fingerprint: "fp", Status: 201}
	count.On.Store(true)
	c, err := svc.CreateOnce(ctx, finalize.CreateRequest{OrderID: "o-count", Amount: 1000, Currency: "EUR"}, key)
	count.On.Store(false)
	if err != nil || c.Payment.Status != pay.Captured {
		t.Fatalf("CreateOnce: %+v (%v), want captured", c.Payment, err)
	}
	if n := count.Statements.Load(); n > maxCreateStatements {
		t.Errorf("one create sent %d statements, want at most %d", n, maxCreateStatements)
	} else {
		t.Logf("one create: %d statements", n)
	}
}
