package main

import (
	"bytes"
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

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/simulate"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

const (
	crashStdSecret      = "whsec_Y3Jhc2gtc3RhbmRhcmQtc2VjcmV0LWNyYXNoLXN0YW5kYXJk"
	crashMerchantSecret = "whsec_Y3Jhc2gtbWVyY2hhbnQtc2VjcmV0LWNyYXNoLW1lcmNoYW50"
	crashMockSecret     = "whsec_Y3Jhc2gtbW9jay1zZWNyZXQtY3Jhc2gtbW9jay1zZWM="
)

// crashConfig runs the real binary with chaos in the mock, a short sweeper
// and ripple clock, and a merchant endpoint. minAge is sweeper.min_age.
//
// The mock PSP has no rate limit of its own, so the sweeper's
// rate_per_second is the largest allowed: at the default (5 status calls a
// second) the sweeper, not paystate's correctness, bounds the test. One
// mock create in six (amount ending in 04) is answered finalize_pending by
// design, and only the sweeper's status call settles it; at 5 a second
// the few hundred milliseconds each process lives leave most of them to
// the last start (354 after 100 cycles, some 70 s of status calls).
func crashConfig(merchantURL, minAge string) string {
	return serveTOML(`
[sweeper]
interval = "200ms"
min_age = "` + minAge + `"
rate_per_second = 10000
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
`)
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
	cfg := crashConfig(ms.URL+"/hooks", "1s")

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
	// Its sweeper asks the PSP about every open payment, however young
	// (min_age 0): each pass then sees every candidate, so a pass that
	// writes nothing is the sweeper's fixed point (settle), not a pass
	// that passed young payments over.
	p := startProcessIn(t, dir, crashConfig(ms.URL+"/hooks", "0s"))
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
	// the client never learnt its id. settle waits for the sweeper's
	// fixed point, counted in its passes.
	all := settle(t, c)
	points := map[string]int64{}
	captured, capturedHooks := 0, 0
	for _, pm := range all {
		id, _ := pm["id"].(string)
		status, _ := pm["status"].(string)
		if status != "captured" && status != "refunded" {
			continue
		}
		captured++
		ids := m.Events(id, "payment.captured")
		if ids != 1 {
			t.Errorf("%s (%s) got %d distinct payment.captured webhooks, want 1", id, status, ids)
		}
		capturedHooks += ids
		cus, _ := pm["customer"].(map[string]any)["id"].(string)
		if cus != "" && status == "captured" {
			points[cus] += int64(pm["amount"].(float64)) / 100
		}
	}
	var pointsTotal int64
	for cus := range c.customers {
		_, cm, err := c.do("GET", "/v1/customers/"+cus, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := cm["points"].(float64)
		if int64(got) != points[cus] {
			t.Errorf("customer %s has %v points, captures say %d", cus, got, points[cus])
		}
		pointsTotal += int64(got)
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
	checkOpenAtPSP(t, filepath.Join(dir, "paystate.db"), openMock(all))
	t.Logf("%d crashes, %d payments stored (%d known to the client, %d captured or refunded), %d acknowledged webhooks, "+
		"effects: %d merchant payment.captured webhooks, %d loyalty points over %d customers; %d answers checked for versions; %s",
		cycles, len(all), len(c.payments), captured, len(c.acked), capturedHooks, pointsTotal, len(c.customers), answers, strings.TrimSpace(out))
	if captured == 0 || len(c.acked) == 0 {
		t.Fatalf("the load did too little to show anything")
	}
}

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

// settle drives the last process's sweeper to its fixed point and returns
// the stored payments then: the wait is counted in sweeper passes, not
// seconds. After a listing, two more passes end (/metrics'
// paystate_sweeper_pass_duration_seconds_count), so one whole pass began
// after the listing and, with min_age 0, asked the PSP about every
// candidate; then the deliveries settle and the payments are listed
// again. The fixed point is a listing that no write changed over such a
// pass, with no candidate skipped for a held lease. Each round either
// finds it or saw a payment written: the rounds are bounded by the work
// left.
//
// At the fixed point no mock payment is finalize_pending, expired or
// created: the mock charged each one and its status API answers, so the
// sweeper must have settled every one of them. What a correct paystate
// leaves open there is logged, and checked against the PSP's records
// after the stop (checkOpenAtPSP): a 3-D Secure or processing
// payment (02, 03) whose customer step the mock runs in the process a
// kill ended (the PSP still says requires_action or processing, so
// paystate waits, up to sweeper.give_up_after), a refund the kill cut off
// before the PSP had it (the PSP does not know it: pending until
// give_up_after, or until its retry), and a standard payment whose final
// webhook never came (report mode: no one to ask).
func settle(t *testing.T, c *crashClient) []map[string]any {
	t.Helper()
	all := listPayments(t, c)
	t.Logf("last start: %d payments stored; mock payments open for the sweeper: %v", len(all), openKinds(openMock(all)))
	for {
		before := sweeperCounts(t, c)
		after := before
		for guard := time.Now().Add(5 * time.Minute); after.passes < before.passes+2; {
			if time.Now().After(guard) { // a hang, not a measurement
				t.Fatalf("no sweeper pass ended in 5 minutes (%d passes before, %d now)", before.passes, after.passes)
			}
			time.Sleep(50 * time.Millisecond)
			after = sweeperCounts(t, c)
		}
		waitSettled(t, c)
		again := listPayments(t, c)
		if sameField(all, again, "version") && after.leaseHeld == before.leaseHeld {
			all = again
			break
		}
		all = again
	}
	open := openMock(all)
	t.Logf("sweeper at its fixed point: mock payments left open: %v", openKinds(open))
	for _, p := range open {
		switch p["status"] {
		case "finalize_pending", "expired", "created":
			t.Errorf("mock payment %v (amount %v) is still %v when the sweeper has nothing left to do: the PSP charged it and answers its status",
				p["id"], p["amount"], p["status"])
		}
	}
	return all
}

// checkOpenAtPSP checks, in the stopped process's file, that each mock
// payment left open at the sweeper's fixed point is open at the PSP too
// (the mock keeps its charges and refunds in the file, as paystate runs
// it): a payment in processing or requires_action is in that status at
// the PSP, and a pending refund is one the PSP never received. Anything
// else the sweeper should have settled.
func checkOpenAtPSP(t *testing.T, path string, open []map[string]any) {
	t.Helper()
	viewDB(t, path, func(tx store.Tx) error {
		for _, p := range open {
			id, _ := p["id"].(string)
			if p["status"] != "captured" {
				c, err := tx.PSPCharge(finalize.ChargeKey(id))
				if err != nil {
					return fmt.Errorf("the PSP's charge of %s: %w", id, err)
				}
				if string(c.Status) != p["status"] {
					t.Errorf("%s is %v at the sweeper's fixed point while the PSP says %s", id, p["status"], c.Status)
				}
				continue
			}
			refunds, err := tx.RefundsForPayment(id)
			if err != nil {
				return err
			}
			for _, r := range refunds {
				if r.Status != pay.RefundPending {
					continue
				}
				switch c, err := tx.PSPCharge(pay.RefundKey(r.ID)); {
				case err == nil:
					t.Errorf("refund %s of %s is pending at the sweeper's fixed point while the PSP has it (%s)", r.ID, id, c.Status)
				case pay.ErrorCode(err) != pay.ENOTFOUND:
					return err
				}
			}
		}
		return nil
	})
}

// openMock returns the mock payments that are not final, or captured with
// a refund pending (less refundable than the amount less what was
// refunded).
func openMock(all []map[string]any) []map[string]any {
	var open []map[string]any
	for _, p := range all {
		if p["provider"] != "mock" {
			continue
		}
		amount, _ := p["amount"].(float64)
		refunded, _ := p["amount_refunded"].(float64)
		refundable, _ := p["amount_refundable"].(float64)
		switch p["status"] {
		case "captured":
			if refundable < amount-refunded {
				open = append(open, p)
			}
		case "failed", "refunded":
		default:
			open = append(open, p)
		}
	}
	return open
}

// openKinds counts open payments by status and the last two digits of
// their amount (the mock's outcome).
func openKinds(open []map[string]any) map[string]int {
	kinds := map[string]int{}
	for _, p := range open {
		amount, _ := p["amount"].(float64)
		kinds[fmt.Sprintf("%v/%02d", p["status"], int64(amount)%100)]++
	}
	return kinds
}

// sameField reports whether two lists hold the same payments with the
// same value of field ("status"; "version": nothing was written to a
// payment in between).
func sameField(a, b []map[string]any, field string) bool {
	if len(a) != len(b) {
		return false
	}
	v := map[any]any{}
	for _, p := range a {
		v[p["id"]] = p[field]
	}
	for _, p := range b {
		if got, ok := v[p["id"]]; !ok || got != p[field] {
			return false
		}
	}
	return true
}

// sweeperCount is what /metrics says about the sweeper's work so far.
type sweeperCount struct {
	passes, leaseHeld uint64
}

// sweeperCounts reads from /metrics how many sweeper passes ended and how
// many candidates they skipped for a held lease.
func sweeperCounts(t *testing.T, c *crashClient) sweeperCount {
	t.Helper()
	base := c.url.Load()
	api := &daemontest.Instance{Base: *base, HTTP: c.hc}
	r, err := api.Send("GET", "/metrics", nil, nil)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %v %d %.300s", err, r.Status, r.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	counter := func(name string) uint64 {
		if f := fams[name]; f != nil && len(f.GetMetric()) == 1 {
			return uint64(f.GetMetric()[0].GetCounter().GetValue())
		}
		t.Fatalf("/metrics has no counter %s", name)
		return 0
	}
	h := fams["paystate_sweeper_pass_duration_seconds"]
	if h == nil || len(h.GetMetric()) != 1 {
		t.Fatal("/metrics has no paystate_sweeper_pass_duration_seconds")
	}
	return sweeperCount{
		passes:    h.GetMetric()[0].GetHistogram().GetSampleCount(),
		leaseHeld: counter("paystate_sweeper_lease_held_total"),
	}
}

// waitSettled waits until no webhook, outbox record or delivery is pending
// (the process's /v1/deliveries and the timeline tell).
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
