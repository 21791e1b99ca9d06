package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/simulate"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

const (
	crashStdSecret      = "whsec_Y3Jhc2gtc3RhbmRhcmQtc2VjcmV0LWNyYXNoLXN0YW5kYXJk"
	crashMerchantSecret = "whsec_Y3Jhc2gtbWVyY2hhbnQtc2VjcmV0LWNyYXNoLW1lcmNoYW50"
	crashMockSecret     = "whsec_Y3Jhc2gtbW9jay1zZWNyZXQtY3Jhc2gtbW9jay1zZWM="
)

// crashConfig runs the real binary with chaos in the mock, a short sweeper
// and ripple clock, and a merchant endpoint.
func crashConfig(merchantURL string) string {
	return `
[server]
listen = "127.0.0.1:0"
[storage]
path = "DBPATH"
[auth]
api_keys = ["` + daemontest.APIKey + `"]
[log]
level = "info"
format = "json"
[sweeper]
interval = "200ms"
min_age = "1s"
[ripple]
backoff_base = "50ms"
backoff_cap = "500ms"
[[webhooks]]
url = "` + merchantURL + `"
secret = "` + crashMerchantSecret + `"
events = ["payment.captured", "payment.failed", "payment.refunded"]
[providers.mock]
allow_public = true # an API key is production: the test drives the mock
webhook_secret = "` + crashMockSecret + `"
webhook_delay = "0s"
duplicate_rate = 0.3
webhook_first_rate = 0.2
reorder = true
[providers.standard]
webhook_secret = "` + crashStdSecret + `"
`
}

// crashClient drives load against whichever process is up.
type crashClient struct {
	t   *testing.T
	url atomic.Pointer[string]
	hc  *http.Client

	book                        // its mutex guards the maps below too
	keys      map[string]string // create idempotency key → body, until answered
	customers map[string]bool
	nextKey   atomic.Int64
}

// do sends a request to whichever process is up; hdr holds extra headers,
// one given as "" is not sent (Authorization, for a PSP's webhook).
func (c *crashClient) do(method, path string, body []byte, hdr map[string]string) (int, map[string]any, error) {
	base := c.url.Load()
	if base == nil {
		return 0, nil, fmt.Errorf("down")
	}
	api := &daemontest.Instance{Base: *base, HTTP: c.hc}
	r, err := api.Send(method, path, body, hdr)
	return r.Status, r.JSON, err
}

// step does one random piece of work. Connection errors are expected: the
// process may be killed at any instant.
func (c *crashClient) step(rnd *rand.Rand) {
	switch n := rnd.IntN(10); {
	case n < 4: // a mock payment (or a retry of one whose answer was lost)
		c.mu.Lock()
		var key, body string
		for k, b := range c.keys {
			key, body = k, b
			break
		}
		c.mu.Unlock()
		if key == "" || rnd.IntN(2) == 0 {
			i := c.nextKey.Add(1)
			key = fmt.Sprintf("crash-%d", i)
			body = fmt.Sprintf(`{"order_id":"c-%d","amount":%d,"currency":"EUR","customer":{"id":"cus_%d"}}`, i, 1000+100*rnd.IntN(50)+[]int{0, 1, 2, 3, 4, 57}[rnd.IntN(6)], i%7)
			c.mu.Lock()
			c.keys[key] = body
			c.customers[fmt.Sprintf("cus_%d", i%7)] = true
			c.mu.Unlock()
		}
		start := time.Now()
		st, m, err := c.do("POST", "/v1/payments", []byte(body), map[string]string{"Idempotency-Key": key})
		if err == nil && st == 201 {
			c.observe(start, m)
			c.mu.Lock()
			delete(c.keys, key)
			c.payments[m["id"].(string)] = "mock"
			c.mu.Unlock()
		}
	case n < 6: // report mode: create, then a signed webhook and a /sync racing
		i := c.nextKey.Add(1)
		st, m, err := c.do("POST", "/v1/payments", []byte(fmt.Sprintf(`{"order_id":"s-%d","amount":2000,"currency":"EUR","provider":"standard"}`, i)), map[string]string{"Idempotency-Key": fmt.Sprint("std-", i)})
		if err != nil || st != 201 {
			return
		}
		id := m["id"].(string)
		c.mu.Lock()
		c.payments[id] = "standard"
		c.mu.Unlock()
		typ := []string{"payment.captured", "payment.failed"}[rnd.IntN(2)]
		evID := fmt.Sprintf("evt_crash_%d", i)
		ts := time.Now()
		body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"provider_ref":"psp_%d","amount":2000,"currency":"EUR"}}`, evID, typ, ts.Unix(), id, i))
		hook := testkit.SignStandard(c.t, crashStdSecret, evID, ts, body)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 2 { // delivered twice
				st, _, err := c.do("POST", "/webhooks/standard", body, hook)
				if err == nil && st == 200 {
					c.mu.Lock()
					c.acked[evID] = id
					c.mu.Unlock()
				}
			}
		}()
		go func() {
			defer wg.Done()
			start := time.Now()
			if st, m, err := c.do("POST", "/v1/payments/"+id+"/sync", []byte(`{"status":"requires_action","client_secret":"cs_x","expected_version":1}`), nil); err == nil && st == 200 {
				c.observe(start, m)
			}
		}()
		wg.Wait()
	case n < 7: // refund a captured mock payment
		id := c.pick(rnd, "mock")
		if id == "" {
			return
		}
		start := time.Now()
		if st, m, err := c.do("POST", "/v1/payments/"+id+"/refund", nil, map[string]string{"Idempotency-Key": "refund-" + id}); err == nil && st == 200 {
			c.observe(start, m)
		}
	default: // read
		id := c.pick(rnd, "")
		if id == "" {
			return
		}
		start := time.Now()
		if st, m, err := c.do("GET", "/v1/payments/"+id, nil, nil); err == nil && st == 200 {
			c.observe(start, m)
		}
	}
}

// TestCrashLoop starts the real binary, drives a mixed load, kills it with
// SIGKILL at random instants, restarts it on the same database, repeats,
// and then checks: every webhook answered 2xx is reflected in its payment;
// every captured payment got each merchant webhook exactly once (by
// webhook-id) and its loyalty points exactly once; `paystate verify` is
// clean; no client ever saw a version go backwards.
func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the binary many times")
	}
	cycles := 20
	if v, err := strconv.Atoi(os.Getenv("PAYSTATE_CRASH_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	dir := t.TempDir()
	m, err := simulate.NewMerchant(crashMerchantSecret)
	if err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(m)
	defer ms.Close()
	cfg := crashConfig(ms.URL + "/hooks")

	c := &crashClient{t: t, hc: &http.Client{Timeout: 5 * time.Second},
		book: newBook(), keys: map[string]string{}, customers: map[string]bool{}}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 7))

	// Load from several goroutines, across every crash.
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for !stop.Load() {
				if c.url.Load() == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				c.step(r)
			}
		}()
	}

	for cycle := range cycles {
		p := startProcessIn(t, dir, cfg)
		c.url.Store(&p.url)
		// Kill at a random instant: no signal handler runs, nothing flushes.
		time.Sleep(time.Duration(150+rnd.IntN(450)) * time.Millisecond)
		c.url.Store(nil)
		p.cmd.Process.Kill()
		<-p.done
		if !strings.Contains(p.logText(), "paystate started") {
			t.Fatalf("cycle %d: did not start:\n%s", cycle, p.logText())
		}
	}

	// The last start: finish the open creates, let the workers settle.
	p := startProcessIn(t, dir, cfg)
	c.url.Store(&p.url)
	stop.Store(true)
	wg.Wait()
	for key, body := range c.keys {
		st, m, err := c.do("POST", "/v1/payments", []byte(body), map[string]string{"Idempotency-Key": key})
		if err != nil || st != 201 {
			t.Fatalf("retry of %s after the crashes: %v %d %v", key, err, st, m)
		}
		c.payments[m["id"].(string)] = "mock"
	}
	waitSettled(t, c)

	// Every acknowledged webhook is reflected in its payment's timeline
	// (the inbox applies stored events after a restart, with backoff).
	deadline := time.Now().Add(30 * time.Second)
	for evID, id := range c.acked {
		for {
			_, m, err := c.do("GET", "/v1/payments/"+id+"/events", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, s := range m["data"].([]any) {
				if s.(map[string]any)["event_id"] == evID {
					found = true
				}
			}
			if found {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("webhook %s was answered 2xx but its payment %s does not reflect it: %v", evID, id, m["data"])
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Effects exactly once, over every payment stored: a create whose
	// answer a crash cut off is charged at the PSP (which keeps its
	// charges in the store) and may be captured by the sweeper, though
	// the client never learnt its id.
	// The sweeper may still be reconciling such payments (min_age 1s):
	// wait until no status changes between two looks, and their effects
	// are delivered.
	all := listPayments(t, c)
	for deadline := time.Now().Add(30 * time.Second); ; {
		time.Sleep(1500 * time.Millisecond)
		waitSettled(t, c)
		again := listPayments(t, c)
		if sameStatuses(all, again) {
			break
		}
		if all = again; time.Now().After(deadline) {
			t.Fatal("payment statuses still change 30 s after the last start")
		}
	}
	points := map[string]int64{}
	captured := 0
	for _, pm := range all {
		id, _ := pm["id"].(string)
		status, _ := pm["status"].(string)
		if status != "captured" && status != "refunded" {
			continue
		}
		captured++
		if ids := m.Events(id, "payment.captured"); ids != 1 {
			t.Errorf("%s (%s) got %d distinct payment.captured webhooks, want 1", id, status, ids)
		}
		cus, _ := pm["customer"].(map[string]any)["id"].(string)
		if cus != "" && status == "captured" {
			points[cus] += int64(pm["amount"].(float64)) / 100
		}
	}
	for cus := range c.customers {
		_, cm, err := c.do("GET", "/v1/customers/"+cus, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := cm["points"].(float64)
		if int64(got) != points[cus] {
			t.Errorf("customer %s has %v points, captures say %d", cus, got, points[cus])
		}
	}
	if bad := m.Rejected(); len(bad) > 0 {
		t.Errorf("%d merchant webhooks failed verification: %v", len(bad), bad)
	}

	// Versions never went backwards: an answer that started after another
	// ended never shows an older version.
	answers := c.checkVersions(t)

	// A clean stop, then verify the database.
	p.cmd.Process.Signal(os.Interrupt)
	if err := <-p.done; err != nil {
		t.Fatalf("exit: %v", err)
	}
	out, err := runCmd("verify", "-db", filepath.Join(dir, "paystate.db"))
	if err != nil {
		t.Fatalf("verify after %d crashes: %v\n%s", cycles, err, out)
	}
	t.Logf("%d crashes, %d payments (%d captured), %d acknowledged webhooks, %d answers checked for versions; %s",
		cycles, len(c.payments), captured, len(c.acked), answers, strings.TrimSpace(out))
	if captured == 0 || len(c.acked) == 0 {
		t.Fatalf("the load did too little to show anything")
	}
}

// waitSettled waits until no webhook, outbox record or delivery is pending
// (the process's /v1/deliveries and the timeline tell).
// listPayments lists every stored payment over the API.
func listPayments(t *testing.T, c *crashClient) []map[string]any {
	t.Helper()
	var all []map[string]any
	for cursor := ""; ; {
		_, page, err := c.do("GET", "/v1/payments?limit=500&cursor="+url.QueryEscape(cursor), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := page["data"].([]any)
		for _, d := range data {
			all = append(all, d.(map[string]any))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// sameStatuses reports whether two lists hold the same payments in the
// same statuses.
func sameStatuses(a, b []map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	st := map[any]any{}
	for _, p := range a {
		st[p["id"]] = p["status"]
	}
	for _, p := range b {
		if st[p["id"]] != p["status"] {
			return false
		}
	}
	return true
}

func waitSettled(t *testing.T, c *crashClient) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, m, err := c.do("GET", "/v1/deliveries?state=pending", nil, nil)
		if err == nil && st == 200 {
			if d, _ := m["data"].([]any); len(d) == 0 {
				// Deliveries are created from the outbox by the workers:
				// wait for two empty looks in a row a little apart.
				time.Sleep(500 * time.Millisecond)
				st, m, err = c.do("GET", "/v1/deliveries?state=pending", nil, nil)
				if d, _ := m["data"].([]any); err == nil && st == 200 && len(d) == 0 {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("deliveries did not settle")
}
