package ripple_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/postgres"
	"github.com/paystate/paystate/store/storetest"
)

// TestShared_OneAttemptAcrossInstances: two ripple services (two paystate
// instances) on one PostgreSQL database, Config.Shared. While the first
// instance's webhook attempt is in flight (the endpoint holds it), the
// second instance's pass finds the delivery claimed and sends nothing:
// the endpoint gets one request, and the delivery ends done.
func TestShared_OneAttemptAcrossInstances(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.Schema(t), &postgres.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	var requests atomic.Int64
	got, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			close(got)
			<-release
		}
	}))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before srv.Close, should the test fail while the first request is held
	cfg := ripple.Config{Shared: true, FanOut: db.SetFanOut, Webhooks: []ripple.EndpointConfig{{
		URL: srv.URL, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Events: []string{"payment.captured"},
	}}}
	a, b := newService(t, db, clock, cfg), newService(t, db, clock, cfg)

	p := insertPayment(t, db, 1, 1500, "EUR", pay.Customer{})
	if _, err := finalize.New(db).Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Captured}); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() { _, err := a.RunOnce(ctx); aDone <- err }()
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the first instance sent no request")
	}
	if _, err := b.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the endpoint got %d requests while the first attempt was in flight, want 1", n)
	}
	free()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	var done int
	if err := db.View(ctx, func(tx store.Tx) (err error) { done, err = tx.CountDeliveries(pay.DeliveryDone); return err }); err != nil {
		t.Fatal(err)
	}
	if done != 1 || requests.Load() != 1 {
		t.Fatalf("done deliveries=%d, requests=%d; want 1 and 1", done, requests.Load())
	}
}

// cursorTracer records whether a statement took the ripple cursor's
// advisory lock or wrote the cursor row.
type cursorTracer struct{ cursor atomic.Int64 }

func (c *cursorTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	touches := strings.Contains(d.SQL, "ripple_cursor") && strings.Contains(strings.ToUpper(d.SQL), "UPDATE")
	for _, a := range d.Args {
		if s, ok := a.(string); ok && s == "ripple:cursor" {
			touches = true
		}
		if ss, ok := a.([]string); ok && slices.Contains(ss, "ripple:cursor") {
			touches = true
		}
	}
	if touches {
		c.cursor.Add(1)
	}
	return ctx
}

func (c *cursorTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestShared_FanOutInTransition: on PostgreSQL the transaction of a
// transition writes its deliveries (the ripple service gave the store its
// targets), so they exist as soon as it commits, before any pass; the
// records appended before any service existed are fanned out by two
// instances' passes at once, each exactly once, and neither instance
// takes the ripple cursor's lock or writes its row.
func TestShared_FanOutInTransition(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	var trace cursorTracer
	open := func() *postgres.DB {
		db, err := postgres.Open(ctx, dsn, &postgres.Options{Now: clock.Now, Tracer: &trace})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	dbA, dbB := open(), open()
	trace.cursor.Store(0) // the migrations read it
	customer := pay.Customer{ID: "cus_1"}
	// Captured before any service: nothing fanned out.
	var early []pay.Payment
	for i := 1; i <= 6; i++ {
		p := insertPayment(t, dbA, i, 1000, "EUR", customer)
		if _, err := finalize.New(dbA).Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Captured}); err != nil {
			t.Fatal(err)
		}
		early = append(early, p)
	}
	a := newService(t, dbA, clock, ripple.Config{Shared: true, FanOut: dbA.SetFanOut, PointsPerUnit: 1})
	b := newService(t, dbB, clock, ripple.Config{Shared: true, FanOut: dbB.SetFanOut, PointsPerUnit: 1})

	p := insertPayment(t, dbB, 7, 1000, "EUR", customer)
	if _, err := finalize.New(dbB).Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Captured}); err != nil {
		t.Fatal(err)
	}
	ds := deliveries(t, dbA, p.ID)
	const loyalty, retention = pay.EffectLoyalty + " payment.captured", pay.EffectRetention + " payment.captured"
	if len(ds) != 2 || ds[loyalty].State != pay.DeliveryPending || ds[retention].State != pay.DeliveryPending {
		t.Fatalf("deliveries after the transition's commit, before any pass: %v; want a pending loyalty and retention delivery", ds)
	}

	var wg sync.WaitGroup
	for _, svc := range []*ripple.Service{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if n, err := svc.RunOnce(ctx); err != nil {
					t.Error(err)
					return
				} else if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	settle(t, a)
	for _, q := range append(early, p) {
		ds := deliveries(t, dbA, q.ID) // fails on two deliveries of one target
		if len(ds) != 2 || ds[loyalty].State != pay.DeliveryDone || ds[retention].State != pay.DeliveryDone {
			t.Fatalf("deliveries of %s: %v; want a done loyalty and retention delivery", q.ID, ds)
		}
	}
	if got, want := customerPoints(t, dbA, "cus_1"), int64(70); got != want {
		t.Fatalf("points=%d, want %d (10 per payment, each once)", got, want)
	}
	if n := trace.cursor.Load(); n != 0 {
		t.Fatalf("%d statements took the ripple cursor's lock or wrote its row, want none", n)
	}
}

// customerPoints returns a customer's loyalty points.
func customerPoints(t *testing.T, db store.Store, id string) int64 {
	t.Helper()
	return customer(t, db, id).Points
}
