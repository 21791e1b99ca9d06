package ripple_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

// BenchmarkDeliver measures fan-out and delivery of captured payments to
// loyalty and retention on a real bbolt file: each iteration captures 100
// payments and runs passes until all 200 deliveries are done. It reports
// deliveries per second.
func BenchmarkDeliver(b *testing.B) {
	ctx := context.Background()
	clock := storetest.NewClock(t0)
	db := bolttest.MustOpen(b, &store.Options{Now: clock.Now})
	svc, err := ripple.New(db, ripple.Config{PointsPerUnit: 1})
	if err != nil {
		b.Fatal(err)
	}
	svc.Now = clock.Now
	f := finalize.New(db)
	const perIter = 100
	i, delivered := 0, 0
	for b.Loop() {
		b.StopTimer()
		for range perIter {
			i++
			p := pay.Payment{
				ID: fmt.Sprintf("pay_%026d", i), OrderID: fmt.Sprintf("order-%d", i), Amount: 1000, Currency: "EUR",
				Customer: pay.Customer{ID: fmt.Sprintf("cus_%d", i%10)}, Provider: "mock", Status: pay.Processing, Version: 1,
				CreatedAt: t0, UpdatedAt: t0,
			}
			if err := db.Update(ctx, func(tx pay.Tx) error { return tx.InsertPayment(p) }); err != nil {
				b.Fatal(err)
			}
			if _, err := f.Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Captured}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for {
			n, err := svc.RunOnce(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
			delivered += n
		}
	}
	b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "deliveries/s")
}
