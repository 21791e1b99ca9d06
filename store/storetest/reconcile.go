package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
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
	updateEach(e, ss, pay.Tx.PutSettlement)

	var got pay.Settlement
	e.view(func(tx pay.Tx) (err error) { got, err = tx.Settlement("stripe", "txn_a"); return err })
	if got != ss[1] {
		t.Fatalf("Settlement=%+v, want %+v", got, ss[1])
	}
	forPayment := func(id string) []string {
		t.Helper()
		var got []pay.Settlement
		e.view(func(tx pay.Tx) (err error) { got, err = tx.SettlementsForPayment(id); return err })
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
	e.update(func(tx pay.Tx) error { return tx.PutSettlement(moved) })
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
		e.view(func(tx pay.Tx) (err error) { got, err = tx.ListSettlements(ap, aid, limit); return err })
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
		if err := e.tryUpdate(func(tx pay.Tx) error { return tx.PutSettlement(c.s) }); pay.ErrorCode(err) != c.code {
			t.Errorf("%s: PutSettlement=%v, want %s", name, err, c.code)
		}
	}
	e.view(func(tx pay.Tx) error {
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
	updateEach(e, runs, pay.Tx.PutReconRun)
	var got pay.ReconRun
	e.view(func(tx pay.Tx) (err error) { got, err = tx.ReconRun("rr_01"); return err })
	if !slices.Equal(got.Items, runs[1].Items) || got.Lines != 11 || got.Posted != 6 || !got.CreatedAt.Equal(runs[1].CreatedAt) || got.Source != runs[1].Source {
		t.Fatalf("ReconRun=%+v, want %+v", got, runs[1])
	}
	replaced := runs[2]
	replaced.Matched = 9
	e.update(func(tx pay.Tx) error { return tx.PutReconRun(replaced) })
	list := func(before string, limit int) []string {
		t.Helper()
		var got []pay.ReconRun
		e.view(func(tx pay.Tx) (err error) { got, err = tx.ListReconRuns(before, limit); return err })
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
	e.view(func(tx pay.Tx) error {
		if _, err := tx.ReconRun("rr_nope"); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Errorf("ReconRun of none=%v, want %s", err, pay.ENOTFOUND)
		}
		return nil
	})
	if err := e.tryUpdate(func(tx pay.Tx) error { return tx.PutReconRun(pay.ReconRun{ID: "rr_x", CreatedAt: t0}) }); pay.ErrorCode(err) != pay.EINVALID {
		t.Errorf("PutReconRun without provider=%v, want %s", err, pay.EINVALID)
	}
}
