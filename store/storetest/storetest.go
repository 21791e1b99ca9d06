// Package storetest holds Run, the conformance suite that every store.Store
// backend passes, and Clock, a settable clock for tests. The suite is
// written against package pay alone, so a second backend (PostgreSQL) runs
// the same tests without pulling in bbolt; the backend passes in a
// constructor, and does its own checks when a test ends. The bbolt store
// runs it with the opener of package store/bolt/bolttest:
//
//	func TestDB(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
//			return bolttest.MustOpen(t, &bolt.Options{Now: now})
//		})
//	}
package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Opener opens an empty store for one test. Every transaction of the store
// reads the time from now. The store is closed when the test ends
// (t.Cleanup); the opener arranges that.
type Opener func(t *testing.T, now func() time.Time) store.Store

// Run runs the conformance suite: every method of store.Tx, the indexes kept
// in step with the records, OnCommit and rollback semantics, leases under
// an injected clock. Subtests run in parallel, each on its own store. They
// are listed by record family, in the order of store.Tx, so a new backend
// can pass them family by family (go test -run 'TestDB/Inbox|TestDB/PurgeProcessed').
func Run(t *testing.T, open Opener) {
	for _, tt := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"Tx", testTx},
		{"WriteProbe", testWriteProbe},
		// Payments and their indexes.
		{"InsertPayment", testInsertPayment},
		{"UpdatePayment", testUpdatePayment},
		{"PaymentByRef", testPaymentByRef},
		{"ListPayments", testListPayments},
		{"Candidates", testCandidates},
		{"CandidatesAfter", testCandidatesAfter},
		{"PaymentCounts", testPaymentCounts},
		// Timeline.
		{"Timeline", testTimeline},
		// Inbox and processed event ids.
		{"Inbox", testInbox},
		{"PurgeProcessed", testPurgeProcessed},
		// Leases.
		{"Lease", testLease},
		// Outbox and deliveries.
		{"Outbox", testOutbox},
		{"RippleCursor", parallel(testRippleCursor)},
		{"Claims", parallel(testClaims)},
		{"PurgeOutbox", testPurgeOutbox},
		{"Delivery", parallel(testDelivery)},
		{"DueDeliveries", parallel(testDueDeliveries)},
		{"DeliveriesInOrder", parallel(testDeliveriesInOrder)},
		{"ListDeliveries", parallel(testListDeliveries)},
		{"PurgeDoneDeliveries", parallel(testPurgeDoneDeliveries)},
		// Ledger.
		{"Ledger", testLedger},
		// Review queue.
		{"Review", testReview},
		// Idempotency keys.
		{"IdemKey", testIdemKey},
		{"ClaimIdemKey", testClaimIdemKey},
		{"PurgeIdemKeys", testPurgeIdemKeys},
		// Effect state.
		{"CustomerAccount", parallel(testCustomerAccount)},
		{"Effect", parallel(testEffect)},
		{"WebhookEndpoint", parallel(testWebhookEndpoint)},
		// PSP answers.
		{"PSPAnswer", testPSPAnswer},
		{"PSPCharge", testPSPCharge},
		// Refunds and disputes.
		{"Refunds", testRefunds},
		{"RefundsConcurrent", testRefundsConcurrent},
		{"Disputes", testDisputes},
		// Settlement reconciliation.
		{"Settlements", testSettlements},
		{"ClaimSettlement", testClaimSettlement},
		{"ReconRuns", testReconRuns},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// parallel makes a test that is one case, not a set of subtests, run in
// parallel with the others.
func parallel(fn func(*testing.T, Opener)) func(*testing.T, Opener) {
	return func(t *testing.T, open Opener) { t.Parallel(); fn(t, open) }
}

// Clock is a settable clock for tests, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads t until moved.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d and returns the new time.
func (c *Clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// t0 is where every test's clock starts. It has microsecond precision, the
// finest a PostgreSQL timestamp keeps, so backends that store less than
// nanoseconds pass too.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)

// env is one test's store and clock.
type env struct {
	t     *testing.T
	s     store.Store
	clock *Clock
}

// newEnv opens a store for t on a clock at t0.
func newEnv(t *testing.T, open Opener) *env {
	c := NewClock(t0)
	return &env{t: t, s: open(t, c.Now), clock: c}
}

// update runs fn in a write transaction and fails the test on error.
func (e *env) update(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.s.Update(context.Background(), fn); err != nil {
		e.t.Fatalf("Update: %v", err)
	}
}

// updateEach runs fn on every x of xs in one write transaction and fails
// the test on error.
func updateEach[T any](e *env, xs []T, fn func(tx store.Tx, x T) error) {
	e.t.Helper()
	e.update(func(tx store.Tx) error {
		for _, x := range xs {
			if err := fn(tx, x); err != nil {
				return err
			}
		}
		return nil
	})
}

// updateN runs fn for i from 0 to n-1 in one write transaction and fails
// the test on error.
func (e *env) updateN(n int, fn func(tx store.Tx, i int) error) {
	e.t.Helper()
	e.update(func(tx store.Tx) error {
		for i := range n {
			if err := fn(tx, i); err != nil {
				return err
			}
		}
		return nil
	})
}

// view runs fn in a read transaction and fails the test on error.
func (e *env) view(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.s.View(context.Background(), fn); err != nil {
		e.t.Fatalf("View: %v", err)
	}
}

// tryUpdate runs fn in a write transaction and returns its error.
func (e *env) tryUpdate(fn func(tx store.Tx) error) error {
	return e.s.Update(context.Background(), fn)
}

// payment reads one payment and fails the test if it cannot.
func (e *env) payment(id string) pay.Payment {
	e.t.Helper()
	var p pay.Payment
	e.view(func(tx store.Tx) (err error) { p, err = tx.Payment(id); return err })
	return p
}

// insert stores payments in one transaction.
func (e *env) insert(ps ...pay.Payment) {
	e.t.Helper()
	updateEach(e, ps, store.Tx.InsertPayment)
}

// move writes a new version of the stored payment id with status s at
// time at, and returns it.
func (e *env) move(id string, s pay.Status, at time.Time) pay.Payment {
	e.t.Helper()
	var p pay.Payment
	e.update(func(tx store.Tx) error {
		cur, err := tx.Payment(id)
		if err != nil {
			return err
		}
		p = cur
		p.Status, p.UpdatedAt, p.Version = s, at, cur.Version+1
		return tx.UpdatePayment(p, cur.Version)
	})
	return p
}

// paymentID returns the i-th test payment id.
func paymentID(i int) string { return fmt.Sprintf("pay_%026d", i) }

// newPayment returns payment i in status created at time at.
func newPayment(i int, at time.Time) pay.Payment {
	id := paymentID(i)
	return pay.Payment{
		ID:           id,
		OrderID:      fmt.Sprintf("order-%d", i),
		Amount:       1000 + int64(i),
		Currency:     "EUR",
		Customer:     pay.Customer{ID: "cus_1", Email: "ada@example.com"},
		Provider:     "mock",
		Status:       pay.Created,
		Version:      1,
		ClientSecret: "secret_" + id,
		RedirectURL:  "https://psp.example/3ds/" + id,
		ReturnURL:    "https://shop.example/done",
		CreatedAt:    at,
		UpdatedAt:    at,
	}
}

// samePayment fails the test unless got equals want (times compared as
// instants).
func samePayment(t *testing.T, got, want pay.Payment) {
	t.Helper()
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("CreatedAt=%s, want %s", got.CreatedAt, want.CreatedAt)
	}
	if !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("UpdatedAt=%s, want %s", got.UpdatedAt, want.UpdatedAt)
	}
	got.CreatedAt, got.UpdatedAt, want.CreatedAt, want.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Fatalf("Payment=%#v, want %#v", got, want)
	}
}

// wantCode fails the test unless err carries the pay error code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := pay.ErrorCode(err); got != code {
		t.Fatalf("error %v: code=%q, want %q", err, got, code)
	}
}

// ids returns the ids of payments, in order.
func ids(ps []pay.Payment) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

// wantIDs fails the test unless ps has exactly the payments want[i], in
// that order.
func wantIDs(t *testing.T, ps []pay.Payment, want ...int) {
	t.Helper()
	w := make([]string, 0, len(want))
	for _, i := range want {
		w = append(w, paymentID(i))
	}
	if got := ids(ps); !slices.Equal(got, w) {
		t.Fatalf("ids=%v, want %v", got, w)
	}
}
