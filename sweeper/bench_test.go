package sweeper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/storetest"
	"github.com/paystate/paystate/sweeper"
)

// benchCandidates is the number of payments each measured pass corrects.
const benchCandidates = 100

// benchInsertBatch is how many payments one transaction of the loader
// inserts.
const benchInsertBatch = 50_000

// benchEnv is a database of n payments, 100 of them lost answers that the
// mock PSP captured. It is built once per size and kept for every run of
// the benchmark function (the testing package calls it several times, and
// runs the cleanups of b in between), and removed by TestMain.
type benchEnv struct {
	dir        string
	db         *bolt.DB
	clock      *storetest.Clock
	mock       *mock.Provider
	sw         *sweeper.Sweeper
	candidates []string
	loadTime   time.Duration
}

var (
	benchMu   sync.Mutex
	benchEnvs = map[int]*benchEnv{}
)

// closeBenchEnvs closes and removes every benchmark database.
func closeBenchEnvs() {
	benchMu.Lock()
	defer benchMu.Unlock()
	for n, e := range benchEnvs {
		_ = e.mock.Close()
		_ = e.db.Close()
		_ = os.RemoveAll(e.dir)
		delete(benchEnvs, n)
	}
}

// loadBenchEnv builds the database of n payments: n−100 of them are not
// candidates (captured and failed, or finalize_pending and processing but
// updated too recently), spread over time; the 100 candidates are
// finalize_pending and older than min_age.
func loadBenchEnv(b *testing.B, n int) *benchEnv {
	benchMu.Lock()
	defer benchMu.Unlock()
	if e, ok := benchEnvs[n]; ok {
		return e
	}
	start := time.Now()
	dir, err := os.MkdirTemp("", "paystate-bench-")
	if err != nil {
		b.Fatal(err)
	}
	clock := storetest.NewClock(t0)
	db, err := bolt.Open(filepath.Join(dir, "paystate.db"), &bolt.Options{Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	mk, err := mock.New(mock.Config{}, mock.WithNow(clock.Now))
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{dir: dir, db: db, clock: clock, mock: mk}
	benchEnvs[n] = e
	ctx := context.Background()

	// The payments, in big transactions. Times run over the 30 days before
	// "now" (t0 + 30 days); the last 5% are younger than min_age. The clock
	// stays at now for every pass.
	now := t0.Add(30 * 24 * time.Hour)
	span := now.Sub(t0)
	others := n - benchCandidates
	for lo := 0; lo < others; lo += benchInsertBatch {
		hi := min(lo+benchInsertBatch, others)
		err := db.Update(ctx, func(tx store.Tx) error {
			for i := lo; i < hi; i++ {
				at := t0.Add(time.Duration(int64(span) / int64(others) * int64(i)))
				young := i >= others*95/100
				if young {
					at = now.Add(-time.Duration(others-i) * time.Millisecond) // well within min_age
				}
				p := benchPayment(i, at)
				switch {
				case young && i%2 == 0:
					p.Status = pay.FinalizePending // not a candidate yet
				case young:
					p.Status = pay.Processing
				case i%10 == 0:
					p.Status = pay.Failed
				default:
					p.Status = pay.Captured
				}
				if err := tx.InsertPayment(p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("load: %v", err)
		}
	}

	// The candidates: charged at the PSP, answer lost.
	err = db.Update(ctx, func(tx store.Tx) error {
		for i := range benchCandidates {
			p := benchPayment(n+i, t0.Add(time.Duration(i)*time.Minute))
			p.Amount = 1004
			p.Status = pay.FinalizePending
			if err := tx.InsertPayment(p); err != nil {
				return err
			}
			e.candidates = append(e.candidates, p.ID)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range e.candidates {
		var p pay.Payment
		if err := db.View(ctx, func(tx store.Tx) (err error) { p, err = tx.Payment(id); return err }); err != nil {
			b.Fatal(err)
		}
		if _, err := mk.Create(ctx, p, finalize.ChargeKey(p.ID)); pay.ErrorCode(err) != pay.EPSP {
			b.Fatalf("mock charge of a ...04 amount: err=%v, want the lost answer", err)
		}
	}

	clock.Add(now.Sub(clock.Now()))
	e.sw = &sweeper.Sweeper{
		Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"mock": mk}, Now: clock.Now,
		Leases: &finalize.Leases{Store: db, Holder: "sweeper", TTL: 30 * time.Second},
		MinAge: minAge, GiveUpAfter: giveUpAfter, ExpireAfter: 365 * 24 * time.Hour, ProcessedRetention: retention,
		Batch: benchCandidates,
	}
	e.loadTime = time.Since(start)
	return e
}

// benchPayment returns payment i, created and updated at at.
func benchPayment(i int, at time.Time) pay.Payment {
	return pay.Payment{
		ID: fmt.Sprintf("pay_%026d", i), OrderID: fmt.Sprintf("order-%09d", i), Amount: 1000, Currency: "EUR",
		Customer: pay.Customer{ID: "cus_1"}, Provider: "mock", Version: 1, CreatedAt: at, UpdatedAt: at,
	}
}

// reset puts the candidates back in finalize_pending, older than min_age,
// as if their answers had been lost again.
func (e *benchEnv) reset(b *testing.B) {
	err := e.db.Update(context.Background(), func(tx store.Tx) error {
		old := tx.Now().Add(-2 * minAge)
		for _, id := range e.candidates {
			p, err := tx.Payment(id)
			if err != nil {
				return err
			}
			prev := p.Version
			p.Status, p.UpdatedAt, p.Version = pay.FinalizePending, old, prev+1
			if err := tx.UpdatePayment(p, prev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// benchParallel are the values of Sweeper.Parallel the benchmarks compare:
// 1 (one candidate after the other, as before the pipelined pass) and the
// default.
var benchParallel = []int{1, sweeper.DefaultParallel}

// pass resets the candidates and runs one pass with the given parallelism,
// timed (the reset is not), and checks that it corrected every candidate.
func (e *benchEnv) pass(b *testing.B, parallel int) time.Duration {
	b.StopTimer()
	e.reset(b)
	e.sw.Parallel = parallel
	b.StartTimer()
	start := time.Now()
	if _, err := e.sw.RunOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if rep := e.sw.LastReport(); rep.Corrected != benchCandidates || rep.Candidates != benchCandidates {
		b.Fatalf("report=%+v, want %d candidates corrected", rep, benchCandidates)
	}
	return d
}

// BenchmarkSweeperPass measures one pass that corrects 100 lost answers
// (lease, PSP status, finalize with outbox and ledger, release) in a
// database of 10k and of 1M payments, one candidate at a time and
// Parallel at a time. Candidates come from the status+time index, so the
// two sizes should cost about the same.
func BenchmarkSweeperPass(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		for _, par := range benchParallel {
			b.Run(fmt.Sprintf("payments=%d/parallel=%d", n, par), func(b *testing.B) {
				if n > 100_000 && testing.Short() {
					b.Skip("1M payments: skipped under -short")
				}
				e := loadBenchEnv(b, n)
				b.ResetTimer()
				for range b.N {
					e.pass(b, par)
				}
				b.ReportMetric(benchCandidates, "candidates/op")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*benchCandidates), "ms/correction")
				b.ReportMetric(e.loadTime.Seconds(), "setup-s")
			})
		}
	}
}

// BenchmarkSweeperPassRatio runs the passes of both sizes, one candidate
// at a time and Parallel at a time, in turns, so that all four see the
// same machine (other processes, the disk's fsync latency), and reports
// per-correction times and the ratios of their totals: 1M against 10k
// (the O(candidates) claim) and sequential against pipelined. Its ns/op
// is one pass of each kind.
func BenchmarkSweeperPassRatio(b *testing.B) {
	if testing.Short() {
		b.Skip("1M payments: skipped under -short")
	}
	small, large := loadBenchEnv(b, 10_000), loadBenchEnv(b, 1_000_000)
	par := sweeper.DefaultParallel
	var ss, sl, ps, pl time.Duration // sequential and parallel, small and large
	b.ResetTimer()
	for range b.N {
		ss += small.pass(b, 1)
		ps += small.pass(b, par)
		sl += large.pass(b, 1)
		pl += large.pass(b, par)
	}
	perCorrection := func(d time.Duration) float64 {
		return float64(d.Microseconds()) / 1000 / float64(b.N*benchCandidates)
	}
	b.ReportMetric(perCorrection(ss), "ms/corr-10k-seq")
	b.ReportMetric(perCorrection(ps), "ms/corr-10k-par")
	b.ReportMetric(perCorrection(sl), "ms/corr-1M-seq")
	b.ReportMetric(perCorrection(pl), "ms/corr-1M-par")
	b.ReportMetric(float64(pl)/float64(ps), "ratio-1M/10k-par")
	b.ReportMetric(float64(sl)/float64(ss), "ratio-1M/10k-seq")
	b.ReportMetric(float64(ss)/float64(ps), "speedup-10k")
	b.ReportMetric(float64(sl)/float64(pl), "speedup-1M")
}
