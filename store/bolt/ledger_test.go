package bolt_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

// TestDB_CheckLedger runs captures, refunds, duplicates, a failure and a
// refund of a payment never captured through finalize in four currencies
// (two of them without two decimals), then checks that the journal sums
// to zero per currency and that the balances say what was kept.
func TestDB_CheckLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(t0)
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	f := finalize.New(db)

	type run struct {
		currency string
		amount   int64
		obs      []pay.Status // observed in order
	}
	runs := []run{
		{"EUR", 1250, []pay.Status{pay.Captured}},
		{"EUR", 999, []pay.Status{pay.Captured, pay.Refunded}},
		{"EUR", 5000, []pay.Status{pay.Captured, pay.Captured, pay.Refunded, pay.Refunded}},
		{"USD", 300, []pay.Status{pay.Captured}},
		{"USD", 700, []pay.Status{pay.Failed, pay.Captured}}, // conflicting: stays failed, posts nothing
		{"JPY", 1500, []pay.Status{pay.Captured}},
		{"JPY", 2000, []pay.Status{pay.Captured, pay.Refunded}},
		{"BHD", 1250, []pay.Status{pay.Refunded}}, // refunded, never captured here
		{"BHD", 3125, []pay.Status{pay.Captured}},
	}
	want := map[string]int64{} // psp_receivable per currency
	for i, r := range runs {
		p := payment(100+i, pay.Processing, t0)
		p.Currency, p.Amount = r.currency, r.amount
		if err := db.Update(ctx, func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
			t.Fatal(err)
		}
		for _, s := range r.obs {
			if _, err := f.Finalize(ctx, pay.Observation{PaymentID: p.ID, Source: pay.SourceSweeper, Status: s}); err != nil {
				t.Fatalf("finalize %s %s: %v", p.ID, s, err)
			}
		}
		final := r.obs[len(r.obs)-1]
		if final == pay.Captured && r.obs[0] == pay.Captured {
			want[r.currency] += r.amount
		}
		if _, ok := want[r.currency]; !ok {
			want[r.currency] = 0
		}
	}

	bad, err := db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 0 {
		t.Fatalf("CheckLedger=%v, want every currency balanced", bad)
	}
	var bs []pay.Balance
	if err := db.View(ctx, func(tx store.Tx) (err error) { bs, err = tx.LedgerBalances(); return err }); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	total := map[string]int64{}
	for _, b := range bs {
		total[b.Currency] += b.Amount
		if b.Account == pay.AccountPSPReceivable {
			got[b.Currency] = b.Amount
		}
	}
	for cur, w := range want {
		if got[cur] != w {
			t.Errorf("psp_receivable %s=%d, want %d", cur, got[cur], w)
		}
		if total[cur] != 0 {
			t.Errorf("balances in %s sum to %d, want 0", cur, total[cur])
		}
	}
	for _, cur := range []string{"EUR", "USD", "JPY"} {
		if _, ok := got[cur]; !ok {
			t.Errorf("no psp_receivable balance in %s", cur)
		}
	}
}

// TestDB_CheckLedgerImbalance writes an unbalanced journal line behind
// the store's back and expects CheckLedger to name its currency only.
func TestDB_CheckLedgerImbalance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "paystate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(ctx, func(tx store.Tx) error {
		for _, cur := range []string{"EUR", "USD"} {
			if err := tx.AppendLedger([]pay.LedgerEntry{
				{PaymentID: "pay_1", Account: pay.AccountPSPReceivable, Currency: cur, Amount: 1000},
				{PaymentID: "pay_1", Account: pay.AccountMerchantRevenue, Currency: cur, Amount: -1000},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = bolt.BoltDB(db).Update(func(btx *bbolt.Tx) error {
		line := bolt.LedgerValue(pay.LedgerEntry{Seq: 999, Account: pay.AccountMerchantRevenue, Currency: "USD", Amount: -7, At: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)})
		return btx.Bucket([]byte("ledger")).Put([]byte{0, 0, 0, 0, 0, 0, 0x03, 0xe7}, line)
	})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(bad), 1; got != want {
		t.Fatalf("CheckLedger=%v, want one currency", bad)
	}
	if got, want := bad[0], (store.LedgerImbalance{Currency: "USD", Sum: -7, Lines: 3}); got != want {
		t.Fatalf("CheckLedger[0]=%+v, want %+v", got, want)
	}
}
