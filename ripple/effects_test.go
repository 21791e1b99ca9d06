package ripple_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/receipt"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/storetest"
)

// TestLoyalty_CrashAfterEffect closes the database between the loyalty
// effect's transaction and the delivery's own update, as a crash would, on
// the one-delivery-at-a-time path (the fallback of a batch whose
// transaction failed; SetAfterEffect selects it), then opens the file
// again with a new service: the delivery runs again and the points are
// counted once, by the effect's dedupe key.
func TestLoyalty_CrashAfterEffect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "paystate.db")
	clock := storetest.NewClock(t0)
	db, err := bolt.Open(path, &bolt.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ripple.Config{PointsPerUnit: 1}
	svc := newService(t, db, clock, cfg)
	crashed := false
	ripple.SetAfterEffect(svc, func(d pay.Delivery) error {
		if d.Effect != pay.EffectLoyalty {
			return nil
		}
		crashed = true
		if err := db.Close(); err != nil {
			return err
		}
		return errors.New("crash after the loyalty effect")
	})
	p := insertPayment(t, db, 1, 1999, "EUR", pay.Customer{ID: "cus_crash"})
	if _, err := finalize.New(db).Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Captured}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RunOnce(ctx); err == nil || !crashed {
		t.Fatalf("RunOnce=%v (crashed=%v), want the crash", err, crashed)
	}

	db, err = bolt.Open(path, &bolt.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(); err != nil {
			t.Errorf("check store: %v", err)
		}
		db.Close()
	})
	// The effect committed before the crash; its delivery did not.
	if got, want := customer(t, db, "cus_crash").Points, int64(19); got != want {
		t.Fatalf("points after the crash=%d, want %d", got, want)
	}
	loyaltyOf := func() pay.Delivery {
		t.Helper()
		return deliveries(t, db, p.ID)[pay.EffectLoyalty+" payment.captured"]
	}
	if d := loyaltyOf(); d.State != pay.DeliveryPending || d.Attempts != 0 {
		t.Fatalf("loyalty delivery after the crash=%+v, want pending, no attempt recorded", d)
	}

	svc = newService(t, db, clock, cfg)
	settle(t, svc)
	if got, want := customer(t, db, "cus_crash").Points, int64(19); got != want {
		t.Fatalf("points after the restart=%d, want %d (counted once)", got, want)
	}
	if d := loyaltyOf(); d.State != pay.DeliveryDone || d.Attempts != 1 || d.Note != "applied before" {
		t.Fatalf("loyalty delivery after the restart=%+v, want done by its dedupe key", d)
	}

	// The refund claws back exactly what was credited.
	if _, err := finalize.New(db).Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: pay.Refunded}); err != nil {
		t.Fatal(err)
	}
	settle(t, svc)
	settle(t, svc)
	if got := customer(t, db, "cus_crash").Points; got != 0 {
		t.Fatalf("points after the refund=%d, want 0", got)
	}
}

// TestDeliveries_OneEffectFails: a merchant endpoint that always fails
// dead-letters after max_attempts while loyalty, retention and the receipt
// complete; once it works, a retry delivers it.
func TestDeliveries_OneEffectFails(t *testing.T) {
	t.Parallel()
	smtpd := rippletest.NewSMTPServer(t, 0)
	ep := rippletest.NewEndpoint(t)
	ep.Answer(http.StatusInternalServerError, nil)
	e := newEnv(t, t0, ripple.Config{
		MaxAttempts: 3, PointsPerUnit: 1,
		Receipt:  receipt.Config{Addr: smtpd.Addr, From: "receipts@shop.example", TLS: receipt.TLSNone},
		Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}}},
	})
	target := pay.EffectWebhook + ":" + ripple.EndpointID(ep.URL)
	p := e.payment(1, 4000, "EUR", pay.Customer{ID: "cus_1", Email: "c1@example.com"})
	e.finalize(p.ID, pay.Captured)
	e.runOnce()
	for _, tgt := range []string{pay.EffectLoyalty, pay.EffectRetention, pay.EffectReceipt} {
		if d := e.delivery(p.ID, tgt, pay.Captured); d.State != pay.DeliveryDone || d.Attempts != 1 {
			t.Fatalf("%s delivery=%+v, want done at the first attempt", tgt, d)
		}
	}
	for range 5 {
		e.clock.Add(2 * time.Hour)
		e.runOnce()
	}
	d := e.delivery(p.ID, target, pay.Captured)
	if d.State != pay.DeliveryDead || d.Attempts != 3 || !strings.Contains(d.LastError, "500") {
		t.Fatalf("webhook delivery=%+v, want dead after 3 attempts", d)
	}
	if got, want := len(ep.Requests()), 3; got != want {
		t.Fatalf("requests=%d, want %d", got, want)
	}
	if got, want := customer(t, e.db, "cus_1").Points, int64(40); got != want {
		t.Fatalf("points=%d, want %d", got, want)
	}
	if got, want := len(smtpd.Messages()), 1; got != want {
		t.Fatalf("receipts=%d, want %d", got, want)
	}

	ep.Answer(http.StatusOK, nil)
	if _, err := e.svc.Retry(context.Background(), d.ID); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if d := e.delivery(p.ID, target, pay.Captured); d.State != pay.DeliveryDone || d.Attempts != 1 {
		t.Fatalf("webhook delivery after the retry=%+v, want done at its first new attempt", d)
	}
	if got, want := len(ep.Requests()), 4; got != want {
		t.Fatalf("requests=%d, want %d", got, want)
	}
}
