package sweeper_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
	"github.com/paystate/paystate/sweeper"
)

// TestMain runs the tests and benchmarks, removes the benchmark databases
// and fails if a goroutine is left behind (goleak).
func TestMain(m *testing.M) {
	code := m.Run()
	closeBenchEnvs()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

const (
	minAge      = 10 * time.Minute
	expireAfter = time.Hour
	giveUpAfter = 24 * time.Hour
	retention   = 30 * 24 * time.Hour

	stdSecret = "whsec_cGF5c3RhdGUtc3dlZXBlci10ZXN0LXNlY3JldC0wMDA="
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a paystate core on a real bbolt file: store, finalize, leases, the
// mock and standard providers, the merchant operations, the webhook inbox
// and a sweeper, all on one injected clock.
type env struct {
	t        *testing.T
	ctx      context.Context
	clock    *storetest.Clock
	db       *bolt.DB
	fin      *finalize.Finalizer
	mock     *mock.Provider
	payments *finalize.Payments
	inbox    *finalize.Inbox
	sw       *sweeper.Sweeper
}

// newMock returns a simulated PSP whose webhooks never reach paystate (they
// go to a closed port and are dropped after one try), so only the sweeper
// can learn what the PSP did. delay is the mock's webhook_delay.
func newMock(t *testing.T, clock *storetest.Clock, delay time.Duration) *mock.Provider {
	t.Helper()
	m, err := mock.New(mock.Config{WebhookURL: "http://127.0.0.1:1/webhooks/mock", WebhookDelay: delay},
		mock.WithNow(clock.Now), mock.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func newEnv(t *testing.T, delay time.Duration) *env {
	t.Helper()
	clock := storetest.NewClock(t0)
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	fin := finalize.New(db)
	mk := newMock(t, clock, delay)
	std, err := standard.New(standard.Config{WebhookSecret: stdSecret})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]pay.Provider{"mock": mk, "standard": std}
	e := &env{
		t: t, ctx: context.Background(), clock: clock, db: db, fin: fin, mock: mk,
		payments: &finalize.Payments{Store: db, Finalizer: fin, Providers: providers, DefaultProvider: "mock"},
		inbox:    &finalize.Inbox{Store: db, Finalizer: fin, Providers: providers, Now: clock.Now, ApplyLater: true},
	}
	e.sw = &sweeper.Sweeper{
		Store: db, Finalizer: fin, Providers: providers, Now: clock.Now,
		Leases: &finalize.Leases{Store: db, Holder: "sweeper", TTL: 30 * time.Second},
		MinAge: minAge, GiveUpAfter: giveUpAfter, ExpireAfter: expireAfter, ProcessedRetention: retention,
		RatePerSecond: 1000, RetryBackoff: time.Millisecond,
	}
	return e
}

// create makes a payment through the merchant operations.
func (e *env) create(provider string, amount int64) pay.Payment {
	e.t.Helper()
	p, err := e.payments.Create(e.ctx, finalize.CreateRequest{
		OrderID: fmt.Sprintf("order-%d", amount), Amount: amount, Currency: "EUR", Provider: provider,
		Customer: pay.Customer{ID: "cus_1", Email: "ada@example.com"},
	})
	if err != nil {
		e.t.Fatalf("create %d: %v", amount, err)
	}
	return p
}

// pass runs one sweeper pass and returns its report.
func (e *env) pass() sweeper.Report {
	e.t.Helper()
	if _, err := e.sw.RunOnce(e.ctx); err != nil {
		e.t.Fatalf("RunOnce: %v", err)
	}
	return e.sw.LastReport()
}

func (e *env) payment(id string) pay.Payment {
	e.t.Helper()
	var p pay.Payment
	e.view(func(tx store.Tx) (err error) { p, err = tx.Payment(id); return err })
	return p
}

func (e *env) view(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.db.View(e.ctx, fn); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) update(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.db.Update(e.ctx, fn); err != nil {
		e.t.Fatal(err)
	}
}

// snapshot is everything a pass must not touch when it has nothing to do.
type snapshot struct {
	payment pay.Payment
	steps   []pay.Step
	outbox  []pay.OutboxRecord
	review  []pay.ReviewItem
}

func (e *env) snapshot(id string) snapshot {
	e.t.Helper()
	var s snapshot
	e.view(func(tx store.Tx) (err error) {
		if s.payment, err = tx.Payment(id); err != nil {
			return err
		}
		if s.steps, err = tx.Steps(id); err != nil {
			return err
		}
		if s.outbox, err = tx.OutboxForPayment(id); err != nil {
			return err
		}
		s.review, err = tx.ListReview()
		return err
	})
	return s
}

func (e *env) sameSnapshot(id string, want snapshot) {
	e.t.Helper()
	got := e.snapshot(id)
	if got.payment.Version != want.payment.Version || got.payment.Status != want.payment.Status || !got.payment.UpdatedAt.Equal(want.payment.UpdatedAt) {
		e.t.Fatalf("payment %s moved: %s, want %s", id, got.payment, want.payment)
	}
	if got, want := len(got.steps), len(want.steps); got != want {
		e.t.Fatalf("timeline of %s has %d steps, want %d", id, got, want)
	}
	if got, want := len(got.outbox), len(want.outbox); got != want {
		e.t.Fatalf("outbox of %s has %d records, want %d", id, got, want)
	}
	if got, want := len(got.review), len(want.review); got != want {
		e.t.Fatalf("review queue has %d items, want %d", got, want)
	}
}

// verify replays every payment's timeline against its record (paystate
// verify) and fails the test on a mismatch.
func (e *env) verify() {
	e.t.Helper()
	rep, err := verify.Run(e.ctx, e.db)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		e.t.Errorf("verify: %v", m)
	}
}

// lastStep returns a payment's last timeline step.
func (e *env) lastStep(id string) pay.Step {
	e.t.Helper()
	s := e.snapshot(id).steps
	return s[len(s)-1]
}

func (e *env) reviewItem(id string) (pay.ReviewItem, bool) {
	e.t.Helper()
	var (
		it    pay.ReviewItem
		found bool
	)
	e.view(func(tx store.Tx) error {
		var err error
		it, err = tx.Review(id)
		switch pay.ErrorCode(err) {
		case "":
			found = true
		case pay.ENOTFOUND:
		default:
			return err
		}
		return nil
	})
	return it, found
}

func TestSweeper_LostAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	var lost []pay.Payment
	for _, amount := range []int64{1004, 2004, 3004} {
		p := e.create("mock", amount)
		if got, want := p.Status, pay.FinalizePending; got != want {
			t.Fatalf("Status after a lost answer=%s, want %s", got, want)
		}
		lost = append(lost, p)
	}

	// Younger than min_age: the main path may still finish them.
	e.clock.Add(minAge - time.Second)
	if got, want := e.pass().Corrected, 0; got != want {
		t.Fatalf("Corrected before min_age=%d, want %d", got, want)
	}

	e.clock.Add(2 * time.Second)
	rep := e.pass()
	if got, want := rep.Corrected, len(lost); got != want {
		t.Fatalf("Corrected=%d, want %d", got, want)
	}
	for _, p := range lost {
		got := e.snapshot(p.ID)
		if got, want := got.payment.Status, pay.Captured; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
		if got.payment.ProviderRef == "" {
			t.Fatalf("ProviderRef is empty, want the PSP's reference")
		}
		var captured int
		for _, r := range got.outbox {
			if r.Type == "payment.captured" {
				captured++
			}
		}
		if captured != 1 {
			t.Fatalf("payment.captured outbox records=%d, want 1 (outbox %+v)", captured, got.outbox)
		}
		last := got.steps[len(got.steps)-1]
		if last.Source != pay.SourceSweeper || last.Kind != pay.StepTransition || last.From != pay.FinalizePending || last.To != pay.Captured {
			t.Fatalf("last step=%+v, want the sweeper's transition finalize_pending → captured", last)
		}
	}

	// A second pass over the same records changes nothing and publishes
	// nothing.
	before := make([]snapshot, len(lost))
	for i, p := range lost {
		before[i] = e.snapshot(p.ID)
	}
	e.clock.Add(minAge)
	n, err := e.sw.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("second pass changed %d records, want 0", n)
	}
	for i, p := range lost {
		e.sameSnapshot(p.ID, before[i])
	}
	var balances []pay.Balance
	e.view(func(tx store.Tx) (err error) { balances, err = tx.LedgerBalances(); return err })
	for _, b := range balances {
		if b.Account == pay.AccountPSPReceivable {
			if got, want := b.Amount, int64(1004+2004+3004); got != want {
				t.Fatalf("receivable=%d, want %d (one posting per capture)", got, want)
			}
		}
	}
	e.verify()
}

func TestSweeper_UnknownToPSP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	p := e.create("mock", 1004)

	// The process restarts: the new simulated PSP has forgotten the charge.
	e.sw.Providers = map[string]pay.Provider{"mock": newMock(t, e.clock, 0)}
	e.clock.Add(minAge + time.Second)
	rep := e.pass()
	if rep.Corrected != 0 || rep.Reviewed != 1 || rep.Unresolved != 1 || rep.ReviewQueue != 1 {
		t.Fatalf("report=%+v, want one payment reviewed and none corrected", rep)
	}
	it, ok := e.reviewItem(p.ID)
	if !ok {
		t.Fatal("payment is not on the review queue")
	}
	if it.Reason != pay.ReasonUnresolved || it.PaymentID != p.ID || it.Provider != "mock" || it.LastPSP == "" {
		t.Fatalf("review item=%+v, want unresolved with the PSP's answer", it)
	}
	var ans pay.PSPAnswer
	e.view(func(tx store.Tx) (err error) { ans, err = tx.PSPAnswer(p.ID); return err })
	if ans.Found || ans.Raw != "mock status=not_found" || ans.Provider != "mock" {
		t.Fatalf("PSPAnswer=%+v, want not found", ans)
	}
	got := e.snapshot(p.ID)
	if got, want := got.payment.Status, pay.FinalizePending; got != want {
		t.Fatalf("Status=%s, want %s: no PSP evidence, no decision", got, want)
	}
	if last := got.steps[len(got.steps)-1]; last.Kind != pay.StepReview || last.Source != pay.SourceSweeper {
		t.Fatalf("last step=%+v, want the sweeper's review step", last)
	}

	// Next passes ask again but queue nothing twice.
	for range 2 {
		e.clock.Add(minAge)
		if n, err := e.sw.RunOnce(e.ctx); err != nil || n != 0 {
			t.Fatalf("RunOnce=%d, %v; want 0 changes", n, err)
		}
		e.sameSnapshot(p.ID, got)
	}
	e.verify()
}

// signedStandard accepts a webhook of the standard provider through the
// inbox (verified, stored, not yet applied) and returns its event id.
func (e *env) signedStandard(id, typ, paymentID string) {
	e.t.Helper()
	body, err := stdwebhook.EncodeEvent(stdwebhook.Event{
		ID: id, Type: typ, Created: e.clock.Now(), PaymentID: paymentID, ProviderRef: "psp_" + paymentID, Amount: 1500, Currency: "EUR",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := stdwebhook.Sign(stdSecret, id, e.clock.Now(), body)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, dup, err := e.inbox.Accept(e.ctx, "standard", body, h); err != nil || dup {
		e.t.Fatalf("Accept=%t, %v", dup, err)
	}
}

func TestSweeper_StandardFromHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	a := e.create("standard", 1500) // will be settled by its webhooks
	b := e.create("standard", 1501) // only ever processing
	if a.Status != pay.Created || b.Status != pay.Created {
		t.Fatalf("statuses=%s, %s; want created (report mode)", a.Status, b.Status)
	}

	// The webhooks arrive (stored, archived) but are never applied: the
	// worker that would apply them is not running.
	e.signedStandard("evt_a1", stdwebhook.TypeProcessing, a.ID)
	e.clock.Add(time.Second)
	e.signedStandard("evt_a2", stdwebhook.TypeCaptured, a.ID)
	e.signedStandard("evt_b1", stdwebhook.TypeProcessing, b.ID)

	// Past payment.expire_after both expire; a later pass settles a from
	// its webhook history.
	e.clock.Add(expireAfter + time.Second)
	if got, want := e.pass().Expired, 2; got != want {
		t.Fatalf("Expired=%d, want %d", got, want)
	}
	if got, want := e.payment(a.ID).Status, pay.Expired; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	e.clock.Add(minAge + time.Second)
	rep := e.pass()
	if rep.Corrected != 1 || rep.Reviewed != 0 {
		t.Fatalf("report=%+v, want one correction, no review before give_up_after", rep)
	}
	pa := e.payment(a.ID)
	if got, want := pa.Status, pay.Captured; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	if last := e.lastStep(a.ID); last.Source != pay.SourceSweeper || last.EventID != "evt_a2" {
		t.Fatalf("last step=%+v, want the sweeper applying evt_a2", last)
	}
	// The event was applied by the sweeper, in the same transaction: the
	// inbox worker finds it processed and writes nothing.
	var processed bool
	e.view(func(tx store.Tx) (err error) { processed, err = tx.IsProcessed("standard", "evt_a2"); return err })
	if !processed {
		t.Fatal("evt_a2 is not processed")
	}
	if got, want := e.payment(b.ID).Status, pay.Expired; got != want {
		t.Fatalf("Status of b=%s, want %s (no final webhook)", got, want)
	}

	// Past give_up_after, b goes on the review queue, once.
	e.clock.Add(giveUpAfter)
	rep = e.pass()
	if rep.Reviewed != 1 {
		t.Fatalf("report=%+v, want b reviewed", rep)
	}
	it, ok := e.reviewItem(b.ID)
	if !ok || it.Reason != pay.ReasonUnresolved {
		t.Fatalf("review item=%+v (found %t), want unresolved", it, ok)
	}
	snap := e.snapshot(b.ID)
	e.clock.Add(minAge)
	if n, err := e.sw.RunOnce(e.ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce=%d, %v; want 0 changes", n, err)
	}
	e.sameSnapshot(b.ID, snap)
	e.verify()
}

func TestSweeper_ExpiryThenPSP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)

	// A worker stored the payment and sent the charge, then crashed before
	// it recorded the answer: created here, captured at the PSP.
	now := e.clock.Now()
	p := pay.Payment{
		ID: ids.Payment(now), OrderID: "order-crash", Amount: 1000, Currency: "EUR", Provider: "mock",
		Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	e.update(func(tx store.Tx) error {
		if err := tx.InsertPayment(p); err != nil {
			return err
		}
		return tx.AppendStep(pay.Step{PaymentID: p.ID, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1})
	})
	if _, err := e.mock.Create(e.ctx, p, finalize.ChargeKey(p.ID)); err != nil {
		t.Fatal(err)
	}
	e.mock.Wait() // its webhook is lost

	// created is not reconciled before it expires.
	e.clock.Add(expireAfter - time.Second)
	if rep := e.pass(); rep.Changes() != 0 {
		t.Fatalf("report=%+v, want no change before payment.expire_after", rep)
	}
	e.clock.Add(2 * time.Second)
	if rep := e.pass(); rep.Expired != 1 || rep.Corrected != 0 {
		t.Fatalf("report=%+v, want one expiry and no correction in the same pass", rep)
	}
	pe := e.payment(p.ID)
	if got, want := pe.Status, pay.Expired; got != want {
		t.Fatalf("Status=%s, want %s (never assumed failed)", got, want)
	}

	e.clock.Add(minAge + time.Second)
	if rep := e.pass(); rep.Corrected != 1 {
		t.Fatalf("report=%+v, want one correction", rep)
	}
	got := e.snapshot(p.ID)
	if got, want := got.payment.Status, pay.Captured; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	var types []string
	for _, r := range got.outbox {
		types = append(types, r.Type)
	}
	if want := []string{"payment.expired", "payment.captured"}; !slices.Equal(types, want) {
		t.Fatalf("outbox=%v, want %v", types, want)
	}
	e.verify()
}

func TestSweeper_StillOpenAtPSP(t *testing.T) {
	t.Parallel()
	// The customer never finishes 3-D Secure: the PSP reports
	// requires_action until long after the test.
	e := newEnv(t, 240*time.Hour)
	p := e.create("mock", 1002)
	if got, want := p.Status, pay.RequiresAction; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}

	e.clock.Add(expireAfter + time.Second)
	if rep := e.pass(); rep.Expired != 1 {
		t.Fatalf("report=%+v, want one expiry", rep)
	}
	// The PSP says it is still open: the payment moves back.
	e.clock.Add(minAge + time.Second)
	if rep := e.pass(); rep.Corrected != 1 {
		t.Fatalf("report=%+v, want one correction", rep)
	}
	pp := e.payment(p.ID)
	if got, want := pp.Status, pay.RequiresAction; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	// It is not expired a second time, and nothing is written while the
	// PSP's answer stays the same.
	snap := e.snapshot(p.ID)
	for range 3 {
		e.clock.Add(expireAfter + time.Second)
		if n, err := e.sw.RunOnce(e.ctx); err != nil || n != 0 {
			t.Fatalf("RunOnce=%d, %v; want 0 changes", n, err)
		}
		e.sameSnapshot(p.ID, snap)
	}
	// Past give_up_after a human must look.
	e.clock.Add(giveUpAfter)
	if rep := e.pass(); rep.Reviewed != 1 {
		t.Fatalf("report=%+v, want one review", rep)
	}
	it, ok := e.reviewItem(p.ID)
	if !ok || it.Observed != pay.RequiresAction {
		t.Fatalf("review item=%+v (found %t), want observed requires_action", it, ok)
	}
	e.verify()
}

// cancelingPSP is a PSP with a cancel API (as Stripe has): it cancels
// every open payment it is asked to.
type cancelingPSP struct {
	*mock.Provider
	keys []string
}

func (c *cancelingPSP) Cancel(ctx context.Context, p pay.Payment, key string) (pay.PSPResult, error) {
	c.keys = append(c.keys, key)
	return pay.PSPResult{Status: pay.Failed, ProviderRef: p.ProviderRef, Found: true, Raw: "canceled"}, nil
}

func TestSweeper_ExpiryCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 240*time.Hour)
	p := e.create("mock", 1002)
	psp := &cancelingPSP{Provider: e.mock}
	e.sw.Providers = map[string]pay.Provider{"mock": psp}

	e.clock.Add(expireAfter + time.Second)
	if rep := e.pass(); rep.Expired != 1 {
		t.Fatalf("report=%+v, want one expiry", rep)
	}
	if got, want := psp.keys, []string{"cancel-" + p.ID}; !slices.Equal(got, want) {
		t.Fatalf("Cancel keys=%v, want %v", got, want)
	}
	got := e.snapshot(p.ID)
	if got, want := got.payment.Status, pay.Failed; got != want {
		t.Fatalf("Status=%s, want %s (what the PSP answered)", got, want)
	}
	if got.payment.ClientSecret != "" || got.payment.RedirectURL != "" {
		t.Fatal("a failed payment kept its secrets")
	}
	e.verify()
}

// countingPSP counts the Cancel calls of a provider without a cancel API
// (the mock answers EUNSUPPORTED).
type countingPSP struct {
	*mock.Provider
	cancels int
}

func (c *countingPSP) Cancel(ctx context.Context, p pay.Payment, key string) (pay.PSPResult, error) {
	c.cancels++
	return c.Provider.Cancel(ctx, p, key)
}

// TestSweeper_ExpiryNoCancelAPI: a provider whose Cancel answers
// EUNSUPPORTED has its open payments expired by the sweeper, no PSP answer
// recorded for them, and is asked once: the sweeper remembers it.
func TestSweeper_ExpiryNoCancelAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 240*time.Hour)
	p1, p2 := e.create("mock", 1002), e.create("mock", 2002)
	psp := &countingPSP{Provider: e.mock}
	e.sw.Providers = map[string]pay.Provider{"mock": psp}
	e.sw.Parallel = 1 // one after the other: the second learns from the first

	e.clock.Add(expireAfter + time.Second)
	if rep := e.pass(); rep.Expired != 2 {
		t.Fatalf("report=%+v, want two expiries", rep)
	}
	if got, want := psp.cancels, 1; got != want {
		t.Fatalf("Cancel calls=%d, want %d (EUNSUPPORTED is remembered)", got, want)
	}
	for _, id := range []string{p1.ID, p2.ID} {
		if got, want := e.payment(id).Status, pay.Expired; got != want {
			t.Fatalf("%s: Status=%s, want %s", id, got, want)
		}
		e.view(func(tx store.Tx) error {
			if a, err := tx.PSPAnswer(id); pay.ErrorCode(err) != pay.ENOTFOUND {
				t.Fatalf("%s: PSP answer %+v, %v; want none (no cancel API is no answer)", id, a, err)
			}
			return nil
		})
	}
	e.verify()
}

func TestSweeper_LeaseHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	p := e.create("mock", 1004)
	var l pay.Lease
	e.update(func(tx store.Tx) (err error) { l, err = tx.AcquireLease(p.ID, "inbox", time.Hour); return err })

	e.clock.Add(minAge + time.Second)
	rep := e.pass()
	if rep.Skipped != 1 || rep.Corrected != 0 {
		t.Fatalf("report=%+v, want the payment skipped", rep)
	}
	if got, want := e.payment(p.ID).Status, pay.FinalizePending; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	e.update(func(tx store.Tx) error { return tx.ReleaseLease(p.ID, l.Token) })
	if rep := e.pass(); rep.Corrected != 1 {
		t.Fatalf("report=%+v, want the payment corrected once the lease is free", rep)
	}
}

func TestSweeper_Housekeeping(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	e.sw.Batch = 2 // several transactions per purge

	// Idempotency keys: five expire within a day, one after the test.
	e.update(func(tx store.Tx) error {
		for i := range 5 {
			if err := tx.PutIdemKey(pay.IdemRecord{Key: fmt.Sprintf("old-%d", i), State: pay.IdemDone, ExpiresAt: t0.Add(24 * time.Hour)}); err != nil {
				return err
			}
		}
		return tx.PutIdemKey(pay.IdemRecord{Key: "fresh", State: pay.IdemDone, ExpiresAt: t0.Add(retention + 48*time.Hour)})
	})
	// Processed webhooks: three at t0 (archived in the inbox), one later.
	for i := range 3 {
		e.signedStandard(fmt.Sprintf("evt_old_%d", i), stdwebhook.TypeCaptured, "")
	}
	if n, err := e.inbox.RunOnce(e.ctx); err != nil || n != 0 {
		// Events for no payment are deferred, not applied.
		t.Fatalf("inbox RunOnce=%d, %v", n, err)
	}
	e.update(func(tx store.Tx) error {
		for i := range 3 {
			if err := tx.MarkProcessed("standard", fmt.Sprintf("evt_old_%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	e.clock.Add(retention - time.Hour)
	e.update(func(tx store.Tx) error { return tx.MarkProcessed("standard", "evt_fresh") })

	// Deliveries: three done at t0+retention-1h (so far), one dead, one
	// pending; only done ones past the retention go.
	e.update(func(tx store.Tx) error {
		for i, st := range []string{pay.DeliveryDone, pay.DeliveryDone, pay.DeliveryDone, pay.DeliveryDead, pay.DeliveryPending} {
			if err := tx.InsertDelivery(pay.Delivery{
				ID: fmt.Sprintf("dlv_%d", i), Effect: pay.EffectRetention, EventID: fmt.Sprintf("evt_o_%d", i),
				EventType: "payment.captured", EventSeq: uint64(i + 1), EventAt: tx.Now(),
				PaymentID: fmt.Sprintf("pay_d_%d", i), State: st,
			}); err != nil {
				return err
			}
		}
		return nil
	})

	e.clock.Add(2 * time.Hour) // past the retention of the old ones, and past every old key's expiry
	rep := e.pass()
	if rep.PurgedIdemKeys != 5 || rep.PurgedProcessed != 3 || rep.PurgedDeliveries != 0 {
		t.Fatalf("report=%+v, want 5 keys and 3 processed events purged, no delivery yet", rep)
	}

	e.view(func(tx store.Tx) error {
		for i := range 5 {
			if _, err := tx.IdemKey(fmt.Sprintf("old-%d", i)); pay.ErrorCode(err) != pay.ENOTFOUND {
				t.Fatalf("old key %d: err=%v, want not found", i, err)
			}
		}
		if _, err := tx.IdemKey("fresh"); err != nil {
			t.Fatalf("fresh key: %v", err)
		}
		for i := range 3 {
			id := fmt.Sprintf("evt_old_%d", i)
			if ok, _ := tx.IsProcessed("standard", id); ok {
				t.Fatalf("%s is still processed", id)
			}
			if _, err := tx.InboxEvent("standard", id); pay.ErrorCode(err) != pay.ENOTFOUND {
				t.Fatalf("%s: err=%v, want its archived webhook gone", id, err)
			}
		}
		if ok, _ := tx.IsProcessed("standard", "evt_fresh"); !ok {
			t.Fatal("evt_fresh was purged before its retention")
		}
		return nil
	})
	e.clock.Add(retention)
	if rep := e.pass(); rep.PurgedDeliveries != 3 {
		t.Fatalf("report=%+v, want the 3 done deliveries purged", rep)
	}
	e.view(func(tx store.Tx) error {
		for i := range 5 {
			_, err := tx.Delivery(fmt.Sprintf("dlv_%d", i))
			if got, want := pay.ErrorCode(err) == pay.ENOTFOUND, i < 3; got != want {
				t.Fatalf("dlv_%d: gone=%v, want %v (%v)", i, got, want, err)
			}
		}
		return nil
	})
	if rep := e.pass(); rep.PurgedIdemKeys != 0 || rep.PurgedProcessed != 0 || rep.PurgedDeliveries != 0 {
		t.Fatalf("last pass report=%+v, want nothing purged", rep)
	}
}

func TestSweeper_DriftAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	lose := func(n int) {
		for i := range n {
			e.create("mock", int64(100*(i+10)+4))
		}
		e.clock.Add(minAge + time.Second)
	}

	// First pass: 4 corrections against no history (threshold 3).
	lose(4)
	if rep := e.pass(); rep.Corrected != 4 || !rep.DriftAlert || !e.sw.DriftAlert() {
		t.Fatalf("report=%+v, want 4 corrections and the alert raised", rep)
	}
	// A normal pass clears it.
	e.clock.Add(minAge)
	if rep := e.pass(); rep.Corrected != 0 || rep.DriftAlert || e.sw.DriftAlert() {
		t.Fatalf("report=%+v, want the alert cleared", rep)
	}
	// Trailing average (4+0)/2 = 2: the threshold is 6, so 5 is normal.
	lose(5)
	if rep := e.pass(); rep.Corrected != 5 || rep.DriftAlert {
		t.Fatalf("report=%+v, want 5 corrections without alert", rep)
	}
}

func TestSweeper_TidyQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	p := e.create("mock", 1004)
	e.sw.Providers = map[string]pay.Provider{"mock": newMock(t, e.clock, 0)} // forgot the charge
	e.clock.Add(minAge + time.Second)
	if rep := e.pass(); rep.Reviewed != 1 {
		t.Fatalf("report=%+v, want one review", rep)
	}
	// A late webhook settles it.
	if _, err := e.fin.Finalize(e.ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceWebhook, Status: pay.Captured, Provider: "mock", EventID: "evt_late"}); err != nil {
		t.Fatal(err)
	}
	rep := e.pass()
	if rep.Dropped != 1 || rep.ReviewQueue != 0 || rep.Unresolved != 0 {
		t.Fatalf("report=%+v, want the settled item off the queue", rep)
	}
	if _, ok := e.reviewItem(p.ID); ok {
		t.Fatal("settled payment is still on the review queue")
	}
	e.verify()
}

func TestSweeper_Run(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	p := e.create("mock", 1004)
	e.clock.Add(minAge + time.Second)
	e.sw.Interval = time.Hour
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.sw.Run(ctx) }()
	// Run makes a pass at once.
	testkit.WaitFor(t, 10*time.Second, func() error {
		if got := e.payment(p.ID).Status; got != pay.Captured {
			return fmt.Errorf("status %s, want captured", got)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run=%v, want nil on cancel", err)
	}
}
