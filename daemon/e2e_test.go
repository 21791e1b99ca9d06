package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
)

const apiKey = "test-api-key-0123456789abcdef"

// instance is a paystate booted for a test, driven over HTTP only.
type instance struct {
	t    *testing.T
	m    *daemon.Main
	base string
	hc   *http.Client
}

// boot starts a whole paystate on 127.0.0.1:0 with a temporary database.
func boot(t *testing.T, mutate func(*config.Config)) *instance {
	t.Helper()
	return bootMain(t, mutate, nil)
}

// bootMain is boot with the daemon's clock and its knobs set by setup
// before Open.
func bootMain(t *testing.T, mutate func(*config.Config), setup func(*daemon.Main)) *instance {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Path = filepath.Join(t.TempDir(), "paystate.db")
	cfg.Auth.APIKeys = []string{apiKey}
	cfg.Providers.Mock.WebhookDelay = config.Duration{}
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	m := daemon.New(cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if setup != nil {
		setup(m)
	}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, m: m, base: m.Server.URL(), hc: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return in
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func (r response) str(k string) string { s, _ := r.json[k].(string); return s }
func (r response) num(k string) float64 {
	f, _ := r.json[k].(float64)
	return f
}
func (r response) errCode() string {
	if e, ok := r.json["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

// do sends a request; hdr holds extra headers ("Authorization" is added
// unless given as "").
func (in *instance) do(method, path string, body []byte, hdr map[string]string) response {
	in.t.Helper()
	req, err := http.NewRequest(method, in.base+path, bytes.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := in.hc.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		in.t.Fatal(err)
	}
	r := response{status: res.StatusCode, header: res.Header, body: b}
	_ = json.Unmarshal(b, &r.json)
	return r
}

func (in *instance) create(body string, key string) response {
	return in.do("POST", "/v1/payments", []byte(body), map[string]string{"Idempotency-Key": key})
}

// signStandard signs a webhook body with the svix library, as a PSP bridge
// speaking Standard Webhooks would.
func signStandard(t *testing.T, secret, id string, ts time.Time, body []byte) map[string]string {
	t.Helper()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"webhook-id": id, "webhook-timestamp": fmt.Sprint(ts.Unix()), "webhook-signature": sig,
		"Authorization": "",
	}
}

func eventBody(id, typ, paymentID, ref string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"provider_ref":%q}}`,
		id, typ, time.Now().Unix(), paymentID, ref))
}

// waitFor polls fn until it returns nil or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assertNoSecretWhenFinal fails if a payment response outside created,
// processing and requires_action carries a client secret or redirect URL.
func assertNoSecretWhenFinal(t *testing.T, r response) {
	t.Helper()
	switch r.str("status") {
	case "created", "processing", "requires_action", "":
		return
	}
	for _, k := range []string{"client_secret", "redirect_url"} {
		if _, ok := r.json[k]; ok {
			t.Errorf("%s present in a response for a %s payment: %s", k, r.str("status"), r.body)
		}
	}
}

func TestE2E_MockPaymentLifecycle(t *testing.T) {
	t.Parallel()
	in := boot(t, nil)

	for _, tc := range []struct {
		amount int
		want   string
	}{
		{1000, "captured"}, {1001, "failed"}, {1002, "captured"}, {1003, "captured"}, {1099, "captured"},
	} {
		r := in.create(fmt.Sprintf(`{"order_id":"o-%d","amount":%d,"currency":"EUR","customer":{"id":"c1","email":"c1@example.com"}}`, tc.amount, tc.amount), fmt.Sprintf("k-%d", tc.amount))
		if got, want := r.status, 201; got != want {
			t.Fatalf("create %d: status=%d, want %d: %s", tc.amount, got, want, r.body)
		}
		assertNoSecretWhenFinal(t, r)
		id := r.str("id")
		if !strings.HasPrefix(id, "pay_") || len(id) != 30 {
			t.Fatalf("id=%q, want pay_ + 26-char ULID", id)
		}
		waitFor(t, 10*time.Second, func() error {
			g := in.do("GET", "/v1/payments/"+id, nil, nil)
			assertNoSecretWhenFinal(t, g)
			if g.str("status") != tc.want {
				return fmt.Errorf("amount %d: status=%s, want %s", tc.amount, g.str("status"), tc.want)
			}
			if got, want := g.header.Get("ETag"), fmt.Sprintf(`"%d"`, int(g.num("version"))); got != want {
				return fmt.Errorf("ETag=%s, want %s", got, want)
			}
			return nil
		})
		ev := in.do("GET", "/v1/payments/"+id+"/events", nil, nil)
		if got, want := ev.status, 200; got != want {
			t.Fatalf("events: status=%d", got)
		}
		steps, _ := ev.json["data"].([]any)
		if len(steps) < 2 {
			t.Fatalf("timeline of %d has %d steps: %s", tc.amount, len(steps), ev.body)
		}
	}

	// The requires_action answer carries the redirect while it is still open.
	r := in.create(`{"order_id":"o-3ds","amount":2002,"currency":"EUR"}`, "k-3ds")
	if r.str("status") == "requires_action" {
		if r.str("redirect_url") == "" || r.str("client_secret") == "" {
			t.Fatalf("requires_action without redirect/secret: %s", r.body)
		}
	}

	// A lost sync answer leaves the payment in finalize_pending.
	lost := in.create(`{"order_id":"o-lost","amount":1004,"currency":"EUR"}`, "k-lost")
	if got, want := lost.str("status"), "finalize_pending"; got != want {
		t.Fatalf("lost answer: status=%s, want %s: %s", got, want, lost.body)
	}

	// Refund a captured payment.
	c := in.create(`{"order_id":"o-ref","amount":5000,"currency":"EUR"}`, "k-ref")
	if c.str("status") != "captured" {
		t.Fatalf("status=%s", c.str("status"))
	}
	rf := in.do("POST", "/v1/payments/"+c.str("id")+"/refund", nil, map[string]string{"Idempotency-Key": "rk-1"})
	if got, want := rf.str("status"), "refunded"; got != want {
		t.Fatalf("refund: status=%s, want %s: %s", got, want, rf.body)
	}

	// The list shows them, newest first, with a cursor.
	l := in.do("GET", "/v1/payments?limit=2", nil, nil)
	data, _ := l.json["data"].([]any)
	if len(data) != 2 || l.str("next_cursor") == "" {
		t.Fatalf("list: %s", l.body)
	}
	l2 := in.do("GET", "/v1/payments?limit=2&cursor="+l.str("next_cursor"), nil, nil)
	data2, _ := l2.json["data"].([]any)
	if len(data2) != 2 || data2[0].(map[string]any)["id"] == data[1].(map[string]any)["id"] {
		t.Fatalf("second page: %s", l2.body)
	}
	lc := in.do("GET", "/v1/payments?status=refunded", nil, nil)
	dc, _ := lc.json["data"].([]any)
	if len(dc) != 1 {
		t.Fatalf("status filter: %s", lc.body)
	}

	// Health.
	if r := in.do("GET", "/healthz", nil, map[string]string{"Authorization": ""}); r.status != 200 {
		t.Fatalf("healthz=%d", r.status)
	}
	if r := in.do("GET", "/readyz", nil, map[string]string{"Authorization": ""}); r.status != 200 {
		t.Fatalf("readyz=%d", r.status)
	}
}

func TestE2E_Idempotency(t *testing.T) {
	t.Parallel()
	in := boot(t, nil)
	body := `{"order_id":"o-1","amount":1000,"currency":"EUR"}`

	first := in.create(body, "key-1")
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	again := in.create(body, "key-1")
	if got, want := again.status, 201; got != want {
		t.Fatalf("replay: status=%d, want %d", got, want)
	}
	if got, want := again.header.Get("Idempotent-Replayed"), "true"; got != want {
		t.Fatalf("Idempotent-Replayed=%q, want %q", got, want)
	}
	if got, want := again.str("id"), first.str("id"); got != want {
		t.Fatalf("replay id=%s, want %s", got, want)
	}
	if got, want := in.m.Mock.Charges("charge-"+first.str("id")), 1; got != want {
		t.Fatalf("PSP charges=%d, want %d", got, want)
	}

	reused := in.create(`{"order_id":"o-1","amount":2000,"currency":"EUR"}`, "key-1")
	if got, want := reused.status, 422; got != want {
		t.Fatalf("reused key: status=%d, want %d", got, want)
	}
	if got, want := reused.errCode(), "idempotency_key_reused"; got != want {
		t.Fatalf("reused key: code=%s, want %s", got, want)
	}

	missing := in.create(body, "")
	if got, want := missing.status, 400; got != want {
		t.Fatalf("missing key: status=%d, want %d: %s", got, want, missing.body)
	}

	// Concurrent requests with one key: exactly one payment, the others
	// either in flight (409 + Retry-After) or replayed.
	var wg sync.WaitGroup
	results := make([]response, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = in.create(`{"order_id":"o-c","amount":1003,"currency":"EUR"}`, "key-c")
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, r := range results {
		switch r.status {
		case 201:
			ids[r.str("id")] = true
		case 409:
			if r.errCode() != "idempotency_key_in_use" || r.header.Get("Retry-After") == "" {
				t.Fatalf("409 without code or Retry-After: %v %s", r.header, r.body)
			}
		default:
			t.Fatalf("concurrent: status=%d %s", r.status, r.body)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("one key made %d payments", len(ids))
	}
}

func TestE2E_StandardWebhook(t *testing.T) {
	t.Parallel()
	in := boot(t, func(c *config.Config) { c.Payment.Provider = "standard" })
	secret := in.m.Config.Providers.Standard.WebhookSecret

	c := in.create(`{"order_id":"o-std","amount":1234,"currency":"USD"}`, "k")
	if got, want := c.str("status"), "created"; got != want {
		t.Fatalf("report mode create: status=%s, want %s", got, want)
	}
	id := c.str("id")
	body := eventBody("evt_std_1", "payment.captured", id, "psp_1")
	h := signStandard(t, secret, "evt_std_1", time.Now(), body)
	for range 3 { // the PSP redelivers
		r := in.do("POST", "/webhooks/standard", body, h)
		if r.status != 200 {
			t.Fatalf("webhook: %d %s", r.status, r.body)
		}
	}
	waitFor(t, 10*time.Second, func() error {
		g := in.do("GET", "/v1/payments/"+id, nil, nil)
		if g.str("status") != "captured" || g.num("version") != 2 {
			return fmt.Errorf("status=%s version=%v", g.str("status"), g.num("version"))
		}
		return nil
	})
	ev := in.do("GET", "/v1/payments/"+id+"/events", nil, nil)
	steps, _ := ev.json["data"].([]any)
	if got, want := len(steps), 2; got != want {
		t.Fatalf("steps=%d, want %d (created, transition): %s", got, want, ev.body)
	}
}
