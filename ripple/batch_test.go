package ripple_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store"
)

// countingStore counts the write transactions made through it and the
// endpoint-health writes in them.
type countingStore struct {
	store.Store
	updates   atomic.Int64
	endpoints atomic.Int64
}

func (c *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.updates.Add(1)
	return c.Store.Update(ctx, func(tx store.Tx) error { return fn(countingTx{tx, c}) })
}

type countingTx struct {
	store.Tx
	c *countingStore
}

func (t countingTx) PutWebhookEndpoint(e store.WebhookEndpoint) error {
	t.c.endpoints.Add(1)
	return t.Tx.PutWebhookEndpoint(e)
}

// TestDeliver_WritesPerRecord: n captured payments, each delivered to
// loyalty, retention and one merchant endpoint, cost one fan-out
// transaction, one transaction for all loyalty and retention deliveries
// (effects and records together) and at most one per webhook delivery,
// with its endpoint's health in it, written once while it stays healthy.
// MaxInFlight is 1 so that no two webhook records meet in one transaction
// and the count does not depend on timing. Before batching, each record
// cost 6 write transactions.
func TestDeliver_WritesPerRecord(t *testing.T) {
	t.Parallel()
	const n = 20
	ep := rippletest.NewEndpoint(t)
	e := newEnv(t, t0, ripple.Config{PointsPerUnit: 1})
	cs := &countingStore{Store: e.db}
	e.svc = newService(t, cs, e.clock, ripple.Config{
		PointsPerUnit: 1,
		Webhooks:      []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}, MaxInFlight: 1}},
	})
	var ps []pay.Payment
	for i := range n {
		p := e.payment(i+1, 1000, "EUR", pay.Customer{ID: "cus_1"})
		e.finalize(p.ID, pay.Captured)
		ps = append(ps, p)
	}
	for pass := 0; e.runOnce() > 0; pass++ {
		if pass > 2*n {
			t.Fatal("ripple did not settle")
		}
	}

	if got, want := customer(t, e.db, "cus_1").Points, int64(10*n); got != want {
		t.Fatalf("points=%d, want %d (each capture once)", got, want)
	}
	if got, want := len(ep.Requests()), n; got != want {
		t.Fatalf("requests=%d, want %d", got, want)
	}
	for _, p := range ps {
		ds := deliveries(t, e.db, p.ID)
		if got, want := len(ds), 3; got != want {
			t.Fatalf("deliveries of %s=%d, want %d", p.ID, got, want)
		}
		for tgt, d := range ds {
			if d.State != pay.DeliveryDone || d.Attempts != 1 {
				t.Fatalf("delivery %s of %s=%+v, want done at the first attempt", tgt, p.ID, d)
			}
		}
	}
	if got, max := cs.updates.Load(), int64(1+1+n); got > max {
		t.Fatalf("write transactions=%d for %d records (%d deliveries), want at most %d", got, n, 3*n, max)
	}
	if got, want := cs.endpoints.Load(), int64(1); got != want {
		t.Fatalf("endpoint health writes=%d after %d successes, want %d (on change only)", got, n, want)
	}
}

// TestFanOut_NoWriteWithoutDeliveries: records that no target wants cost
// no write transaction; the cursor moves past them with the next write
// that ripple makes anyway.
func TestFanOut_NoWriteWithoutDeliveries(t *testing.T) {
	t.Parallel()
	const n = 5
	ep := rippletest.NewEndpoint(t)
	e := newEnv(t, t0, ripple.Config{})
	cs := &countingStore{Store: e.db}
	e.svc = newService(t, cs, e.clock, ripple.Config{
		Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.refunded"}}},
	})
	var last pay.Payment
	for i := range n {
		last = e.payment(i+1, 1000, "EUR", pay.Customer{}) // no customer: no loyalty, no retention
		e.finalize(last.ID, pay.Captured)
	}
	if got := e.runOnce(); got != 0 {
		t.Fatalf("attempts=%d, want 0", got)
	}
	if got := cs.updates.Load(); got != 0 {
		t.Fatalf("write transactions=%d for %d records that no target wants, want 0", got, n)
	}
	if got := cursor(t, e.db); got != 0 {
		t.Fatalf("stored cursor=%d, want 0 (not written on its own)", got)
	}

	e.finalize(last.ID, pay.Refunded)
	e.settle()
	if got, want := len(ep.Requests()), 1; got != want {
		t.Fatalf("requests=%d, want %d", got, want)
	}
	// The refund in full appends payment.refund.succeeded and
	// payment.refunded.
	if got, want := cursor(t, e.db), uint64(n+2); got != want {
		t.Fatalf("stored cursor=%d, want %d", got, want)
	}
	if got, max := cs.updates.Load(), int64(2); got > max {
		t.Fatalf("write transactions=%d, want at most %d (fan-out, record)", got, max)
	}
}

func cursor(t *testing.T, db store.Store) uint64 {
	t.Helper()
	var cur uint64
	if err := db.View(context.Background(), func(tx store.Tx) (err error) { cur, err = tx.RippleCursor(); return err }); err != nil {
		t.Fatal(err)
	}
	return cur
}
