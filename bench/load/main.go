// Command load drives a running paystate over HTTP: it creates -n payments
// with the mock PSP from -c concurrent clients and reports throughput,
// latency percentiles and the statuses answered. It only talks to a server
// on this machine (a loopback address) and stops after -n requests or -d.
//
//	go run ./bench/load -url http://127.0.0.1:8080 -n 5000 -c 32
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run() error {
	base := flag.String("url", "http://127.0.0.1:8080", "paystate base URL (loopback only)")
	key := flag.String("api-key", os.Getenv("PAYSTATE_API_KEY"), "API key, if the server has one")
	n := flag.Int("n", 2000, "payments to create")
	c := flag.Int("c", 32, "concurrent clients")
	d := flag.Duration("d", 5*time.Minute, "stop after this long at the latest")
	provider := flag.String("provider", "mock", "provider of the payments")
	flag.Parse()

	u, err := url.Parse(*base)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errors.New("-url must be a loopback address: this tool loads a paystate on this machine only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *d)
	defer cancel()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *c}}
	run := fmt.Sprint(time.Now().UnixNano())

	var (
		next      atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
		statuses  = map[string]int{}
		errs      int
		wg        sync.WaitGroup
	)
	start := time.Now()
	for range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1))
				if i > *n {
					return
				}
				amount := 1000 + 100*(i%50) + []int{0, 0, 0, 1, 2, 3, 57}[i%7]
				body := fmt.Sprintf(`{"order_id":"load-%s-%d","amount":%d,"currency":"EUR","provider":%q,"customer":{"id":"cus_%d"}}`, run, i, amount, *provider, i%100)
				req, _ := http.NewRequestWithContext(ctx, "POST", *base+"/v1/payments", bytes.NewBufferString(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("load-%s-%d", run, i))
				if *key != "" {
					req.Header.Set("Authorization", "Bearer "+*key)
				}
				t0 := time.Now()
				res, err := hc.Do(req)
				lat := time.Since(t0)
				status := "error"
				if err == nil {
					var v struct {
						Status string `json:"status"`
					}
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					json.Unmarshal(b, &v)
					status = fmt.Sprintf("%d %s", res.StatusCode, v.Status)
				}
				mu.Lock()
				latencies = append(latencies, lat)
				statuses[status]++
				if err != nil {
					errs++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p/100*float64(len(latencies))))]
	}
	fmt.Printf("requests     %d in %s (%d clients)\n", len(latencies), elapsed.Round(time.Millisecond), *c)
	fmt.Printf("throughput   %.0f payments/s\n", float64(len(latencies))/elapsed.Seconds())
	fmt.Printf("latency      p50 %s  p95 %s  p99 %s  max %s\n", pct(50).Round(time.Microsecond), pct(95).Round(time.Microsecond), pct(99).Round(time.Microsecond), pct(100).Round(time.Microsecond))
	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("answered     %-24s %d\n", k, statuses[k])
	}
	if errs > 0 {
		return fmt.Errorf("%d requests failed", errs)
	}
	return nil
}
