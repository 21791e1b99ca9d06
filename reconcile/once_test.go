package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/reconcile"
	"github.com/paystate/paystate/store"
)

// year is a settle_within that lists no payment missing_at_psp.
const year = 365 * 24 * time.Hour

// generic reads a generic CSV given as its lines after the header.
func generic(t *testing.T, rows ...string) []pay.SettlementLine {
	t.Helper()
	ls, err := reconcile.ReadGeneric(strings.NewReader("id,provider_ref,type,amount,fee,currency,payout_id\n" + strings.Join(rows, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// verifyClean fails the test if paystate verify finds a problem.
func verifyClean(t *testing.T, db store.Store) {
	t.Helper()
	rep, err := verify.Run(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %v", rep.Mismatches)
	}
}

// genericCSV reads testdata/reconcile/generic.csv.
func genericCSV(t *testing.T) []pay.SettlementLine {
	t.Helper()
	lines, err := reconcile.ReadGeneric(testdata(t, "generic.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// wantPosted checks that the ledger moved, since the balances before and
// the journal's lines0 lines, by what testdata/reconcile/generic.csv
// posts once (want), and that verify is clean.
func (e *env) wantPosted(before map[string]int64, lines0 int) {
	e.t.Helper()
	if got := e.ledgerLines() - lines0; got != want.journal {
		e.t.Errorf("journal lines +%d, want +%d", got, want.journal)
	}
	after := e.balances()
	if got := after[pay.AccountPSPFees] - before[pay.AccountPSPFees]; got != want.fees {
		e.t.Errorf("psp_fees +%d, want +%d", got, want.fees)
	}
	if got := after[pay.AccountPayouts] - before[pay.AccountPayouts]; got != want.payouts {
		e.t.Errorf("payouts +%d, want +%d", got, want.payouts)
	}
	verifyClean(e.t, e.db)
}

// TestEngine_ConcurrentImports runs imports of one report at the same
// time, as two `paystate reconcile import` of one file would on
// PostgreSQL (and as goroutines of one process on bbolt): each line is
// posted once, whichever import posts it.
func TestEngine_ConcurrentImports(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open)
			lines := genericCSV(t)
			before, lines0 := e.balances(), e.ledgerLines()
			const imports = 4
			start := make(chan struct{})
			errs := make([]error, imports)
			runs := make([]pay.ReconRun, imports)
			var wg sync.WaitGroup
			for i := range imports {
				wg.Add(1)
				go func() {
					defer wg.Done()
					eng := &reconcile.Engine{Store: e.db, SettleWithin: 7 * 24 * time.Hour}
					<-start
					runs[i], errs[i] = eng.Run(context.Background(), "standard", "import:test:generic.csv", lines)
				}()
			}
			close(start)
			wg.Wait()
			posted := 0
			for i, err := range errs {
				if err != nil {
					t.Fatalf("import %d: %v", i, err)
				}
				if runs[i].Matched != want.matched {
					t.Errorf("import %d: matched %d, want %d", i, runs[i].Matched, want.matched)
				}
				posted += runs[i].Posted
			}
			if posted != want.posted {
				t.Errorf("the imports posted %d lines together, want %d", posted, want.posted)
			}
			e.wantPosted(before, lines0)
		})
	}
}

// TestEngine_ChangedSincePosted imports a line, then lines with its id
// and other figures: another fee (the PSP revised it), another payment
// (an id reused), another payout. None posts anything; each is a
// changed_since_posted item of its run and on the review queue with both
// versions. A line first seen without a payout still posts its payout
// when it comes.
func TestEngine_ChangedSincePosted(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open)
			ctx := context.Background()
			eng := &reconcile.Engine{Store: e.db, Now: e.clock.Now, SettleWithin: year}
			run := func(rows ...string) pay.ReconRun {
				t.Helper()
				r, err := eng.Run(ctx, "standard", "test", generic(t, rows...))
				if err != nil {
					t.Fatal(err)
				}
				e.clock.Add(time.Second)
				return r
			}
			run("txn_1,pi_one,charge,100.00,1.75,EUR,")
			run("txn_1,pi_one,charge,100.00,1.75,EUR,po_1") // its payout: posted
			base, lines0 := e.balances(), e.ledgerLines()
			for _, c := range []struct{ name, row, old, new string }{
				{"Fee", "txn_1,pi_one,charge,100.00,2.00,EUR,po_1", "fee 1.75", "fee 2.00"},
				{"Payment", "txn_1,pi_two,charge,200.00,3.20,EUR,po_1", "pi_one", "pi_two"},
				{"Payout", "txn_1,pi_one,charge,100.00,1.75,EUR,po_2", "po_1", "po_2"},
			} {
				r := run(c.row)
				if r.Matched != 0 || r.Posted != 0 || r.Mismatched != 1 || len(r.Items) != 1 {
					t.Fatalf("%s: run=%+v, want one mismatch, nothing posted", c.name, r)
				}
				it := r.Items[0]
				if it.Kind != pay.ReconChangedSincePosted || it.Line != 2 || it.LineID != "txn_1" {
					t.Errorf("%s: item=%+v, want changed_since_posted on line 2", c.name, it)
				}
				if !strings.Contains(it.Note, c.old) || !strings.Contains(it.Note, c.new) {
					t.Errorf("%s: note %q names not both %q and %q", c.name, it.Note, c.old, c.new)
				}
				var rev pay.ReviewItem
				for _, ri := range e.review() {
					if ri.Reason == pay.ReconChangedSincePosted && ri.EventID == "txn_1" {
						rev = ri
					}
				}
				if !strings.Contains(rev.Note, c.old) || !strings.Contains(rev.Note, c.new) {
					t.Errorf("%s: review item %+v, want one naming %q and %q", c.name, rev, c.old, c.new)
				}
			}
			if got := e.ledgerLines(); got != lines0 {
				t.Errorf("the changed lines added %d journal lines, want 0", got-lines0)
			}
			if after := e.balances(); after[pay.AccountPSPFees] != base[pay.AccountPSPFees] || after[pay.AccountPayouts] != base[pay.AccountPayouts] ||
				after[pay.AccountPSPReceivable] != base[pay.AccountPSPReceivable] {
				t.Errorf("balances=%v, want %v", after, base)
			}
			// The same figures again: matched, nothing posted, nothing listed.
			if r := run("txn_1,pi_one,charge,100.00,1.75,EUR,po_1"); r.Matched != 1 || r.Posted != 0 || r.Mismatched != 0 {
				t.Errorf("the first figures again: run=%+v, want matched, nothing posted", r)
			}
			verifyClean(t, e.db)
		})
	}
}

// TestEngine_ReusedIDBeforePayout is an id posted without its payout and
// seen again for another payment, with a payout: the payout is not
// posted under the first payment's settlement.
func TestEngine_ReusedIDBeforePayout(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open)
			ctx := context.Background()
			eng := &reconcile.Engine{Store: e.db, Now: e.clock.Now, SettleWithin: year}
			if _, err := eng.Run(ctx, "standard", "test", generic(t, "txn_1,pi_one,charge,100.00,1.75,EUR,")); err != nil {
				t.Fatal(err)
			}
			base := e.balances()
			r, err := eng.Run(ctx, "standard", "test", generic(t, "txn_1,pi_two,charge,200.00,3.20,EUR,po_1"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Posted != 0 || r.Mismatched != 1 || len(r.Items) != 1 || r.Items[0].Kind != pay.ReconChangedSincePosted {
				t.Fatalf("run=%+v, want one changed_since_posted, nothing posted", r)
			}
			if after := e.balances(); after[pay.AccountPayouts] != base[pay.AccountPayouts] {
				t.Fatalf("payouts %d, want %d: a payout was posted for the reused id", after[pay.AccountPayouts], base[pay.AccountPayouts])
			}
		})
	}
}

// TestReadGeneric_DuplicateID refuses a file with two lines of one id and
// different figures, naming both lines; the same line twice is read as
// it is and posts once.
func TestReadGeneric_DuplicateID(t *testing.T) {
	_, err := reconcile.ReadGeneric(strings.NewReader("id,provider_ref,type,amount,fee,currency\n" +
		"txn_1,pi_one,charge,100.00,1.75,EUR\n" +
		"txn_2,pi_two,charge,200.00,3.20,EUR\n" +
		"txn_1,pi_one,charge,100.00,2.75,EUR\n"))
	if err == nil {
		t.Fatal("a file with txn_1 twice, with two fees, was read")
	}
	if msg := pay.ErrorMessage(err); !strings.Contains(msg, "line 2") || !strings.Contains(msg, "line 4") || !strings.Contains(msg, "txn_1") {
		t.Fatalf("error %q, want one naming txn_1 on lines 2 and 4", msg)
	}

	e := newEnv(t, backends[0].Open)
	lines := generic(t, "txn_1,pi_one,charge,100.00,1.75,EUR,", "txn_1,pi_one,charge,100.00,1.75,EUR,")
	before := e.balances()
	r, err := (&reconcile.Engine{Store: e.db, Now: e.clock.Now, SettleWithin: year}).Run(context.Background(), "standard", "test", lines)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lines != 2 || r.Matched != 2 || r.Posted != 1 || !r.OK() {
		t.Fatalf("run=%+v, want two lines matched, one posted", r)
	}
	if got := e.balances()[pay.AccountPSPFees] - before[pay.AccountPSPFees]; got != 175 {
		t.Fatalf("psp_fees +%d, want +175 (once)", got)
	}
}

// TestEngine_RefundByOwnID matches a refund line that names the refund by
// paystate's own id (what the standard bridge sent in data.refund.id) as
// well as by its provider reference.
func TestEngine_RefundByOwnID(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open)
			var rs []pay.Refund
			if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { rs, err = tx.RefundsForPayment(e.pays["one"].ID); return err }); err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || !strings.HasPrefix(rs[0].ID, "re_") {
				t.Fatalf("refunds of one=%+v, want one", rs)
			}
			before := e.balances()
			r, err := (&reconcile.Engine{Store: e.db, Now: e.clock.Now, SettleWithin: year}).Run(context.Background(), "standard", "test",
				generic(t, "txn_r,"+rs[0].ID+",refund,-40.00,0.00,EUR,po_1"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Matched != 1 || r.MissingLocally != 0 || r.Mismatched != 0 || r.Posted != 1 {
				t.Fatalf("run=%+v, want the refund line matched by %s", r, rs[0].ID)
			}
			if got := e.balances()[pay.AccountPayouts] - before[pay.AccountPayouts]; got != -4000 {
				t.Fatalf("payouts %+d, want -4000", got)
			}
		})
	}
}

// TestEngine_Interrupted cancels an import's context after its second
// transaction (of two lines each), through the Progress hook: Import
// stops before the next transaction with ErrInterrupted and the cause;
// the four lines posted stay posted, no run is stored, and importing the
// report again posts the rest, each line once.
func TestEngine_Interrupted(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open)
			lines := genericCSV(t)
			before, lines0 := e.balances(), e.ledgerLines()
			cause := errors.New("test: stop after four lines")
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var seen []int
			eng := &reconcile.Engine{Store: e.db, SettleWithin: 7 * 24 * time.Hour, Now: e.clock.Now, Batch: 2, Progress: func(done, total int) {
				seen = append(seen, done)
				if total != want.lines {
					t.Errorf("Progress total=%d, want %d", total, want.lines)
				}
				if done == 4 {
					cancel(cause)
				}
			}}
			run, err := eng.Run(ctx, "standard", "test", lines)
			if !errors.Is(err, reconcile.ErrInterrupted) || !errors.Is(err, cause) {
				t.Fatalf("Run=%v, want ErrInterrupted with the cause", err)
			}
			if run.Lines != 4 || run.Posted != 4 || fmt.Sprint(seen) != "[0 2 4]" {
				t.Fatalf("interrupted run=%+v after progress %v, want 4 lines posted in two transactions", run, seen)
			}
			if got := e.ledgerLines() - lines0; got != 14 {
				t.Errorf("journal lines +%d after the interruption, want +14 (fees and payouts of four lines, the refund without a fee)", got)
			}
			var runs []pay.ReconRun
			if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { runs, err = tx.ListReconRuns("", 10); return err }); err != nil {
				t.Fatal(err)
			}
			if len(runs) != 0 {
				t.Errorf("an interrupted import stored runs %+v", runs)
			}

			eng.Progress = nil
			again, err := eng.Run(context.Background(), "standard", "test", lines)
			if err != nil {
				t.Fatal(err)
			}
			if again.Matched != want.matched || again.Posted != want.posted-4 {
				t.Errorf("the import again: run=%+v, want %d matched, %d posted", again, want.matched, want.posted-4)
			}
			e.wantPosted(before, lines0)
		})
	}
}

// TestEngine_MissingAtPSPRefunded lists a payment refunded in full, long
// ago and in no report, as missing_at_psp, as it lists a captured one.
func TestEngine_MissingAtPSPRefunded(t *testing.T) {
	e := newEnv(t, backends[0].Open)
	ctx := context.Background()
	three := e.pays["three"]
	r, err := e.svc.RefundOnce(ctx, three.ID, finalize.RefundRequest{}, finalize.IdemKey{Key: "refund:three", Fingerprint: "three", Status: http.StatusCreated})
	if err != nil {
		t.Fatal(err)
	}
	e.send(stdwebhook.Event{ID: "evt_re_three", Type: stdwebhook.TypeRefundSucceeded, PaymentID: three.ID,
		Refund: &stdwebhook.Refund{ID: r.Refund.ID, ProviderRef: "re_three", Amount: three.Amount}})
	var p pay.Payment
	if err := e.db.View(ctx, func(tx store.Tx) (err error) { p, err = tx.Payment(three.ID); return err }); err != nil || p.Status != pay.Refunded {
		t.Fatalf("payment three: %v, %v; want refunded", p.Status, err)
	}
	run, err := (&reconcile.Engine{Store: e.db, Now: e.clock.Now, SettleWithin: 7 * 24 * time.Hour}).Run(ctx, "standard", "test",
		generic(t, "txn_fee,,fee,0,1.00,EUR,"))
	if err != nil {
		t.Fatal(err)
	}
	missing := map[string]bool{}
	for _, it := range run.Items {
		if it.Kind == pay.ReconMissingAtPSP {
			missing[it.PaymentID] = true
		}
	}
	if !missing[three.ID] || run.MissingAtPSP != len(missing) {
		t.Fatalf("run=%+v, want the refunded payment three among the missing_at_psp", run)
	}
}
