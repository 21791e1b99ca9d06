package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// TestE2E_IdempotencyCrashResume: a process was killed after it stored the
// payment and sent the charge, before the PSP's answer was recorded. The
// database holds exactly what such a crash leaves behind: the payment in
// created and the idempotency key in flight, owned by the dead process. The
// client's retry with the same key finishes the request instead of
// repeating it, and the PSP sees the same derived key, so it charges once.
func TestE2E_IdempotencyCrashResume(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	ctx := context.Background()
	body := []byte(`{"order_id":"o-crash","amount":1000,"currency":"EUR"}`)

	// The state a crash midway leaves.
	now := time.Now().UTC()
	p := pay.Payment{ID: ids.Payment(now), OrderID: "o-crash", Amount: 1000, Currency: "EUR",
		Provider: "mock", Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now}
	err := in.Main.Store.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertPayment(p); err != nil {
			return err
		}
		if err := tx.AppendStep(pay.Step{PaymentID: p.ID, At: now, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1}); err != nil {
			return err
		}
		return tx.PutIdemKey(pay.IdemRecord{
			Key: httpd.ScopedKey("create", "crash-1"), Fingerprint: httpd.Fingerprint("POST", "/v1/payments", body),
			State: pay.IdemInFlight, Owner: "a-process-that-died", LockedUntil: now.Add(time.Minute),
			PaymentID: p.ID, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The charge reached the PSP before the crash. Its webhook is lost
	// (nothing listens at that address), so only the retry can finish the
	// payment, through the PSP's answer to the same key.
	in.Main.Mock.SetWebhookURL("http://127.0.0.1:1/webhooks/mock")
	if _, err := in.Main.Mock.Create(ctx, p, "charge-"+p.ID); err != nil {
		t.Fatal(err)
	}

	r := in.Create(string(body), "crash-1")
	if got, want := r.Status, 201; got != want {
		t.Fatalf("retry: status=%d, want %d: %s", got, want, r.Body)
	}
	if got, want := r.Str("id"), p.ID; got != want {
		t.Fatalf("retry made payment %s, want the stored %s", got, want)
	}
	if got, want := r.Str("status"), "captured"; got != want {
		t.Fatalf("retry: status=%s, want %s", got, want)
	}
	if got := r.Header.Get("Idempotent-Replayed"); got != "" {
		t.Fatalf("a resumed request is not a replay: Idempotent-Replayed=%q", got)
	}
	if got, want := in.Main.Mock.Charges("charge-"+p.ID), 1; got != want {
		t.Fatalf("PSP charges=%d, want %d", got, want)
	}
	if st := in.Main.Mock.Stats(); st.Charges != 1 || st.Replays != 1 {
		t.Fatalf("PSP stats=%+v, want one charge and one replay of it", st)
	}

	// Now finished: the next retry is a replay.
	again := in.Create(string(body), "crash-1")
	if got, want := again.Header.Get("Idempotent-Replayed"), "true"; got != want {
		t.Fatalf("Idempotent-Replayed=%q, want %q", got, want)
	}
	var list []pay.Payment
	if err := in.Main.Store.View(ctx, func(tx store.Tx) (err error) {
		list, _, err = tx.ListPayments(pay.PaymentFilter{OrderID: "o-crash"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := len(list), 1; got != want {
		t.Fatalf("payments for the order=%d, want %d", got, want)
	}
}
