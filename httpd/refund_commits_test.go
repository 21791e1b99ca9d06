package httpd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/store/bolttest"
)

// TestServer_RefundCommits counts the write transactions of a refund over
// real HTTP and a real bbolt file, with the mock PSP: the key claimed in
// one, the PSP's answer finalized with the key's answer in the second. A
// replay writes nothing; a refund of a payment already refunded, under a
// new key, claims and answers the key in one transaction without calling
// the PSP; a refund of a payment not captured yet is answered from a read
// transaction. A request that died after its claim committed is resumed
// by the retry in two transactions, and the PSP, asked again under
// "refund-<payment_id>", refunds once.
func TestServer_RefundCommits(t *testing.T) {
	t.Parallel()
	d, cs := newCountingServer(t)
	psp := d.srv.Payments.(*finalize.Payments).Providers["mock"].(*mock.Provider)

	// create makes a mock payment; amount ending 00 is captured in the
	// PSP's answer, 03 is processing.
	create := func(order string, amount int64) string {
		t.Helper()
		a := d.do("POST", "/v1/payments", "application/json",
			`{"order_id":"`+order+`","amount":`+strconv.FormatInt(amount, 10)+`,"currency":"EUR","provider":"mock"}`,
			map[string]string{"Idempotency-Key": "create-" + order})
		if a.status != http.StatusCreated {
			t.Fatalf("create %s: status=%d: %s", order, a.status, a.body)
		}
		var p struct{ ID string }
		if err := json.Unmarshal([]byte(a.body), &p); err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	refund := func(id, key string) answer {
		t.Helper()
		return d.do("POST", "/v1/payments/"+id+"/refund", "", "", map[string]string{"Idempotency-Key": key})
	}
	// commits runs fn and returns the write transactions it committed.
	commits := func(fn func()) int64 {
		t.Helper()
		before := cs.N.Load()
		fn()
		return cs.N.Load() - before
	}
	wantRefunded := func(name string, a answer, replayed string) {
		t.Helper()
		var p struct{ Status string }
		if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != http.StatusOK || p.Status != "refunded" {
			t.Fatalf("%s: status=%d %s (%v), want 200 refunded", name, a.status, a.body, err)
		}
		if got := a.header.Get("Idempotent-Replayed"); got != replayed {
			t.Fatalf("%s: Idempotent-Replayed=%q, want %q", name, got, replayed)
		}
	}
	id := create("o-refund-commits", 1000)

	t.Run("OK", func(t *testing.T) {
		var a answer
		if got, want := commits(func() { a = refund(id, "refund-commits-1") }), int64(2); got != want {
			t.Errorf("write transactions of a refund=%d, want %d", got, want)
		}
		wantRefunded("refund", a, "")
		if c, _ := psp.Charge(finalize.ChargeKey(id)); c.Refunds != 1 {
			t.Fatalf("PSP refunds of the charge=%d, want 1", c.Refunds)
		}
		var rec pay.IdemRecord
		if err := cs.View(context.Background(), func(tx pay.Tx) (err error) {
			rec, err = tx.IdemKey(httpd.ScopedKey("refund", "", "refund-commits-1"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if rec.State != pay.IdemDone || rec.StatusCode != http.StatusOK || rec.PaymentID != id || len(rec.Body) != 0 {
			t.Fatalf("key record: state=%s status=%d payment=%s body=%d bytes, want done 200 %s and no body", rec.State, rec.StatusCode, rec.PaymentID, len(rec.Body), id)
		}
	})

	t.Run("Replay", func(t *testing.T) {
		var a answer
		if got, want := commits(func() { a = refund(id, "refund-commits-1") }), int64(0); got != want {
			t.Errorf("write transactions of a replayed refund=%d, want %d", got, want)
		}
		wantRefunded("replay", a, "true")
	})

	t.Run("AlreadyRefunded", func(t *testing.T) {
		var a answer
		if got, want := commits(func() { a = refund(id, "refund-commits-2") }), int64(1); got != want {
			t.Errorf("write transactions of a refund of a refunded payment under a new key=%d, want %d", got, want)
		}
		wantRefunded("refund of a refunded payment", a, "")
		// Its key holds the answer now: the retry is a replay.
		if got, want := commits(func() { a = refund(id, "refund-commits-2") }), int64(0); got != want {
			t.Errorf("write transactions of its replay=%d, want %d", got, want)
		}
		wantRefunded("its replay", a, "true")
	})

	t.Run("ErrNotCaptured", func(t *testing.T) {
		pid := create("o-refund-processing", 1003)
		var a answer
		if got, want := commits(func() { a = refund(pid, "refund-commits-3") }), int64(0); got != want {
			t.Errorf("write transactions of a refused refund=%d, want %d", got, want)
		}
		assertRefused(t, "refund of a processing payment", a, http.StatusConflict, pay.ECONFLICT)
	})

	t.Run("Resume", func(t *testing.T) {
		pid := create("o-refund-resume", 2000)
		ctx := context.Background()
		// A request claimed the key, the PSP refunded, and the process died
		// before the finalize committed.
		key := httpd.ScopedKey("refund", "", "refund-commits-4")
		fp := httpd.Fingerprint("POST", "/v1/payments/"+pid+"/refund", nil)
		if _, claim, err := (&finalize.Idempotency{Store: cs, Owner: "dead"}).Begin(ctx, key, fp); err != nil || claim != finalize.ClaimNew {
			t.Fatalf("claim: %v, %v", claim, err)
		}
		p, err := d.srv.Payments.Get(ctx, pid)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := psp.Refund(ctx, p, finalize.RefundKey(pid)); err != nil {
			t.Fatal(err)
		}

		// While the key's lock holds, the retry is told to wait.
		a := refund(pid, "refund-commits-4")
		if a.status != http.StatusConflict || a.errCode() != pay.EKEYINUSE {
			t.Fatalf("retry within the lock: status=%d: %s, want 409 %s", a.status, a.body, pay.EKEYINUSE)
		}
		d.clock.Add(finalize.DefaultIdemLock)
		if got, want := commits(func() { a = refund(pid, "refund-commits-4") }), int64(2); got != want {
			t.Errorf("write transactions of a resumed refund=%d, want %d", got, want)
		}
		wantRefunded("resumed refund", a, "")
		if c, _ := psp.Charge(finalize.ChargeKey(pid)); c.Refunds != 1 {
			t.Fatalf("PSP refunds of the charge=%d, want 1", c.Refunds)
		}
		if got, want := commits(func() { a = refund(pid, "refund-commits-4") }), int64(0); got != want {
			t.Errorf("write transactions of its replay=%d, want %d", got, want)
		}
		wantRefunded("replay of the resumed refund", a, "true")
	})
}

// BenchmarkRefund measures a refund over real HTTP on loopback and a real
// bbolt file, with the mock PSP: each op refunds, under a new key, a
// payment captured before the timer started. RawUpdate, the reference in
// the same run, is one store Update inserting a payment (one commit).
// Both report the write transactions per op (commits/op).
func BenchmarkRefund(b *testing.B) {
	ctx := context.Background()
	psp, err := mock.New(mock.Config{})
	if err != nil {
		b.Fatal(err)
	}
	_ = psp.Close() // it still answers; no webhook goroutine runs
	db := bolttest.MustOpen(b, nil)
	cs := &commitCounter{Store: db}
	fin := finalize.New(cs)
	providers := map[string]pay.Provider{"mock": psp}
	payments := &finalize.Payments{Store: cs, Finalizer: fin, Providers: providers, DefaultProvider: "mock"}
	srv := &httpd.Server{
		Addr: "127.0.0.1:0", Payments: payments, Events: payments, Ledger: payments,
		Idempotency: &finalize.Idempotency{Store: cs},
		Webhooks:    &finalize.Inbox{Store: cs, Finalizer: fin, Providers: providers},
	}
	if err := srv.Open(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	hc := &http.Client{Timeout: 10 * time.Second}
	per := func(b *testing.B, before int64) {
		b.ReportMetric(float64(cs.N.Load()-before)/float64(b.N), "commits/op")
	}

	b.Run("RawUpdate", func(b *testing.B) {
		before := cs.N.Load()
		for i := 0; b.Loop(); i++ {
			err := cs.Update(ctx, func(tx pay.Tx) error {
				now := tx.Now()
				return tx.InsertPayment(pay.Payment{ID: ids.Payment(now), OrderID: fmt.Sprint("raw-", i), Amount: 1000, Currency: "EUR",
					Provider: "mock", Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		per(b, before)
	})
	b.Run("Refund", func(b *testing.B) {
		pids := make([]string, b.N)
		for i := range pids {
			p, err := payments.Create(ctx, finalize.CreateRequest{OrderID: fmt.Sprint("o-", i), Amount: 1000, Currency: "EUR"}, "")
			if err != nil || p.Status != pay.Captured {
				b.Fatalf("create: %s (%v)", p.Status, err)
			}
			pids[i] = p.ID
		}
		before := cs.N.Load()
		b.ResetTimer()
		for i := range b.N {
			req, _ := http.NewRequest("POST", srv.URL()+"/v1/payments/"+pids[i]+"/refund", nil)
			req.Header.Set("Idempotency-Key", "bench-refund-"+pids[i])
			res, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("refund: status %d", res.StatusCode)
			}
		}
		b.StopTimer()
		per(b, before)
	})
}
