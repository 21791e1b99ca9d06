package finalize_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// commitCounter is a real store that counts the write transactions that
// committed (testkit.CommitCounter).
type commitCounter = testkit.CommitCounter

// idemRecord reads a key's record; ENOTFOUND if there is none.
func idemRecord(t *testing.T, db store.Store, key string) (rec pay.IdemRecord, err error) {
	t.Helper()
	err = db.View(context.Background(), func(tx store.Tx) (err error) {
		rec, err = tx.IdemKey(key)
		return err
	})
	return rec, err
}

// TestPayments_RefundOnce counts the commits of a refund under an
// idempotency key on a real bbolt file with the mock PSP: two (the claim
// with the refund's creation; the PSP's answer finalized with the key's
// answer), none for a replay, a reused key, a payment that is not
// captured or a refund that does not fit (the key is not kept: the answer
// is about now), and one for an unknown payment (claimed, held for the
// caller to store the 404).
func TestPayments_RefundOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := bolttest.MustOpen(t, nil)
	cs := &commitCounter{Store: db}
	psp := newMock(t)
	svc := &finalize.Payments{Store: cs, Finalizer: finalize.New(cs), Providers: map[string]pay.Provider{"mock": psp}, DefaultProvider: "mock"}
	create := func(amount int64) pay.Payment {
		t.Helper()
		p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-refund", Amount: amount, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func(k string) finalize.IdemKey {
		return finalize.IdemKey{Key: "refund:" + k, Fingerprint: "fp-" + k, Status: http.StatusCreated, Refusal: refusal}
	}
	all := finalize.RefundRequest{}
	p := create(1000) // captured in the PSP's answer

	t.Run("OK", func(t *testing.T) {
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, all, key("1")) }), int64(2); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Payment.Status != pay.Refunded || r.Claim != finalize.ClaimNew {
			t.Fatalf("RefundOnce: status=%s claim=%v, want refunded, new", r.Payment.Status, r.Claim)
		}
		if r.Refund.Status != pay.RefundSucceeded || r.Refund.Amount != 1000 || r.Payment.AmountRefunded != 1000 {
			t.Fatalf("refund %+v, amount_refunded %d; want 1000 succeeded", r.Refund, r.Payment.AmountRefunded)
		}
		if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.Refunds != 1 {
			t.Fatalf("PSP refunds=%d, want 1", c.Refunds)
		}
		rec, err := idemRecord(t, db, key("1").Key)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != pay.IdemDone || rec.StatusCode != http.StatusCreated || rec.PaymentID != p.ID {
			t.Fatalf("key record: state=%s status=%d payment=%s, want done 201 %s", rec.State, rec.StatusCode, rec.PaymentID, p.ID)
		}
	})

	t.Run("Replay", func(t *testing.T) {
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, all, key("1")) }), int64(0); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if err != nil || r.Claim != finalize.ClaimReplay || r.Record.PaymentID != p.ID || r.Refund.PaymentID != p.ID {
			t.Fatalf("replay: claim=%v record payment=%s refund %+v (%v), want a replay of %s", r.Claim, r.Record.PaymentID, r.Refund, err, p.ID)
		}
	})

	t.Run("ErrKeyReused", func(t *testing.T) {
		var err error
		k := key("1")
		k.Fingerprint = "another request"
		if got, want := cs.Commits(func() { _, err = svc.RefundOnce(ctx, p.ID, all, k) }), int64(0); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if got, want := pay.ErrorCode(err), pay.EKEYREUSED; got != want {
			t.Fatalf("ErrorCode=%q (%v), want %q", got, err, want)
		}
	})

	t.Run("ErrAlreadyRefunded", func(t *testing.T) {
		var err error
		if got, want := cs.Commits(func() { _, err = svc.RefundOnce(ctx, p.ID, all, key("2")) }), int64(0); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if pay.ErrorCode(err) != pay.ECONFLICT {
			t.Fatalf("RefundOnce: %v, want ECONFLICT", err)
		}
		if _, err := idemRecord(t, db, key("2").Key); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Fatalf("key record: %v, want none", err)
		}
		if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.Refunds != 1 {
			t.Fatalf("PSP refunds=%d, want 1", c.Refunds)
		}
	})

	t.Run("Partial", func(t *testing.T) {
		q := create(1000)
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() {
			r, err = svc.RefundOnce(ctx, q.ID, finalize.RefundRequest{Amount: 300, Reason: "one item"}, key("p1"))
		}), int64(2); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if err != nil || r.Payment.Status != pay.Captured || r.Payment.AmountRefunded != 300 || r.Refund.Reason != "one item" {
			t.Fatalf("RefundOnce 300: %+v %+v (%v), want captured with 300 refunded", r.Payment, r.Refund, err)
		}
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, q.ID, finalize.RefundRequest{Amount: 800}, key("p2")) }), int64(0); got != want {
			t.Errorf("commits of a refund that does not fit=%d, want %d", got, want)
		}
		if pay.ErrorCode(err) != pay.ERefundExceeds {
			t.Fatalf("RefundOnce 800: %v, want %s", err, pay.ERefundExceeds)
		}
		if _, err := idemRecord(t, db, key("p2").Key); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Fatalf("key record of the refused refund: %v, want none", err)
		}
		if r, err = svc.RefundOnce(ctx, q.ID, all, key("p3")); err != nil || r.Refund.Amount != 700 || r.Payment.Status != pay.Refunded {
			t.Fatalf("RefundOnce of the rest: %+v %+v (%v), want 700 and refunded", r.Refund, r.Payment, err)
		}
	})

	t.Run("ErrNotCaptured", func(t *testing.T) {
		q := create(1003) // processing
		var err error
		if got, want := cs.Commits(func() { _, err = svc.RefundOnce(ctx, q.ID, all, key("3")) }), int64(0); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if pay.ErrorCode(err) != pay.ECONFLICT {
			t.Fatalf("RefundOnce: %v, want ECONFLICT", err)
		}
		if _, err := idemRecord(t, db, key("3").Key); pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Fatalf("key record: %v, want none", err)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		// A final answer: stored on the key in one commit, and replayed.
		const unknown = "pay_01ARZ3NDEKTSV4RRFFQ69G5FAV"
		var r finalize.Refunded
		var err error
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, unknown, all, key("4")) }), int64(1); got != want {
			t.Errorf("commits=%d, want %d", got, want)
		}
		if pay.ErrorCode(err) != pay.ENOTFOUND {
			t.Fatalf("RefundOnce: %v, want ENOTFOUND", err)
		}
		if rec, err := idemRecord(t, db, key("4").Key); err != nil || rec.State != pay.IdemDone || rec.StatusCode != http.StatusNotFound {
			t.Fatalf("key record: %+v (%v), want done 404", rec, err)
		}
		if got, want := cs.Commits(func() { r, err = svc.RefundOnce(ctx, unknown, all, key("4")) }), int64(0); got != want {
			t.Errorf("commits of the replay=%d, want %d", got, want)
		}
		if err != nil || r.Claim != finalize.ClaimReplay || r.Record.StatusCode != http.StatusNotFound {
			t.Fatalf("replay: claim=%v record %+v (%v), want the stored 404", r.Claim, r.Record, err)
		}
	})
}

// refusal is the answer of a failed request as an adapter stores it: a
// status code (404 for ENOTFOUND, 409 for any other) and the code.
func refusal(err error) (int, []byte) {
	if pay.ErrorCode(err) == pay.ENOTFOUND {
		return http.StatusNotFound, []byte(pay.ENOTFOUND)
	}
	return http.StatusConflict, []byte(pay.ErrorCode(err))
}

// TestPayments_RefundOnceResume: the claim committed, the PSP refunded,
// and the finalize failed (the process died there: nothing released the
// key). The retry in the next process takes the key over, finds the
// refund by it and finishes in two commits; the PSP, asked again under
// "refund-<refund_id>", refunds once.
func TestPayments_RefundOnceResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := bolttest.MustOpen(t, nil)
	psp := newMock(t)
	providers := map[string]pay.Provider{"mock": psp}

	// The first process dies at its fourth write (1, 2: the create; 3:
	// the claim; 4: the refund's finalize): nothing after it is written.
	first := &commitCounter{Store: &failingStore{Store: db, failOn: 4, died: true}}
	svc := &finalize.Payments{Store: first, Finalizer: finalize.New(first), Providers: providers, DefaultProvider: "mock",
		Idempotency: &finalize.Idempotency{Store: first, Owner: "first", Exclusive: true}}
	p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-resume", Amount: 1000, Currency: "EUR"})
	if err != nil || p.Status != pay.Captured {
		t.Fatalf("create: %s (%v), want captured", p.Status, err)
	}
	k := finalize.IdemKey{Key: "refund:resume", Fingerprint: "fp", Status: http.StatusCreated}
	var r finalize.Refunded
	if got, want := first.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, finalize.RefundRequest{}, k) }), int64(1); got != want {
		t.Errorf("commits of the failed refund=%d, want %d", got, want)
	}
	if err == nil {
		t.Fatal("RefundOnce: no error, want the injected failure")
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
	if got, want := next.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, finalize.RefundRequest{}, k) }), int64(2); got != want {
		t.Errorf("commits of the resumed refund=%d, want %d", got, want)
	}
	if err != nil || r.Claim != finalize.ClaimResume || r.Payment.Status != pay.Refunded || r.Refund.Status != pay.RefundSucceeded {
		t.Fatalf("resume: claim=%v status=%s refund %+v (%v), want resume, refunded", r.Claim, r.Payment.Status, r.Refund, err)
	}
	if refunds, err := svc.Refunds(ctx, p.ID); err != nil || len(refunds) != 1 {
		t.Fatalf("refunds %+v (%v), want the one refund", refunds, err)
	}
	if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.Refunds != 1 {
		t.Fatalf("PSP refunds=%d, want 1", c.Refunds)
	}
	if rec, err := idemRecord(t, db, k.Key); err != nil || rec.State != pay.IdemDone || rec.StatusCode != http.StatusCreated {
		t.Fatalf("key record: %+v (%v), want done 201", rec, err)
	}
	if got, want := next.Commits(func() { r, err = svc.RefundOnce(ctx, p.ID, finalize.RefundRequest{}, k) }), int64(0); got != want || r.Claim != finalize.ClaimReplay {
		t.Fatalf("the retry after: commits=%d claim=%v (%v), want %d and a replay", got, r.Claim, err, want)
	}
}
