package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/paystate/paystate/internal/simulate"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/postgres"
)

const (
	scaleStdSecret      = "whsec_c2NhbGUtc3RhbmRhcmQtc2VjcmV0LXNjYWxlLXN0YW5kYXJk"
	scaleMerchantSecret = "whsec_c2NhbGUtbWVyY2hhbnQtc2VjcmV0LXNjYWxlLW1lcmNoYW50"
	scaleMockSecret     = "whsec_c2NhbGUtbW9jay1zZWNyZXQtc2NhbGUtbW9jay1zZWM="
	scaleInstances      = 3
)

// scaleConfig is the configuration of every instance of the scale-out
// test: one PostgreSQL database, the NATS relay, receipts over SMTP, one
// merchant endpoint, and the mock PSP sending its webhooks through the
// load balancer. Leases last 2 s, so a killed instance's leases end after
// 2 s and its delivery claims after 6 s (three lease TTLs).
func scaleConfig(dsn, natsURL, smtpAddr, merchantURL, lbURL string) string {
	return `
[server]
listen = "127.0.0.1:0"
[storage]
backend = "postgres"
dsn = "` + dsn + `"
max_conns = 8
[auth]
api_keys = ["` + daemontest.APIKey + `"]
[log]
level = "info"
format = "json"
[lease]
ttl = "2s"
[sweeper]
interval = "200ms"
min_age = "1s"
[ripple]
backoff_base = "50ms"
backoff_cap = "500ms"
[receipt]
smtp_addr = "` + smtpAddr + `"
from = "receipts@shop.example"
tls = "none"
[relay.nats]
url = "` + natsURL + `"
[[webhooks]]
url = "` + merchantURL + `"
secret = "` + scaleMerchantSecret + `"
events = ["payment.captured", "payment.failed", "payment.refunded"]
[providers.mock]
allow_public = true # an API key is production: the test drives the mock
webhook_secret = "` + scaleMockSecret + `"
webhook_url = "` + lbURL + `/webhooks/mock"
webhook_delay = "0s"
duplicate_rate = 0.3
webhook_first_rate = 0.2
reorder = true
[providers.standard]
webhook_secret = "` + scaleStdSecret + `"
`
}

// scaleCluster is the instances of the test, some of which may be down,
// and a round-robin load balancer in front of the live ones (where the
// mock PSP sends its webhooks).
type scaleCluster struct {
	urls [scaleInstances]atomic.Pointer[string]
	next atomic.Uint64
}

// pick returns the next instance round robin, up or not.
func (cl *scaleCluster) pick() int { return int(cl.next.Add(1) % scaleInstances) }

// ServeHTTP proxies a request to the next live instance (502 if none).
func (cl *scaleCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for range scaleInstances {
		if u := cl.urls[cl.pick()].Load(); u != nil {
			target, _ := url.Parse(*u)
			p := httputil.NewSingleHostReverseProxy(target)
			p.ErrorLog = nil
			p.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
			p.ServeHTTP(w, r)
			return
		}
	}
	w.WriteHeader(http.StatusBadGateway)
}

// answer is one response seen by the load, for the checks.
type answer struct {
	status   int
	body     map[string]any
	replayed bool // Idempotent-Replayed: true
}

// scaleLoad drives the instances: creates (some with one key sent to two
// instances at once), report-mode payments whose webhook goes to two
// instances at once while a /sync races it on a third, refunds sent to two
// instances at once, and reads. Connection errors are expected: an
// instance may be killed at any instant.
type scaleLoad struct {
	t  *testing.T
	cl *scaleCluster
	hc *http.Client

	book                        // its mutex guards the fields below too
	keys    map[string]string   // create key → body, until a 201
	sentTo  map[string][]int    // create key → instances it was sent to
	keyIDs  map[string][]string // create key → payment ids answered
	pairs   [][2]answer         // the answers of one key sent to two instances at once
	leaks   []string            // a secret in the answer for a payment past requires_action
	nextKey atomic.Int64
	answers atomic.Int64
}

// send sends a request to instance i.
func (l *scaleLoad) send(i int, method, path string, body []byte, hdr map[string]string) (answer, error) {
	u := l.cl.urls[i].Load()
	if u == nil {
		return answer{}, fmt.Errorf("instance %d is down", i)
	}
	r, err := (&daemontest.Instance{Base: *u, HTTP: l.hc}).Send(method, path, body, hdr)
	if err == nil {
		l.answers.Add(1)
		l.check(r.JSON)
	}
	return answer{r.Status, r.JSON, r.Header.Get("Idempotent-Replayed") == "true"}, err
}

// check records a client secret or redirect URL in the view of a payment
// whose status no longer allows one.
func (l *scaleLoad) check(m map[string]any) {
	st, _ := m["status"].(string)
	if st == "" || st == "created" || st == "processing" || st == "requires_action" {
		return
	}
	for _, k := range []string{"client_secret", "redirect_url"} {
		if _, ok := m[k]; ok {
			l.mu.Lock()
			l.leaks = append(l.leaks, fmt.Sprintf("%v (%s) carries %s", m["id"], st, k))
			l.mu.Unlock()
		}
	}
}

// observe records a 2xx answer about a payment with its time window.
func (l *scaleLoad) observe(start time.Time, a answer) {
	if a.status/100 == 2 {
		l.book.observe(start, a.body)
	}
}

// both sends the same request to instances i and j at once.
func (l *scaleLoad) both(i, j int, method, path string, body []byte, hdr map[string]string) ([2]answer, [2]error) {
	var (
		out  [2]answer
		errs [2]error
		wg   sync.WaitGroup
	)
	for k, in := range []int{i, j} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			out[k], errs[k] = l.send(in, method, path, body, hdr)
			if errs[k] == nil {
				l.observe(start, out[k])
			}
		}()
	}
	wg.Wait()
	return out, errs
}

// create sends a mock create: a new key (or the retry of one whose answer
// was lost), to one instance or to two at once.
func (l *scaleLoad) create(rnd *rand.Rand) {
	l.mu.Lock()
	var key, body string
	for k, b := range l.keys {
		key, body = k, b
		break
	}
	l.mu.Unlock()
	fresh := key == "" || rnd.IntN(3) > 0
	if fresh {
		n := l.nextKey.Add(1)
		key = fmt.Sprintf("scale-%d", n)
		body = fmt.Sprintf(`{"order_id":"s-%d","amount":%d,"currency":"EUR","customer":{"id":"cus_%d","email":"c%d@example.com"}}`,
			n, 1000+100*rnd.IntN(50)+[]int{0, 1, 2, 3, 4, 57}[rnd.IntN(6)], n%7, n%7)
		l.mu.Lock()
		l.keys[key] = body
		l.mu.Unlock()
	}
	i, j := l.cl.pick(), -1
	if fresh && rnd.IntN(3) == 0 { // a retry may race another worker's: only a new key goes to two at once
		j = (i + 1 + rnd.IntN(scaleInstances-1)) % scaleInstances
	}
	hdr := map[string]string{"Idempotency-Key": key}
	var answers []answer
	if j < 0 {
		start := time.Now()
		a, err := l.send(i, "POST", "/v1/payments", []byte(body), hdr)
		l.note(key, i)
		if err == nil {
			l.observe(start, a)
			answers = append(answers, a)
		}
	} else {
		as, errs := l.both(i, j, "POST", "/v1/payments", []byte(body), hdr)
		l.note(key, i)
		l.note(key, j)
		for k := range as {
			if errs[k] == nil {
				answers = append(answers, as[k])
			}
		}
		if errs[0] == nil && errs[1] == nil {
			l.mu.Lock()
			l.pairs = append(l.pairs, as)
			l.mu.Unlock()
		}
	}
	for _, a := range answers {
		if a.status == 201 {
			l.created(key, a.body["id"].(string))
		}
	}
}

// note records that key was sent to instance i.
func (l *scaleLoad) note(key string, i int) {
	l.mu.Lock()
	l.sentTo[key] = append(l.sentTo[key], i)
	l.mu.Unlock()
}

// created records the payment a create key answered with.
func (l *scaleLoad) created(key, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
	l.keyIDs[key] = append(l.keyIDs[key], id)
	l.payments[id] = "mock"
}

// report creates a payment in report mode and races its signed webhook,
// sent to two instances at once and again, with a /sync on a third.
func (l *scaleLoad) report(rnd *rand.Rand) {
	n := l.nextKey.Add(1)
	a, err := l.send(l.cl.pick(), "POST", "/v1/payments", []byte(fmt.Sprintf(`{"order_id":"r-%d","amount":2000,"currency":"EUR","provider":"standard","customer":{"id":"cus_%d","email":"c%d@example.com"}}`, n, n%7, n%7)),
		map[string]string{"Idempotency-Key": fmt.Sprint("std-", n)})
	if err != nil || a.status != 201 {
		return
	}
	id := a.body["id"].(string)
	l.mu.Lock()
	l.payments[id] = "standard"
	l.mu.Unlock()
	typ := []string{"payment.captured", "payment.failed"}[rnd.IntN(2)]
	evID := fmt.Sprintf("evt_scale_%d", n)
	ts := time.Now()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"provider_ref":"psp_%d","amount":2000,"currency":"EUR"}}`, evID, typ, ts.Unix(), id, n))
	hook := testkit.SignStandard(l.t, scaleStdSecret, evID, ts, body)
	i := l.cl.pick()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 2 { // delivered twice, each time to two instances at once
			as, errs := l.both(i, (i+1)%scaleInstances, "POST", "/webhooks/standard", body, hook)
			for k := range as {
				if errs[k] == nil && as[k].status == 200 {
					l.mu.Lock()
					l.acked[evID] = id
					l.mu.Unlock()
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		start := time.Now()
		if a, err := l.send((i+2)%scaleInstances, "POST", "/v1/payments/"+id+"/sync", []byte(`{"status":"requires_action","client_secret":"cs_scale","expected_version":1}`), nil); err == nil {
			l.observe(start, a)
		}
	}()
	wg.Wait()
}

// refund refunds a mock payment, the same key sent to two instances at once.
func (l *scaleLoad) refund(rnd *rand.Rand) {
	id := l.pick(rnd, "mock")
	if id == "" {
		return
	}
	i := l.cl.pick()
	l.both(i, (i+1)%scaleInstances, "POST", "/v1/payments/"+id+"/refund", nil, map[string]string{"Idempotency-Key": "refund-" + id})
}

// read reads a payment on some instance.
func (l *scaleLoad) read(rnd *rand.Rand) {
	id := l.pick(rnd, "")
	if id == "" {
		return
	}
	start := time.Now()
	if a, err := l.send(l.cl.pick(), "GET", "/v1/payments/"+id, nil, nil); err == nil {
		l.observe(start, a)
	}
}

// step does one random piece of work.
func (l *scaleLoad) step(rnd *rand.Rand) {
	switch n := rnd.IntN(10); {
	case n < 4:
		l.create(rnd)
	case n < 6:
		l.report(rnd)
	case n < 7:
		l.refund(rnd)
	default:
		l.read(rnd)
	}
}

// hookLog counts the merchant webhooks accepted (2xx), by webhook-id, and
// when each was first accepted.
type hookLog struct {
	mu    sync.Mutex
	first map[string]time.Time
	n     map[string]int
}

// wrap returns h, logging what it accepts.
func (hl *hookLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		if sw.status/100 != 2 {
			return
		}
		id := r.Header.Get("webhook-id")
		hl.mu.Lock()
		defer hl.mu.Unlock()
		if hl.n[id] == 0 {
			hl.first[id] = time.Now()
		}
		hl.n[id]++
	})
}

// counts returns how often each webhook-id was accepted.
func (hl *hookLog) counts() map[string]int {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	out := map[string]int{}
	for k, v := range hl.n {
		out[k] = v
	}
	return out
}

// firstAt returns when a webhook-id was first accepted.
func (hl *hookLog) firstAt(id string) time.Time {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	return hl.first[id]
}

// statusWriter keeps the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader keeps the status and writes it.
func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// receiptID finds the payment of a receipt in its Message-ID.
var receiptID = regexp.MustCompile(`(?mi)^Message-ID:\s*<receipt\.(pay_[0-9A-Za-z]+)@`)

// TestScaleOut runs three paystate processes (the real binary) on one
// PostgreSQL database, with the outbox relayed to an embedded NATS
// JetStream, receipts sent to a real SMTP server and one merchant
// endpoint, drives creates, report-mode webhooks with /sync, refunds and
// reads round robin across them, with the same request sent to two
// instances at once, SIGKILLs one instance mid-run and starts it again.
// Then, as the single-node crash test: every acknowledged webhook is
// reflected, no client saw a version go back, one idempotency key made one
// payment, each effect happened once across the instances (the merchant
// webhook by webhook-id, the receipt by Message-ID, the NATS message by
// Nats-Msg-Id, loyalty points, ledger lines), no answer about a payment
// past requires_action carried a secret, and `paystate verify -config` is
// clean.
func TestScaleOut(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("runs three paystate processes on PostgreSQL")
	}
	t.Parallel()
	dsn := pgtest.Schema(t)
	natsSrv := rippletest.NewNATSServer(t)
	smtpd := rippletest.NewSMTPServer(t, 0)
	merchant, err := simulate.NewMerchant(scaleMerchantSecret)
	if err != nil {
		t.Fatal(err)
	}
	hooks := &hookLog{first: map[string]time.Time{}, n: map[string]int{}}
	ms := httptest.NewServer(hooks.wrap(merchant))
	defer ms.Close()
	cl := &scaleCluster{}
	lb := httptest.NewServer(cl)
	defer lb.Close()
	cfg := scaleConfig(dsn, natsSrv.URL, smtpd.Addr, ms.URL+"/hooks", lb.URL)

	var procs [scaleInstances]*proc
	dirs := [scaleInstances]string{}
	for i := range procs {
		dirs[i] = t.TempDir()
		procs[i] = startProcessIn(t, dirs[i], cfg)
		cl.urls[i].Store(&procs[i].url)
	}

	l := &scaleLoad{t: t, cl: cl, hc: &http.Client{Timeout: 10 * time.Second},
		book: newBook(), keys: map[string]string{}, sentTo: map[string][]int{}, keyIDs: map[string][]string{}}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var stop atomic.Bool
	var wg sync.WaitGroup
	loadStart := time.Now()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			for !stop.Load() {
				l.step(rnd)
			}
		}()
	}

	// Mid-run, one instance dies (SIGKILL: nothing flushes, its leases,
	// claims and in-flight keys stay behind) and comes back on another
	// port.
	const killed = 1
	rnd := rand.New(rand.NewPCG(seed, 99))
	time.Sleep(time.Duration(1500+rnd.IntN(1000)) * time.Millisecond)
	killedAt := time.Now()
	cl.urls[killed].Store(nil)
	if err := procs[killed].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[killed].done
	killDone := time.Now()
	// What reached the SMTP server until then: an e-mail the killed
	// instance sent but could not record is sent again by another (at
	// least once), under the same Message-ID.
	sentBeforeKill := map[string]bool{}
	for _, m := range smtpd.Messages() {
		if sub := receiptID.FindSubmatch(m.Data); sub != nil {
			sentBeforeKill[string(sub[1])] = true
		}
	}
	time.Sleep(time.Duration(500+rnd.IntN(1000)) * time.Millisecond)
	procs[killed] = startProcessIn(t, dirs[killed], cfg)
	restartedAt := time.Now()
	cl.urls[killed].Store(&procs[killed].url)
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	t.Logf("instance %d killed %s into the load, started again %s later; the load ran %s",
		killed, killedAt.Sub(loadStart).Round(time.Millisecond), restartedAt.Sub(killedAt).Round(time.Millisecond), time.Since(loadStart).Round(time.Millisecond))

	// The creates whose answer was lost: each retry gives the payment of
	// the key or, for a key whose request died with the killed instance,
	// 409 until its lock (finalize.DefaultIdemLock) runs out.
	heldByKilled := 0
	for key, body := range l.keys {
		a, err := l.send(0, "POST", "/v1/payments", []byte(body), map[string]string{"Idempotency-Key": key})
		switch {
		case err != nil:
			t.Fatalf("retry of %s: %v", key, err)
		case a.status == 201:
			l.created(key, a.body["id"].(string))
		case a.status == 409 && slices.Contains(l.sentTo[key], killed):
			heldByKilled++
		default:
			t.Fatalf("retry of %s after the load: %d %v (sent to instances %v)", key, a.status, a.body, l.sentTo[key])
		}
	}

	// Settle: no delivery pending and no status changing between two
	// looks (the sweeper resolves lost answers and payments whose
	// webhooks died with the killed instance).
	c := &crashClient{t: t, hc: l.hc}
	c.url.Store(&procs[0].url)
	all := listPayments(t, c)
	for deadline := time.Now().Add(40 * time.Second); ; {
		time.Sleep(time.Second)
		waitSettled(t, c)
		again := listPayments(t, c)
		if sameField(all, again, "status") {
			break
		}
		if all = again; time.Now().After(deadline) {
			t.Fatal("payment statuses still change 40 s after the load")
		}
	}
	status := map[string]map[string]any{}
	byOrder := map[string]int{}
	for _, p := range all {
		status[p["id"].(string)] = p
		byOrder[p["order_id"].(string)]++
		l.check(p)
	}

	// Every acknowledged webhook is in its payment's timeline.
	for evID, id := range l.acked {
		a, err := l.send(2, "GET", "/v1/payments/"+id+"/events", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range a.body["data"].([]any) {
			found = found || s.(map[string]any)["event_id"] == evID
		}
		if !found {
			t.Errorf("webhook %s was answered 2xx but payment %s does not reflect it", evID, id)
		}
	}

	// One key, one payment: the same answer from both instances (or a
	// replay, or 409 while the first ran), and one payment per order.
	for key, ids := range l.keyIDs {
		for _, id := range ids[1:] {
			if id != ids[0] {
				t.Errorf("key %s made payments %v", key, ids)
			}
		}
	}
	for _, p := range l.pairs {
		a, b := p[0], p[1]
		fresh := 0
		for _, x := range p {
			if x.status == 201 && !x.replayed {
				fresh++
			}
		}
		if fresh > 1 || (a.status == 201 && b.status == 201 && a.body["id"] != b.body["id"]) {
			t.Errorf("one key on two instances at once, two creates: %d %v and %d %v", a.status, a.body, b.status, b.body)
		}
	}
	for order, n := range byOrder {
		if n != 1 {
			t.Errorf("order %s has %d payments", order, n)
		}
	}

	// Versions never went back, whichever instance answered.
	l.checkVersions(t)
	for _, leak := range l.leaks {
		t.Errorf("secret after requires_action: %s", leak)
	}

	// Each effect once, against the outbox of the database.
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var (
		outbox []pay.OutboxRecord
		lines  []pay.LedgerEntry
		dead   int
	)
	err = db.View(ctx, func(tx store.Tx) error {
		var err error
		if outbox, err = tx.OutboxAfter(0, 1<<20); err != nil {
			return err
		}
		if lines, err = tx.LedgerEntries(0, 1<<20); err != nil {
			return err
		}
		dead, err = tx.CountDeliveries(pay.DeliveryDead)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if dead > 0 {
		t.Errorf("%d dead letters", dead)
	}
	msgs := natsSrv.Messages(ripple.DefaultNATSStream)
	byMsgID := map[string]int{}
	for _, m := range msgs {
		byMsgID[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	receipts := map[string]int{}
	for _, m := range smtpd.Messages() {
		if sub := receiptID.FindSubmatch(m.Data); sub != nil {
			receipts[string(sub[1])]++
		} else {
			t.Errorf("an e-mail without a receipt Message-ID:\n%s", m.Data)
		}
	}
	perPair := map[string]int{}
	wantReceipts := map[string]bool{}
	for _, r := range outbox {
		if got := byMsgID[r.ID]; got != 1 {
			t.Errorf("outbox record %s (%s of %s): %d NATS messages with its Nats-Msg-Id, want 1", r.ID, r.Type, r.PaymentID, got)
		}
		delete(byMsgID, r.ID)
		switch r.Type {
		case "payment.captured", "payment.failed", "payment.refunded":
			perPair[r.PaymentID+" "+r.Type]++
		}
		if r.Status == pay.Captured && r.Customer.Email != "" {
			wantReceipts[r.PaymentID] = true
		}
	}
	for id := range byMsgID {
		t.Errorf("NATS message %s has no outbox record", id)
	}
	for pair, n := range perPair {
		id, typ, _ := strings.Cut(pair, " ")
		if got := merchant.Events(id, typ); got != n {
			t.Errorf("%s: the merchant got %d distinct %s webhooks, the outbox has %d", id, got, typ, n)
		}
	}
	redelivered := 0
	for id, n := range hooks.counts() {
		switch first := hooks.firstAt(id); {
		case n > 1 && first.Before(killDone):
			redelivered++ // accepted while the killed instance sent it, not recorded: sent again
		case n > 1:
			t.Errorf("merchant webhook %s accepted %d times, the first after the kill", id, n)
		}
	}
	if bad := merchant.Rejected(); len(bad) > 0 {
		t.Errorf("%d merchant webhooks failed verification: %v", len(bad), bad)
	}
	resent := 0
	for id := range wantReceipts {
		switch n := receipts[id]; {
		case n == 0:
			t.Errorf("captured payment %s got no receipt", id)
		case n > 1 && sentBeforeKill[id]:
			resent++ // sent by the killed instance, not recorded: sent again
		case n > 1:
			t.Errorf("payment %s got %d receipts", id, n)
		}
	}
	for id := range receipts {
		if !wantReceipts[id] {
			t.Errorf("payment %s got a receipt but was never captured", id)
		}
	}

	// Loyalty and the ledger: once per capture, clawed back by a refund.
	points := map[string]int64{}
	receivable := map[string]int64{}
	for id, p := range status {
		amount := int64(p["amount"].(float64))
		cus, _ := p["customer"].(map[string]any)["id"].(string)
		if p["status"] == "captured" {
			points[cus] += amount / 100
			receivable[id] = amount
		}
	}
	perEvent := map[string]int{}
	gotReceivable := map[string]int64{}
	for _, e := range lines {
		perEvent[e.EventID]++
		if e.Account == pay.AccountPSPReceivable {
			gotReceivable[e.PaymentID] += e.Amount
		}
	}
	for ev, n := range perEvent {
		if n != 2 {
			t.Errorf("event %s posted %d ledger lines, want one posting of 2", ev, n)
		}
	}
	for id := range status {
		if gotReceivable[id] != receivable[id] {
			t.Errorf("%s (%s): the ledger holds %d receivable, want %d", id, status[id]["status"], gotReceivable[id], receivable[id])
		}
	}
	for cus := range points {
		a, err := l.send(0, "GET", "/v1/customers/"+cus, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := a.body["points"].(float64); int64(got) != points[cus] {
			t.Errorf("customer %s has %v points, the captures say %d", cus, got, points[cus])
		}
	}

	// A clean stop of every instance, then verify the database.
	for i, p := range procs {
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if err := <-p.done; err != nil {
			t.Fatalf("instance %d exit: %v\n%s", i, err, p.logText())
		}
	}
	out, err := runCmd("verify", "-config", procs[0].cmd.Args[3])
	if err != nil {
		t.Fatalf("verify -config: %v\n%s", err, out)
	}
	captured := 0
	for _, p := range status {
		if p["status"] == "captured" || p["status"] == "refunded" {
			captured++
		}
	}
	total := 0
	for _, n := range receipts {
		total += n
	}
	t.Logf("%d payments (%d captured or refunded), %d answers, %d acknowledged webhooks, %d key pairs on two instances, %d keys left to the killed instance; "+
		"%d outbox records = %d NATS messages; %d receipts (%d e-mails, %d sent again after the kill); %d merchant webhooks sent again after the kill; %s",
		len(status), captured, l.answers.Load(), len(l.acked), len(l.pairs), heldByKilled,
		len(outbox), len(msgs), len(receipts), total, resent, redelivered, strings.TrimSpace(out))
	if captured == 0 || len(l.acked) == 0 || len(l.pairs) == 0 {
		t.Fatal("the load did too little to show anything")
	}
}
