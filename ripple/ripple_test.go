package ripple_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// workers, SMTP conversations and HTTP connections must all end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(stopPG{m}) }

// stopPG removes the PostgreSQL that pgtest may have started, after the
// tests and before the leak check.
type stopPG struct{ m *testing.M }

func (s stopPG) Run() int {
	code := s.m.Run()
	pgtest.Stop()
	return code
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// env is one test's store, clock, finalizer and ripple service.
type env struct {
	t     *testing.T
	db    *bolt.DB
	clock *storetest.Clock
	f     *finalize.Finalizer
	svc   *ripple.Service
}

// newEnv opens a store in t.TempDir() on a clock at start and a ripple
// service for cfg over it.
func newEnv(t *testing.T, start time.Time, cfg ripple.Config) *env {
	t.Helper()
	clock := storetest.NewClock(start)
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	return &env{t: t, db: db, clock: clock, f: finalize.New(db), svc: newService(t, db, clock, cfg)}
}

// newService returns a ripple service over db on clock.
func newService(t *testing.T, db store.Store, clock *storetest.Clock, cfg ripple.Config) *ripple.Service {
	t.Helper()
	svc, err := ripple.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc.Now = clock.Now
	t.Cleanup(svc.Close)
	return svc
}

// payment stores payment i in status processing.
func (e *env) payment(i int, amount int64, currency string, c pay.Customer) pay.Payment {
	e.t.Helper()
	return insertPayment(e.t, e.db, i, amount, currency, c)
}

func insertPayment(t *testing.T, db store.Store, i int, amount int64, currency string, c pay.Customer) pay.Payment {
	t.Helper()
	p := pay.Payment{
		ID: fmt.Sprintf("pay_%026d", i), OrderID: fmt.Sprintf("order-%d", i), Amount: amount, Currency: currency,
		Customer: c, Provider: "mock", Status: pay.Processing, Version: 1,
	}
	err := db.Update(context.Background(), func(tx store.Tx) error {
		p.CreatedAt, p.UpdatedAt = tx.Now(), tx.Now()
		return tx.InsertPayment(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// finalize moves a payment to status s through finalize.
func (e *env) finalize(id string, s pay.Status) {
	e.t.Helper()
	if _, err := e.f.Finalize(context.Background(), pay.Observation{PaymentID: id, Source: pay.SourceSweeper, Status: s}); err != nil {
		e.t.Fatalf("finalize %s %s: %v", id, s, err)
	}
}

// runOnce runs one pass and fails the test on error.
func (e *env) runOnce() int {
	e.t.Helper()
	return runOnce(e.t, e.svc)
}

func runOnce(t *testing.T, svc *ripple.Service) int {
	t.Helper()
	n, err := svc.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	return n
}

// settle runs passes until one attempts nothing.
func (e *env) settle() {
	e.t.Helper()
	settle(e.t, e.svc)
}

func settle(t *testing.T, svc *ripple.Service) {
	t.Helper()
	for range 20 {
		if runOnce(t, svc) == 0 {
			return
		}
	}
	t.Fatal("ripple did not settle in 20 passes")
}

// deliveries returns the deliveries of a payment, in every state, keyed by
// target; it fails the test if a target has two.
func deliveries(t *testing.T, db store.Store, paymentID string) map[string]pay.Delivery {
	t.Helper()
	out := map[string]pay.Delivery{}
	err := db.View(context.Background(), func(tx store.Tx) error {
		for _, st := range []string{pay.DeliveryPending, pay.DeliveryDone, pay.DeliveryDead} {
			ds, _, err := tx.ListDeliveries(pay.DeliveryFilter{State: st, Limit: 1000})
			if err != nil {
				return err
			}
			for _, d := range ds {
				if d.PaymentID != paymentID {
					continue
				}
				if _, dup := out[d.Target()+" "+d.EventType]; dup {
					t.Fatalf("two deliveries of %s for %s", d.EventType, d.Target())
				}
				out[d.Target()+" "+d.EventType] = d
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// delivery returns the one delivery of a payment's event to a target.
func (e *env) delivery(paymentID, target string, s pay.Status) pay.Delivery {
	e.t.Helper()
	return e.deliveryOf(paymentID, target, pay.EventType(s))
}

// deliveryOf is the delivery of the payment's record of type typ to
// target.
func (e *env) deliveryOf(paymentID, target, typ string) pay.Delivery {
	e.t.Helper()
	d, ok := deliveries(e.t, e.db, paymentID)[target+" "+typ]
	if !ok {
		e.t.Fatalf("no delivery of %s to %s for %s", typ, target, paymentID)
	}
	return d
}

// customer reads a customer account.
func customer(t *testing.T, db store.Store, id string) store.CustomerAccount {
	t.Helper()
	var c store.CustomerAccount
	if err := db.View(context.Background(), func(tx store.Tx) (err error) { c, err = tx.CustomerAccount(id); return err }); err != nil {
		t.Fatalf("customer %s: %v", id, err)
	}
	return c
}

func TestPointsAndFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   int64
		currency string
		perUnit  int64
		points   int64
		text     string
	}{
		{1250, "EUR", 1, 12, "12.50 EUR"},
		{1299, "USD", 10, 129, "12.99 USD"},
		{99, "EUR", 1, 0, "0.99 EUR"},
		{5, "EUR", 1, 0, "0.05 EUR"},
		{1500, "JPY", 1, 1500, "1500 JPY"},
		{1500, "KRW", 2, 3000, "1500 KRW"},
		{1250, "BHD", 1, 1, "1.250 BHD"},
		{7, "KWD", 1000, 7, "0.007 KWD"},
		{1250, "EUR", 0, 0, "12.50 EUR"},
	} {
		got, err := ripple.Points(tc.amount, tc.currency, tc.perUnit)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.points {
			t.Errorf("Points(%d, %s, %d)=%d, want %d", tc.amount, tc.currency, tc.perUnit, got, tc.points)
		}
		if got := pay.FormatAmount(tc.amount, tc.currency); got != tc.text {
			t.Errorf("FormatAmount(%d, %s)=%q, want %q", tc.amount, tc.currency, got, tc.text)
		}
	}
	if _, err := ripple.Points(1<<62, "JPY", 8); err == nil {
		t.Error("Points of an overflowing amount succeeded")
	}
}

// TestLoyaltyRetention credits points on a capture, claws them back on the
// refund, moves the last visit, and skips payments without a customer.
func TestLoyaltyRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t0, ripple.Config{PointsPerUnit: 2})
	ada := pay.Customer{ID: "cus_ada", Email: "ada@example.com"}
	p1 := e.payment(1, 1250, "EUR", ada)
	p2 := e.payment(2, 3000, "JPY", ada)
	anon := e.payment(3, 5000, "EUR", pay.Customer{})
	e.finalize(p1.ID, pay.Captured)
	e.clock.Add(time.Hour)
	e.finalize(p2.ID, pay.Captured)
	e.finalize(anon.ID, pay.Captured)
	e.settle()

	c := customer(t, e.db, "cus_ada")
	if got, want := c.Points, int64(25+2*3000); got != want { // 12.50 EUR and 3000 JPY at 2 per unit
		t.Fatalf("Points=%d, want %d", got, want)
	}
	if got, want := c.LastVisitAt, t0.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("LastVisitAt=%s, want %s", got, want)
	}
	if ds := deliveries(t, e.db, anon.ID); len(ds) != 0 {
		t.Fatalf("deliveries of a payment without a customer=%v, want none", ds)
	}

	e.clock.Add(time.Hour)
	e.finalize(p1.ID, pay.Refunded)
	e.settle()
	c = customer(t, e.db, "cus_ada")
	if got, want := c.Points, int64(2*3000); got != want {
		t.Fatalf("Points after the refund=%d, want %d", got, want)
	}
	if got, want := c.LastVisitAt, t0.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("LastVisitAt after the refund=%s, want %s (a refund is no visit)", got, want)
	}
	if _, ok := deliveries(t, e.db, p1.ID)[pay.EffectRetention+" payment.refunded"]; ok {
		t.Fatal("a refund was delivered to retention")
	}
}

// TestRun_Notify: the loop wakes on Notify (its ticker is an hour away)
// and returns nil when its context ends.
func TestRun_Notify(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t0, ripple.Config{PointsPerUnit: 1})
	e.svc.Interval = time.Hour
	e.f.Notify = e.svc.Notify
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()

	p := e.payment(1, 4200, "EUR", pay.Customer{ID: "cus_1"})
	e.finalize(p.ID, pay.Captured)
	testkit.WaitFor(t, 10*time.Second, func() error {
		var c store.CustomerAccount
		err := e.db.View(ctx, func(tx store.Tx) (err error) { c, err = tx.CustomerAccount("cus_1"); return err })
		if err != nil {
			return err
		}
		if c.Points != 42 {
			return fmt.Errorf("points=%d, want 42", c.Points)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v, want nil on cancel", err)
	}
}
