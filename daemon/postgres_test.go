package daemon_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
)

// TestE2E_PostgresTwoInstances: two paystate instances on one PostgreSQL
// database (storage.backend = "postgres") share everything: a create sent
// to the first with an idempotency key is replayed by the second with the
// same key, a webhook taken by the second captures the payment the first
// created, and the first reads it captured, its loyalty points credited
// once.
func TestE2E_PostgresTwoInstances(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	boot := func() *daemontest.Instance {
		return daemontest.Boot(t, func(c *config.Config) {
			c.Storage.Backend, c.Storage.DSN = "postgres", dsn
		})
	}
	a, b := boot(), boot()
	secret := a.Main.Config.Providers.Standard.WebhookSecret

	body := `{"order_id":"o-pg","amount":2500,"currency":"EUR","provider":"standard","customer":{"id":"cus_pg"}}`
	c := a.Create(body, "k-pg")
	if c.Status != 201 {
		t.Fatalf("create on a: %d %s", c.Status, c.Body)
	}
	id := c.Str("id")
	r := b.Create(body, "k-pg")
	if r.Status != 201 || r.Str("id") != id || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("same key on b: %d %s (replayed %q), want the replay of %s", r.Status, r.Body, r.Header.Get("Idempotent-Replayed"), id)
	}

	ev := eventBody("evt_pg_1", "payment.captured", id, "psp_pg_1")
	for i, in := range []*daemontest.Instance{b, a} { // the PSP redelivers to the other instance
		h := testkit.SignStandard(t, secret, "evt_pg_1", time.Now(), ev)
		if w := in.Do("POST", "/webhooks/standard", ev, h); w.Status != 200 {
			t.Fatalf("webhook %d: %d %s", i, w.Status, w.Body)
		}
	}
	if g := a.Do("GET", "/v1/payments/"+id, nil, nil); g.Str("status") != "captured" {
		t.Fatalf("on a after the webhook on b: %s", g.Body)
	}
	testkit.WaitFor(t, 20*time.Second, func() error {
		g := a.Do("GET", "/v1/customers/cus_pg", nil, nil)
		if g.Status != 200 || g.Num("points") != 25 {
			return fmt.Errorf("customer: %d %s, want 25 points", g.Status, g.Body)
		}
		return nil
	})
	ev2 := b.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
	if ev2.Status != 200 {
		t.Fatalf("events: %d %s", ev2.Status, ev2.Body)
	}
}
