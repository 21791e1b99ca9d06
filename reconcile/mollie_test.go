package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
)

// TestEngine_Mollie: testdata/reconcile/mollie.csv, a Mollie settlement
// export, matched against the ledger (amounts in cents):
//
//	line  id                 kind     amount   outcome
//	2     tr_WDqYK6vllg      charge    10000   matched (m1)
//	3     tr_7UhSN1zuXS      charge     3000   matched (m2, USD; settled as 27.60 EUR)
//	4     tr_Eq8xzWUPCF      charge    20000   matched (m3)
//	5     tr_Gh0stGh0st      charge     7000   missing_locally (no such payment)
//	6     tr_s5Ksh7VnHq      charge     4000   amount_mismatch (m5 is 5000)
//	7     cpt_mNepDkEtco     -          1200   missing_locally (a capture: for a human)
//	8     re_4qqhO89gsT      refund    -4000   matched (m1's refund)
//	9     chb_n9z0tp         dispute   -5000   matched (m3's chargeback)
//	10    (withheld fees)    fee           0   matched, a fee of 254
//
// A wrong sign (a refund or chargeback read as money in) or a column
// mixed up (the settlement amount read as the amount) turns a matched
// line into a mismatch.
func TestEngine_Mollie(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open)
			ctx := context.Background()
			e.captureAs("m1", "tr_WDqYK6vllg", "EUR", 10000)
			e.captureAs("m2", "tr_7UhSN1zuXS", "USD", 3000)
			e.captureAs("m3", "tr_Eq8xzWUPCF", "EUR", 20000)
			e.captureAs("m5", "tr_s5Ksh7VnHq", "EUR", 5000)
			e.refund("m1", "re_4qqhO89gsT", 4000)
			e.dispute("m3", "chb_n9z0tp", 5000)

			eng := &reconcile.Engine{Store: e.db, SettleWithin: 7 * 24 * time.Hour, Now: e.clock.Now}
			run := func() pay.ReconRun {
				t.Helper()
				r, err := eng.Import(ctx, "standard", "import:mollie:mollie.csv", reconcile.FileLines(testdata(t, "mollie.csv"), reconcile.ScanMollie))
				if err != nil {
					t.Fatal(err)
				}
				e.clock.Add(time.Second)
				return r
			}
			before := e.balances()
			first := run()
			for _, c := range []struct {
				name      string
				got, want int
			}{
				{"Lines", first.Lines, 9}, {"Matched", first.Matched, 6}, {"Posted", first.Posted, 6},
				{"Mismatched", first.Mismatched, 1}, {"MissingLocally", first.MissingLocally, 2},
			} {
				if c.got != c.want {
					t.Errorf("%s=%d, want %d", c.name, c.got, c.want)
				}
			}
			kinds := map[string]string{}
			for _, it := range first.Items {
				kinds[it.LineID] = it.Kind
			}
			for id, want := range map[string]string{
				"tr_Gh0stGh0st": pay.ReconMissingLocally, "cpt_mNepDkEtco": pay.ReconMissingLocally, "tr_s5Ksh7VnHq": pay.ReconAmountMismatch,
			} {
				if kinds[id] != want {
					t.Errorf("line %s: %q, want %q", id, kinds[id], want)
				}
			}
			if t.Failed() {
				t.Logf("items: %+v", first.Items)
			}
			if got, want := e.balances()[pay.AccountPSPFees]-before[pay.AccountPSPFees], int64(254); got != want {
				t.Errorf("psp_fees=%d, want %d (the costs withheld)", got, want)
			}
			// Imported again: nothing more is posted.
			mid := e.balances()
			if again := run(); again.Posted != 0 || again.Matched != 6 {
				t.Errorf("second import: posted=%d matched=%d, want 0 and 6", again.Posted, again.Matched)
			}
			if got := e.balances(); got[pay.AccountPSPFees] != mid[pay.AccountPSPFees] || got[pay.AccountPayouts] != mid[pay.AccountPayouts] {
				t.Errorf("balances moved on a second import: %v, then %v", mid, got)
			}
		})
	}
}
