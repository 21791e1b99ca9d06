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

// testSettlements covers the settlement family: PutSettlement (insert,
// replace, its payment checked, its fields validated), the lookups, the
// by-payment index kept in step, and the list in key order with its
// cursor.
func testSettlements(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	p, q := newPayment(1, t0), newPayment(2, t0)
	e.insert(p, q)
	ss := []pay.Settlement{
		{Provider: "stripe", ID: "txn_b", Kind: pay.SettleCharge, PaymentID: p.ID, ProviderRef: "pi_1", Amount: 1001, Fee: 30, Currency: "EUR", RunID: "rr_1"},
		{Provider: "stripe", ID: "txn_a", Kind: pay.SettleRefund, PaymentID: p.ID, ProviderRef: "re_1", Amount: -100, Currency: "EUR", PayoutID: "po_1", RunID: "rr_1"},
		{Provider: "mock", ID: "txn_a", Kind: pay.SettleFee, Fee: 250, Currency: "EUR", RunID: "rr_1"},
		{Provider: "mock", ID: "txn_c", Kind: pay.SettleCharge, PaymentID: q.ID, ProviderRef: "pi_2", Amount: 1002, Currency: "EUR", RunID: "rr_1"},
	}
	for i := range ss {
		ss[i].CreatedAt, ss[i].UpdatedAt = t0, t0
	}
	updateEach(e, ss, store.Tx.PutSettlement)

	var got pay.Settlement
	e.view(func(tx store.Tx) (err error) { got, err = tx.Settlement("stripe", "txn_a"); return err })
	if got != ss[1] {
		t.Fatalf("Settlement=%+v, want %+v", got, ss[1])
	}
	forPayment := func(id string) []string {
		t.Helper()
		var got []pay.Settlement
		e.view(func(tx store.Tx) (err error) { got, err = tx.SettlementsForPayment(id); return err })
		var out []string
		for _, s := range got {
			out = append(out, s.Provider+"/"+s.ID)
		}
		return out
	}
	if got, want := forPayment(p.ID), []string{"stripe/txn_a", "stripe/txn_b"}; !slices.Equal(got, want) {
		t.Fatalf("SettlementsForPayment=%v, want %v", got, want)
	}

	// A replacement moves the index entry to its new payment.
	moved := ss[3]
	moved.PaymentID, moved.PayoutID, moved.UpdatedAt = p.ID, "po_2", t0.Add(1)
	e.update(func(tx store.Tx) error { return tx.PutSettlement(moved) })
	if got, want := forPayment(p.ID), []string{"mock/txn_c", "stripe/txn_a", "stripe/txn_b"}; !slices.Equal(got, want) {
		t.Fatalf("after the move SettlementsForPayment=%v, want %v", got, want)
	}
	if got := forPayment(q.ID); len(got) != 0 {
		t.Fatalf("the old payment keeps %v", got)
	}

	// Key order (provider, then id) and the cursor.
	list := func(ap, aid string, limit int) []string {
		t.Helper()
		var got []pay.Settlement
		e.view(func(tx store.Tx) (err error) { got, err = tx.ListSettlements(ap, aid, limit); return err })
		var out []string
		for _, s := range got {
			out = append(out, s.Provider+"/"+s.ID)
		}
		return out
	}
	if got, want := list("", "", 10), []string{"mock/txn_a", "mock/txn_c", "stripe/txn_a", "stripe/txn_b"}; !slices.Equal(got, want) {
		t.Fatalf("ListSettlements=%v, want %v", got, want)
	}
	if got, want := list("mock", "txn_c", 1), []string{"stripe/txn_a"}; !slices.Equal(got, want) {
		t.Fatalf("ListSettlements after mock/txn_c=%v, want %v", got, want)
	}

	// Refused: unknown payment, bad fields, a bad limit; not found.
	for name, c := range map[string]struct {
		s    pay.Settlement
		code string
	}{
		"NoPayment": {pay.Settlement{Provider: "mock", ID: "txn_x", Kind: pay.SettleCharge, PaymentID: paymentID(99), Currency: "EUR", CreatedAt: t0, UpdatedAt: t0}, pay.ENOTFOUND},
		"Kind":      {pay.Settlement{Provider: "mock", ID: "txn_x", Kind: "transfer", Currency: "EUR", CreatedAt: t0, UpdatedAt: t0}, pay.EINVALID},
		"NoID":      {pay.Settlement{Provider: "mock", Kind: pay.SettleFee, Currency: "EUR", CreatedAt: t0, UpdatedAt: t0}, pay.EINVALID},
		"Currency":  {pay.Settlement{Provider: "mock", ID: "txn_x", Kind: pay.SettleFee, Currency: "EURO", CreatedAt: t0, UpdatedAt: t0}, pay.EINVALID},
	} {
		if err := e.tryUpdate(func(tx store.Tx) error { return tx.PutSettlement(c.s) }); pay.ErrorCode(err) != c.code {
			t.Errorf("%s: PutSettlement=%v, want %s", name, err, c.code)
		}
	}
	e.view(func(tx store.Tx) error {
		if _, err := tx.Settlement("mock", "txn_x"); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Errorf("Settlement of a refused one=%v, want %s", err, pay.ENOTFOUND)
		}
		if _, err := tx.ListSettlements("", "", 0); pay.ErrorCode(err) != pay.EINVALID {
			t.Errorf("ListSettlements limit 0=%v, want %s", err, pay.EINVALID)
		}
		return nil
	})
}

// testReconRuns covers the run family: PutReconRun (insert, replace),
// ReconRun with its items, and the list newest first with its cursor.
func testReconRuns(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	var runs []pay.ReconRun
	for i := range 3 {
		runs = append(runs, pay.ReconRun{
			ID: fmt.Sprintf("rr_%02d", i), Provider: "stripe", Source: "import:stripe:report.csv", Lines: 10 + i, Matched: 7, Mismatched: 1,
			MissingLocally: 1, MissingAtPSP: 1, Posted: 7 - i, CreatedAt: t0.Add(time.Duration(i) * time.Hour),
		})
	}
	runs[1].Items = []pay.ReconItem{
		{Kind: pay.ReconAmountMismatch, Line: 4, LineID: "txn_4", ProviderRef: "pi_4", PaymentID: paymentID(4), Amount: 900, Expected: 1000, Currency: "EUR", Note: "settled 900"},
		{Kind: pay.ReconMissingAtPSP, PaymentID: paymentID(5), Amount: 500, Currency: "EUR"},
	}
	updateEach(e, runs, store.Tx.PutReconRun)
	var got pay.ReconRun
	e.view(func(tx store.Tx) (err error) { got, err = tx.ReconRun("rr_01"); return err })
	if !slices.Equal(got.Items, runs[1].Items) || got.Lines != 11 || got.Posted != 6 || !got.CreatedAt.Equal(runs[1].CreatedAt) || got.Source != runs[1].Source {
		t.Fatalf("ReconRun=%+v, want %+v", got, runs[1])
	}
	replaced := runs[2]
	replaced.Matched = 9
	e.update(func(tx store.Tx) error { return tx.PutReconRun(replaced) })
	list := func(before string, limit int) []string {
		t.Helper()
		var got []pay.ReconRun
		e.view(func(tx store.Tx) (err error) { got, err = tx.ListReconRuns(before, limit); return err })
		var out []string
		for _, r := range got {
			out = append(out, fmt.Sprintf("%s:%d", r.ID, r.Matched))
		}
		return out
	}
	if got, want := list("", 10), []string{"rr_02:9", "rr_01:7", "rr_00:7"}; !slices.Equal(got, want) {
		t.Fatalf("ListReconRuns=%v, want %v", got, want)
	}
	if got, want := list("rr_02", 1), []string{"rr_01:7"}; !slices.Equal(got, want) {
		t.Fatalf("ListReconRuns before rr_02=%v, want %v", got, want)
	}
	if got, want := list("rr_99", 10), []string{"rr_02:9", "rr_01:7", "rr_00:7"}; !slices.Equal(got, want) {
		t.Fatalf("ListReconRuns before rr_99=%v, want %v", got, want)
	}
	e.view(func(tx store.Tx) error {
		if _, err := tx.ReconRun("rr_nope"); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Errorf("ReconRun of none=%v, want %s", err, pay.ENOTFOUND)
		}
		return nil
	})
	if err := e.tryUpdate(func(tx store.Tx) error { return tx.PutReconRun(pay.ReconRun{ID: "rr_x", CreatedAt: t0}) }); pay.ErrorCode(err) != pay.EINVALID {
		t.Errorf("PutReconRun without provider=%v, want %s", err, pay.EINVALID)
	}
}

// testClaimSettlement covers ClaimSettlement and ClaimSettlementPayout:
// the first claim stores, a later one returns what is stored and changes
// nothing; of transactions that claim one id (or one payout) at the same
// time, exactly one does, and the others see what it stored.
func testClaimSettlement(t *testing.T, open Opener) {
	t.Parallel()
	e := newEnv(t, open)
	p := newPayment(1, t0)
	e.insert(p)
	s := pay.Settlement{Provider: "stripe", ID: "txn_1", Kind: pay.SettleCharge, PaymentID: p.ID, ProviderRef: "pi_1", Amount: 1001, Fee: 30,
		Currency: "EUR", RunID: "rr_1", CreatedAt: t0, UpdatedAt: t0}
	claim := func(s pay.Settlement) (got pay.Settlement, ok bool) {
		t.Helper()
		e.update(func(tx store.Tx) (err error) { got, ok, err = tx.ClaimSettlement(s); return err })
		return got, ok
	}
	if got, ok := claim(s); !ok || got != s {
		t.Fatalf("first ClaimSettlement=%+v, %v; want it stored", got, ok)
	}
	other := s
	other.Fee, other.RunID = 99, "rr_2"
	if got, ok := claim(other); ok || got != s {
		t.Fatalf("second ClaimSettlement=%+v, %v; want the first, not claimed", got, ok)
	}
	var set bool
	e.update(func(tx store.Tx) (err error) {
		set, err = tx.ClaimSettlementPayout("stripe", "txn_1", "po_1", t0.Add(time.Second))
		return err
	})
	if !set {
		t.Fatal("ClaimSettlementPayout of a settlement without payout: not set")
	}
	e.update(func(tx store.Tx) (err error) {
		set, err = tx.ClaimSettlementPayout("stripe", "txn_1", "po_2", t0.Add(time.Second))
		return err
	})
	if set {
		t.Fatal("ClaimSettlementPayout of a settlement with a payout: set again")
	}
	var got pay.Settlement
	e.view(func(tx store.Tx) (err error) { got, err = tx.Settlement("stripe", "txn_1"); return err })
	if got.PayoutID != "po_1" || got.Fee != 30 || !got.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("Settlement=%+v, want payout po_1, fee 30", got)
	}
	if err := e.tryUpdate(func(tx store.Tx) error {
		_, err := tx.ClaimSettlementPayout("stripe", "txn_none", "po_1", t0)
		return err
	}); pay.ErrorCode(err) != pay.ENOTFOUND {
		t.Fatalf("ClaimSettlementPayout of nothing=%v, want ENOTFOUND", err)
	}

	// At the same time: one claim of each id and of each payout wins.
	const n = 8
	for _, id := range []string{"txn_2", "txn_3"} {
		var (
			wg             sync.WaitGroup
			mu             sync.Mutex
			claims, payout int
			start          = make(chan struct{})
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := s
				c.ID, c.Fee = id, int64(i)
				<-start
				var won, paid bool
				err := e.s.Update(context.Background(), func(tx store.Tx) (err error) {
					if _, won, err = tx.ClaimSettlement(c); err != nil {
						return err
					}
					paid, err = tx.ClaimSettlementPayout("stripe", id, fmt.Sprintf("po_%d", i), t0)
					return err
				})
				if err != nil {
					t.Errorf("claim %s: %v", id, err)
				}
				mu.Lock()
				defer mu.Unlock()
				if won {
					claims++
				}
				if paid {
					payout++
				}
			}()
		}
		close(start)
		wg.Wait()
		if claims != 1 || payout != 1 {
			t.Fatalf("%d concurrent claims of %s: %d stored it and %d set its payout, want 1 and 1", n, id, claims, payout)
		}
	}
}
