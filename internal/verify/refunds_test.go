package verify_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// TestRun_Refunds: a history of partial refunds made through finalize
// verifies; then each kind of damage is found: a payment's
// amount_refunded that its refunds do not add up to, a succeeded refund
// without its posting, a posting of a refund that did not succeed, a
// refund step without its outbox record.
func TestRun_Refunds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := bolttest.MustOpen(t, &bolt.Options{Now: func() time.Time { return t0 }})
	psp, err := mock.New(mock.Config{}, mock.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = psp.Close() })
	svc := &finalize.Payments{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"mock": psp}, DefaultProvider: "mock"}
	p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-v", Amount: 1000, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	var refunds []pay.Refund
	for i, amount := range []int64{300, 200} {
		r, err := svc.RefundOnce(ctx, p.ID, finalize.RefundRequest{Amount: amount}, finalize.IdemKey{Key: "refund:v" + string(rune('0'+i)), Fingerprint: "fp", Status: http.StatusCreated})
		if err != nil {
			t.Fatal(err)
		}
		refunds = append(refunds, r.Refund)
	}
	if rep, err := verify.Run(ctx, db); err != nil || !rep.OK() || rep.Refunds != 2 {
		t.Fatalf("verify of a good history: %+v (%v), want clean with 2 refunds", rep, err)
	}

	damage := func(name, want string, fn func(tx store.Tx) error) {
		t.Helper()
		if err := db.Update(ctx, fn); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep, err := verify.Run(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Mismatches {
			if strings.Contains(m.Problem, want) {
				return
			}
		}
		t.Fatalf("%s: mismatches %v, want one saying %q", name, rep.Mismatches, want)
	}
	// The payment says more was refunded than its refunds did.
	damage("amount_refunded", "amount_refunded 6.00 EUR", func(tx store.Tx) error {
		cur, err := tx.Payment(p.ID)
		if err != nil {
			return err
		}
		next := cur
		next.AmountRefunded, next.Version = 600, cur.Version+1
		if err := tx.UpdatePayment(next, cur.Version); err != nil {
			return err
		}
		return tx.AppendStep(pay.Step{PaymentID: p.ID, Source: pay.SourceAPI, Kind: pay.StepUpdate, From: cur.Status, To: cur.Status, Version: next.Version})
	})
	// The payment says it was charged back; it has no dispute.
	damage("dispute status", `the payment says its dispute is "lost", its disputes say ""`, func(tx store.Tx) error {
		cur, err := tx.Payment(p.ID)
		if err != nil {
			return err
		}
		next := cur
		next.Dispute, next.Version = pay.DisputeLost, cur.Version+1
		if err := tx.UpdatePayment(next, cur.Version); err != nil {
			return err
		}
		return tx.AppendStep(pay.Step{PaymentID: p.ID, Source: pay.SourceAPI, Kind: pay.StepUpdate, From: cur.Status, To: cur.Status, Version: next.Version})
	})
	// A refund marked failed whose success was posted.
	damage("posting of a failed refund", "did not succeed but the ledger has", func(tx store.Tx) error {
		r, err := tx.Refund(refunds[0].ID)
		if err != nil {
			return err
		}
		r.Status = pay.RefundFailed
		return tx.UpdateRefund(r)
	})
	// A succeeded refund without a posting under its event.
	damage("refund without posting", "want one posting of its amount", func(tx store.Tx) error {
		r, err := tx.Refund(refunds[1].ID)
		if err != nil {
			return err
		}
		r.EventID = "evt_01JN8S7QG0NXTZ33KXC9RCH2ZJ"
		return tx.UpdateRefund(r)
	})
}
