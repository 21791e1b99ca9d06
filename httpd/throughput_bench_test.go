package httpd_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	svix "github.com/svix/svix-webhooks/go"
	"github.com/valyala/fasthttp"
	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// The benchmarks of this file put the daemon's request paths next to raw
// bbolt in the same run: webhooks and creates over real HTTP on loopback
// into a real bbolt file (through the store's group committer), against a
// plain bbolt file written with db.Batch or db.Update. Times on a shared
// machine move with its load; the ratios, measured in turns, move less,
// and the counts (commits per operation) not at all.

// clients is the number of concurrent clients (and raw goroutines) of the
// parallel cases.
const clients = 256

// benchDaemon is the request path as package daemon wires it, on a real
// bbolt file: the HTTP server on 127.0.0.1:0, finalize's services over a
// commit-counting store, the mock PSP (no webhooks), the standard provider,
// and the inbox worker once startInbox is called. It drops the daemon's
// logs (zero loggers) and runs no sweeper or ripple.
type benchDaemon struct {
	db    *bolt.DB
	cs    *commitCounter
	srv   *httpd.Server
	inbox *finalize.Inbox
	hc    *fasthttp.HostClient
	wh    *svix.Webhook

	flipped atomic.Int64  // status changes committed (Finalizer.Notify)
	flip    chan struct{} // a status change committed; capacity 1

	// randomKeys makes postCreate send a random Idempotency-Key
	// (crypto/rand.Text, as clients that use UUIDs do) instead of
	// run-i, which sorts near the keys sent just before it.
	randomKeys bool
}

// newBenchDaemon opens a benchDaemon; its cleanup shuts everything down.
func newBenchDaemon(b *testing.B) *benchDaemon {
	b.Helper()
	// The mock has no webhook URL (the webhooks it would send are not
	// the request path's work); one try, so that each create's webhook is
	// dropped at once rather than retried for seconds by a goroutine.
	psp, err := mock.New(mock.Config{}, mock.WithRetry(1, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = psp.Close() })
	sp, err := standard.New(standard.Config{WebhookSecret: standardSecret})
	if err != nil {
		b.Fatal(err)
	}
	d := &benchDaemon{db: bolttest.MustOpen(b, nil), flip: make(chan struct{}, 1)}
	d.cs = &commitCounter{Store: d.db}
	fin := finalize.New(d.cs)
	fin.Notify = func() {
		d.flipped.Add(1)
		select {
		case d.flip <- struct{}{}:
		default:
		}
	}
	providers := map[string]pay.Provider{"standard": sp, "mock": psp}
	idem := &finalize.Idempotency{Store: d.cs, Owner: "bench", Exclusive: true}
	payments := &finalize.Payments{Store: d.cs, Finalizer: fin, Providers: providers, Idempotency: idem, DefaultProvider: "mock"}
	d.inbox = &finalize.Inbox{Store: d.cs, Finalizer: fin, Providers: providers}
	d.srv = &httpd.Server{
		Addr: "127.0.0.1:0", Payments: payments, Events: payments, Ledger: payments,
		Webhooks: d.inbox,
	}
	if err := d.srv.Open(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.srv.Shutdown(context.Background()) })
	// fasthttp's client: keep-alive connections, one per client, and a
	// request and response reused by each client, so that the clients
	// take little of the cores the server shares with them. Its
	// idle-connection cleaner ends within MaxIdleConnDuration of the last
	// close (the package's leak check waits 5 s).
	d.hc = &fasthttp.HostClient{
		Addr: "127.0.0.1:" + strconv.Itoa(d.srv.Port()), MaxConns: 2 * clients,
		MaxIdleConnDuration: 3 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		// net.Dial, not fasthttp's default dialer, whose address cache
		// starts a goroutine that never ends.
		Dial: func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) },
	}
	b.Cleanup(d.hc.CloseIdleConnections)
	if d.wh, err = svix.NewWebhook(standardSecret); err != nil {
		b.Fatal(err)
	}
	return d
}

// startInbox runs the inbox worker, as the daemon does, until the
// benchmark ends.
func (d *benchDaemon) startInbox(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.inbox.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
}

// waitFlipped waits until n status changes have committed in all.
func (d *benchDaemon) waitFlipped(b *testing.B, n int64) {
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	for d.flipped.Load() < n {
		select {
		case <-d.flip:
		case <-timeout.C:
			b.Fatalf("%d of %d status changes after 2 minutes", d.flipped.Load(), n)
		}
	}
}

// createPayments stores n payments of the standard provider (created,
// 10.00 EUR) with their first timeline step, 1,000 per transaction, and
// returns their ids.
func (d *benchDaemon) createPayments(b *testing.B, n int) []string {
	b.Helper()
	out := make([]string, 0, n)
	for len(out) < n {
		var batch []string
		err := d.db.Update(context.Background(), func(tx store.Tx) error {
			batch = batch[:0] // the function may run more than once
			now := tx.Now()
			for i := len(out); i < min(n, len(out)+1000); i++ {
				p := pay.Payment{
					ID: ids.Payment(now), OrderID: "bench-" + strconv.Itoa(i), Amount: 1000, Currency: "EUR",
					Provider: "standard", Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now,
				}
				if err := tx.InsertPayment(p); err != nil {
					return err
				}
				if err := tx.AppendStep(pay.Step{PaymentID: p.ID, At: now, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1}); err != nil {
					return err
				}
				batch = append(batch, p.ID)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, batch...)
	}
	return out
}

// signedWebhook is one standard webhook ready to send.
type signedWebhook struct {
	body                []byte
	id, timestamp, sign string
}

// webhooks signs one payment.captured webhook (the payment's own amount
// and currency) for each payment, with the svix library, as a bridge
// speaking Standard Webhooks would.
func (d *benchDaemon) webhooks(b *testing.B, paymentIDs []string) []signedWebhook {
	b.Helper()
	now := time.Now()
	out := make([]signedWebhook, len(paymentIDs))
	for i, id := range paymentIDs {
		evt := "evt_" + id
		body := fmt.Appendf(nil, `{"id":%q,"type":"payment.captured","created":%d,"data":{"payment_id":%q,"amount":1000,"currency":"EUR"}}`, evt, now.Unix(), id)
		sig, err := d.wh.Sign(evt, now, body)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = signedWebhook{body: body, id: evt, timestamp: strconv.FormatInt(now.Unix(), 10), sign: sig}
	}
	return out
}

// postWebhook sends w to /webhooks/standard with the caller's req and resp
// and wants 200.
func (d *benchDaemon) postWebhook(req *fasthttp.Request, resp *fasthttp.Response, w signedWebhook) error {
	req.Reset()
	req.SetRequestURI(d.srv.URL() + "/webhooks/standard")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("webhook-id", w.id)
	req.Header.Set("webhook-timestamp", w.timestamp)
	req.Header.Set("webhook-signature", w.sign)
	req.SetBodyRaw(w.body)
	if err := d.hc.Do(req, resp); err != nil {
		return err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return fmt.Errorf("webhook: status %d: %s", resp.StatusCode(), resp.Body())
	}
	return nil
}

// postCreate creates payment i over HTTP with the caller's req and resp:
// 10.00 EUR with the given provider and its own Idempotency-Key (run-i,
// or a random one if d.randomKeys), wanting 201 and the status want.
func (d *benchDaemon) postCreate(req *fasthttp.Request, resp *fasthttp.Response, run string, i int, provider string, want pay.Status) (string, error) {
	return d.postCreateTo(d.srv.URL(), req, resp, run, i, provider, want)
}

// postCreateTo is postCreate to the server at url (d.hc's address).
func (d *benchDaemon) postCreateTo(url string, req *fasthttp.Request, resp *fasthttp.Response, run string, i int, provider string, want pay.Status) (string, error) {
	req.Reset()
	req.SetRequestURI(url + "/v1/payments")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	if d.randomKeys {
		req.Header.Set("Idempotency-Key", rand.Text())
	} else {
		req.Header.Set("Idempotency-Key", run+"-"+strconv.Itoa(i))
	}
	req.SetBodyRaw(fmt.Appendf(nil, `{"order_id":"%s-%d","amount":1000,"currency":"EUR","provider":%q}`, run, i, provider))
	if err := d.hc.Do(req, resp); err != nil {
		return "", err
	}
	var v struct{ ID, Status string }
	if resp.StatusCode() != fasthttp.StatusCreated || json.Unmarshal(resp.Body(), &v) != nil || v.Status != string(want) {
		return "", fmt.Errorf("create: status %d: %s, want 201 and %s", resp.StatusCode(), resp.Body(), want)
	}
	return v.ID, nil
}

// postSync reports payment id captured at the PSP (POST .../sync) with the
// caller's req and resp, wanting 200.
func (d *benchDaemon) postSync(req *fasthttp.Request, resp *fasthttp.Response, id string) error {
	req.Reset()
	req.SetRequestURI(d.srv.URL() + "/v1/payments/" + id + "/sync")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(fmt.Appendf(nil, `{"status":"captured","provider_ref":"ref_%s"}`, id))
	if err := d.hc.Do(req, resp); err != nil {
		return err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return fmt.Errorf("sync: status %d: %s", resp.StatusCode(), resp.Body())
	}
	return nil
}

// warmUp opens the clients' keep-alive connections (GET /healthz from
// every client at once), so that no timed request pays for a dial.
func (d *benchDaemon) warmUp(b *testing.B) {
	b.Helper()
	err := fanOut(4*clients, clients, func() func(int) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		return func(int) error {
			req.SetRequestURI(d.srv.URL() + "/healthz")
			return d.hc.Do(req, resp)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
}

// sendWebhooks posts ws from clients goroutines and returns how long it
// took until the last was answered.
func (d *benchDaemon) sendWebhooks(b *testing.B, ws []signedWebhook) time.Duration {
	start := time.Now()
	err := fanOut(len(ws), clients, func() func(int) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		return func(i int) error { return d.postWebhook(req, resp, ws[i]) }
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// sendCreates creates n payments with the mock PSP, captured in its
// answer, from clients goroutines, and returns how long it took.
func (d *benchDaemon) sendCreates(b *testing.B, run string, n int) time.Duration {
	start := time.Now()
	err := fanOut(n, clients, func() func(int) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		return func(i int) error {
			_, err := d.postCreate(req, resp, run, i, "mock", pay.Captured)
			return err
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// fanOut runs operations 0..n-1 from workers goroutines, each with the
// function newWorker returns (its own request and response), and returns
// the first error.
func fanOut(n, workers int, newWorker func() func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := newWorker()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// Sizes of the values the store writes for one applied payment.captured
// webhook of the standard provider (schema 2, CBOR records, measured on a
// real file): the raw reference writes values of these sizes. (Schema 1's
// JSON records were 605, 39, 237, 251, 288 and 197 bytes.)
const (
	rawInboxSize     = 268 // the inbox record, with the archived body
	rawProcessedSize = 11
	rawPaymentSize   = 61
	rawStepSize      = 108
	rawOutboxSize    = 118
	rawLedgerSize    = 77
)

var (
	rawBuckets = [][]byte{[]byte("inbox"), []byte("processed"), []byte("payments"), []byte("timeline"), []byte("outbox"), []byte("ledger")}
	rawFill    = make([]byte, rawInboxSize) // value bytes (never changed)
)

// rawDB is the reference: a plain bbolt file, opened with bbolt's defaults
// (MaxBatchDelay 10 ms, the freelist synced on every commit), written
// with bbolt's own Update or Batch and nothing of paystate.
type rawDB struct {
	db  *bbolt.DB
	ids [][]byte // payment keys, one per transaction
}

// newRawDB opens a fresh raw file with the buckets of the transaction.
func newRawDB(b *testing.B) *rawDB {
	b.Helper()
	db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range rawBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return &rawDB{db: db}
}

// addPayments stores n more payment records (10,000 per transaction) for
// transactions to read and rewrite; it returns the index of the first.
func (r *rawDB) addPayments(b *testing.B, n int) int {
	b.Helper()
	first := len(r.ids)
	for lo := first; lo < first+n; lo += 10_000 {
		hi := min(first+n, lo+10_000)
		err := r.db.Update(func(tx *bbolt.Tx) error {
			bk := tx.Bucket([]byte("payments"))
			for i := lo; i < hi; i++ {
				if err := bk.Put(fmt.Appendf(nil, "pay_%026d", i), rawFill[:rawPaymentSize]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		for i := lo; i < hi; i++ {
			r.ids = append(r.ids, fmt.Appendf(nil, "pay_%026d", i))
		}
	}
	return first
}

// apply is one webhook's worth of writes for payment i in tx: an inbox
// record, a processed key, the payment read and rewritten, a timeline
// step, an outbox record and two ledger entries. It has no effect outside
// tx (Batch may run it twice).
func (r *rawDB) apply(tx *bbolt.Tx, i int) error {
	id := r.ids[i]
	event := append([]byte("\x00\x08standardevt_"), id...)
	if err := tx.Bucket(rawBuckets[0]).Put(event, rawFill[:rawInboxSize]); err != nil {
		return err
	}
	if err := tx.Bucket(rawBuckets[1]).Put(event, rawFill[:rawProcessedSize]); err != nil {
		return err
	}
	payments := tx.Bucket(rawBuckets[2])
	v := payments.Get(id)
	if v == nil {
		return fmt.Errorf("payment %s not found", id)
	}
	p := append(make([]byte, 0, len(v)), v...) // a value is valid only inside tx
	p[0]++
	if err := payments.Put(id, p); err != nil {
		return err
	}
	step := binary.BigEndian.AppendUint64(append([]byte(nil), id...), 2)
	if err := tx.Bucket(rawBuckets[3]).Put(step, rawFill[:rawStepSize]); err != nil {
		return err
	}
	for _, bk := range []*bbolt.Bucket{tx.Bucket(rawBuckets[4]), tx.Bucket(rawBuckets[5]), tx.Bucket(rawBuckets[5])} {
		seq, err := bk.NextSequence()
		if err != nil {
			return err
		}
		size := rawLedgerSize
		if bk == tx.Bucket(rawBuckets[4]) {
			size = rawOutboxSize
		}
		if err := bk.Put(binary.BigEndian.AppendUint64(nil, seq), rawFill[:size]); err != nil {
			return err
		}
	}
	return nil
}

// batch runs transactions first..first+n-1 with db.Batch from clients
// goroutines and returns how long it took.
func (r *rawDB) batch(b *testing.B, first, n int) time.Duration {
	start := time.Now()
	err := fanOut(n, clients, func() func(int) error {
		return func(i int) error {
			return r.db.Batch(func(tx *bbolt.Tx) error { return r.apply(tx, first+i) })
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// update runs transaction i with db.Update and returns how long it took.
func (r *rawDB) update(b *testing.B, i int) time.Duration {
	start := time.Now()
	if err := r.db.Update(func(tx *bbolt.Tx) error { return r.apply(tx, i) }); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// perSecond is n operations in d, per second.
func perSecond(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// ratioBlock is the number of operations of each kind in one turn of the
// ratio benchmarks.
const ratioBlock = 4096

// inTurns splits b.N operations into turns of at most ratioBlock and
// calls turn for each with the operations done before it and its size.
func inTurns(b *testing.B, turn func(done, size int)) {
	for done := 0; done < b.N; done += ratioBlock {
		turn(done, min(ratioBlock, b.N-done))
	}
}

// BenchmarkWebhooks measures signed standard webhooks (payment.captured,
// the payment's own amount and currency) for distinct payments, created
// beforehand and not timed, posted by 256 clients over keep-alive
// connections to /webhooks/standard, with the inbox worker running as in
// the daemon. webhooks/s counts the answered webhooks (each answered once
// durable), applied/s counts until the last one is applied (payment
// captured, timeline, outbox, ledger), and commits/webhook the write
// transactions that committed until then; the group committer shares one
// bbolt commit among many of them.
//
// parallel256 is the daemon's path: Accept stores and applies a new event
// in one transaction. parallel256ApplyLater sets Inbox.ApplyLater, the
// worker's path: the event is stored by the request and applied by the
// worker in a second transaction.
//
// rawBatch256 is the reference: bbolt's own db.Batch from 256 goroutines
// on a plain bbolt file, each transaction one webhook's writes in one go
// (rawDB.apply). ratio and ratioApplyLater run both in turns of
// ratioBlock operations of each, so that both see the same machine, and
// report webhooks/s ÷ raw tx/s (ratio-applied: applied/s ÷ raw tx/s);
// their ns/op is one webhook plus one raw transaction.
func BenchmarkWebhooks(b *testing.B) {
	for _, later := range []bool{false, true} {
		name := ""
		if later {
			name = "ApplyLater"
		}
		b.Run("parallel256"+name, func(b *testing.B) {
			d := newBenchDaemon(b)
			d.inbox.ApplyLater = later
			d.startInbox(b)
			d.warmUp(b)
			ws := d.webhooks(b, d.createPayments(b, b.N))
			before, counts := d.cs.N.Load(), countStore()
			b.ResetTimer()
			start := time.Now()
			accepted := d.sendWebhooks(b, ws)
			d.waitFlipped(b, int64(b.N))
			applied := time.Since(start)
			b.StopTimer()
			reportStore(b, counts, b.N, "webhook")
			b.ReportMetric(perSecond(b.N, accepted), "webhooks/s")
			b.ReportMetric(perSecond(b.N, applied), "applied/s")
			b.ReportMetric(float64(d.cs.N.Load()-before)/float64(b.N), "commits/webhook")
		})
	}
	b.Run("rawBatch256", func(b *testing.B) {
		r := newRawDB(b)
		r.addPayments(b, b.N)
		b.ResetTimer()
		took := r.batch(b, 0, b.N)
		b.ReportMetric(perSecond(b.N, took), "tx/s")
	})
	for _, later := range []bool{false, true} {
		name := ""
		if later {
			name = "ApplyLater"
		}
		b.Run("ratio"+name, func(b *testing.B) {
			d := newBenchDaemon(b)
			d.inbox.ApplyLater = later
			d.startInbox(b)
			d.warmUp(b)
			r := newRawDB(b)
			var accepted, applied, raw, cpu, rawCPU time.Duration
			before := d.cs.N.Load()
			inTurns(b, func(done, size int) {
				b.StopTimer()
				ws := d.webhooks(b, d.createPayments(b, size))
				first := r.addPayments(b, size)
				b.StartTimer()
				start, c0 := time.Now(), cpuTime(b)
				accepted += d.sendWebhooks(b, ws)
				d.waitFlipped(b, int64(done+size))
				applied += time.Since(start)
				c1 := cpuTime(b)
				raw += r.batch(b, first, size)
				cpu, rawCPU = cpu+c1-c0, rawCPU+cpuTime(b)-c1
			})
			reportCPU(b, cpu, rawCPU, raw)
			b.ReportMetric(perSecond(b.N, accepted), "webhooks/s")
			b.ReportMetric(perSecond(b.N, applied), "applied/s")
			b.ReportMetric(perSecond(b.N, raw), "raw-tx/s")
			b.ReportMetric(float64(raw)/float64(accepted), "ratio")
			b.ReportMetric(float64(raw)/float64(applied), "ratio-applied")
			b.ReportMetric(float64(d.cs.N.Load()-before)/float64(b.N), "commits/webhook")
		})
	}
}

// BenchmarkCreates256 measures creates over HTTP from 256 clients (mock
// PSP, captured in its answer: amount ending 00; each its own
// Idempotency-Key), two write transactions each, against the raw Batch
// reference of BenchmarkWebhooks, and in turns as a ratio of creates/s to
// raw tx/s.
func BenchmarkCreates256(b *testing.B) {
	b.Run("parallel256", func(b *testing.B) {
		d := newBenchDaemon(b)
		d.warmUp(b)
		before, counts := d.cs.N.Load(), countStore()
		b.ResetTimer()
		took := d.sendCreates(b, "p", b.N)
		reportStore(b, counts, b.N, "create")
		b.ReportMetric(perSecond(b.N, took), "creates/s")
		b.ReportMetric(float64(d.cs.N.Load()-before)/float64(b.N), "commits/create")
	})
	b.Run("rawBatch256", func(b *testing.B) {
		r := newRawDB(b)
		r.addPayments(b, b.N)
		b.ResetTimer()
		took := r.batch(b, 0, b.N)
		b.ReportMetric(perSecond(b.N, took), "tx/s")
	})
	b.Run("ratio", createsRatio(false))
	// ratioRandomKeys is ratio with a random Idempotency-Key on each
	// create. run-i keys land next to the keys of the creates just
	// before them, so a commit's claims and answers share a few pages of
	// idempotency_keys; random keys land on a page of their own, twice
	// per create (the claim, then the answer).
	b.Run("ratioRandomKeys", createsRatio(true))
	// ratioClientProcess is ratio with the 256 clients in a second
	// process (clientProcess): the server's scheduler runs only the
	// server, as with a merchant's clients. cpu-µs/op adds both
	// processes' CPU time.
	b.Run("ratioClientProcess", func(b *testing.B) {
		d := newBenchDaemon(b)
		p := startClientProcess(b, d)
		p.creates(b, "warm", clients) // dials every client's connection
		r := newRawDB(b)
		var creates, raw, cpu, rawCPU time.Duration
		inTurns(b, func(done, size int) {
			b.StopTimer()
			first := r.addPayments(b, size)
			b.StartTimer()
			c0 := cpuTime(b)
			took, clientCPU := p.creates(b, "t"+strconv.Itoa(done), size)
			creates += took
			c1 := cpuTime(b)
			raw += r.batch(b, first, size)
			cpu, rawCPU = cpu+c1-c0+clientCPU, rawCPU+cpuTime(b)-c1
		})
		reportCPU(b, cpu, rawCPU, raw)
		b.ReportMetric(perSecond(b.N, creates), "creates/s")
		b.ReportMetric(perSecond(b.N, raw), "raw-tx/s")
		b.ReportMetric(float64(raw)/float64(creates), "ratio")
	})
}

// createsRatio is BenchmarkCreates256/ratio: creates from 256 clients
// (with random Idempotency-Keys if randomKeys) and raw db.Batch
// transactions in turns, reporting their ratio, the CPU time of each and
// the commits and pages per create.
func createsRatio(randomKeys bool) func(*testing.B) {
	return func(b *testing.B) {
		d := newBenchDaemon(b)
		d.randomKeys = randomKeys
		d.warmUp(b)
		r := newRawDB(b)
		var creates, raw, cpu, rawCPU time.Duration
		before, counts := d.cs.N.Load(), countStore()
		inTurns(b, func(done, size int) {
			b.StopTimer()
			first := r.addPayments(b, size)
			b.StartTimer()
			c0 := cpuTime(b)
			creates += d.sendCreates(b, "t"+strconv.Itoa(done), size)
			c1 := cpuTime(b)
			raw += r.batch(b, first, size)
			cpu, rawCPU = cpu+c1-c0, rawCPU+cpuTime(b)-c1
		})
		reportCPU(b, cpu, rawCPU, raw)
		reportStore(b, counts, b.N, "create")
		n := b.N
		b.ReportMetric(perSecond(n, creates), "creates/s")
		b.ReportMetric(perSecond(n, raw), "raw-tx/s")
		b.ReportMetric(float64(raw)/float64(creates), "ratio")
		b.ReportMetric(float64(d.cs.N.Load()-before)/float64(n), "commits/create")
	}
}

// storeCounts is what the store did so far in this process (the counters
// of /metrics): write transactions asked for, bbolt commits, and pages
// those wrote.
type storeCounts struct{ writes, commits, pages uint64 }

func countStore() storeCounts {
	return storeCounts{
		writes:  metrics.GetOrCreateCounter("paystate_store_write_transactions_total").Get(),
		commits: metrics.GetOrCreateCounter("paystate_store_commits_total").Get(),
		pages:   metrics.GetOrCreateCounter("paystate_store_pages_written_total").Get(),
	}
}

// reportStore reports, from the counts before and after n operations of
// the kind op (such as "webhook"), the write transactions each bbolt
// commit carried, and the pages written per commit and per operation.
// These are counts, not times; they still move with the group sizes,
// which the machine's speed sets.
func reportStore(b *testing.B, before storeCounts, n int, op string) {
	after := countStore()
	commits, pages := float64(after.commits-before.commits), float64(after.pages-before.pages)
	if commits == 0 {
		return
	}
	b.ReportMetric(float64(after.writes-before.writes)/commits, "writes/bbolt-commit")
	b.ReportMetric(pages/commits, "pages/bbolt-commit")
	b.ReportMetric(pages/float64(n), "pages/"+op)
}

// cpuTime is the CPU time (user and system) the test process has used so
// far: the server, its clients and raw bbolt all run in it.
func cpuTime(b *testing.B) time.Duration {
	cpu, err := processCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// reportCPU reports the CPU time per operation (cpu-µs/op: the server's
// and its in-process clients'), per raw transaction, and cores-at-1.5x:
// the cores that the operation's CPU time needs at 1.5 × the raw tx/s of
// the same run. CPU time moves much less with the machine's load than
// throughput does, and above the machine's cores a target cannot be met
// however the work is scheduled.
func reportCPU(b *testing.B, cpu, rawCPU, raw time.Duration) {
	perOp := float64(cpu.Microseconds()) / float64(b.N)
	b.ReportMetric(perOp, "cpu-µs/op")
	b.ReportMetric(float64(rawCPU.Microseconds())/float64(b.N), "raw-cpu-µs/tx")
	b.ReportMetric(perOp*1.5*perSecond(b.N, raw)/1e6, "cores-at-1.5x")
}

// percentiles reports the p50 and p99 of lat under name, in µs.
func percentiles(b *testing.B, name string, lat []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(lat)
	p50, p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(float64(p50.Nanoseconds())/1e3, name+"-p50-µs")
	b.ReportMetric(float64(p99.Nanoseconds())/1e3, name+"-p99-µs")
	return p50, p99
}

// BenchmarkLoneWebhook is one client: a signed webhook over HTTP (a new
// event for a payment created beforehand) and raw bbolt db.Update of one
// webhook's writes (rawDB.apply), in turns. The webhook is applied in the
// request's own transaction; with ApplyLater the request stores it and
// the inbox worker applies it, waited for and not timed, so that neither
// measurement overlaps the other's work. It reports both p50 and p99 and
// their ratios (webhook ÷ raw), and the write transactions per webhook.
func BenchmarkLoneWebhook(b *testing.B) {
	b.Run("inline", func(b *testing.B) { benchLoneWebhook(b, false) })
	b.Run("ApplyLater", func(b *testing.B) { benchLoneWebhook(b, true) })
}

func benchLoneWebhook(b *testing.B, later bool) {
	d := newBenchDaemon(b)
	d.inbox.ApplyLater = later
	d.startInbox(b)
	r := newRawDB(b)
	r.addPayments(b, b.N)
	ws := d.webhooks(b, d.createPayments(b, b.N))
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	hook, raw := make([]time.Duration, b.N), make([]time.Duration, b.N)
	before := d.cs.N.Load()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := d.postWebhook(req, resp, ws[i]); err != nil {
			b.Fatal(err)
		}
		hook[i] = time.Since(start)
		b.StopTimer()
		d.waitFlipped(b, int64(i+1))
		b.StartTimer()
		raw[i] = r.update(b, i)
	}
	b.StopTimer()
	h50, h99 := percentiles(b, "webhook", hook)
	r50, r99 := percentiles(b, "raw", raw)
	b.ReportMetric(float64(h50)/float64(r50), "ratio-p50")
	b.ReportMetric(float64(h99)/float64(r99), "ratio-p99")
	b.ReportMetric(float64(d.cs.N.Load()-before)/float64(b.N), "commits/webhook")
}

// BenchmarkLoneReportCreate is one client of a report-mode provider
// (standard): the create, which calls no PSP and leaves the payment
// created (the key claimed with the payment's insert, then its answer
// stored: two write transactions), then the merchant's report of the PSP's
// answer (POST /v1/payments/{id}/sync, captured: one), and raw bbolt
// db.Update of one webhook's writes, in turns. It reports p50 and p99 of
// each and the ratios to raw.
func BenchmarkLoneReportCreate(b *testing.B) {
	d := newBenchDaemon(b)
	r := newRawDB(b)
	r.addPayments(b, b.N)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	create, sync, raw := make([]time.Duration, b.N), make([]time.Duration, b.N), make([]time.Duration, b.N)
	var createCommits, syncCommits int64
	b.ResetTimer()
	for i := range b.N {
		n0 := d.cs.N.Load()
		start := time.Now()
		id, err := d.postCreate(req, resp, "lone", i, "standard", pay.Created)
		if err != nil {
			b.Fatal(err)
		}
		create[i] = time.Since(start)
		n1 := d.cs.N.Load()
		start = time.Now()
		if err := d.postSync(req, resp, id); err != nil {
			b.Fatal(err)
		}
		sync[i] = time.Since(start)
		createCommits, syncCommits = createCommits+n1-n0, syncCommits+d.cs.N.Load()-n1
		raw[i] = r.update(b, i)
	}
	b.StopTimer()
	c50, c99 := percentiles(b, "create", create)
	s50, s99 := percentiles(b, "sync", sync)
	r50, r99 := percentiles(b, "raw", raw)
	b.ReportMetric(float64(c50)/float64(r50), "ratio-create-p50")
	b.ReportMetric(float64(c99)/float64(r99), "ratio-create-p99")
	b.ReportMetric(float64(s50)/float64(r50), "ratio-sync-p50")
	b.ReportMetric(float64(s99)/float64(r99), "ratio-sync-p99")
	b.ReportMetric(float64(createCommits)/float64(b.N), "commits/create")
	b.ReportMetric(float64(syncCommits)/float64(b.N), "commits/sync")
}

// BenchmarkCreateUnderLoad measures one client's creates over HTTP (mock
// PSP, captured in the answer: two write transactions) with the store
// otherwise idle and while writers goroutines (4, ripple.workers' default,
// and 32) commit ripple-like writes through the same store as fast as they
// can (a loyalty effect: read a
// customer's account, write it back with more points, store the effect's
// dedupe key): b.N creates of each kind, in turns of createBlock. After
// each create, one raw bbolt db.Update of a webhook's writes on a file of
// its own is timed too: it sees the same machine (CPU, disk) but not the
// store's committer, so the part of the slowdown that priority in the
// committer could remove is the create's ratio beyond the raw one. It
// reports p50 and p99 of each, the ratios loaded ÷ quiet, and the
// background writes per second.
func BenchmarkCreateUnderLoad(b *testing.B) {
	for _, writers := range []int{4, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchCreateUnderLoad(b, writers) })
	}
}

func benchCreateUnderLoad(b *testing.B, writers int) {
	const createBlock = 200
	d := newBenchDaemon(b)
	r := newRawDB(b)
	r.addPayments(b, 2*b.N)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	var quiet, loaded, rawQuiet, rawLoaded []time.Duration
	var bgWrites atomic.Int64
	var bgTime time.Duration
	raws := 0
	creates := func(lat, raw *[]time.Duration, kind string, first, size int) {
		for i := first; i < first+size; i++ {
			start := time.Now()
			if _, err := d.postCreate(req, resp, kind, i, "mock", pay.Captured); err != nil {
				b.Fatal(err)
			}
			*lat = append(*lat, time.Since(start))
			*raw = append(*raw, r.update(b, raws))
			raws++
		}
	}
	for done := 0; done < b.N; done += createBlock {
		size := min(createBlock, b.N-done)
		creates(&quiet, &rawQuiet, "quiet", done, size)

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		start := time.Now()
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				customer := fmt.Sprintf("cus_bg_%d", w)
				for n := 0; ctx.Err() == nil; n++ {
					err := d.db.Update(context.Background(), func(tx store.Tx) error {
						acct, err := tx.CustomerAccount(customer)
						if pay.ErrorCode(err) == pay.ENOTFOUND {
							acct, err = store.CustomerAccount{ID: customer}, nil
						}
						if err != nil {
							return err
						}
						acct.Points += 10
						acct.LastVisitAt = tx.Now()
						if err := tx.PutCustomerAccount(acct); err != nil {
							return err
						}
						return tx.PutEffect(store.EffectRecord{Key: fmt.Sprintf("loyalty:bg_%d_%d_%d", done, w, n), DeliveryID: "dlv_bg", Points: 10, At: tx.Now()})
					})
					if err != nil {
						errs <- err
						return
					}
					bgWrites.Add(1)
				}
			}()
		}
		creates(&loaded, &rawLoaded, "loaded", done, size)
		cancel()
		wg.Wait()
		bgTime += time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	q50, q99 := percentiles(b, "quiet", quiet)
	l50, l99 := percentiles(b, "loaded", loaded)
	rq50, rq99 := percentiles(b, "raw-quiet", rawQuiet)
	rl50, rl99 := percentiles(b, "raw-loaded", rawLoaded)
	b.ReportMetric(float64(l50)/float64(q50), "ratio-p50")
	b.ReportMetric(float64(l99)/float64(q99), "ratio-p99")
	b.ReportMetric(float64(rl50)/float64(rq50), "raw-ratio-p50")
	b.ReportMetric(float64(rl99)/float64(rq99), "raw-ratio-p99")
	b.ReportMetric(perSecond(int(bgWrites.Load()), bgTime), "background-writes/s")
}
