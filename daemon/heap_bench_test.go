package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
)

// BenchmarkLoadHeap creates b.N payments (run it with -benchtime 1000000x)
// through a whole paystate over HTTP on loopback — the mock PSP captures
// each in the create's answer and sends its webhook at once, loyalty and
// retention deliver every capture — from 32 clients, and samples the live
// heap (HeapAlloc right after a GC) every 10,000 payments. It reports the
// largest sample (MiB-heap-max) and the last one, the mock PSP's
// remembered charges included (providers.mock.max_charges, default
// 25,000). Every 1,000 payments it also reads, without a GC, the heap in
// use (HeapInuse: live objects and the garbage not yet collected), and
// reports its largest value (MiB-inuse-max): what the collector's settings
// (GOGC, GOMEMLIMIT; `paystate serve` sets its own, cli/gc.go) trade
// against CPU. The benchmark runs at the test binary's settings; set the
// environment as serve would to measure serve's.
func BenchmarkLoadHeap(b *testing.B) {
	cfg := config.DefaultConfig()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Path = filepath.Join(b.TempDir(), "paystate.db")
	cfg.Providers.Mock.WebhookDelay = config.Duration{}
	m := daemon.New(cfg, zerolog.Nop())
	if err := m.Open(); err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	base := m.Server.URL()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer hc.CloseIdleConnections()

	var (
		next     atomic.Int64
		done     atomic.Int64
		mu       sync.Mutex
		maxHeap  uint64
		lastHeap uint64
		maxInuse uint64
		failed   error
	)
	peek := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		maxInuse = max(maxInuse, ms.HeapInuse)
		mu.Unlock()
	}
	sample := func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		maxHeap, lastHeap = max(maxHeap, ms.HeapAlloc), ms.HeapAlloc
		mu.Unlock()
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"order_id":"heap-%d","amount":%d,"currency":"EUR","provider":"mock","customer":{"id":"cus_%d"}}`, i, 1500+100*(i%40), i%1000)
				req, _ := http.NewRequest("POST", base+"/v1/payments", bytes.NewBufferString(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("heap-%d", i))
				res, err := hc.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusCreated {
						err = fmt.Errorf("create %d: HTTP %d", i, res.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				switch n := done.Add(1); {
				case n%10_000 == 0:
					peek() // before the sample's GC
					sample()
				case n%1_000 == 0:
					peek()
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	sample()
	b.ReportMetric(float64(maxHeap)/(1<<20), "MiB-heap-max")
	b.ReportMetric(float64(lastHeap)/(1<<20), "MiB-heap-last")
	b.ReportMetric(float64(maxInuse)/(1<<20), "MiB-inuse-max")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "payments/s")
}
