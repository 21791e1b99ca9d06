package finalize_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store/bolttest"
)

// commitCounter is a real store that counts the write transactions that
// committed (testkit.CommitCounter).
type commitCounter = testkit.CommitCounter

// idemRecord reads a key's record; ENOTFOUND if there is none.
func idemRecord(t *testing.T, db pay.Store, key string) (rec pay.IdemRecord, err error) {
	t.Helper()
	err = db.View(context.Background(), func(tx pay.Tx) (err error) {
		rec, err = tx.IdemKey(key)
		return err
	})
	return rec, err
}

// TestPayments_RefundOnce counts the commits of a refund under an
// idempotency key on a real bbolt file with the mock PSP: two (the claim;
// the PSP's answer finalized with the key's answer), none for a replay, a
// reused key or a payment that is not captured, one for a payment already
// refunded (claimed and answered together, no PSP call) and one for an
// unknown payment (claimed, held for the caller to store the 404).
func TestPayments_RefundOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := bolttest.MustOpen(t, nil)
	cs := &commitCounter{Store: db}
	psp := newMock(t)
	svc := &finalize.Payments{Store: cs, Finalizer: finalize.New(cs), Providers: map[string]pay.Provider{"mock": psp}, DefaultProvider: "mock"}
	create := func(amount int64) pay.Payment {
		t.Helper()
		p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-refund", Amount: amount, Currency: "EUR"}, "")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func(k string) finalize.IdemKey {
		return finalize.IdemKey{Key: "refund:" + k, Fingerprint: "fp-" + k, Status: http.StatusOK}
	}
	p := create(1000) // captured in the PSP's answer

	t.Run("OK", func(t *testing.T) {
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, key("1")) }), int64(2); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Payment.Status != pay.Refunded || r.Claim != finalize.ClaimNew || r.Held {
			t.Fatalf("RefundOnce: status=%s claim=%v held=%v, want refunded, new, not held", r.Payment.Status, r.Claim, r.Held)
		}
		if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.Refunds != 1 {
			t.Fatalf("PSP refunds=%d, want 1", c.Refunds)
		}
		rec, err := idemRecord(t, db, key("1").Key)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != pay.IdemDone || rec.StatusCode != http.StatusOK || rec.PaymentID != p.ID {
			t.Fatalf("key record: state=%s status=%d payment=%s, want done 200 %s", rec.State, rec.StatusCode, rec.PaymentID, p.ID)
		}
	})

	t.Run("Replay", func(t *testing.T) {
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, key("1")) }), int64(0); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if err != nil || r.Claim != finalize.ClaimReplay || r.Record.PaymentID != p.ID {
			t.Fatalf("replay: claim=%v record payment=%s (%v), want a replay of %s", r.Claim, r.Record.PaymentID, err, p.ID)
		}
	})

	t.Run("ErrKeyReused", func(t *testing.T) {
		var err error
		k := key("1")
		k.Fingerprint = "another request"
		if got, want := cs.Commits(func() { _, err = svc.RefundOnce(ctx, p.ID, k) }), int64(0); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if got, want := pay.ErrorCode(err), pay.EKEYREUSED; got != want {
			t.Fatalf("ErrorCode=%q (%v), want %q", got, err, want)
		}
	})

	t.Run("AlreadyRefunded", func(t *testing.T) {
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, key("2")) }), int64(1); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if err != nil || r.Payment.Status != pay.Refunded || r.Held {
			t.Fatalf("RefundOnce: status=%s held=%v (%v), want refunded, not held", r.Payment.Status, r.Held, err)
		}
		if rec, err := idemRecord(t, db, key("2").Key); err != nil || rec.State != pay.IdemDone || rec.PaymentID != p.ID {
			t.Fatalf("key record: %+v (%v), want done for %s", rec, err, p.ID)
		}
		if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.Refunds != 1 {
			t.Fatalf("PSP refunds=%d, want 1", c.Refunds)
		}
	})

	t.Run("ErrNotCaptured", func(t *testing.T) {
		q := create(1003) // processing
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, q.ID, key("3")) }), int64(0); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if pay.ErrorCode(err) != pay.ECONFLICT || r.Held {
			t.Fatalf("RefundOnce: held=%v (%v), want ECONFLICT, not held", r.Held, err)
		}
		if _, err := idemRecord(t, db, key("3").Key); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Fatalf("key record: %v, want none", err)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, "pay_01ARZ3NDEKTSV4RRFFQ69G5FAV", key("4")) }), int64(1); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if pay.ErrorCode(err) != pay.ENOTFOUND || !r.Held {
			t.Fatalf("RefundOnce: held=%v (%v), want ENOTFOUND with the key held", r.Held, err)
		}
		if rec, err := idemRecord(t, db, key("4").Key); err != nil || rec.State != pay.IdemInFlight {
			t.Fatalf("key record: %+v (%v), want in flight", rec, err)
		}
	})
}

// TestPayments_RefundOnceResume: the claim committed, the PSP refunded,
// and the finalize failed (the process died there: nothing released the
// key). The retry in the next process takes the key over and finishes in
// two commits; the PSP, asked again under "refund-<payment_id>", refunds
// once.
func TestPayments_RefundOnceResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := bolttest.MustOpen(t, nil)
	psp := newMock(t)
	providers := map[string]pay.Provider{"mock": psp}

	// The first process: its fourth write (1, 2: the create; 3: the
	// claim; 4: the refund's finalize) fails.
	first := &commitCounter{Store: &failingStore{Store: db, failOn: 4}}
	svc := &finalize.Payments{Store: first, Finalizer: finalize.New(first), Providers: providers, DefaultProvider: "mock",
		Idempotency: &finalize.Idempotency{Store: first, Owner: "first", Exclusive: true}}
	p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-resume", Amount: 1000, Currency: "EUR"}, "")
	if err != nil || p.Status != pay.Captured {
		t.Fatalf("create: %s (%v), want captured", p.Status, err)
	}
	k := finalize.IdemKey{Key: "refund:resume", Fingerprint: "fp", Status: http.StatusOK}
	var r finalize.Refunded
	if got, want := first.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, k) }), int64(1); got != want {
		t.Errorf("commits of the failed refund=%d, want %d", got, want)
	}
	if err == nil || !r.Held {
		t.Fatalf("RefundOnce: held=%v (%v), want the injected failure with the key held", r.Held, err)
	}
	if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.Refunds != 1 || c.Status != pay.Refunded {
		t.Fatalf("PSP charge=%+v, want refunded once", c)
	}
	if rec, err := idemRecord(t, db, k.Key); err != nil || rec.State != pay.IdemInFlight || rec.PaymentID != p.ID {
		t.Fatalf("key record: %+v (%v), want in flight for %s", rec, err, p.ID)
	}

	// The next process retries with the same key.
	next := &commitCounter{Store: db}
	svc = &finalize.Payments{Store: next, Finalizer: finalize.New(next), Providers: providers, DefaultProvider: "mock",
		Idempotency: &finalize.Idempotency{Store: next, Owner: "next", Exclusive: true}}
	if got, want := next.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, k) }), int64(2); got != want {
		t.Errorf("commits of the resumed refund=%d, want %d", got, want)
	}
	if err != nil || r.Claim != finalize.ClaimResume || r.Payment.Status != pay.Refunded {
		t.Fatalf("resume: claim=%v status=%s (%v), want resume, refunded", r.Claim, r.Payment.Status, err)
	}
	if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.Refunds != 1 {
		t.Fatalf("PSP refunds=%d, want 1", c.Refunds)
	}
	if rec, err := idemRecord(t, db, k.Key); err != nil || rec.State != pay.IdemDone || rec.StatusCode != http.StatusOK {
		t.Fatalf("key record: %+v (%v), want done 200", rec, err)
	}
	if got, want := next.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, k) }), int64(0); got != want || r.Claim != finalize.ClaimReplay {
		t.Fatalf("the retry after: commits=%d claim=%v (%v), want %d and a replay", got, r.Claim, err, want)
	}
}
