package storetest

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

func testInsertPayment(t *testing.T, open Opener) {
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		want := newPayment(1, t0)
		e.insert(want)
		samePayment(t, e.payment(want.ID), want)
	})

	t.Run("UTC", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0.In(time.FixedZone("EST", -5*3600)))
		p.UpdatedAt = p.CreatedAt.Add(time.Second)
		e.insert(p)
		got := e.payment(p.ID)
		samePayment(t, got, p)
		if got.CreatedAt.Location() != time.UTC || got.UpdatedAt.Location() != time.UTC {
			t.Fatalf("times in %s and %s, want UTC", got.CreatedAt.Location(), got.UpdatedAt.Location())
		}
	})

	t.Run("FlowAndDescription", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		p.Provider, p.Flow, p.Description = "stripe", "checkout", "Membership, June – «gold»"
		e.insert(p)
		samePayment(t, e.payment(p.ID), p)
		next := p
		next.Version, next.Status, next.ProviderRef = 2, pay.RequiresAction, "cs_test_1"
		e.update(func(tx store.Tx) error { return tx.UpdatePayment(next, 1) })
		samePayment(t, e.payment(p.ID), next)
	})

	t.Run("ErrConflict", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		dup := newPayment(1, t0.Add(time.Minute))
		dup.Amount = 5
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertPayment(dup) }), pay.ECONFLICT)
		if got, want := e.payment(dup.ID).Amount, newPayment(1, t0).Amount; got != want {
			t.Fatalf("Amount=%d, want %d (the first payment)", got, want)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		for name, change := range map[string]func(*pay.Payment){
			"Version0":   func(p *pay.Payment) { p.Version = 0 },
			"Version2":   func(p *pay.Payment) { p.Version = 2 },
			"NoID":       func(p *pay.Payment) { p.ID = "" },
			"BadStatus":  func(p *pay.Payment) { p.Status = "paid" },
			"NoCreated":  func(p *pay.Payment) { p.CreatedAt = time.Time{} },
			"NoUpdated":  func(p *pay.Payment) { p.UpdatedAt = time.Time{} },
			"LongID":     func(p *pay.Payment) { p.ID = "pay_" + string(make([]byte, 64<<10)) },
			"LongRef":    func(p *pay.Payment) { p.ProviderRef = string(make([]byte, 64<<10)) },
			"LongOrder":  func(p *pay.Payment) { p.OrderID = string(make([]byte, 64<<10)) },
			"NoStatus":   func(p *pay.Payment) { p.Status = "" },
			"LongVendor": func(p *pay.Payment) { p.Provider = string(make([]byte, 64<<10)) },
		} {
			p := newPayment(1, t0)
			change(&p)
			err := e.tryUpdate(func(tx store.Tx) error { return tx.InsertPayment(p) })
			if got, want := pay.ErrorCode(err), pay.EINVALID; got != want {
				t.Fatalf("%s: error %v: code=%q, want %q", name, err, got, want)
			}
		}
		e.view(func(tx store.Tx) error {
			ps, _, err := tx.ListPayments(pay.PaymentFilter{})
			if err != nil {
				return err
			}
			if got, want := len(ps), 0; got != want {
				t.Fatalf("len(ListPayments)=%d, want %d", got, want)
			}
			return nil
		})
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		e.view(func(tx store.Tx) error {
			_, err := tx.Payment(paymentID(2))
			wantCode(t, err, pay.ENOTFOUND)
			_, err = tx.Payment("")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})
	})
}

func testUpdatePayment(t *testing.T, open Opener) {
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		want := newPayment(1, t0)
		want.Status, want.Version, want.UpdatedAt = pay.RequiresAction, 2, t0.Add(time.Minute)
		want.ProviderRef, want.RedirectURL = "pi_1", "https://psp.example/3ds/other"
		e.update(func(tx store.Tx) error { return tx.UpdatePayment(want, 1) })
		samePayment(t, e.payment(want.ID), want)

		want.Status, want.Version, want.UpdatedAt = pay.Captured, 3, t0.Add(2*time.Minute)
		e.update(func(tx store.Tx) error { return tx.UpdatePayment(want, 2) })
		samePayment(t, e.payment(want.ID), want)
	})

	t.Run("ErrConflict", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		e.move(paymentID(1), pay.Processing, t0.Add(time.Minute)) // version 2
		for _, tt := range []struct {
			name          string
			prev, version uint64
		}{
			{"PrevBehind", 1, 2},
			{"PrevAhead", 3, 4},
			{"SameVersion", 2, 2},
			{"SkipsVersion", 2, 4},
			{"VersionBack", 2, 1},
		} {
			p := newPayment(1, t0)
			p.Status, p.Version, p.UpdatedAt = pay.Captured, tt.version, t0.Add(time.Hour)
			err := e.tryUpdate(func(tx store.Tx) error { return tx.UpdatePayment(p, tt.prev) })
			if got, want := pay.ErrorCode(err), pay.ECONFLICT; got != want {
				t.Fatalf("%s: error %v: code=%q, want %q", tt.name, err, got, want)
			}
		}
		got := e.payment(paymentID(1))
		if got, want := got.Version, uint64(2); got != want {
			t.Fatalf("Version=%d, want %d", got, want)
		}
		if got, want := got.Status, pay.Processing; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
	})

	t.Run("ErrConflictIgnored", func(t *testing.T) {
		// A conflict writes nothing, even if fn goes on and commits.
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		p := newPayment(1, t0)
		p.Status, p.Version, p.UpdatedAt = pay.Captured, 3, t0.Add(time.Hour)
		var err error
		e.update(func(tx store.Tx) error { err = tx.UpdatePayment(p, 2); return nil })
		wantCode(t, err, pay.ECONFLICT)
		if got, want := e.payment(p.ID).Status, pay.Created; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
		e.view(func(tx store.Tx) error {
			ps, err := tx.Candidates([]pay.Status{pay.Captured}, t0.Add(2*time.Hour), 10)
			if err != nil {
				return err
			}
			wantIDs(t, ps)
			return nil
		})
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		p.Version = 2
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.UpdatePayment(p, 1) }), pay.ENOTFOUND)
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		p := newPayment(1, t0)
		p.Status, p.Version = "done", 2
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.UpdatePayment(p, 1) }), pay.EINVALID)
	})

	t.Run("Indexes", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0), newPayment(2, t0.Add(time.Second)))
		e.move(paymentID(1), pay.Processing, t0.Add(time.Minute))
		e.view(func(tx store.Tx) error {
			before := t0.Add(time.Hour)
			created, err := tx.Candidates([]pay.Status{pay.Created}, before, 10)
			if err != nil {
				return err
			}
			wantIDs(t, created, 2)
			processing, err := tx.Candidates([]pay.Status{pay.Processing}, before, 10)
			if err != nil {
				return err
			}
			wantIDs(t, processing, 1)
			// The status index follows UpdatedAt: not a candidate before it.
			early, err := tx.Candidates([]pay.Status{pay.Processing}, t0.Add(time.Minute), 10)
			if err != nil {
				return err
			}
			wantIDs(t, early)

			list, _, err := tx.ListPayments(pay.PaymentFilter{Status: pay.Created})
			if err != nil {
				return err
			}
			wantIDs(t, list, 2)
			list, _, err = tx.ListPayments(pay.PaymentFilter{Status: pay.Processing})
			if err != nil {
				return err
			}
			wantIDs(t, list, 1)
			list, _, err = tx.ListPayments(pay.PaymentFilter{OrderID: "order-1"})
			if err != nil {
				return err
			}
			wantIDs(t, list, 1)
			if got, want := list[0].Status, pay.Processing; got != want {
				t.Fatalf("Status=%s, want %s", got, want)
			}
			list, _, err = tx.ListPayments(pay.PaymentFilter{})
			if err != nil {
				return err
			}
			wantIDs(t, list, 2, 1)
			return nil
		})
	})
}

func testPaymentByRef(t *testing.T, open Opener) {
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		e.view(func(tx store.Tx) error {
			_, err := tx.PaymentByRef("mock", "")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})

		// The reference becomes known.
		p := e.payment(paymentID(1))
		p.ProviderRef, p.Version, p.UpdatedAt = "pi_1", 2, t0.Add(time.Second)
		e.update(func(tx store.Tx) error { return tx.UpdatePayment(p, 1) })
		e.view(func(tx store.Tx) error {
			got, err := tx.PaymentByRef("mock", "pi_1")
			if err != nil {
				return err
			}
			samePayment(t, got, p)
			_, err = tx.PaymentByRef("stripe", "pi_1")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})

		// It changes: the old one no longer finds the payment.
		p.ProviderRef, p.Version = "pi_2", 3
		e.update(func(tx store.Tx) error { return tx.UpdatePayment(p, 2) })
		e.view(func(tx store.Tx) error {
			_, err := tx.PaymentByRef("mock", "pi_1")
			wantCode(t, err, pay.ENOTFOUND)
			got, err := tx.PaymentByRef("mock", "pi_2")
			if err != nil {
				return err
			}
			if got, want := got.Version, uint64(3); got != want {
				t.Fatalf("Version=%d, want %d", got, want)
			}
			return nil
		})
	})

	t.Run("Insert", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p := newPayment(1, t0)
		p.ProviderRef = "pi_1"
		e.insert(p)
		e.view(func(tx store.Tx) error {
			got, err := tx.PaymentByRef("mock", "pi_1")
			if err != nil {
				return err
			}
			samePayment(t, got, p)
			return nil
		})
	})

	t.Run("ErrConflict", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p1, p2, p3 := newPayment(1, t0), newPayment(2, t0), newPayment(3, t0)
		p1.ProviderRef = "pi_1"
		p3.Provider, p3.ProviderRef = "stripe", "pi_1" // another provider: fine
		e.insert(p1, p2, p3)

		p2.ProviderRef, p2.Version = "pi_1", 2
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.UpdatePayment(p2, 1) }), pay.ECONFLICT)
		p4 := newPayment(4, t0)
		p4.ProviderRef = "pi_1"
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertPayment(p4) }), pay.ECONFLICT)

		e.view(func(tx store.Tx) error {
			for provider, want := range map[string]string{"mock": p1.ID, "stripe": p3.ID} {
				got, err := tx.PaymentByRef(provider, "pi_1")
				if err != nil {
					return err
				}
				if got.ID != want {
					t.Fatalf("PaymentByRef(%s)=%s, want %s", provider, got.ID, want)
				}
			}
			return nil
		})
	})

	// A payment on a hosted page has a second reference (a Checkout
	// Session's PaymentIntent) that finds it too, and that no other
	// payment may hold in either column.
	t.Run("SecondRef", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		p1, p2 := newPayment(1, t0), newPayment(2, t0)
		p1.Provider, p1.Flow, p1.ProviderRef = "stripe", "checkout", "cs_1"
		p2.Provider, p2.ProviderRef = "stripe", "pi_other"
		e.insert(p1, p2)

		next := p1
		next.SecondRef, next.Version, next.UpdatedAt = "pi_1", 2, t0.Add(time.Second)
		e.update(func(tx store.Tx) error { return tx.UpdatePayment(next, 1) })
		e.view(func(tx store.Tx) error {
			for _, ref := range []string{"cs_1", "pi_1"} {
				got, err := tx.PaymentByRef("stripe", ref)
				if err != nil {
					return err
				}
				samePayment(t, got, next)
			}
			_, err := tx.PaymentByRef("mock", "pi_1")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})

		// Another payment's reference, in either column: ECONFLICT, nothing
		// written.
		taken := next
		taken.SecondRef, taken.Version = "pi_other", 3
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.UpdatePayment(taken, 2) }), pay.ECONFLICT)
		p3 := newPayment(3, t0)
		p3.Provider, p3.ProviderRef = "stripe", "pi_1"
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertPayment(p3) }), pay.ECONFLICT)
		p4 := newPayment(4, t0)
		p4.Provider, p4.ProviderRef, p4.SecondRef = "stripe", "cs_4", "cs_1"
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.InsertPayment(p4) }), pay.ECONFLICT)
		p2b := p2
		p2b.ProviderRef, p2b.Version = "pi_1", 2
		p2b.UpdatedAt = t0.Add(time.Second)
		wantCode(t, e.tryUpdate(func(tx store.Tx) error { return tx.UpdatePayment(p2b, 1) }), pay.ECONFLICT)
		samePayment(t, e.payment(p1.ID), next)
		samePayment(t, e.payment(p2.ID), p2)
		e.view(func(tx store.Tx) error {
			got, err := tx.PaymentByRef("stripe", "pi_other")
			if err != nil {
				return err
			}
			if got.ID != p2.ID {
				t.Fatalf("PaymentByRef(pi_other)=%s, want %s", got.ID, p2.ID)
			}
			return nil
		})
	})
}

func testListPayments(t *testing.T, open Opener) {
	// pages lists every page of f and returns them.
	pages := func(t *testing.T, e *env, f pay.PaymentFilter) [][]pay.Payment {
		t.Helper()
		var out [][]pay.Payment
		for i := 0; ; i++ {
			if i > 100 {
				t.Fatal("ListPayments does not end")
			}
			var (
				ps   []pay.Payment
				next string
			)
			e.view(func(tx store.Tx) (err error) { ps, next, err = tx.ListPayments(f); return err })
			out = append(out, ps)
			if next == "" {
				return out
			}
			f.Cursor = next
		}
	}

	t.Run("Paging", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		for i := range 7 {
			e.insert(newPayment(i, t0.Add(time.Duration(i)*time.Minute)))
		}
		got := pages(t, e, pay.PaymentFilter{Limit: 3})
		if got, want := len(got), 3; got != want {
			t.Fatalf("pages=%d, want %d", got, want)
		}
		wantIDs(t, got[0], 6, 5, 4)
		wantIDs(t, got[1], 3, 2, 1)
		wantIDs(t, got[2], 0)

		// An exact multiple of the limit ends without an empty page.
		got = pages(t, e, pay.PaymentFilter{Limit: 7})
		if got, want := len(got), 1; got != want {
			t.Fatalf("pages=%d, want %d", got, want)
		}
		wantIDs(t, got[0], 6, 5, 4, 3, 2, 1, 0)
	})

	t.Run("SameCreatedAt", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		for i := range 5 {
			e.insert(newPayment(i, t0))
		}
		var all []pay.Payment
		for _, page := range pages(t, e, pay.PaymentFilter{Limit: 2}) {
			all = append(all, page...)
		}
		wantIDs(t, all, 4, 3, 2, 1, 0)
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.view(func(tx store.Tx) error {
			for _, f := range []pay.PaymentFilter{{}, {Status: pay.Created}, {OrderID: "order-1"}} {
				ps, next, err := tx.ListPayments(f)
				if err != nil {
					return err
				}
				if len(ps) != 0 || next != "" {
					t.Fatalf("ListPayments(%+v)=%d payments, cursor %q; want none", f, len(ps), next)
				}
			}
			return nil
		})
	})

	t.Run("Status", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		for i := range 6 {
			e.insert(newPayment(i, t0.Add(time.Duration(i)*time.Minute)))
		}
		// Newest updated first, whatever the creation order.
		e.move(paymentID(1), pay.Processing, t0.Add(10*time.Minute))
		e.move(paymentID(5), pay.Processing, t0.Add(11*time.Minute))
		e.move(paymentID(3), pay.Processing, t0.Add(12*time.Minute))
		got := pages(t, e, pay.PaymentFilter{Status: pay.Processing, Limit: 2})
		if got, want := len(got), 2; got != want {
			t.Fatalf("pages=%d, want %d", got, want)
		}
		wantIDs(t, got[0], 3, 5)
		wantIDs(t, got[1], 1)
		got = pages(t, e, pay.PaymentFilter{Status: pay.Created})
		wantIDs(t, got[0], 4, 2, 0)
		got = pages(t, e, pay.PaymentFilter{Status: pay.Captured})
		wantIDs(t, got[0])
	})

	t.Run("OrderID", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		for i := range 6 {
			p := newPayment(i, t0.Add(time.Duration(i)*time.Minute))
			if i%2 == 0 {
				p.OrderID = "order-A"
			}
			e.insert(p)
		}
		// "order-A" must not match "order-AB" or "order-" (prefixes).
		e.insert(func() pay.Payment { p := newPayment(10, t0); p.OrderID = "order-AB"; return p }())
		e.insert(func() pay.Payment { p := newPayment(11, t0); p.OrderID = "order-"; return p }())
		got := pages(t, e, pay.PaymentFilter{OrderID: "order-A", Limit: 2})
		if got, want := len(got), 2; got != want {
			t.Fatalf("pages=%d, want %d", got, want)
		}
		wantIDs(t, got[0], 4, 2)
		wantIDs(t, got[1], 0)

		e.move(paymentID(2), pay.Captured, t0.Add(time.Hour))
		got = pages(t, e, pay.PaymentFilter{OrderID: "order-A", Status: pay.Captured})
		wantIDs(t, got[0], 2)
		got = pages(t, e, pay.PaymentFilter{OrderID: "order-A", Status: pay.Created, Limit: 1})
		if got, want := len(got), 2; got != want {
			t.Fatalf("pages=%d, want %d", got, want)
		}
		wantIDs(t, got[0], 4)
		wantIDs(t, got[1], 0)
		got = pages(t, e, pay.PaymentFilter{OrderID: "order-none"})
		wantIDs(t, got[0])
	})

	t.Run("Search", func(t *testing.T) {
		// A customer id, an e-mail (ASCII case folded) and a creation
		// range: newest created first, whatever else is set, paged.
		t.Parallel()
		e := newEnv(t, open)
		for i := range 10 {
			p := newPayment(i, t0.Add(time.Duration(i)*time.Hour))
			switch i % 3 {
			case 0:
				p.Customer = pay.Customer{ID: "cus_A", Email: "Ada.Lovelace@Example.com"}
			case 1:
				p.Customer = pay.Customer{ID: "cus_AB", Email: "ada.lovelace@example.com.evil"}
			default:
				p.Customer = pay.Customer{ID: "cus_B", Email: "ÁDA@example.com"}
			}
			e.insert(p)
		}
		e.move(paymentID(3), pay.Captured, t0.Add(20*time.Hour))
		e.move(paymentID(6), pay.Captured, t0.Add(21*time.Hour))
		at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
		all := func(t *testing.T, f pay.PaymentFilter) []pay.Payment {
			var out []pay.Payment
			for _, page := range pages(t, e, f) {
				out = append(out, page...)
			}
			return out
		}
		for name, tt := range map[string]struct {
			f    pay.PaymentFilter
			want []int
		}{
			"CustomerID":      {pay.PaymentFilter{CustomerID: "cus_A", Limit: 2}, []int{9, 6, 3, 0}},
			"CustomerIDExact": {pay.PaymentFilter{CustomerID: "cus_"}, nil},
			"Email":           {pay.PaymentFilter{CustomerEmail: "ada.lovelace@example.com", Limit: 3}, []int{9, 6, 3, 0}},
			"EmailUpper":      {pay.PaymentFilter{CustomerEmail: "ADA.LOVELACE@EXAMPLE.COM"}, []int{9, 6, 3, 0}},
			"EmailASCIIOnly":  {pay.PaymentFilter{CustomerEmail: "áda@example.com"}, nil},
			"EmailNonASCII":   {pay.PaymentFilter{CustomerEmail: "ÁDA@EXAMPLE.COM"}, []int{8, 5, 2}},
			"Range":           {pay.PaymentFilter{CreatedFrom: at(2), CreatedBefore: at(5), Limit: 2}, []int{4, 3, 2}},
			"From":            {pay.PaymentFilter{CreatedFrom: at(7)}, []int{9, 8, 7}},
			"Before":          {pay.PaymentFilter{CreatedBefore: at(1).Add(time.Nanosecond)}, []int{1, 0}},
			"RangeCustomer":   {pay.PaymentFilter{CustomerID: "cus_A", CreatedFrom: at(1), CreatedBefore: at(9), Limit: 1}, []int{6, 3}},
			"RangeStatus":     {pay.PaymentFilter{Status: pay.Captured, CreatedBefore: at(5)}, []int{3}},
			"StatusCustomer":  {pay.PaymentFilter{Status: pay.Created, CustomerID: "cus_A", Limit: 1}, []int{9, 0}},
			"OrderCustomer":   {pay.PaymentFilter{OrderID: "order-3", CustomerID: "cus_A"}, []int{3}},
			"OrderOther":      {pay.PaymentFilter{OrderID: "order-3", CustomerID: "cus_B"}, nil},
			"OrderRange":      {pay.PaymentFilter{OrderID: "order-3", CreatedFrom: at(4)}, nil},
			"Nothing":         {pay.PaymentFilter{CreatedFrom: at(100)}, nil},
		} {
			t.Run(name, func(t *testing.T) { wantIDs(t, all(t, tt.f), tt.want...) })
		}

		// A cursor of one range continues it, not the whole list.
		var next string
		e.view(func(tx store.Tx) (err error) {
			_, next, err = tx.ListPayments(pay.PaymentFilter{CreatedBefore: at(5), Limit: 2})
			return err
		})
		wantIDs(t, all(t, pay.PaymentFilter{CreatedBefore: at(5), CreatedFrom: at(1), Cursor: next}), 2, 1)

		// An empty or backwards range is refused, naming the field.
		e.view(func(tx store.Tx) error {
			for _, f := range []pay.PaymentFilter{{CreatedFrom: at(3), CreatedBefore: at(3)}, {CreatedFrom: at(4), CreatedBefore: at(3)}} {
				_, _, err := tx.ListPayments(f)
				wantCode(t, err, pay.EINVALID)
				if got, want := pay.ErrorParam(err), "created_before"; got != want {
					t.Errorf("ListPayments(%v..%v): param %q, want %q", f.CreatedFrom, f.CreatedBefore, got, want)
				}
			}
			return nil
		})
	})

	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.updateN(501, func(tx store.Tx, i int) error {
			return tx.InsertPayment(newPayment(i, t0.Add(time.Duration(i)*time.Second)))
		})
		for _, tt := range []struct {
			limit, want int
		}{{0, 50}, {-1, 1}, {1, 1}, {500, 500}, {501, 500}, {100000, 500}} {
			e.view(func(tx store.Tx) error {
				ps, next, err := tx.ListPayments(pay.PaymentFilter{Limit: tt.limit})
				if err != nil {
					return err
				}
				if got := len(ps); got != tt.want {
					t.Fatalf("Limit %d: len=%d, want %d", tt.limit, got, tt.want)
				}
				if next == "" {
					t.Fatalf("Limit %d: no next cursor", tt.limit)
				}
				return nil
			})
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		for i := range 3 {
			e.insert(newPayment(i, t0.Add(time.Duration(i)*time.Minute)))
		}
		var byCreated, byStatus string
		e.view(func(tx store.Tx) (err error) {
			if _, byCreated, err = tx.ListPayments(pay.PaymentFilter{Limit: 1}); err != nil {
				return err
			}
			_, byStatus, err = tx.ListPayments(pay.PaymentFilter{Status: pay.Created, Limit: 1})
			return err
		})
		if byCreated == "" || byStatus == "" {
			t.Fatal("no next cursor")
		}
		for name, f := range map[string]pay.PaymentFilter{
			"NotBase64":      {Cursor: "!!!"},
			"Short":          {Cursor: base64.RawURLEncoding.EncodeToString([]byte("x"))},
			"Garbage":        {Cursor: base64.RawURLEncoding.EncodeToString([]byte("garbage cursor, not from us"))},
			"StatusOnPlain":  {Cursor: byStatus},
			"PlainOnStatus":  {Cursor: byCreated, Status: pay.Created},
			"OtherStatus":    {Cursor: byStatus, Status: pay.Processing},
			"PlainOnOrderID": {Cursor: byCreated, OrderID: "order-1"},
			"BadStatus":      {Status: "paid"},
		} {
			e.view(func(tx store.Tx) error {
				_, _, err := tx.ListPayments(f)
				if got, want := pay.ErrorCode(err), pay.EINVALID; got != want {
					t.Fatalf("%s: error %v: code=%q, want %q", name, err, got, want)
				}
				return nil
			})
		}
	})
}

func testCandidates(t *testing.T, open Opener) {
	sweep := []pay.Status{pay.FinalizePending, pay.Expired, pay.Processing, pay.RequiresAction}

	// setup stores payments 0..7, each updated at t0+i minutes into the
	// status listed.
	setup := func(t *testing.T) *env {
		e := newEnv(t, open)
		statuses := []pay.Status{
			pay.Processing, pay.Captured, pay.FinalizePending, pay.Created,
			pay.Expired, pay.RequiresAction, pay.Failed, pay.Processing,
		}
		e.update(func(tx store.Tx) error {
			for i, s := range statuses {
				p := newPayment(i, t0)
				p.Status, p.UpdatedAt = s, t0.Add(time.Duration(i)*time.Minute)
				if err := tx.InsertPayment(p); err != nil {
					return err
				}
			}
			return nil
		})
		return e
	}
	candidates := func(t *testing.T, e *env, statuses []pay.Status, before time.Time, limit int) []pay.Payment {
		t.Helper()
		var ps []pay.Payment
		e.view(func(tx store.Tx) (err error) { ps, err = tx.Candidates(statuses, before, limit); return err })
		return ps
	}

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		wantIDs(t, candidates(t, e, sweep, t0.Add(time.Hour), 100), 0, 2, 4, 5, 7)
		wantIDs(t, candidates(t, e, []pay.Status{pay.Captured, pay.Failed}, t0.Add(time.Hour), 100), 1, 6)
		wantIDs(t, candidates(t, e, []pay.Status{pay.Refunded}, t0.Add(time.Hour), 100))
		wantIDs(t, candidates(t, e, nil, t0.Add(time.Hour), 100))
		// Duplicate statuses do not duplicate payments.
		wantIDs(t, candidates(t, e, []pay.Status{pay.Processing, pay.Processing}, t0.Add(time.Hour), 100), 0, 7)
	})

	t.Run("Bound", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		// Strictly before: payment 5 was updated at exactly t0+5m.
		wantIDs(t, candidates(t, e, sweep, t0.Add(5*time.Minute), 100), 0, 2, 4)
		wantIDs(t, candidates(t, e, sweep, t0.Add(5*time.Minute+time.Microsecond), 100), 0, 2, 4, 5)
		wantIDs(t, candidates(t, e, sweep, t0, 100))
		wantIDs(t, candidates(t, e, sweep, time.Time{}, 100))
	})

	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		// The oldest over all statuses, not the first status's.
		wantIDs(t, candidates(t, e, sweep, t0.Add(time.Hour), 3), 0, 2, 4)
		wantIDs(t, candidates(t, e, []pay.Status{pay.Processing, pay.FinalizePending}, t0.Add(time.Hour), 2), 0, 2)
		wantIDs(t, candidates(t, e, sweep, t0.Add(time.Hour), 1), 0)
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.view(func(tx store.Tx) error {
			_, err := tx.Candidates(sweep, t0.Add(time.Hour), 0)
			wantCode(t, err, pay.EINVALID)
			_, err = tx.Candidates([]pay.Status{"paid"}, t0.Add(time.Hour), 10)
			wantCode(t, err, pay.EINVALID)
			return nil
		})
	})
}
