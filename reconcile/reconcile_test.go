package reconcile_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
	"github.com/paystate/paystate/store"
)

// The hand-computed table of testdata/reconcile/{generic,stripe}.csv
// against newEnv's payments (amounts in cents):
//
//	line  id               kind     amount   fee    net     outcome
//	2     txn_charge_one   charge    10000   175   9825    matched (pi_one)
//	3     txn_charge_two   charge    20000   320  19680    matched (pi_two)
//	4     txn_refund_one   refund    -4000     0  -4000    matched (re_one)
//	5     txn_dispute_one  dispute   -5000  1500  -6500    matched (dp_one)
//	6     txn_fee_monthly  fee           *     *   -250    matched (a fee of 250)
//	7     txn_unknown      charge     7000   130   6870    missing_locally (pi_ghost)
//	8     txn_mismatch     charge     4000    90   3910    amount_mismatch (pi_five is 5000)
//	9     txn_payout_one   payout   -25625     0 -25625    matched (posts nothing)
//	-     pi_three                    3000                 missing_at_psp (8 days, in no report)
//
// psp_fees = 175 + 320 + 1500 + 250 = 2245; payouts = 9825 + 19680 -
// 4000 - 6500 - 250 = 18755 (the unknown and the mismatched lines post
// nothing); 18 journal lines: a fee and a payout pair for each charge,
// the dispute and the fee line, a payout pair for the refund.
var want = struct {
	lines, matched, mismatched, missingLocally, missingAtPSP, posted int
	fees, payouts                                                    int64
	journal                                                          int
}{8, 6, 1, 1, 1, 6, 2245, 18755, 18}

func TestEngine_Run(t *testing.T) {
	formats := []struct {
		name string
		file string
		read func(io.Reader) ([]pay.SettlementLine, error)
	}{
		{"Generic", "generic.csv", reconcile.ReadGeneric},
		{"Stripe", "stripe.csv", reconcile.ReadStripe},
	}
	for _, b := range backends {
		for _, f := range formats {
			t.Run(b.Name+"/"+f.name, func(t *testing.T) {
				e := newEnv(t, b.Open)
				ctx := context.Background()
				eng := &reconcile.Engine{Store: e.db, SettleWithin: 7 * 24 * time.Hour, Now: e.clock.Now}
				before, lines0 := e.balances(), e.ledgerLines()
				run := func() pay.ReconRun {
					t.Helper()
					lines, err := f.read(testdata(t, f.file))
					if err != nil {
						t.Fatal(err)
					}
					r, err := eng.Run(ctx, "standard", "import:test:"+f.file, lines)
					if err != nil {
						t.Fatal(err)
					}
					e.clock.Add(time.Second)
					return r
				}
				first := run()
				for _, c := range []struct {
					name      string
					got, want int
				}{
					{"Lines", first.Lines, want.lines}, {"Matched", first.Matched, want.matched},
					{"Mismatched", first.Mismatched, want.mismatched}, {"MissingLocally", first.MissingLocally, want.missingLocally},
					{"MissingAtPSP", first.MissingAtPSP, want.missingAtPSP}, {"Posted", first.Posted, want.posted},
					{"journal lines", e.ledgerLines() - lines0, want.journal},
				} {
					if c.got != c.want {
						t.Errorf("%s=%d, want %d", c.name, c.got, c.want)
					}
				}
				after := e.balances()
				if got := after[pay.AccountPSPFees] - before[pay.AccountPSPFees]; got != want.fees {
					t.Errorf("psp_fees=%d, want %d", got, want.fees)
				}
				if got := after[pay.AccountPayouts] - before[pay.AccountPayouts]; got != want.payouts {
					t.Errorf("payouts=%d, want %d", got, want.payouts)
				}
				items := map[string]pay.ReconItem{}
				for _, it := range first.Items {
					items[it.Kind] = it
				}
				if it := items[pay.ReconMissingLocally]; it.LineID != "txn_unknown" || it.Line != 7 || it.ProviderRef != "pi_ghost" {
					t.Errorf("missing_locally item=%+v, want txn_unknown on line 7", it)
				}
				if it := items[pay.ReconAmountMismatch]; it.LineID != "txn_mismatch" || it.Amount != 4000 || it.Expected != 5000 || it.PaymentID != e.pays["five"].ID {
					t.Errorf("amount_mismatch item=%+v, want txn_mismatch 4000 against 5000", it)
				}
				if it := items[pay.ReconMissingAtPSP]; it.PaymentID != e.pays["three"].ID || it.Amount != 3000 {
					t.Errorf("missing_at_psp item=%+v, want payment three", it)
				}
				rev := e.review()
				if len(rev) != 1 || rev[0].Reason != pay.ReasonUnreconciled || rev[0].EventID != "txn_unknown" {
					t.Fatalf("review queue=%+v, want one unreconciled item for txn_unknown", rev)
				}

				// Imported again: the same figures, nothing new posted.
				lines1 := e.ledgerLines()
				second := run()
				if second.Matched != want.matched || second.Posted != 0 || second.MissingLocally != 1 || second.Mismatched != 1 {
					t.Errorf("second run=%+v, want %d matched, 0 posted", second, want.matched)
				}
				if got := e.ledgerLines(); got != lines1 {
					t.Errorf("the second run added %d journal lines, want 0", got-lines1)
				}
				if again := e.balances(); again[pay.AccountPSPFees] != after[pay.AccountPSPFees] || again[pay.AccountPayouts] != after[pay.AccountPayouts] {
					t.Errorf("balances after the second run=%v, want %v", again, after)
				}
				if got := len(e.review()); got != 1 {
					t.Errorf("review queue holds %d items after the second run, want 1", got)
				}

				// Both runs are stored, newest first.
				var runs []pay.ReconRun
				if err := e.db.View(ctx, func(tx store.Tx) (err error) { runs, err = tx.ListReconRuns("", 10); return err }); err != nil {
					t.Fatal(err)
				}
				if len(runs) != 2 || runs[0].ID != second.ID || runs[1].ID != first.ID || runs[1].Matched != want.matched || len(runs[1].Items) != 3 {
					t.Fatalf("runs=%+v, want the second then the first", runs)
				}
				rep, err := verify.Run(ctx, e.db)
				if err != nil {
					t.Fatal(err)
				}
				if !rep.OK() {
					t.Fatalf("verify: %v", rep.Mismatches)
				}
			})
		}
	}
}

// TestEngine_PayoutLater shows a line first settled without a payout
// posting its fee, and seen again with its payout posting the payout only.
func TestEngine_PayoutLater(t *testing.T) {
	e := newEnv(t, backends[0].Open)
	ctx := context.Background()
	eng := &reconcile.Engine{Store: e.db, Now: e.clock.Now}
	csv := func(payout string) []pay.SettlementLine {
		ls, err := reconcile.ReadGeneric(strings.NewReader("id,provider_ref,type,amount,fee,currency,payout_id\ntxn_1,pi_one,charge,100.00,1.75,EUR," + payout + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	before := e.balances()
	if _, err := eng.Run(ctx, "standard", "test", csv("")); err != nil {
		t.Fatal(err)
	}
	mid := e.balances()
	if got := mid[pay.AccountPSPFees] - before[pay.AccountPSPFees]; got != 175 || mid[pay.AccountPayouts] != before[pay.AccountPayouts] {
		t.Fatalf("after the line without payout: fees +%d, payouts %d, want +175 and none", got, mid[pay.AccountPayouts])
	}
	for range 2 {
		if _, err := eng.Run(ctx, "standard", "test", csv("po_9")); err != nil {
			t.Fatal(err)
		}
	}
	end := e.balances()
	if end[pay.AccountPSPFees] != mid[pay.AccountPSPFees] || end[pay.AccountPayouts]-mid[pay.AccountPayouts] != 9825 {
		t.Fatalf("after the payout: fees %d (want %d), payouts +%d (want +9825)", end[pay.AccountPSPFees], mid[pay.AccountPSPFees], end[pay.AccountPayouts]-mid[pay.AccountPayouts])
	}
}
