package reconcile_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	testbackends "github.com/paystate/paystate/internal/testkit/backends"
	"github.com/paystate/paystate/store"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/leakcheck"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store/storetest"
)

// TestMain stops the PostgreSQL the tests share and fails the package if
// a goroutine is left running.
func TestMain(m *testing.M) { leakcheck.MainThen(m, pgtest.Stop) }

// backends are the two stores the tests run on.
var backends = testbackends.All

const secret = "whsec_cGF5c3RhdGUtZGV2ZWxvcG1lbnQtc2VjcmV0LTAwMDA="

// env is a paystate with the standard provider (report mode, webhooks
// signed with its secret) holding the payments the test reports settle:
//
//	one    100.00 EUR  pi_one    captured, refund re_one of 40.00 succeeded
//	two    200.00 EUR  pi_two    captured, dispute dp_one of 50.00 open
//	three   30.00 EUR  pi_three  captured, in no report (missing_at_psp)
//	five    50.00 EUR  pi_five   captured, settled as 40.00 (amount_mismatch)
//	four    10.00 EUR  pi_four   captured 8 days later: too recent to miss
//
// and the clock 8 days after the first four were captured.
type env struct {
	t     *testing.T
	db    store.Store
	clock *storetest.Clock
	svc   *finalize.Payments
	inbox *finalize.Inbox
	pays  map[string]pay.Payment
}

func newEnv(t *testing.T, open func(*testing.T, func() time.Time) store.Store) *env {
	t.Helper()
	clock := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	db := open(t, clock.Now)
	std, err := standard.New(standard.Config{WebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]pay.Provider{"standard": std}
	fin := finalize.New(db)
	e := &env{
		t: t, db: db, clock: clock, pays: map[string]pay.Payment{},
		svc:   &finalize.Payments{Store: db, Finalizer: fin, Providers: providers, DefaultProvider: "standard"},
		inbox: &finalize.Inbox{Store: db, Finalizer: fin, Providers: providers, Now: clock.Now},
	}
	for _, c := range []struct {
		name   string
		amount int64
	}{{"one", 10000}, {"two", 20000}, {"three", 3000}, {"five", 5000}} {
		e.capture(c.name, c.amount)
	}
	e.refund("one", "re_one", 4000)
	e.dispute("two", "dp_one", 5000)
	clock.Add(8 * 24 * time.Hour)
	e.capture("four", 1000)
	return e
}

// refund refunds amount of payment name and reports the refund
// succeeded at the PSP with reference ref.
func (e *env) refund(name, ref string, amount int64) {
	e.t.Helper()
	r, err := e.svc.RefundOnce(context.Background(), e.pays[name].ID, finalize.RefundRequest{Amount: amount},
		finalize.IdemKey{Key: "refund:" + name, Fingerprint: name, Status: http.StatusCreated})
	if err != nil {
		e.t.Fatal(err)
	}
	e.send(stdwebhook.Event{ID: "evt_" + ref, Type: stdwebhook.TypeRefundSucceeded, PaymentID: e.pays[name].ID,
		Refund: &stdwebhook.Refund{ID: r.Refund.ID, ProviderRef: ref, Amount: amount}})
}

// dispute opens dispute id of amount on payment name.
func (e *env) dispute(name, id string, amount int64) {
	e.t.Helper()
	e.send(stdwebhook.Event{ID: "evt_" + id, Type: stdwebhook.TypeDisputeCreated, PaymentID: e.pays[name].ID,
		Dispute: &stdwebhook.Dispute{ID: id, Amount: amount, Status: pay.DisputeNeedsResponse}})
}

// capture creates a payment and reports it captured with reference
// "pi_<name>".
func (e *env) capture(name string, amount int64) {
	e.t.Helper()
	e.captureAs(name, "pi_"+name, "EUR", amount)
}

// captureAs creates a payment of amount in currency and reports it
// captured with reference ref.
func (e *env) captureAs(name, ref, currency string, amount int64) {
	e.t.Helper()
	ctx := context.Background()
	p, err := e.svc.Create(ctx, finalize.CreateRequest{OrderID: "o-" + name, Amount: amount, Currency: currency})
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.svc.Report(ctx, p.ID, finalize.ReportRequest{Status: pay.Captured, ProviderRef: ref})
	if err != nil {
		e.t.Fatal(err)
	}
	e.pays[name] = res.Payment
	e.clock.Add(time.Second)
}

// send signs and accepts one webhook.
func (e *env) send(ev stdwebhook.Event) {
	e.t.Helper()
	ev.Created = e.clock.Now()
	body, err := stdwebhook.EncodeEvent(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.inbox.Accept(context.Background(), "standard", body, testkit.StandardHeader(e.t, secret, ev.ID, e.clock.Now(), body)); err != nil {
		e.t.Fatalf("webhook %s: %v", ev.ID, err)
	}
	e.clock.Add(time.Second)
}

// balances returns the ledger's EUR balances by account.
func (e *env) balances() map[string]int64 {
	e.t.Helper()
	var bs []pay.Balance
	if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { bs, err = tx.LedgerBalances(); return err }); err != nil {
		e.t.Fatal(err)
	}
	m := map[string]int64{}
	for _, b := range bs {
		if b.Currency == "EUR" {
			m[b.Account] = b.Amount
		}
	}
	return m
}

// ledgerLines counts the journal's lines.
func (e *env) ledgerLines() int {
	e.t.Helper()
	n := 0
	err := e.db.View(context.Background(), func(tx store.Tx) error {
		n = 0
		var after uint64
		for {
			ls, err := tx.LedgerEntries(after, 500)
			if err != nil {
				return err
			}
			n += len(ls)
			if len(ls) < 500 {
				return nil
			}
			after = ls[len(ls)-1].Seq
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// review returns the review queue.
func (e *env) review() []pay.ReviewItem {
	e.t.Helper()
	var items []pay.ReviewItem
	if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { items, err = tx.ListReview(); return err }); err != nil {
		e.t.Fatal(err)
	}
	return items
}

// testdata opens a file of testdata/reconcile at the module's root.
func testdata(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "reconcile", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}
