package httpd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// failingUpdates is a store whose Updates from number failOn (from 1) on
// fail without running: a process that died before that commit.
type failingUpdates struct {
	store.Store
	n      atomic.Int32
	failOn int32
}

func (f *failingUpdates) Update(ctx context.Context, fn func(store.Tx) error) error {
	if f.n.Add(1) >= f.failOn {
		return errors.New("the process died")
	}
	return f.Store.Update(ctx, fn)
}

// TestServer_RefundCommits counts the write transactions of a refund over
// real HTTP and a real bbolt file, with the mock PSP: the key claimed with
// the refund's creation in one, the PSP's answer finalized with the key's
// answer in the second, 201 with the refund. A replay writes nothing and
// answers the same refund; a refund that does not fit in what is left, of
// a payment refunded already or not captured yet, is answered 409 from a
// read transaction. A request that died after its claim committed is
// resumed by the retry in two transactions, and the PSP, asked again
// under "refund-<refund_id>", refunds once.
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
	refund := func(id, key, body string) answer {
		t.Helper()
		ct := ""
		if body != "" {
			ct = "application/json"
		}
		return d.do("POST", "/v1/payments/"+id+"/refund", ct, body, map[string]string{"Idempotency-Key": key})
	}
	// commits runs fn and returns the write transactions it committed.
	commits := func(fn func()) int64 {
		t.Helper()
		before := cs.N.Load()
		fn()
		return cs.N.Load() - before
	}
	type refundBody struct {
		ID, PaymentID, Status string
		Amount                int64
	}
	wantRefund := func(name string, a answer, replayed string, amount int64) refundBody {
		t.Helper()
		var r struct {
			ID        string `json:"id"`
			PaymentID string `json:"payment_id"`
			Status    string `json:"status"`
			Amount    int64  `json:"amount"`
		}
		if err := json.Unmarshal([]byte(a.body), &r); err != nil || a.status != http.StatusCreated || r.Status != "succeeded" || r.Amount != amount || !ids.ValidRefund(r.ID) {
			t.Fatalf("%s: status=%d %s (%v), want 201 with a refund of %d succeeded", name, a.status, a.body, err, amount)
		}
		if got := a.header.Get("Idempotent-Replayed"); got != replayed {
			t.Fatalf("%s: Idempotent-Replayed=%q, want %q", name, got, replayed)
		}
		return refundBody{r.ID, r.PaymentID, r.Status, r.Amount}
	}
	id := create("o-refund-commits", 1000)
	var first refundBody

	t.Run("OK", func(t *testing.T) {
		var a answer
		if got, want := commits(func() { a = refund(id, "refund-commits-1", "") }), int64(2); got != want {
			t.Errorf("write transactions of a refund=%d, want %d", got, want)
		}
		first = wantRefund("refund", a, "", 1000)
		if c, _ := psp.Charge(finalize.ChargeKey(id)); c.Refunds != 1 {
			t.Fatalf("PSP refunds of the charge=%d, want 1", c.Refunds)
		}
		var rec pay.IdemRecord
		if err := cs.View(context.Background(), func(tx store.Tx) (err error) {
			rec, err = tx.IdemKey(httpd.ScopedKey("refund", "refund-commits-1"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if rec.State != pay.IdemDone || rec.StatusCode != http.StatusCreated || rec.PaymentID != id || len(rec.Body) != 0 {
			t.Fatalf("key record: state=%s status=%d payment=%s body=%d bytes, want done 201 %s and no body", rec.State, rec.StatusCode, rec.PaymentID, len(rec.Body), id)
		}
	})

	t.Run("Replay", func(t *testing.T) {
		var a answer
		if got, want := commits(func() { a = refund(id, "refund-commits-1", "") }), int64(0); got != want {
			t.Errorf("write transactions of a replayed refund=%d, want %d", got, want)
		}
		if r := wantRefund("replay", a, "true", 1000); r.ID != first.ID {
			t.Fatalf("replay answered refund %s, the first answer %s", r.ID, first.ID)
		}
	})

	t.Run("ErrAlreadyRefunded", func(t *testing.T) {
		var a answer
		if got, want := commits(func() { a = refund(id, "refund-commits-2", "") }), int64(0); got != want {
			t.Errorf("write transactions of a refund of a refunded payment=%d, want %d", got, want)
		}
		assertRefused(t, "refund of a refunded payment", a, http.StatusConflict, pay.ECONFLICT)
	})

	t.Run("Partial", func(t *testing.T) {
		pid := create("o-refund-partial", 1000)
		var a answer
		if got, want := commits(func() { a = refund(pid, "refund-partial-1", `{"amount":300,"reason":"one item"}`) }), int64(2); got != want {
			t.Errorf("write transactions of a partial refund=%d, want %d", got, want)
		}
		wantRefund("partial refund", a, "", 300)
		if got, want := commits(func() { a = refund(pid, "refund-partial-2", `{"amount":800}`) }), int64(0); got != want {
			t.Errorf("write transactions of a refund that does not fit=%d, want %d", got, want)
		}
		assertRefused(t, "refund of more than is left", a, http.StatusConflict, pay.ERefundExceeds)
		v := d.do("GET", "/v1/payments/"+pid, "", "", nil)
		var p struct {
			Status           string `json:"status"`
			AmountRefunded   int64  `json:"amount_refunded"`
			AmountRefundable int64  `json:"amount_refundable"`
		}
		if err := json.Unmarshal([]byte(v.body), &p); err != nil || p.Status != "captured" || p.AmountRefunded != 300 || p.AmountRefundable != 700 {
			t.Fatalf("payment after a partial refund: %s (%v), want captured, 300 refunded, 700 refundable", v.body, err)
		}
		l := d.do("GET", "/v1/payments/"+pid+"/refunds", "", "", nil)
		var list struct {
			Data []struct {
				Amount int64  `json:"amount"`
				Reason string `json:"reason"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(l.body), &list); err != nil || l.status != http.StatusOK || len(list.Data) != 1 || list.Data[0].Reason != "one item" {
			t.Fatalf("refunds: %d %s (%v), want the one refund", l.status, l.body, err)
		}
		if a := refund(pid, "refund-partial-bad", `{"amount":300,"extra":1}`); a.status != http.StatusBadRequest {
			t.Fatalf("refund with an unknown field: status=%d %s, want 400", a.status, a.body)
		}
		// Only an absent amount means the rest: null, 0, a string or a
		// fraction is refused naming the key, and nothing is refunded.
		for i, bad := range []string{`{"amount":null}`, `{"amount":null,"reason":"whole"}`, `{"reason":"x","amount":null}`,
			`{"amount":0}`, `{"amount":-5}`, `{"amount":"300"}`, `{"amount":""}`, `{"amount":3.5}`, `{"amount":true}`, `{"amount":{}}`} {
			a := refund(pid, "refund-partial-bad-"+strconv.Itoa(i), bad)
			if a.status != http.StatusBadRequest || a.errCode() != httpd.CodeInvalidRequest || a.errParam() != "amount" {
				t.Fatalf("refund %s: status=%d %s, want 400 %s with param amount", bad, a.status, a.body, httpd.CodeInvalidRequest)
			}
		}
		if v := d.do("GET", "/v1/payments/"+pid, "", "", nil); !strings.Contains(v.body, `"amount_refundable":700`) {
			t.Fatalf("payment after refused refunds: %s, want 700 still refundable", v.body)
		}
	})

	t.Run("ErrNotCaptured", func(t *testing.T) {
		pid := create("o-refund-processing", 1003)
		var a answer
		if got, want := commits(func() { a = refund(pid, "refund-commits-3", "") }), int64(0); got != want {
			t.Errorf("write transactions of a refused refund=%d, want %d", got, want)
		}
		assertRefused(t, "refund of a processing payment", a, http.StatusConflict, pay.ECONFLICT)
	})

	t.Run("Resume", func(t *testing.T) {
		pid := create("o-refund-resume", 2000)
		ctx := context.Background()
		// A request claimed the key with its refund, the PSP refunded,
		// and the process died before the finalize committed.
		dead := &failingUpdates{Store: cs, failOn: 2}
		svc := d.srv.Payments.(*finalize.Payments)
		deadSvc := &finalize.Payments{Store: dead, Finalizer: finalize.New(dead), Providers: svc.Providers, DefaultProvider: "mock",
			Idempotency: &finalize.Idempotency{Store: dead, Owner: "dead"}}
		key := httpd.ScopedKey("refund", "refund-commits-4")
		fp := httpd.Fingerprint("POST", "/v1/payments/"+pid+"/refund", nil)
		if _, err := deadSvc.RefundOnce(ctx, pid, finalize.RefundRequest{}, finalize.IdemKey{Key: key, Fingerprint: fp, Status: http.StatusCreated}); err == nil {
			t.Fatal("the dying request: no error, want its failure with the key held")
		}
		if c, _ := psp.Charge(finalize.ChargeKey(pid)); c.Refunds != 1 {
			t.Fatalf("PSP refunds of the charge=%d, want 1", c.Refunds)
		}

		// While the key's lock holds, the retry is told to wait.
		a := refund(pid, "refund-commits-4", "")
		if a.status != http.StatusConflict || a.errCode() != pay.EKEYINUSE {
			t.Fatalf("retry within the lock: status=%d: %s, want 409 %s", a.status, a.body, pay.EKEYINUSE)
		}
		d.clock.Add(finalize.DefaultIdemLock)
		if got, want := commits(func() { a = refund(pid, "refund-commits-4", "") }), int64(2); got != want {
			t.Errorf("write transactions of a resumed refund=%d, want %d", got, want)
		}
		resumed := wantRefund("resumed refund", a, "", 2000)
		if c, _ := psp.Charge(finalize.ChargeKey(pid)); c.Refunds != 1 {
			t.Fatalf("PSP refunds of the charge=%d, want 1", c.Refunds)
		}
		if got, want := commits(func() { a = refund(pid, "refund-commits-4", "") }), int64(0); got != want {
			t.Errorf("write transactions of its replay=%d, want %d", got, want)
		}
		if r := wantRefund("replay of the resumed refund", a, "true", 2000); r.ID != resumed.ID {
			t.Fatalf("replay answered refund %s, the resumed one %s", r.ID, resumed.ID)
		}
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
		Webhooks: &finalize.Inbox{Store: cs, Finalizer: fin, Providers: providers},
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
			err := cs.Update(ctx, func(tx store.Tx) error {
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
			p, err := payments.Create(ctx, finalize.CreateRequest{OrderID: fmt.Sprint("o-", i), Amount: 1000, Currency: "EUR"})
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
			if res.StatusCode != http.StatusCreated {
				b.Fatalf("refund: status %d", res.StatusCode)
			}
		}
		b.StopTimer()
		per(b, before)
	})
}
