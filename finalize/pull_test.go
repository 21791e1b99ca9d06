package finalize_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mollie"
	"github.com/paystate/paystate/psp/mollie/mollietest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

// pullFixture is a store, the Mollie provider pointed at a fake Mollie
// API, and the inbox with its pull worker, in the inbox worker's path.
type pullFixture struct {
	db    store.Store
	clock *storetest.Clock
	fake  *mollietest.Fake
	prov  *mollie.Provider
	in    *finalize.Inbox
	pull  *finalize.Pull
}

func newPullFixture(t *testing.T, db store.Store, clock *storetest.Clock, fake *mollietest.Fake) *pullFixture {
	t.Helper()
	if clock == nil {
		clock = storetest.NewClock(time.Now().UTC())
	}
	if db == nil {
		db = bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	}
	if fake == nil {
		fake = mollietest.New(t)
	}
	prov, err := mollie.New(mollie.Config{APIKey: mollietest.APIKey, APIBase: fake.URL, WebhookURL: "https://shop.example/webhooks/mollie", RedirectURL: "https://shop.example/thanks"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	provs := map[string]pay.Provider{mollie.Name: prov}
	fin := finalize.New(db)
	pull := &finalize.Pull{
		Store: db, Finalizer: fin, Providers: provs, Now: clock.Now,
		Leases: &finalize.Leases{Store: db, Holder: "pull/test", TTL: 30 * time.Second, Now: clock.Now},
		Limits: map[string]finalize.PullLimits{mollie.Name: {UnknownIDBackoff: time.Hour}},
	}
	in := &finalize.Inbox{Store: db, Finalizer: fin, Providers: provs, Pull: pull, Now: clock.Now}
	pull.Wake = in.Wake
	return &pullFixture{db: db, clock: clock, fake: fake, prov: prov, in: in, pull: pull}
}

// create makes a payment at the fake through the provider and stores it
// as a create does.
func (f *pullFixture) create(t *testing.T, id string, amount int64) pay.Payment {
	t.Helper()
	now := f.clock.Now()
	p := pay.Payment{ID: id, OrderID: "o-" + id, Amount: amount, Currency: "EUR", Provider: mollie.Name, Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.db.Update(context.Background(), func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
	res, err := f.prov.Create(context.Background(), p, finalize.ChargeKey(id))
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.in.Finalizer.Finalize(context.Background(), pay.Observation{
		PaymentID: id, Source: pay.SourceSync, Status: res.Status, ProviderRef: res.ProviderRef, RedirectURL: res.RedirectURL,
		Amount: res.Amount, Currency: res.Currency,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.Payment
}

// trigger posts Mollie's webhook (id=tr_...) to the inbox and reports
// whether it was coalesced.
func (f *pullFixture) trigger(t *testing.T, ref string) bool {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	_, dup, err := f.in.Accept(context.Background(), mollie.Name, []byte("id="+ref), h)
	if err != nil {
		t.Fatal(err)
	}
	return dup
}

func (f *pullFixture) get(t *testing.T, id string) pay.Payment {
	t.Helper()
	var p pay.Payment
	if err := f.db.View(context.Background(), func(tx store.Tx) (err error) { p, err = tx.Payment(id); return err }); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantStatus fails the test unless the payment is in status want.
func (f *pullFixture) wantStatus(t *testing.T, id string, want pay.Status, when string) {
	t.Helper()
	if got := f.get(t, id).Status; got != want {
		t.Fatalf("Status=%s %s, want %s", got, when, want)
	}
}

// triggered posts n triggers for ref, the inbox worker running after
// each, and checks that the payment ends in status want with one outbox
// record of type once.
func (f *pullFixture) triggered(t *testing.T, n int, ref, id string, want pay.Status, once string) {
	t.Helper()
	for range n {
		f.trigger(t, ref)
		f.runInbox(t)
	}
	f.wantStatus(t, id, want, fmt.Sprintf("after %d triggers", n))
	if got := f.outbox(t, id)[once]; got != 1 {
		t.Fatalf("%s outbox records=%d, want 1", once, got)
	}
}

// pending returns the inbox events not processed yet, due within the hour.
func (f *pullFixture) pending(t *testing.T) []pay.InboxEvent {
	t.Helper()
	var out []pay.InboxEvent
	if err := f.db.View(context.Background(), func(tx store.Tx) (err error) {
		out, err = tx.PendingInbox(f.clock.Now().Add(time.Hour), 10)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *pullFixture) runInbox(t *testing.T) {
	t.Helper()
	if _, err := f.in.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// outbox returns how many outbox records of each type a payment has.
func (f *pullFixture) outbox(t *testing.T, id string) map[string]int {
	t.Helper()
	out := map[string]int{}
	if err := f.db.View(context.Background(), func(tx store.Tx) error {
		recs, err := tx.OutboxForPayment(id)
		for _, r := range recs {
			out[r.Type]++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

const fetchRoute = "GET /v2/payments/{id}"

// A payment paid at Mollie is captured once, whatever the number and
// order of its triggers: before the payment is paid, many at once, after
// it was captured.
func TestPull_CapturedOnce(t *testing.T) {
	t.Parallel()
	onBackends(t, testCapturedOnce)
}

// onBackends runs test with a pull fixture on each storage backend.
func onBackends(t *testing.T, test func(*testing.T, *pullFixture)) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewClock(time.Now().UTC())
			test(t, newPullFixture(t, b.Open(t, clock.Now), clock, nil))
		})
	}
}

func testCapturedOnce(t *testing.T, f *pullFixture) {
	p := f.create(t, "pay_pull1", 1000)
	if got, want := p.Status, pay.RequiresAction; got != want {
		t.Fatalf("Status=%s after create, want %s", got, want)
	}
	if p.RedirectURL == "" {
		t.Fatal("no redirect URL from _links.checkout")
	}
	ref := p.ProviderRef

	// A trigger while the payment is still open: fetched, nothing moves.
	if f.trigger(t, ref) {
		t.Fatal("the first trigger was coalesced")
	}
	f.runInbox(t)
	f.wantStatus(t, p.ID, pay.RequiresAction, "")

	// Paid at Mollie; five triggers arrive before the worker runs: one
	// is stored, four coalesce into it.
	f.fake.SetStatus(ref, "paid")
	coalesced := 0
	for range 5 {
		if f.trigger(t, ref) {
			coalesced++
		}
	}
	if got, want := coalesced, 4; got != want {
		t.Fatalf("coalesced=%d, want %d", got, want)
	}
	before := f.fake.Requests(fetchRoute)
	f.runInbox(t)
	if got, want := f.fake.Requests(fetchRoute)-before, 1; got != want {
		t.Fatalf("fetches=%d for five coalesced triggers, want %d", got, want)
	}
	f.wantStatus(t, p.ID, pay.Captured, "")

	// Late and repeated triggers: fetched, nothing more happens.
	f.triggered(t, 3, ref, p.ID, pay.Captured, "payment.captured")
	pending := f.pending(t)
	if len(pending) != 0 {
		t.Fatalf("pending triggers=%d, want 0", len(pending))
	}
}

// A trigger that arrives while a fetch runs (the lease is held) is
// stored, not coalesced into the trigger being fetched: that fetch may
// have begun before what the new trigger announces.
func TestPull_TriggerDuringFetchNotLost(t *testing.T) {
	t.Parallel()
	f := newPullFixture(t, nil, nil, nil)
	p := f.create(t, "pay_pull2", 1000)
	f.trigger(t, p.ProviderRef)
	// A fetch is running: the payment's lease is held.
	var lease pay.Lease
	if err := f.db.Update(context.Background(), func(tx store.Tx) (err error) {
		lease, err = tx.AcquireLease(p.ID, "pull/other", 30*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if f.trigger(t, p.ProviderRef) {
		t.Fatal("a trigger during a fetch was coalesced into the trigger being fetched")
	}
	if err := f.db.Update(context.Background(), func(tx store.Tx) error { return tx.ReleaseLease(p.ID, lease.Token) }); err != nil {
		t.Fatal(err)
	}
	f.fake.SetStatus(p.ProviderRef, "paid")
	f.runInbox(t)
	f.wantStatus(t, p.ID, pay.Captured, "")
}

// A trigger whose fetch fails is retried with backoff, and the payment is
// not failed meanwhile.
func TestPull_FetchFailsRetried(t *testing.T) {
	t.Parallel()
	f := newPullFixture(t, nil, nil, nil)
	p := f.create(t, "pay_pull3", 1000)
	f.fake.SetStatus(p.ProviderRef, "paid")
	f.trigger(t, p.ProviderRef)

	f.fake.Fail(1)
	f.runInbox(t)
	if got, want := f.get(t, p.ID).Status, pay.RequiresAction; got != want {
		t.Fatalf("Status=%s after a failed fetch, want %s (unchanged)", got, want)
	}
	pending := f.pending(t)
	if len(pending) != 1 || pending[0].Attempts != 1 || !pending[0].NextAttemptAt.After(f.clock.Now()) {
		t.Fatalf("pending=%+v, want the trigger deferred once", pending)
	}
	// Not due yet: nothing is fetched.
	before := f.fake.Requests(fetchRoute)
	f.runInbox(t)
	if f.fake.Requests(fetchRoute) != before {
		t.Fatal("a deferred trigger was fetched before its backoff ended")
	}
	f.clock.Add(time.Minute)
	f.runInbox(t)
	f.wantStatus(t, p.ID, pay.Captured, "after the retry")
}

// 1,000 forged ids in a burst cost one fetch each, a second burst within
// the backoff none, and neither writes to the store.
func TestPull_ForgedIDs(t *testing.T) {
	f := newPullFixture(t, nil, nil, nil)
	writes := metrics.GetOrCreateCounter(`paystate_store_write_transactions_total`)
	w0 := writes.Get()
	const n = 1000
	for burst := range 2 {
		for i := range n {
			f.trigger(t, fmt.Sprintf("tr_forged%d", i))
		}
		got, err := f.pull.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{n, 0}[burst]; got != want {
			t.Fatalf("burst %d: fetched=%d, want %d", burst, got, want)
		}
	}
	if got, want := f.fake.Requests(fetchRoute), n; got != want {
		t.Fatalf("fetches=%d at the fake, want %d (one per forged id)", got, want)
	}
	if got := writes.Get() - w0; got != 0 {
		t.Fatalf("write transactions=%d for forged ids, want 0", got)
	}
	t.Logf("%d forged ids sent twice within the backoff: %d fetches at Mollie, %d write transactions", n, f.fake.Requests(fetchRoute), writes.Get()-w0)
	// Past the backoff, one more fetch each.
	f.clock.Add(time.Hour + time.Second)
	for i := range n {
		f.trigger(t, fmt.Sprintf("tr_forged%d", i))
	}
	if got, _ := f.pull.RunOnce(context.Background()); got != n {
		t.Fatalf("after the backoff: fetched=%d, want %d", got, n)
	}
	if got := writes.Get() - w0; got != 0 {
		t.Fatalf("write transactions=%d for forged ids, want 0", got)
	}
}

// A payment whose create answer was lost (no Mollie id recorded) is found
// by the metadata of the payment Mollie's webhook names, and finalized.
func TestPull_UnknownRefOurs(t *testing.T) {
	t.Parallel()
	f := newPullFixture(t, nil, nil, nil)
	now := f.clock.Now()
	p := pay.Payment{ID: "pay_lost", OrderID: "o", Amount: 2500, Currency: "EUR", Provider: mollie.Name, Status: pay.FinalizePending, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := f.db.Update(context.Background(), func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
	f.fake.Put(mollietest.Payment{ID: "tr_lost1", Status: "paid", Value: "25.00", Currency: "EUR", Description: "x", Metadata: map[string]any{mollie.MetadataPaymentID: p.ID}})
	f.trigger(t, "tr_lost1")
	if n, err := f.pull.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("pull: n=%d err=%v", n, err)
	}
	f.runInbox(t)
	got := f.get(t, p.ID)
	if got.Status != pay.Captured || got.ProviderRef != "tr_lost1" {
		t.Fatalf("payment=%s ref=%s, want captured with tr_lost1", got.Status, got.ProviderRef)
	}
}

// An acknowledged trigger survives a crash: Accept stored it before it
// returned, and a process that opens the file afterwards fetches it.
func TestPull_TriggerSurvivesRestart(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Now().UTC())
	path := filepath.Join(t.TempDir(), "paystate.db")
	db, err := bolt.Open(path, &bolt.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	fake := mollietest.New(t)
	f := newPullFixture(t, db, clock, fake)
	p := f.create(t, "pay_crash", 1000)
	fake.SetStatus(p.ProviderRef, "paid")
	f.trigger(t, p.ProviderRef) // answered 200: the trigger is durable
	// The file as it is on disk now, the first process never closing it:
	// what a process killed after its answer leaves behind.
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crashed, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	db2 := func() *bolt.DB {
		db, err := bolt.Open(crashed, &bolt.Options{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}()
	f2 := newPullFixture(t, db2, clock, fake)
	f2.runInbox(t)
	f2.wantStatus(t, p.ID, pay.Captured, "after restart")
}

// A malformed id is refused and stores nothing.
func TestPull_MalformedID(t *testing.T) {
	t.Parallel()
	f := newPullFixture(t, nil, nil, nil)
	for _, body := range []string{"", "id=", "id=tr_", "id=pay_123", "id=tr_abc%00", "id=tr_" + string(make([]byte, 70))} {
		_, _, err := f.in.Accept(context.Background(), mollie.Name, []byte(body), http.Header{})
		if pay.ErrorCode(err) != pay.EINVALID {
			t.Errorf("body %q: err=%v, want %s", body, err, pay.EINVALID)
		}
	}
	if got, _ := f.pull.RunOnce(context.Background()); got != 0 {
		t.Fatalf("fetched=%d, want 0", got)
	}
}

// A refund made through paystate is settled by what the next fetch
// shows, and a chargeback becomes a dispute (lost; reversed: won is a
// closed dispute reopening, which goes to review): each change once,
// whatever the number of triggers.
func TestPull_RefundsAndChargebacks(t *testing.T) {
	t.Parallel()
	onBackends(t, testRefundsAndChargebacks)
}

func testRefundsAndChargebacks(t *testing.T, f *pullFixture) {
	ctx := context.Background()
	p := f.create(t, "pay_pullre", 2000)
	f.fake.SetStatus(p.ProviderRef, "paid")
	f.trigger(t, p.ProviderRef)
	f.runInbox(t)

	svc := &finalize.Payments{Store: f.db, Finalizer: f.in.Finalizer, Providers: f.in.Providers, DefaultProvider: mollie.Name}
	r, err := svc.RefundOnce(ctx, p.ID, finalize.RefundRequest{Amount: 2000},
		finalize.IdemKey{Key: "refund:all", Fingerprint: "all", Status: http.StatusCreated})
	if err != nil {
		t.Fatal(err)
	}
	if r.Refund.Status != pay.RefundPending {
		t.Fatalf("refund=%+v, want pending (Mollie's answer)", r.Refund)
	}
	mp, _ := f.fake.Payment(p.ProviderRef)
	if len(mp.Refunds) != 1 || mp.Refunds[0].IdemKey != pay.RefundKey(r.Refund.ID) {
		t.Fatalf("refunds at Mollie: %+v, want one under %s", mp.Refunds, pay.RefundKey(r.Refund.ID))
	}

	// Mollie refunds it; its webhooks (twice) settle it.
	f.fake.SetRefundStatus(p.ProviderRef, "refunded")
	f.triggered(t, 2, p.ProviderRef, p.ID, pay.Refunded, "payment.refund.succeeded")

	// A chargeback of another payment: a lost dispute, once.
	q := f.create(t, "pay_pullcb", 1500)
	f.fake.SetStatus(q.ProviderRef, "paid")
	f.trigger(t, q.ProviderRef)
	f.runInbox(t)
	cb := f.fake.AddChargeback(q.ProviderRef, "15.00")
	for range 2 {
		f.trigger(t, q.ProviderRef)
		f.runInbox(t)
	}
	var ds []pay.Dispute
	if err := f.db.View(ctx, func(tx store.Tx) (err error) { ds, err = tx.DisputesForPayment(q.ID); return err }); err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].ID != cb || ds[0].Status != pay.DisputeLost || ds[0].Amount != 1500 {
		t.Fatalf("disputes=%+v, want %s lost for 15.00", ds, cb)
	}
	if n := f.outbox(t, q.ID)["payment.dispute.created"]; n != 1 {
		t.Fatalf("payment.dispute.created records=%d, want 1", n)
	}
}

// Triggers for many payments at once are fetched within the provider's
// rate limit, on the Pull's clock: however the inbox worker's parallel
// applies run, the fetches at the fake by any time are never more than
// the burst (1) plus rate × the time elapsed, and every trigger held back
// is fetched later: each payment is captured, with one fetch.
func TestPull_RateLimit(t *testing.T) {
	t.Parallel()
	f := newPullFixture(t, nil, nil, nil)
	const (
		n     = 40
		rate  = 10 // fetches per second
		burst = 1
	)
	f.pull.Limits[mollie.Name] = finalize.PullLimits{RatePerSecond: rate, UnknownIDBackoff: time.Hour}
	ps := make([]pay.Payment, n)
	for i := range ps {
		ps[i] = f.create(t, fmt.Sprintf("pay_rate%02d", i), 1000)
		f.fake.SetStatus(ps[i].ProviderRef, "paid")
	}

	start := f.clock.Now()
	lw := watchLimit(f, rate, burst)
	f.pull.Until = lw.until

	for _, p := range ps {
		if f.trigger(t, p.ProviderRef) {
			t.Fatalf("the trigger of %s was coalesced", p.ID)
		}
	}
	for i := 0; i < 10 && len(f.pending(t)) > 0; i++ {
		f.runInbox(t)
	}
	lw.done(t)
	for _, p := range ps {
		f.wantStatus(t, p.ID, pay.Captured, "after the burst")
	}
	if got, want := f.fake.Requests(fetchRoute), n; got != want {
		t.Fatalf("fetches=%d, want %d (one per payment)", got, want)
	}
	// n fetches at 10/s after a burst of one take (n-1)/10 s of the clock.
	elapsed := f.clock.Now().Sub(start)
	if min := time.Duration(n-burst) * time.Second / rate; elapsed < min {
		t.Fatalf("%d fetches took %v of the clock, want at least %v", n, elapsed, min)
	}
	t.Logf("%d triggers at %d/s: %d fetches over %v of the clock, in %d steps", n, rate, f.fake.Requests(fetchRoute), elapsed, lw.steps)
}

// limitWatch counts a pull fixture's fetches against a rate limit. The
// clock moves only when a fetch waits for its turn (until, the Pull's
// Until): to the time the limiter gave it. Before each move, the fetches
// so far are counted against the limit at the time the clock shows.
type limitWatch struct {
	f           *pullFixture
	rate, burst int
	start       time.Time
	mu          sync.Mutex
	steps       int
	over        []string
}

func watchLimit(f *pullFixture, rate, burst int) *limitWatch {
	return &limitWatch{f: f, rate: rate, burst: burst, start: f.clock.Now()}
}

func (w *limitWatch) check(at time.Time) {
	elapsed := at.Sub(w.start)
	limit := w.burst + int(int64(w.rate)*int64(elapsed)/int64(time.Second))
	if got := w.f.fake.Requests(fetchRoute); got > limit {
		w.over = append(w.over, fmt.Sprintf("%d fetches %v after the burst began, limit %d", got, elapsed, limit))
	}
}

func (w *limitWatch) until(ctx context.Context, at time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now := w.f.clock.Now(); at.After(now) {
		w.check(now)
		w.steps++
		w.f.clock.Add(at.Sub(now))
	}
	return nil
}

// done checks the fetches at the clock's time and fails t if any count
// was over the limit.
func (w *limitWatch) done(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.check(w.f.clock.Now())
	if len(w.over) > 0 {
		t.Fatalf("over the rate limit (%d/s, burst %d): %s", w.rate, w.burst, strings.Join(w.over, "; "))
	}
}

// Forged ids are fetched within the rate limit too: a burst of them
// waits its turn, one fetch each.
func TestPull_ForgedIDsRateLimit(t *testing.T) {
	t.Parallel()
	f := newPullFixture(t, nil, nil, nil)
	const n, rate, burst = 50, 10, 1
	f.pull.Limits[mollie.Name] = finalize.PullLimits{RatePerSecond: rate, UnknownIDBackoff: time.Hour}
	lw := watchLimit(f, rate, burst)
	f.pull.Until = lw.until
	for i := range n {
		f.trigger(t, fmt.Sprintf("tr_forgedrate%d", i))
	}
	got, err := f.pull.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lw.done(t)
	if got != n || f.fake.Requests(fetchRoute) != n {
		t.Fatalf("fetched=%d, %d at the fake, want %d (one per forged id)", got, f.fake.Requests(fetchRoute), n)
	}
	if min := time.Duration(n-burst) * time.Second / rate; f.clock.Now().Sub(lw.start) < min {
		t.Fatalf("%d fetches took %v of the clock, want at least %v", n, f.clock.Now().Sub(lw.start), min)
	}
}
