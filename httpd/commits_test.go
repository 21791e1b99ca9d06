package httpd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/store"
)

// commitCounter is a real store that counts the write transactions that
// committed (testkit.CommitCounter).
type commitCounter = testkit.CommitCounter

// newCountingServer is newDashServerWith whose services all write through
// a commitCounter over the server's real bbolt file, with the mock PSP
// (no webhooks) as "mock".
func newCountingServer(t *testing.T) (*dashServer, *commitCounter) {
	t.Helper()
	psp, err := mock.New(mock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = psp.Close() })
	var cs *commitCounter
	d := newDashServerWith(t, func(s *httpd.Server) {
		old := s.Payments.(*finalize.Payments)
		inbox := s.Webhooks.(*finalize.Inbox)
		cs = &commitCounter{Store: old.Store}
		fin := finalize.New(cs)
		providers := map[string]pay.Provider{"standard": old.Providers["standard"], "mock": psp}
		payments := &finalize.Payments{Store: cs, Finalizer: fin, Providers: providers, DefaultProvider: "standard"}
		s.Payments, s.Events, s.Ledger = payments, payments, payments
		s.Webhooks = &finalize.Inbox{Store: cs, Finalizer: fin, Providers: providers, Now: inbox.Now}
	})
	return d, cs
}

// TestServer_CreateCommits: a create with the mock PSP, captured in its
// answer (amount ending 00), is two write transactions: the key claimed
// with the payment's insert, the key's answer stored with the PSP answer's
// finalize. Its record keeps the status code and the payment id, no body.
// A replay writes nothing.
func TestServer_CreateCommits(t *testing.T) {
	t.Parallel()
	d, cs := newCountingServer(t)
	create := func() answer {
		return d.do("POST", "/v1/payments", "application/json", `{"order_id":"o-commits","amount":1000,"currency":"EUR","provider":"mock"}`, map[string]string{"Idempotency-Key": "commits-1"})
	}

	a := create()
	if got, want := a.status, http.StatusCreated; got != want {
		t.Fatalf("create: status=%d, want %d: %s", got, want, a.body)
	}
	var p struct{ ID, Status string }
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || p.Status != "captured" {
		t.Fatalf("create: %s (%v), want captured", a.body, err)
	}
	if got, want := cs.N.Load(), int64(2); got != want {
		t.Fatalf("write transactions of a create=%d, want %d", got, want)
	}

	var rec pay.IdemRecord
	if err := cs.View(context.Background(), func(tx store.Tx) (err error) {
		rec, err = tx.IdemKey(httpd.ScopedKey("create", "commits-1"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if rec.State != pay.IdemDone || rec.StatusCode != http.StatusCreated || rec.PaymentID != p.ID || len(rec.Body) != 0 {
		t.Fatalf("key record: state=%s status=%d payment=%s body=%d bytes, want done 201 %s and no body", rec.State, rec.StatusCode, rec.PaymentID, len(rec.Body), p.ID)
	}

	before := cs.N.Load()
	r := create()
	if got, want := r.status, http.StatusCreated; got != want {
		t.Fatalf("replay: status=%d, want %d: %s", got, want, r.body)
	}
	if got, want := r.header.Get("Idempotent-Replayed"), "true"; got != want {
		t.Fatalf("Idempotent-Replayed=%q, want %q", got, want)
	}
	if got := cs.N.Load() - before; got != 0 {
		t.Fatalf("write transactions of a replay=%d, want 0", got)
	}
}

// TestServer_DuplicateWebhookCommits: a webhook is stored and applied in
// one write transaction; its redelivery is answered duplicate from a read
// transaction, with no write.
func TestServer_DuplicateWebhookCommits(t *testing.T) {
	t.Parallel()
	d, cs := newCountingServer(t)
	id := d.createPayment("")

	body := fmt.Sprintf(`{"id":"evt_dup","type":"payment.processing","created":%d,"data":{"payment_id":%q,"amount":1500,"currency":"EUR"}}`, d.clock.Now().Unix(), id)
	send := func() answer { return d.sendWebhook("evt_dup", "application/json", body) }
	var out struct{ Duplicate bool }
	for i, want := range []struct {
		dup     bool
		commits int64
	}{{false, 1}, {true, 0}} {
		before := cs.N.Load()
		a := send()
		if a.status != http.StatusOK {
			t.Fatalf("webhook %d: status=%d: %s", i, a.status, a.body)
		}
		if err := json.Unmarshal([]byte(a.body), &out); err != nil || out.Duplicate != want.dup {
			t.Fatalf("webhook %d: %s (%v), want duplicate=%v", i, a.body, err, want.dup)
		}
		if got := cs.N.Load() - before; got != want.commits {
			t.Fatalf("webhook %d (duplicate=%v): write transactions=%d, want %d", i, want.dup, got, want.commits)
		}
		var p pay.Payment
		if err := cs.View(context.Background(), func(tx store.Tx) (err error) { p, err = tx.Payment(id); return err }); err != nil {
			t.Fatal(err)
		}
		if p.Status != pay.Processing {
			t.Fatalf("webhook %d: payment is %s, want processing: applied in that transaction", i, p.Status)
		}
	}
}
