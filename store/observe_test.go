package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/paystate/paystate/pay"
)

// BenchmarkPaymentCounts measures one scrape's count of payments per
// status (the paystate_payments gauge) on a database of n payments spread
// over the eight statuses.
func BenchmarkPaymentCounts(b *testing.B) {
	for _, n := range []int64{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("payments=%d", n), func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "counts.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			const batch = 20_000
			for start := int64(0); start < n; start += batch {
				err := db.Update(context.Background(), func(t pay.Tx) error {
					for i := start; i < min(start+batch, n); i++ {
						p := benchPayment(i)
						p.Status = pay.Statuses[i%int64(len(pay.Statuses))]
						if err := t.InsertPayment(p); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				var c map[pay.Status]int
				err := db.View(context.Background(), func(t pay.Tx) (err error) { c, err = t.PaymentCounts(); return err })
				if err != nil {
					b.Fatal(err)
				}
				if got := c[pay.Created] + c[pay.Captured] + c[pay.Failed] + c[pay.Refunded] + c[pay.Processing] + c[pay.RequiresAction] + c[pay.FinalizePending] + c[pay.Expired]; int64(got) != n {
					b.Fatalf("counted %d payments, want %d", got, n)
				}
			}
		})
	}
}
