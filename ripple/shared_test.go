package ripple_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
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
	cfg := ripple.Config{Shared: true, Webhooks: []ripple.EndpointConfig{{
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
	if err := db.View(ctx, func(tx pay.Tx) (err error) { done, err = tx.CountDeliveries(pay.DeliveryDone); return err }); err != nil {
		t.Fatal(err)
	}
	if done != 1 || requests.Load() != 1 {
		t.Fatalf("done deliveries=%d, requests=%d; want 1 and 1", done, requests.Load())
	}
}
