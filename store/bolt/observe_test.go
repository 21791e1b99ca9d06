package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// BenchmarkPaymentCounts measures one scrape's count of payments per
// status (the paystate_payments gauge) on a database of n payments spread
// over the eight statuses.
func BenchmarkPaymentCounts(b *testing.B) {
	for _, n := range []int64{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("payments=%d", n), func(b *testing.B) {
			db := openFilled(b, n, func(t store.Tx, i int64) error {
				p := benchPayment(i)
				p.Status = pay.Statuses[i%int64(len(pay.Statuses))]
				return t.InsertPayment(p)
			})
			b.ResetTimer()
			for b.Loop() {
				var c map[pay.Status]int
				err := db.View(context.Background(), func(t store.Tx) (err error) { c, err = t.PaymentCounts(); return err })
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

// BenchmarkReviewAndDisputeCounts measures the rest of one scrape's count
// of stored state (finalize.Payments.CountStored): the review queue, read
// whole, and the open disputes, on a queue of n items with notes of the
// length the sweeper writes.
func BenchmarkReviewAndDisputeCounts(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("review=%d", n), func(b *testing.B) {
			db := openFilled(b, int64(n), func(t store.Tx, i int64) error {
				p := benchPayment(i)
				return t.PutReview(pay.ReviewItem{ID: p.ID, PaymentID: p.ID, Reason: pay.ReasonUnresolved, Provider: "mock",
					Note: "the PSP does not know the payment yet; asked 12 times since the first pass", CreatedAt: p.CreatedAt})
			})
			b.ResetTimer()
			for b.Loop() {
				err := db.View(context.Background(), func(t store.Tx) error {
					items, err := t.ListReview()
					if err != nil {
						return err
					}
					if len(items) != n {
						return fmt.Errorf("%d review items, want %d", len(items), n)
					}
					_, err = t.CountOpenDisputes()
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// openFilled opens a database in b's temporary directory, closed at the
// end of b, with put called for i in [0, n), 20,000 to a transaction.
func openFilled(b *testing.B, n int64, put func(t store.Tx, i int64) error) *DB {
	b.Helper()
	db, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	const batch = 20_000
	for start := int64(0); start < n; start += batch {
		err := db.Update(context.Background(), func(t store.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				if err := put(t, i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return db
}
