// Command load drives a running paystate over HTTP from -c concurrent
// clients and reports throughput, latency percentiles and the statuses
// answered. It only talks to a server on this machine (a loopback address)
// and stops after -n requests or -d.
//
// -mode create (the default) creates -n payments with the given provider
// (the mock PSP by default):
//
//	go run ./bench/load -url http://127.0.0.1:8080 -n 5000 -c 32
//
// -url may list several servers, comma-separated (instances of one
// paystate on a shared PostgreSQL): request i goes to server i mod their
// number, so creates and webhooks are spread round robin (the webhook of
// payment i goes to the server after the one that created it), and -wait
// sums the status changes of all of them.
//
// -mode webhook first creates -n payments of the report-mode provider
// (standard) through the API, which stay created (not timed), then posts
// one signed Standard Webhook per payment (payment.captured, the payment's
// own amount and currency) to /webhooks/standard, signed with
// -standard-secret (by default the development secret that "paystate
// serve" uses on its embedded defaults), and reports webhooks/s. With
// -wait it then waits until the server has applied them (the server's
// paystate_finalize_outcomes_total{outcome="flipped"} has grown by -n, so
// other traffic on the same server counts too), and prints the CPU time
// it used itself from the first webhook until then ("load cpu"), so that
// a benchmark can tell the load's share of the machine from the server's.
// -before-webhooks runs a shell command between the creates and the first
// webhook, so that what it resets counts the webhooks alone:
//
//	go run ./bench/load -mode webhook -n 5000 -c 64
package main

import (
	"bufio"
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
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/psp/stdwebhook"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// loader is one run's settings and HTTP client.
type loader struct {
	bases []string
	key   string
	c     int
	hc    *http.Client
}

func run() error {
	base := flag.String("url", "http://127.0.0.1:8080", "paystate base URL (loopback only); several, comma-separated: round robin")
	key := flag.String("api-key", os.Getenv("PAYSTATE_API_KEY"), "API key, if the server has one")
	mode := flag.String("mode", "create", `"create": create payments; "webhook": create payments of the standard provider, then send their webhooks`)
	n := flag.Int("n", 2000, "payments to create (and, in webhook mode, webhooks to send)")
	c := flag.Int("c", 32, "concurrent clients")
	d := flag.Duration("d", 5*time.Minute, "stop after this long at the latest")
	provider := flag.String("provider", "mock", "provider of the payments (create mode)")
	secret := flag.String("standard-secret", config.DevelopmentWebhookSecret, "providers.standard.webhook_secret of the server (webhook mode)")
	wait := flag.Bool("wait", true, "webhook mode: wait until the server has applied the webhooks")
	before := flag.String("before-webhooks", "", "webhook mode: a shell command (sh -c) run after the creates, before the first webhook (bench/pg/instances.sh resets PostgreSQL's statistics there)")
	flag.Parse()

	var bases []string
	for b := range strings.SplitSeq(*base, ",") {
		u, err := url.Parse(strings.TrimSpace(b))
		if err != nil {
			return fmt.Errorf("-url %q: %w", b, err)
		}
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return errors.New("-url must be a loopback address: this tool loads a paystate on this machine only")
		}
		bases = append(bases, strings.TrimRight(strings.TrimSpace(b), "/"))
	}
	if *c < 1 || *n < 1 {
		return errors.New("-n and -c must be at least 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *d)
	defer cancel()
	l := &loader{
		bases: bases, key: *key, c: *c,
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *c}},
	}
	run := fmt.Sprint(time.Now().UnixNano())
	switch *mode {
	case "create":
		res := l.fire(ctx, *n, func(i int) (*http.Request, error) {
			amount := 1000 + 100*(i%50) + []int{0, 0, 0, 1, 2, 3, 57}[i%7]
			return l.createRequest(ctx, run, i, amount, *provider)
		})
		res.print("payments", *c)
		return res.err(false)
	case "webhook":
		return l.webhooks(ctx, run, *n, *secret, *wait, *before)
	default:
		return fmt.Errorf("-mode %q: want create or webhook", *mode)
	}
}

// createRequest is the create of payment i of this run.
func (l *loader) createRequest(ctx context.Context, run string, i, amount int, provider string) (*http.Request, error) {
	body := fmt.Sprintf(`{"order_id":"load-%s-%d","amount":%d,"currency":"EUR","provider":%q,"customer":{"id":"cus_%d"}}`, run, i, amount, provider, i%100)
	req, err := http.NewRequestWithContext(ctx, "POST", l.base(i)+"/v1/payments", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("load-%s-%d", run, i))
	if l.key != "" {
		req.Header.Set("Authorization", "Bearer "+l.key)
	}
	return req, nil
}

// webhooks is -mode webhook: n payments of the standard provider, then one
// signed payment.captured webhook for each.
func (l *loader) webhooks(ctx context.Context, run string, n int, secret string, wait bool, before string) error {
	signer, err := stdwebhook.NewSigner(secret)
	if err != nil {
		return fmt.Errorf("-standard-secret: %w", err)
	}

	// The payments, through the API; they stay created (report mode).
	const amount = 1000
	ids := make([]string, n)
	res := l.fire(ctx, n, func(i int) (*http.Request, error) {
		return l.createRequest(ctx, run, i, amount, "standard")
	}, func(i int, body []byte) {
		var v struct{ ID string }
		if json.Unmarshal(body, &v) == nil {
			ids[i] = v.ID
		}
	})
	res.print("payments (standard, setup)", l.c)
	if err := res.err(true); err != nil {
		return err
	}
	for i, id := range ids {
		if id == "" {
			return fmt.Errorf("create %d: no payment id in the answer", i)
		}
	}

	// Sign every webhook before the first is sent: the clients' time is
	// spent sending. The timestamps must stay within the server's
	// webhook_inbox.tolerance (5 minutes by default) until the last one.
	bodies, headers := make([][]byte, n), make([]http.Header, n)
	now := time.Now()
	for i, id := range ids {
		evt := stdwebhook.Event{ID: "evt_load_" + id, Type: stdwebhook.TypeCaptured, Created: now, PaymentID: id, Amount: amount, Currency: "EUR"}
		if bodies[i], err = stdwebhook.EncodeEvent(evt); err != nil {
			return err
		}
		if headers[i], err = signer.Header(evt.ID, now, bodies[i]); err != nil {
			return err
		}
	}

	if before != "" {
		cmd := exec.CommandContext(ctx, "sh", "-c", before)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("-before-webhooks: %w", err)
		}
	}
	flipped, err := l.flipped(ctx)
	if err != nil && wait {
		return fmt.Errorf("read /metrics before the webhooks: %w", err)
	}
	cpu0 := cpuTime()
	start := time.Now()
	res = l.fire(ctx, n, func(i int) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", l.base(i+1)+"/webhooks/standard", bytes.NewReader(bodies[i]))
		if err != nil {
			return nil, err
		}
		req.Header = headers[i].Clone()
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	})
	res.print("webhooks", l.c)
	if err := res.err(true); err != nil || !wait {
		return err
	}

	// Applied: the server's count of status changes has grown by n.
	for {
		now, err := l.flipped(ctx)
		if err != nil {
			return fmt.Errorf("read /metrics: %w", err)
		}
		if now-flipped >= int64(n) {
			took := time.Since(start)
			fmt.Printf("applied      %d in %s after the first webhook: %.0f webhooks/s\n", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
			if cpu := cpuTime(); cpu0 >= 0 && cpu >= 0 {
				fmt.Printf("load cpu     %.3f s (user and system of this process) from the first webhook until applied\n", (cpu - cpu0).Seconds())
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d webhooks applied when -d ran out", now-flipped, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// base is the server of request i: round robin over -url.
func (l *loader) base(i int) string { return l.bases[i%len(l.bases)] }

// flipped sums paystate_finalize_outcomes_total{outcome="flipped"} (status
// changes) over the servers' /metrics.
func (l *loader) flipped(ctx context.Context) (int64, error) {
	var sum int64
	for _, b := range l.bases {
		n, err := l.flippedAt(ctx, b)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", b, err)
		}
		sum += n
	}
	return sum, nil
}

// flippedAt reads paystate_finalize_outcomes_total{outcome="flipped"} from
// the /metrics of the server at base; 0 if the server has none yet.
func (l *loader) flippedAt(ctx context.Context, base string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := l.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `paystate_finalize_outcomes_total{outcome="flipped"} `); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, sc.Err()
}

// result is what fire measured.
type result struct {
	elapsed   time.Duration
	latencies []time.Duration
	statuses  map[string]int
	errs      int   // requests that got no answer
	firstErr  error // the first of them
	non2xx    int   // answers that were not 2xx
	firstNon  string
}

// fire sends requests 0..n-1 (from newReq) from l.c clients until n are
// done or ctx ends. Each answer's body goes to the optional onBody.
func (l *loader) fire(ctx context.Context, n int, newReq func(i int) (*http.Request, error), onBody ...func(i int, body []byte)) result {
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		res  = result{statuses: map[string]int{}}
	)
	start := time.Now()
	for range l.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				req, err := newReq(i)
				var (
					lat  time.Duration
					body []byte
					code int
				)
				if err == nil {
					t0 := time.Now()
					var r *http.Response
					if r, err = l.hc.Do(req); err == nil {
						body, err = io.ReadAll(r.Body)
						r.Body.Close()
						code = r.StatusCode
					}
					lat = time.Since(t0)
				}
				status := "error"
				if err == nil {
					var v struct {
						Status string `json:"status"`
					}
					_ = json.Unmarshal(body, &v) // a webhook's answer has no status
					status = strings.TrimSpace(fmt.Sprintf("%d %s", code, v.Status))
					for _, f := range onBody {
						f(i, body)
					}
				}
				mu.Lock()
				res.latencies = append(res.latencies, lat)
				res.statuses[status]++
				switch {
				case err != nil:
					res.errs++
					if res.firstErr == nil {
						res.firstErr = err
					}
				case code/100 != 2:
					res.non2xx++
					if res.firstNon == "" {
						res.firstNon = fmt.Sprintf("status %d: %s", code, bytes.TrimSpace(body))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// print writes the figures of one phase.
func (r result) print(what string, clients int) {
	lat := slices.Clone(r.latencies)
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p/100*float64(len(lat))))]
	}
	fmt.Printf("%s\n", what)
	fmt.Printf("requests     %d in %s (%d clients)\n", len(lat), r.elapsed.Round(time.Millisecond), clients)
	fmt.Printf("throughput   %.0f/s\n", float64(len(lat))/r.elapsed.Seconds())
	fmt.Printf("latency      p50 %s  p95 %s  p99 %s  max %s\n", pct(50).Round(time.Microsecond), pct(95).Round(time.Microsecond), pct(99).Round(time.Microsecond), pct(100).Round(time.Microsecond))
	keys := make([]string, 0, len(r.statuses))
	for k := range r.statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("answered     %-24s %d\n", k, r.statuses[k])
	}
}

// err is the run's failure: a request that got no answer, or with
// strict an answer that was not 2xx.
func (r result) err(strict bool) error {
	switch {
	case r.errs > 0:
		return fmt.Errorf("%d requests failed, the first: %w", r.errs, r.firstErr)
	case strict && r.non2xx > 0:
		return fmt.Errorf("%d answers were not 2xx, the first: %s", r.non2xx, r.firstNon)
	}
	return nil
}
