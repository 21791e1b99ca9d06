package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// TestRun_Settlements checks settlement postings against their
// settlements: a line posted through finalize.PostSettlement is clean; a
// fee posted twice under one balance-transaction id (two imports that
// both posted it), a payout named but not posted, and a psp_fees line
// under no settlement are each reported.
func TestRun_Settlements(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, &bolt.Options{Now: func() time.Time { return t0 }})
	ctx := context.Background()
	line := func(id string, payout string) pay.SettlementLine {
		return pay.SettlementLine{ID: id, Kind: pay.SettleCharge, Category: "charge", ProviderRef: "pi_1", Amount: 1000, Fee: 30, Currency: "EUR", PayoutID: payout}
	}
	err := db.Update(ctx, func(tx store.Tx) error {
		if err := captured(tx, "pay_1", t0, true); err != nil {
			return err
		}
		for _, l := range []pay.SettlementLine{line("txn_ok", ""), line("txn_ok", "po_1"), line("txn_twice", "po_1")} {
			if _, err := finalize.PostSettlement(tx, "mock", "rr_1", "pay_1", l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, db); !rep.OK() {
		t.Fatalf("verify after settlement postings: %v", rep.Mismatches)
	}

	pair := func(event, account string, amt int64) []pay.LedgerEntry {
		return []pay.LedgerEntry{
			{PaymentID: "pay_1", EventID: event, Account: account, Currency: "EUR", Amount: amt, At: t0},
			{PaymentID: "pay_1", EventID: event, Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: -amt, At: t0},
		}
	}
	err = db.Update(ctx, func(tx store.Tx) error {
		// txn_twice posted a second time, as two racing imports did.
		if err := tx.AppendLedger(append(pair("txn_twice", pay.AccountPSPFees, 30), pair("txn_twice", pay.AccountPayouts, 970)...)); err != nil {
			return err
		}
		// txn_lost names a payout the journal does not hold.
		s := pay.Settlement{Provider: "mock", ID: "txn_lost", Kind: pay.SettleCharge, PaymentID: "pay_1", ProviderRef: "pi_1", Amount: 1000, Fee: 30,
			Currency: "EUR", PayoutID: "po_1", RunID: "rr_1", CreatedAt: t0, UpdatedAt: t0}
		if err := tx.PutSettlement(s); err != nil {
			return err
		}
		if err := tx.AppendLedger(pair("txn_lost", pay.AccountPSPFees, 30)); err != nil {
			return err
		}
		// A fee under no settlement.
		return tx.AppendLedger(pair("txn_ghost", pay.AccountPSPFees, 5))
	})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, m := range mustVerify(t, db).Mismatches {
		all = append(all, m.String())
	}
	got := strings.Join(all, "\n")
	for _, want := range []string{
		"settlement mock/txn_twice: 2 fee postings of 60 in psp_fees, want 1 of 30",
		"settlement mock/txn_twice: 2 payout postings of 1940 in payouts, want 1 of 970",
		"settlement mock/txn_lost: 0 payout postings of 0 in payouts, want 1 of 970",
		"under txn_ghost, which is no posted settlement line",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verify reported:\n%s\nwant a line with %q", got, want)
		}
	}
	if len(all) != 4 {
		t.Errorf("verify reported %d problems, want 4:\n%s", len(all), got)
	}
}

// mustVerify runs verify on db, failing the test if it cannot.
func mustVerify(t *testing.T, db store.Store) verify.Report {
	t.Helper()
	rep, err := verify.Run(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
