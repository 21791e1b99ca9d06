package ripple_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/postgres"
)

// BenchmarkDeliver measures fan-out and delivery of captured payments to
// loyalty and retention on a real bbolt file: each iteration captures 100
// payments and runs passes until all 200 deliveries are done. It reports
// deliveries per second.
func BenchmarkDeliver(b *testing.B) { benchDeliver(b, "") }

// benchDeliver captures 100 payments per iteration (timer stopped) and runs
// passes until every delivery is done, to loyalty, retention and, if url is
// set, one merchant endpoint; it reports deliveries per second.
func benchDeliver(b *testing.B, url string) {
	ctx := context.Background()
	db, svc, f := benchEnv(b, url)
	const perIter = 100
	i, delivered := 0, 0
	for b.Loop() {
		b.StopTimer()
		for range perIter {
			i++
			if err := capture(ctx, db, f, i); err != nil {
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

// benchEnv is a store on a real bbolt file and a ripple service over it
// with loyalty, retention and, if url is set, one merchant endpoint for
// payment.captured.
func benchEnv(b *testing.B, url string) (*bolt.DB, *ripple.Service, *finalize.Finalizer) {
	b.Helper()
	db := bolttest.MustOpen(b, nil)
	cfg := ripple.Config{PointsPerUnit: 1}
	if url != "" {
		cfg.Webhooks = []ripple.EndpointConfig{endpointConfig(url)}
	}
	svc, err := ripple.New(db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	return db, svc, finalize.New(db)
}

// capture stores payment i as processing and captures it through finalize.
func capture(ctx context.Context, db store.Store, f *finalize.Finalizer, i int) error {
	p := pay.Payment{
		ID: fmt.Sprintf("pay_%026d", i), OrderID: fmt.Sprintf("order-%d", i), Amount: 1000, Currency: "EUR",
		Customer: pay.Customer{ID: fmt.Sprintf("cus_%d", i%10)}, Provider: "mock", Status: pay.Processing, Version: 1,
	}
	if err := db.Update(ctx, func(tx store.Tx) error {
		p.CreatedAt, p.UpdatedAt = tx.Now(), tx.Now()
		return tx.InsertPayment(p)
	}); err != nil {
		return err
	}
	_, err := f.Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Captured})
	return err
}

// BenchmarkDeliverEndpoint is BenchmarkDeliver with one merchant endpoint
// (a real HTTP server on 127.0.0.1) as a third target: each iteration
// captures 100 payments and runs passes until their 300 deliveries are
// done. It reports deliveries per second.
func BenchmarkDeliverEndpoint(b *testing.B) {
	benchDeliver(b, rippletest.NewEndpoint(b).URL)
}

// BenchmarkEndpointAlone posts signed-size bodies to the same kind of
// endpoint as BenchmarkDeliverEndpoint from DefaultMaxInFlight goroutines
// over keep-alive connections: the ceiling of one endpoint's lane.
func BenchmarkEndpointAlone(b *testing.B) {
	ep := rippletest.NewEndpoint(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost = ripple.DefaultMaxInFlight, ripple.DefaultMaxInFlight
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	body := bytes.Repeat([]byte("x"), 300)
	b.SetParallelism((ripple.DefaultMaxInFlight + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Post(ep.URL, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// BenchmarkKeepPace creates 2,000 captured payments from 64 goroutines as
// fast as the store takes them while Run delivers to loyalty, retention
// and one merchant endpoint, and reports the time from the first create
// to the last delivery divided by the time the creates took (the issue's
// target: at most 1.5).
func BenchmarkKeepPace(b *testing.B) {
	ep := rippletest.NewEndpoint(b)
	var ratios []float64
	for b.Loop() {
		db, svc, f := benchEnv(b, ep.URL)
		ratios = append(ratios, keepPace(b, db, svc, f))
	}
	reportRatio(b, ratios)
}

// BenchmarkKeepPaceStores is BenchmarkKeepPace on bbolt and on
// PostgreSQL (several instances' settings: Shared, the fan-out in the
// transition), and also reports ripple's write transactions per delivery
// and the commits of the whole run (creates included) per payment: on
// bbolt the store's committer's, on PostgreSQL every write transaction
// (one commit each).
func BenchmarkKeepPaceStores(b *testing.B) {
	ep := rippletest.NewEndpoint(b)
	for _, backend := range []string{"bolt", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var ratios []float64
			var rippleTxs, commits, deliveries, payments int64
			for b.Loop() {
				b.StopTimer()
				var (
					db  store.Store
					cfg = ripple.Config{PointsPerUnit: 1, Webhooks: []ripple.EndpointConfig{endpointConfig(ep.URL)}}
				)
				if backend == "bolt" {
					db = bolttest.MustOpen(b, nil)
				} else {
					pg, err := postgres.Open(context.Background(), pgtest.Schema(b), nil)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = pg.Close() })
					db, cfg.Shared, cfg.FanOut = pg, true, pg.SetFanOut
				}
				creates, rippleStore := &countingStore{Store: db}, &countingStore{Store: db}
				svc, err := ripple.New(rippleStore, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(svc.Close)
				boltCommits := metrics.GetOrCreateCounter(`paystate_store_commits_total`)
				before := boltCommits.Get()
				b.StartTimer()
				ratios = append(ratios, keepPace(b, creates, svc, finalize.New(creates)))
				rippleTxs += rippleStore.updates.Load()
				deliveries += 3 * keepPaceN
				payments += keepPaceN
				if backend == "bolt" {
					commits += int64(boltCommits.Get() - before)
				} else {
					commits += creates.updates.Load() + rippleStore.updates.Load()
				}
			}
			b.ReportMetric(float64(rippleTxs)/float64(deliveries), "ripple-tx/delivery")
			b.ReportMetric(float64(commits)/float64(payments), "commits/payment")
			reportRatio(b, ratios)
		})
	}
}

func endpointConfig(url string) ripple.EndpointConfig {
	return ripple.EndpointConfig{URL: url, Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}, Events: []string{"payment.captured"}}
}

// keepPaceN is how many payments keepPace creates.
const keepPaceN = 2000

// keepPace creates keepPaceN captured payments from 64 goroutines while
// svc's Run delivers them, reports creates/s and deliveries/s, and
// returns the time to the last delivery divided by the creates' time.
func keepPace(b *testing.B, db store.Store, svc *ripple.Service, f *finalize.Finalizer) float64 {
	const n, clients = keepPaceN, 64
	ctx, cancel := context.WithCancel(context.Background())
	svc.Interval = 50 * time.Millisecond
	f.Notify = svc.Notify
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				if err := capture(ctx, db, f, i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	created := time.Since(start)
	tick := time.NewTicker(5 * time.Millisecond)
	for range tick.C {
		var doneN int
		if err := db.View(ctx, func(tx store.Tx) (err error) { doneN, err = tx.CountDeliveries(pay.DeliveryDone); return err }); err != nil {
			b.Fatal(err)
		}
		if doneN == 3*n {
			break
		}
	}
	tick.Stop()
	delivered := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/created.Seconds(), "creates/s")
	b.ReportMetric(float64(3*n)/delivered.Seconds(), "deliveries/s")
	return delivered.Seconds() / created.Seconds()
}

// reportRatio reports the mean of ratios as deliver/create.
func reportRatio(b *testing.B, ratios []float64) {
	sum := 0.0
	for _, r := range ratios {
		sum += r
	}
	b.ReportMetric(sum/float64(len(ratios)), "deliver/create")
}
