package mock_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
)

// TestProvider_MaxCharges: past Config.MaxCharges the PSP forgets its
// oldest charges first. The newest still answer; a forgotten one is gone
// as after a restart (Status not found, Refund EINVALID) and a Create with
// its key charges anew.
func TestProvider_MaxCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t, mock.Config{MaxCharges: 3}, nil)
	pms := make([]pay.Payment, 5)
	for i := range pms {
		pms[i] = payment(fmt.Sprintf("pay_max_%d", i), 1000)
		res := create(t, p, pms[i])
		pms[i].ProviderRef, pms[i].Status = res.ProviderRef, res.Status
	}
	if got, want := p.Len(), 3; got != want {
		t.Fatalf("Len=%d, want %d", got, want)
	}
	if s := p.Stats(); s.Charges != 5 || s.Forgotten != 2 {
		t.Fatalf("Stats: charges=%d forgotten=%d, want 5 and 2", s.Charges, s.Forgotten)
	}

	// The newest three answer, by reference and by key.
	for _, pm := range pms[2:] {
		if _, ok := p.Charge("charge-" + pm.ID); !ok {
			t.Fatalf("charge of %s forgotten, want it kept", pm.ID)
		}
		for _, q := range []pay.Payment{pm, {ProviderRef: pm.ProviderRef}, {ID: pm.ID}} {
			if st, err := p.Status(ctx, q); err != nil || !st.Found || st.Status != pay.Captured {
				t.Fatalf("Status(%+v)=%+v, %v, want captured", q, st, err)
			}
		}
	}
	kept := pay.Refund{ID: "re_01ARZ3NDEKTSV4RRFFQ69G5FA8", PaymentID: pms[4].ID, Amount: 100, Status: pay.RefundPending}
	if _, err := p.Refund(ctx, pms[4], kept, pay.RefundKey(kept.ID)); err != nil {
		t.Fatalf("Refund of a kept charge: %v", err)
	}

	// The oldest two are forgotten.
	for _, pm := range pms[:2] {
		if _, ok := p.Charge("charge-" + pm.ID); ok {
			t.Fatalf("charge of %s kept, want it forgotten", pm.ID)
		}
		for _, q := range []pay.Payment{pm, {ProviderRef: pm.ProviderRef}} {
			if st, err := p.Status(ctx, q); err != nil || st.Found {
				t.Fatalf("Status(%+v)=%+v, %v, want not found", q, st, err)
			}
		}
		gone := pay.Refund{ID: "re_01ARZ3NDEKTSV4RRFFQ69G5FA9", PaymentID: pm.ID, Amount: 100, Status: pay.RefundPending}
		_, err := p.Refund(ctx, pm, gone, pay.RefundKey(gone.ID))
		wantCode(t, err, pay.EINVALID)
	}

	// A Create with a forgotten key is a new charge, and the oldest kept
	// one (pms[2]) goes.
	create(t, p, pms[0])
	if s := p.Stats(); s.Charges != 6 || s.Replays != 0 || s.Forgotten != 3 {
		t.Fatalf("Stats: charges=%d replays=%d forgotten=%d, want 6, 0, 3", s.Charges, s.Replays, s.Forgotten)
	}
	if _, ok := p.Charge("charge-" + pms[2].ID); ok {
		t.Fatal("the oldest kept charge is still there")
	}
	if got, want := p.Len(), 3; got != want {
		t.Fatalf("Len=%d, want %d", got, want)
	}
}

// heapInUse is the live heap after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// chargeN makes n charges with fresh payment ids and keys, numbered from
// *seq, as paystate makes them (its id and key strings are the PSP's to
// keep); the PSP is closed, so no webhook goroutine holds memory.
func chargeN(tb testing.TB, p *mock.Provider, seq *int, n int) {
	tb.Helper()
	for range n {
		*seq++
		id := fmt.Sprintf("pay_%026d", *seq) // as long as a real payment id
		if _, err := p.Create(context.Background(), pay.Payment{ID: id, OrderID: "o", Amount: 1000, Currency: "EUR"}, "charge-"+id); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestProvider_MaxChargesHeap: the heap the PSP holds stops growing at
// MaxCharges. After 5×MaxCharges charges it holds what it held at
// MaxCharges, MaxCharges times the bytes of one charge, within a quarter
// (once full, the Go maps' tables may grow once while insertions reuse
// the slots of forgotten charges: up to a fifth more at 100,000 charges;
// growth with the charges made would be 5×). Not parallel: the other
// tests of the package wait while it reads the heap.
func TestProvider_MaxChargesHeap(t *testing.T) {
	const max = 10_000
	p, err := mock.New(mock.Config{MaxCharges: max})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	seq := 0
	base := heapInUse()
	chargeN(t, p, &seq, max)
	full := heapInUse() - base
	chargeN(t, p, &seq, 4*max)
	after := heapInUse() - base
	t.Logf("heap held: %d bytes at %d charges (%.0f bytes per charge), %d bytes after %d", full, max, float64(full)/max, after, seq)
	if got, want := p.Len(), max; got != want {
		t.Fatalf("Len=%d, want %d", got, want)
	}
	if got, want := p.Stats().Forgotten, 4*max; got != want {
		t.Fatalf("Forgotten=%d, want %d", got, want)
	}
	if after > full+full/4 {
		t.Fatalf("heap held after %d charges=%d bytes, more than 125%% of the %d held at %d", seq, after, full, max)
	}
	runtime.KeepAlive(p)
}

// BenchmarkChargeMemory charges fresh payments at the default bound and
// reports the heap the PSP holds per remembered charge (B/charge, after
// two collections): the mock's memory is about Config.MaxCharges times
// this.
func BenchmarkChargeMemory(b *testing.B) {
	p, err := mock.New(mock.Config{})
	if err != nil {
		b.Fatal(err)
	}
	_ = p.Close()
	seq := 0
	base := heapInUse()
	b.ReportAllocs()
	for b.Loop() {
		chargeN(b, p, &seq, 1)
	}
	b.StopTimer()
	held := heapInUse() - base
	b.ReportMetric(float64(held)/float64(p.Len()), "B/charge")
	b.ReportMetric(float64(p.Len()), "charges")
	runtime.KeepAlive(p)
}
