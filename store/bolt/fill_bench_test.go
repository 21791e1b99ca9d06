package bolt

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

// BenchmarkSplitFill measures the page fill bbolt reaches with a bucket's
// FillPercent, for keys that arrive in random order (idempotency keys made
// as UUIDs, PSP event ids) and in increasing order (a merchant's order
// numbers, ULIDs): 20,000 keys of 30–34 bytes with 60-byte values, four
// per transaction. It reports fill-% (bytes in use ÷ bytes of the leaf
// pages) and page-B/key; b.N does not matter (-benchtime 1x). This is what
// appendFill and appendOnly (keys.go) were chosen from: a high fill suits
// increasing keys and ruins random ones, because every split then leaves a
// full page that the next key in its range splits again. "interleaved" is
// four clients' increasing keys, one of each per transaction; "counter"
// is a count without leading zeros ("-10" sorts between "-1" and "-2", so
// each key lands right after the one before it); fill=chosen
// is chooseFill (tx.go), which picks per transaction.
func BenchmarkSplitFill(b *testing.B) {
	const n, perTx = 20000, 4
	const chosen = 0 // fill: chooseFill
	for _, order := range []string{"random", "increasing", "interleaved", "counter"} {
		for _, fill := range []float64{chosen, 0.5, 0.7, 0.8, 0.9, 0.95} {
			name := fmt.Sprintf("%s/fill=%.2f", order, fill)
			if fill == chosen {
				name = order + "/fill=chosen"
			}
			b.Run(name, func(b *testing.B) {
				var stats bbolt.BucketStats
				for range b.N {
					db, err := bbolt.Open(filepath.Join(b.TempDir(), "fill.db"), 0o600, &bbolt.Options{NoSync: true})
					if err != nil {
						b.Fatal(err)
					}
					value := make([]byte, 60)
					for i := 0; i < n; i += perTx {
						err := db.Update(func(btx *bbolt.Tx) error {
							bk, err := btx.CreateBucketIfNotExists([]byte("keys"))
							if err != nil {
								return err
							}
							if fill != chosen {
								bk.FillPercent = fill
							}
							for j := i; j < i+perTx; j++ {
								key := fmt.Sprintf("order-%010d-%s", j, "abcdefghijkl")
								switch order {
								case "random":
									r := make([]byte, 16)
									_, _ = rand.Read(r)
									key = hex.EncodeToString(r)
								case "interleaved":
									key = fmt.Sprintf("order-%d-%010d-%s", j%perTx, j/perTx, "abcdefghijkl")
								case "counter":
									key = fmt.Sprintf("order-abcdefghijkl-%d", j)
								}
								if fill == chosen {
									chooseFill(bk, []byte(key), value)
								}
								if err := bk.Put([]byte(key), value); err != nil {
									return err
								}
							}
							return nil
						})
						if err != nil {
							b.Fatal(err)
						}
					}
					if err := db.View(func(btx *bbolt.Tx) error {
						stats = btx.Bucket([]byte("keys")).Stats()
						return nil
					}); err != nil {
						b.Fatal(err)
					}
					if err := db.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(100*float64(stats.LeafInuse)/float64(stats.LeafAlloc), "fill-%")
				b.ReportMetric(float64(stats.LeafAlloc+stats.BranchAlloc)/n, "page-B/key")
			})
		}
	}
}
