package ripple_test

import (
	"context"
	"fmt"
	"maps"
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
	db := openPG(t, pgtest.Schema(t), clock, nil)

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

// openPG opens the PostgreSQL database of dsn on clock, with tracer if
// not nil, until the test ends.
func openPG(t *testing.T, dsn string, clock *storetest.Clock, tracer pgx.QueryTracer) *postgres.DB {
	t.Helper()
	opts := &postgres.Options{Now: clock.Now}
	if tracer != nil {
		opts.Tracer = tracer
	}
	db, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// readTracer records the ids of the deliveries whose rows an instance's
// statements read by id: its claims (ClaimDeliveries) and the rows of
// its reads of the due index.
type readTracer struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (r *readTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.record(d.SQL, d.Args)
	return ctx
}

func (r *readTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *readTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *readTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.record(d.SQL, d.Args)
}

func (r *readTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// record records the ids that a statement reading deliveries by id asks
// for.
func (r *readTracer) record(sql string, args []any) {
	if !strings.Contains(sql, "FROM deliveries d") || len(args) == 0 {
		return
	}
	if ids, ok := args[0].([]string); ok {
		r.mu.Lock()
		if r.ids == nil {
			r.ids = map[string]bool{}
		}
		for _, id := range ids {
			r.ids[id] = true
		}
		r.mu.Unlock()
	}
}

// read returns the ids recorded so far, sorted.
func (r *readTracer) read() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.ids))
}

// TestShared_OwnDeliveries: two instances on one PostgreSQL database, each
// told of the deliveries its own transitions write (Config.FanOut). The
// passes that Run makes claim each instance's own deliveries by id, and
// neither instance reads a row of the other's fresh deliveries, whichever
// passes first; once Config.Grace has passed, the deliveries of an
// instance that never delivered them (it died after its commit) are
// delivered by the other.
func TestShared_OwnDeliveries(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	var trA, trB readTracer
	dbA, dbB := openPG(t, dsn, clock, &trA), openPG(t, dsn, clock, &trB)
	a := newService(t, dbA, clock, ripple.Config{Shared: true, FanOut: dbA.SetFanOut, PointsPerUnit: 1})
	b := newService(t, dbB, clock, ripple.Config{Shared: true, FanOut: dbB.SetFanOut, PointsPerUnit: 1})
	capture := func(db *postgres.DB, i int) []string {
		t.Helper()
		p := insertPayment(t, db, i, 1000, "EUR", pay.Customer{ID: fmt.Sprintf("cus_%d", i)})
		if _, err := finalize.New(db).Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Captured}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range deliveries(t, db, p.ID) {
			out = append(out, d.ID)
		}
		if len(out) != 2 {
			t.Fatalf("payment %d has %d deliveries, want 2 (loyalty, retention)", i, len(out))
		}
		return out
	}
	ownA, ownB := capture(dbA, 1), capture(dbB, 2)
	for _, svc := range []*ripple.Service{a, b} {
		if _, err := ripple.Pass(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []int64{10, 10} {
		if got := customerPoints(t, dbA, fmt.Sprintf("cus_%d", i+1)); got != want {
			t.Fatalf("cus_%d has %d points, want %d", i+1, got, want)
		}
	}
	if got, want := trA.read(), slices.Sorted(slices.Values(ownA)); !slices.Equal(got, want) {
		t.Fatalf("instance A read the deliveries %q, want only its own %q (B's: %q)", got, want, ownB)
	}
	if got, want := trB.read(), slices.Sorted(slices.Values(ownB)); !slices.Equal(got, want) {
		t.Fatalf("instance B read the deliveries %q, want only its own %q (A's: %q)", got, want, ownA)
	}

	// B writes and dies before its pass: A leaves the deliveries to B
	// until Grace has passed, then delivers them.
	const loyalty, retention = pay.EffectLoyalty + " payment.captured", pay.EffectRetention + " payment.captured"
	paymentID := func(i int) string { return fmt.Sprintf("pay_%026d", i) }
	capture(dbB, 3)
	if _, err := ripple.Pass(ctx, a); err != nil {
		t.Fatal(err)
	}
	if ds := deliveries(t, dbA, paymentID(3)); ds[loyalty].State != pay.DeliveryPending || ds[retention].State != pay.DeliveryPending {
		t.Fatalf("deliveries of B's payment before Grace has passed: %v, want pending (B's to deliver)", ds)
	}
	clock.Add(ripple.DefaultGrace + time.Second)
	if _, err := ripple.Pass(ctx, a); err != nil {
		t.Fatal(err)
	}
	if ds := deliveries(t, dbA, paymentID(3)); ds[loyalty].State != pay.DeliveryDone || ds[retention].State != pay.DeliveryDone {
		t.Fatalf("deliveries of B's payment after Grace: %v, want done (by A)", ds)
	}
	if got := customerPoints(t, dbA, "cus_3"); got != 10 {
		t.Fatalf("cus_3 has %d points after Grace, want 10 (delivered by A)", got)
	}
}

// TestShared_OwnInLine: a payment captured and refunded through one
// instance before its pass: the refund's loyalty delivery, claimed by id
// with the capture's, waits until the capture's is done (a payment's
// records reach a target in order), then claws the points back.
func TestShared_OwnInLine(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(t0)
	ctx := context.Background()
	db := openPG(t, pgtest.Schema(t), clock, nil)
	a := newService(t, db, clock, ripple.Config{Shared: true, FanOut: db.SetFanOut, PointsPerUnit: 1})
	p := insertPayment(t, db, 1, 1000, "EUR", pay.Customer{ID: "cus_1"})
	for _, st := range []pay.Status{pay.Captured, pay.Refunded} {
		if _, err := finalize.New(db).Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	refund := pay.EffectLoyalty + " payment.refund.succeeded"
	if _, err := ripple.Pass(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, want := customerPoints(t, db, "cus_1"), int64(10); got != want {
		t.Fatalf("points after the first pass=%d, want %d (the capture's, the refund's waiting)", got, want)
	}
	if d, ok := deliveries(t, db, p.ID)[refund]; !ok || d.State != pay.DeliveryPending || d.Attempts != 0 {
		t.Fatalf("the refund's loyalty delivery after the first pass: %+v, want pending, not attempted (%v)", d, deliveries(t, db, p.ID))
	}
	if _, err := ripple.Pass(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := customerPoints(t, db, "cus_1"); got != 0 {
		t.Fatalf("points after the second pass=%d, want 0 (clawed back)", got)
	}
	if d := deliveries(t, db, p.ID)[refund]; d.State != pay.DeliveryDone {
		t.Fatalf("the refund's loyalty delivery after the second pass: %+v, want done", d)
	}
}
