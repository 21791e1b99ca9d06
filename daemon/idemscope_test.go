package daemon_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// rotatedKey is the second API key of TestE2E_IdempotencyMerchantScope:
// the key a client switches to in a rotation.
const rotatedKey = "test-api-key-rotated-fedcba9876543210"

// TestE2E_IdempotencyMerchantScope: Idempotency-Keys are scoped by
// operation and merchant, not by API key, on both backends. A create and
// a refund retried with another API key of the same paystate (a key
// rotation) are replayed, never made twice; a key stored before the
// change, under its old name "<op>:<16 hex digits of the API key's
// SHA-256>:<key>", still replays for the API key it was sent with, and
// still refuses another body; a refund made under its old name replays.
func TestE2E_IdempotencyMerchantScope(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"bolt", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			in := daemontest.Boot(t, func(c *config.Config) {
				c.Auth.APIKeys = []string{daemontest.APIKey, rotatedKey}
				if backend == "postgres" {
					c.Storage.Backend, c.Storage.DSN = "postgres", pgtest.Schema(t)
				}
			})
			testIdempotencyRotation(t, in)
			testIdempotencyOldName(t, in)
		})
	}
}

// testIdempotencyRotation retries a create and a refund with the rotated
// API key.
func testIdempotencyRotation(t *testing.T, in *daemontest.Instance) {
	t.Helper()
	rotated := func(key string) map[string]string {
		return map[string]string{"Idempotency-Key": key, "Authorization": "Bearer " + rotatedKey}
	}
	body := []byte(`{"order_id":"o-rot","amount":5000,"currency":"EUR"}`)
	c := in.Create(string(body), "rot-create")
	if c.Status != 201 || c.Str("status") != "captured" {
		t.Fatalf("create: %d %s", c.Status, c.Body)
	}
	id := c.Str("id")
	r := in.Do("POST", "/v1/payments", body, rotated("rot-create"))
	if got, want := r.Str("id"), id; r.Status != 201 || got != want {
		t.Fatalf("create retried with another API key: %d %s, want the replay of %s", r.Status, r.Body, id)
	}
	if got, want := r.Header.Get("Idempotent-Replayed"), "true"; got != want {
		t.Fatalf("create retried with another API key: Idempotent-Replayed=%q, want %q", got, want)
	}
	if got, want := paymentsOfOrder(t, in, "o-rot"), 1; got != want {
		t.Fatalf("payments of the order=%d, want %d", got, want)
	}
	if got, want := in.Main.Mock.Stats().Charges, 1; got < want {
		t.Fatalf("PSP charges=%d, want at least %d", got, want)
	}

	path := "/v1/payments/" + id + "/refund"
	refund := []byte(`{"amount":1000}`)
	rf := in.Do("POST", path, refund, map[string]string{"Idempotency-Key": "rot-refund"})
	if rf.Status != 201 {
		t.Fatalf("refund: %d %s", rf.Status, rf.Body)
	}
	again := in.Do("POST", path, refund, rotated("rot-refund"))
	if got, want := again.Str("id"), rf.Str("id"); again.Status != 201 || got != want {
		t.Fatalf("refund retried with another API key: %d %s, want the replay of %s", again.Status, again.Body, want)
	}
	g := in.Do("GET", "/v1/payments/"+id, nil, nil)
	if got, want := g.Num("amount_refunded"), 1000.0; got != want {
		t.Fatalf("amount_refunded=%v, want %v: %s", got, want, g.Body)
	}
	list := in.Do("GET", path+"s", nil, nil)
	if data, _ := list.JSON["data"].([]any); len(data) != 1 {
		t.Fatalf("refunds of the payment: %s, want one", list.Body)
	}
}

// testIdempotencyOldName stores a finished create under the name keys had
// before they were scoped by merchant, and retries it.
func testIdempotencyOldName(t *testing.T, in *daemontest.Instance) {
	t.Helper()
	ctx := context.Background()
	body := []byte(`{"order_id":"o-old","amount":2000,"currency":"EUR"}`)
	first := in.Create(`{"order_id":"o-old","amount":2000,"currency":"EUR"}`, "made-under-another-key")
	if first.Status != 201 {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	h := sha256.Sum256([]byte(daemontest.APIKey))
	oldName := "create:" + hex.EncodeToString(h[:8]) + ":old-1"
	now := time.Now().UTC()
	err := in.Main.Store.Update(ctx, func(tx store.Tx) error {
		return tx.PutIdemKey(pay.IdemRecord{
			Key: oldName, Fingerprint: httpd.Fingerprint("POST", "/v1/payments", body),
			State: pay.IdemDone, StatusCode: 201, PaymentID: first.Str("id"),
			CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	r := in.Create(string(body), "old-1")
	if got, want := r.Str("id"), first.Str("id"); r.Status != 201 || got != want {
		t.Fatalf("retry of a key stored under its old name: %d %s, want the replay of %s", r.Status, r.Body, want)
	}
	if got, want := r.Header.Get("Idempotent-Replayed"), "true"; got != want {
		t.Fatalf("Idempotent-Replayed=%q, want %q", got, want)
	}
	if got, want := paymentsOfOrder(t, in, "o-old"), 1; got != want {
		t.Fatalf("payments of the order=%d, want %d", got, want)
	}
	other := in.Create(`{"order_id":"o-old","amount":2001,"currency":"EUR"}`, "old-1")
	if got, want := other.ErrCode(), "idempotency_key_reused"; other.Status != 422 || got != want {
		t.Fatalf("another body under a key stored under its old name: %d %s, want 422 %s", other.Status, other.Body, want)
	}

	// A refund made under the old name (as the binary before did: the
	// refund names its key) is replayed by the retry, not made again.
	path := "/v1/payments/" + first.Str("id") + "/refund"
	refund := []byte(`{"amount":500}`)
	oldRefund := "refund:" + hex.EncodeToString(h[:8]) + ":old-r"
	made, err := in.Main.Payments.RefundOnce(ctx, first.Str("id"), finalize.RefundRequest{Amount: 500},
		finalize.IdemKey{Key: oldRefund, Fingerprint: httpd.Fingerprint("POST", path, refund), Status: 201})
	if err != nil {
		t.Fatal(err)
	}
	rf := in.Do("POST", path, refund, map[string]string{"Idempotency-Key": "old-r"})
	if got, want := rf.Str("id"), made.Refund.ID; rf.Status != 201 || got != want {
		t.Fatalf("retry of a refund stored under its old name: %d %s, want the replay of %s", rf.Status, rf.Body, want)
	}
	if g := in.Do("GET", "/v1/payments/"+first.Str("id"), nil, nil); g.Num("amount_refunded") != 500 {
		t.Fatalf("after the retried refund: %s, want 500 refunded", g.Body)
	}
}

// paymentsOfOrder counts the stored payments of an order.
func paymentsOfOrder(t *testing.T, in *daemontest.Instance, orderID string) int {
	t.Helper()
	var list []pay.Payment
	if err := in.Main.Store.View(context.Background(), func(tx store.Tx) (err error) {
		list, _, err = tx.ListPayments(pay.PaymentFilter{OrderID: orderID})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return len(list)
}
