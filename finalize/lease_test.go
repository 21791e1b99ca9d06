package finalize_test

import (
	"context"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

func TestLeases_Do(t *testing.T) {
	clock := storetest.NewClock(time.Now().UTC())
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	ctx := context.Background()
	r := &finalize.Leases{Store: db, Holder: "test", TTL: 30 * time.Second, Now: clock.Now}
	headroom := metrics.GetOrCreateGauge(`paystate_lease_ttl_headroom_low`, nil)

	// Held: the work does not run.
	err := r.Do(ctx, "pay_1", func(ctx context.Context, token uint64) error {
		if token == 0 {
			t.Fatal("no fencing token")
		}
		inner := r.Do(ctx, "pay_1", func(context.Context, uint64) error {
			t.Fatal("work ran under a lease held by another")
			return nil
		})
		if got, want := pay.ErrorCode(inner), pay.ELEASEHELD; got != want {
			t.Fatalf("nested Do: code=%q, want %q", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Released: the next holder gets a higher token.
	var tokens []uint64
	for range 2 {
		if err := r.Do(ctx, "pay_1", func(_ context.Context, token uint64) error { tokens = append(tokens, token); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if tokens[1] <= tokens[0] {
		t.Fatalf("tokens %v not increasing", tokens)
	}

	// Slow work (past half the TTL at p99) raises the headroom alarm ...
	for range 20 {
		if err := r.Do(ctx, "pay_2", func(context.Context, uint64) error { clock.Add(20 * time.Second); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.P99(), 20*time.Second; got != want {
		t.Fatalf("P99=%s, want %s", got, want)
	}
	if got, want := headroom.Get(), 1.0; got != want {
		t.Fatalf("headroom_low=%v, want %v", got, want)
	}
	// ... and fast work lowers it again once the slow runs leave the p99.
	for range 600 {
		if err := r.Do(ctx, "pay_3", func(context.Context, uint64) error { clock.Add(time.Millisecond); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := headroom.Get(), 0.0; got != want {
		t.Fatalf("headroom_low=%v, want %v", got, want)
	}
}
