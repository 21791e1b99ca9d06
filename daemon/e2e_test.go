package daemon_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

// eventBody is a Standard Webhooks event body of the given type, created now.
func eventBody(id, typ, paymentID, ref string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"provider_ref":%q}}`,
		id, typ, time.Now().Unix(), paymentID, ref))
}

// assertNoSecretWhenFinal fails if a payment response outside created,
// processing and requires_action carries a client secret or redirect URL.
func assertNoSecretWhenFinal(t *testing.T, r daemontest.Response) {
	t.Helper()
	switch r.Str("status") {
	case "created", "processing", "requires_action", "":
		return
	}
	for _, k := range []string{"client_secret", "redirect_url"} {
		if _, ok := r.JSON[k]; ok {
			t.Errorf("%s present in a response for a %s payment: %s", k, r.Str("status"), r.Body)
		}
	}
}

func TestE2E_MockPaymentLifecycle(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)

	for _, tc := range []struct {
		amount int
		want   string
	}{
		{1000, "captured"}, {1001, "failed"}, {1002, "captured"}, {1003, "captured"}, {1099, "captured"},
	} {
		r := in.Create(fmt.Sprintf(`{"order_id":"o-%d","amount":%d,"currency":"EUR","customer":{"id":"c1","email":"c1@example.com"}}`, tc.amount, tc.amount), fmt.Sprintf("k-%d", tc.amount))
		if got, want := r.Status, 201; got != want {
			t.Fatalf("create %d: status=%d, want %d: %s", tc.amount, got, want, r.Body)
		}
		assertNoSecretWhenFinal(t, r)
		id := r.Str("id")
		if !strings.HasPrefix(id, "pay_") || len(id) != 30 {
			t.Fatalf("id=%q, want pay_ + 26-char ULID", id)
		}
		testkit.WaitFor(t, 10*time.Second, func() error {
			g := in.Do("GET", "/v1/payments/"+id, nil, nil)
			assertNoSecretWhenFinal(t, g)
			if g.Str("status") != tc.want {
				return fmt.Errorf("amount %d: status=%s, want %s", tc.amount, g.Str("status"), tc.want)
			}
			if got, want := g.Header.Get("ETag"), fmt.Sprintf(`"%d"`, int(g.Num("version"))); got != want {
				return fmt.Errorf("ETag=%s, want %s", got, want)
			}
			return nil
		})
		ev := in.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
		if got, want := ev.Status, 200; got != want {
			t.Fatalf("events: status=%d", got)
		}
		steps, _ := ev.JSON["data"].([]any)
		if len(steps) < 2 {
			t.Fatalf("timeline of %d has %d steps: %s", tc.amount, len(steps), ev.Body)
		}
	}

	// The requires_action answer carries the redirect while it is still open.
	r := in.Create(`{"order_id":"o-3ds","amount":2002,"currency":"EUR"}`, "k-3ds")
	if r.Str("status") == "requires_action" {
		if r.Str("redirect_url") == "" || r.Str("client_secret") == "" {
			t.Fatalf("requires_action without redirect/secret: %s", r.Body)
		}
	}

	// A lost sync answer leaves the payment in finalize_pending.
	lost := in.Create(`{"order_id":"o-lost","amount":1004,"currency":"EUR"}`, "k-lost")
	if got, want := lost.Str("status"), "finalize_pending"; got != want {
		t.Fatalf("lost answer: status=%s, want %s: %s", got, want, lost.Body)
	}

	// Refund a captured payment.
	c := in.Create(`{"order_id":"o-ref","amount":5000,"currency":"EUR"}`, "k-ref")
	if c.Str("status") != "captured" {
		t.Fatalf("status=%s", c.Str("status"))
	}
	rf := in.Do("POST", "/v1/payments/"+c.Str("id")+"/refund", nil, map[string]string{"Idempotency-Key": "rk-1"})
	if got, want := rf.Str("status"), "succeeded"; got != want || rf.Status != 201 {
		t.Fatalf("refund: %d status=%s, want 201 %s: %s", rf.Status, got, want, rf.Body)
	}
	if g := in.Do("GET", "/v1/payments/"+c.Str("id"), nil, nil); g.Str("status") != "refunded" {
		t.Fatalf("after the refund: %s", g.Body)
	}

	// The list shows them, newest first, with a cursor.
	l := in.Do("GET", "/v1/payments?limit=2", nil, nil)
	data, _ := l.JSON["data"].([]any)
	if len(data) != 2 || l.Str("next_cursor") == "" {
		t.Fatalf("list: %s", l.Body)
	}
	l2 := in.Do("GET", "/v1/payments?limit=2&cursor="+l.Str("next_cursor"), nil, nil)
	data2, _ := l2.JSON["data"].([]any)
	if len(data2) != 2 || data2[0].(map[string]any)["id"] == data[1].(map[string]any)["id"] {
		t.Fatalf("second page: %s", l2.Body)
	}
	lc := in.Do("GET", "/v1/payments?status=refunded", nil, nil)
	dc, _ := lc.JSON["data"].([]any)
	if len(dc) != 1 {
		t.Fatalf("status filter: %s", lc.Body)
	}

	// Health.
	if r := in.Do("GET", "/healthz", nil, map[string]string{"Authorization": ""}); r.Status != 200 {
		t.Fatalf("healthz=%d", r.Status)
	}
	if r := in.Do("GET", "/readyz", nil, map[string]string{"Authorization": ""}); r.Status != 200 {
		t.Fatalf("readyz=%d", r.Status)
	}
}

func TestE2E_Idempotency(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	body := `{"order_id":"o-1","amount":1000,"currency":"EUR"}`

	first := in.Create(body, "key-1")
	if first.Status != 201 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	again := in.Create(body, "key-1")
	if got, want := again.Status, 201; got != want {
		t.Fatalf("replay: status=%d, want %d", got, want)
	}
	if got, want := again.Header.Get("Idempotent-Replayed"), "true"; got != want {
		t.Fatalf("Idempotent-Replayed=%q, want %q", got, want)
	}
	if got, want := again.Str("id"), first.Str("id"); got != want {
		t.Fatalf("replay id=%s, want %s", got, want)
	}
	if got, want := in.Main.Mock.Charges("charge-"+first.Str("id")), 1; got != want {
		t.Fatalf("PSP charges=%d, want %d", got, want)
	}

	reused := in.Create(`{"order_id":"o-1","amount":2000,"currency":"EUR"}`, "key-1")
	if got, want := reused.Status, 422; got != want {
		t.Fatalf("reused key: status=%d, want %d", got, want)
	}
	if got, want := reused.ErrCode(), "idempotency_key_reused"; got != want {
		t.Fatalf("reused key: code=%s, want %s", got, want)
	}

	missing := in.Create(body, "")
	if got, want := missing.Status, 400; got != want {
		t.Fatalf("missing key: status=%d, want %d: %s", got, want, missing.Body)
	}

	// Concurrent requests with one key: exactly one payment, the others
	// either in flight (409 + Retry-After) or replayed.
	var wg sync.WaitGroup
	results := make([]daemontest.Response, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = in.Create(`{"order_id":"o-c","amount":1003,"currency":"EUR"}`, "key-c")
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, r := range results {
		switch r.Status {
		case 201:
			ids[r.Str("id")] = true
		case 409:
			if r.ErrCode() != "idempotency_key_in_use" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("409 without code or Retry-After: %v %s", r.Header, r.Body)
			}
		default:
			t.Fatalf("concurrent: status=%d %s", r.Status, r.Body)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("one key made %d payments", len(ids))
	}
}

func TestE2E_StandardWebhook(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, func(c *config.Config) { c.Payment.Provider = "standard" })
	secret := in.Main.Config.Providers.Standard.WebhookSecret

	c := in.Create(`{"order_id":"o-std","amount":1234,"currency":"USD"}`, "k")
	if got, want := c.Str("status"), "created"; got != want {
		t.Fatalf("report mode create: status=%s, want %s", got, want)
	}
	id := c.Str("id")
	body := eventBody("evt_std_1", "payment.captured", id, "psp_1")
	h := testkit.SignStandard(t, secret, "evt_std_1", time.Now(), body)
	for range 3 { // the PSP redelivers
		r := in.Do("POST", "/webhooks/standard", body, h)
		if r.Status != 200 {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		g := in.Do("GET", "/v1/payments/"+id, nil, nil)
		if g.Str("status") != "captured" || g.Num("version") != 2 {
			return fmt.Errorf("status=%s version=%v", g.Str("status"), g.Num("version"))
		}
		return nil
	})
	ev := in.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
	steps, _ := ev.JSON["data"].([]any)
	if got, want := len(steps), 2; got != want {
		t.Fatalf("steps=%d, want %d (created, transition): %s", got, want, ev.Body)
	}
}
