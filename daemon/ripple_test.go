package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store/storetest"
)

// bootClock is boot with the daemon's clock injected (store, workers,
// webhook timestamps), so a test steps ripple's backoff by moving it.
func bootClock(t *testing.T, clock *storetest.Clock, mutate func(*config.Config)) *daemontest.Instance {
	t.Helper()
	return daemontest.BootMain(t, mutate, func(m *daemon.Main) { m.Now = clock.Now })
}

// rippleStep moves the clock past any ripple backoff and runs one ripple pass.
func rippleStep(in *daemontest.Instance, clock *storetest.Clock) error {
	clock.Add(2 * time.Hour)
	_, err := in.Main.Ripple.RunOnce(context.Background())
	return err
}

// deliveries lists a payment's deliveries in one state over the API, as
// "effect" or "webhook" → delivery JSON.
func deliveries(in *daemontest.Instance, state, paymentID string) map[string]map[string]any {
	in.T.Helper()
	r := in.Do("GET", "/v1/deliveries?state="+state+"&limit=1000", nil, nil)
	if r.Status != 200 {
		in.T.Fatalf("list deliveries: %d %s", r.Status, r.Body)
	}
	out := map[string]map[string]any{}
	data, _ := r.JSON["data"].([]any)
	for _, v := range data {
		d, _ := v.(map[string]any)
		if d["payment_id"] == paymentID {
			out[d["effect"].(string)] = d
		}
	}
	return out
}

// TestE2E_ReceiptOncePerPayment: a payment in report mode, captured by a
// webhook the PSP sends five times, gets exactly one receipt from a real
// SMTP server that refuses the first three attempts.
func TestE2E_ReceiptOncePerPayment(t *testing.T) {
	t.Parallel()
	smtpd := rippletest.NewSMTPServer(t, 3)
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
	in := bootClock(t, clock, func(c *config.Config) {
		c.Receipt.SMTPAddr, c.Receipt.From, c.Receipt.TLS = smtpd.Addr, "receipts@shop.example", "none"
	})
	secret := in.Main.Config.Providers.Standard.WebhookSecret

	c := in.Create(`{"order_id":"o-receipt","amount":2500,"currency":"EUR","provider":"standard","customer":{"id":"cus_r","email":"r@example.com"}}`, "k-receipt")
	if c.Status != 201 {
		t.Fatalf("create: %d %s", c.Status, c.Body)
	}
	id := c.Str("id")
	body := eventBody("evt_psp_receipt", "payment.captured", id, "psp_receipt")
	for i := range 5 { // the PSP redelivers
		h := testkit.SignStandard(t, secret, "evt_psp_receipt", clock.Now(), body)
		if r := in.Do("POST", "/webhooks/standard", body, h); r.Status != 200 {
			t.Fatalf("webhook %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if g := in.Do("GET", "/v1/payments/"+id, nil, nil); g.Str("status") != "captured" {
			return fmt.Errorf("status=%s", g.Str("status"))
		}
		return nil
	})

	testkit.WaitFor(t, 20*time.Second, func() error {
		if err := rippleStep(in, clock); err != nil {
			return err
		}
		if n := len(smtpd.Messages()); n != 1 {
			return fmt.Errorf("receipts=%d after %d SMTP attempts", n, smtpd.Attempts())
		}
		return nil
	})
	for range 5 {
		if err := rippleStep(in, clock); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := len(smtpd.Messages()), 1; got != want {
		t.Fatalf("receipts=%d, want %d", got, want)
	}
	if got, want := smtpd.Attempts(), 4; got != want {
		t.Fatalf("SMTP attempts=%d, want %d (three refused, one accepted)", got, want)
	}
	d := deliveries(in, "done", id)["receipt"]
	if d == nil || d["attempts"] != float64(4) {
		t.Fatalf("receipt delivery=%v, want done after 4 attempts", d)
	}
	if to := smtpd.Messages()[0].To; len(to) != 1 || to[0] != "r@example.com" {
		t.Fatalf("receipt to %v, want r@example.com", to)
	}
}

// TestE2E_DeadLetterRetry: a merchant endpoint that always fails
// dead-letters after max_attempts while loyalty, retention and the receipt
// complete; once the endpoint works, POST /v1/deliveries/{id}/retry
// delivers it.
func TestE2E_DeadLetterRetry(t *testing.T) {
	t.Parallel()
	smtpd := rippletest.NewSMTPServer(t, 0)
	ep := rippletest.NewEndpoint(t)
	ep.Answer(http.StatusInternalServerError, nil)
	secret, err := stdwebhook.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
	in := bootClock(t, clock, func(c *config.Config) {
		c.Ripple.MaxAttempts = 3
		c.Receipt.SMTPAddr, c.Receipt.From, c.Receipt.TLS = smtpd.Addr, "receipts@shop.example", "none"
		c.Webhooks = []config.Webhook{{URL: ep.URL, Secret: secret, Events: []string{"payment.captured"}}}
	})
	start := clock.Now()

	c := in.Create(`{"order_id":"o-dead","amount":1000,"currency":"EUR","customer":{"id":"cus_d","email":"d@example.com"}}`, "k-dead")
	if c.Status != 201 || c.Str("status") != "captured" {
		t.Fatalf("create: %d %s", c.Status, c.Body)
	}
	id := c.Str("id")
	var dead map[string]any
	testkit.WaitFor(t, 20*time.Second, func() error {
		if err := rippleStep(in, clock); err != nil {
			return err
		}
		if dead = deliveries(in, "dead", id)["webhook"]; dead == nil {
			return fmt.Errorf("webhook delivery not dead yet after %d requests", len(ep.Requests()))
		}
		return nil
	})
	if dead["attempts"] != float64(3) || !strings.Contains(dead["last_error"].(string), "500") {
		t.Fatalf("dead letter=%v, want 3 attempts, the last answered 500", dead)
	}
	if got, want := len(ep.Requests()), 3; got != want {
		t.Fatalf("requests=%d, want %d", got, want)
	}
	done := deliveries(in, "done", id)
	for _, eff := range []string{"loyalty", "retention", "receipt"} {
		if done[eff] == nil {
			t.Fatalf("no done %s delivery in %v", eff, done)
		}
	}
	cu := in.Do("GET", "/v1/customers/cus_d", nil, nil)
	if cu.Status != 200 || cu.Num("points") != 10 || cu.Str("last_visit_at") == "" {
		t.Fatalf("customer: %d %s, want 10 points and a last visit", cu.Status, cu.Body)
	}
	if r := in.Do("GET", "/v1/customers/cus_nobody", nil, nil); r.Status != 404 {
		t.Fatalf("unknown customer: %d %s, want 404", r.Status, r.Body)
	}

	// Fixed: retry the dead letter over the API.
	ep.Answer(http.StatusOK, nil)
	dlv := dead["id"].(string)
	r := in.Do("POST", "/v1/deliveries/"+dlv+"/retry", nil, nil)
	if r.Status != 200 || r.Str("state") != "pending" || r.Num("attempts") != 0 {
		t.Fatalf("retry: %d %s, want 200 pending", r.Status, r.Body)
	}
	testkit.WaitFor(t, 20*time.Second, func() error {
		if err := rippleStep(in, clock); err != nil {
			return err
		}
		if deliveries(in, "done", id)["webhook"] == nil {
			return fmt.Errorf("webhook delivery not done after %d requests", len(ep.Requests()))
		}
		return nil
	})
	reqs := ep.Requests()
	if got, want := reqs[len(reqs)-1].Status, http.StatusOK; got != want {
		t.Fatalf("last request answered %d, want %d", got, want)
	}

	// The other delivery routes.
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"POST", "/v1/deliveries/" + dlv + "/retry", 409, "conflict"},
		{"POST", "/v1/deliveries/dlv_unknown/retry", 404, "not_found"},
		{"POST", "/v1/deliveries/retry?state=pending&since=" + url.QueryEscape(start.Format(time.RFC3339)), 400, "invalid_request"},
		{"POST", "/v1/deliveries/retry?state=dead", 400, "invalid_request"},
		{"GET", "/v1/deliveries", 400, "invalid_request"},
		{"GET", "/v1/deliveries?state=dead&since=yesterday", 400, "invalid_request"},
	} {
		r := in.Do(tc.method, tc.path, nil, nil)
		if r.Status != tc.status || r.ErrCode() != tc.code {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, r.Status, r.Body, tc.status, tc.code)
		}
	}
	r = in.Do("POST", "/v1/deliveries/retry?state=dead&since="+url.QueryEscape(start.Format(time.RFC3339)), nil, nil)
	if r.Status != 200 || r.Num("retried") != 0 {
		t.Fatalf("retry dead since start: %d %s, want 200 and nothing to retry", r.Status, r.Body)
	}
	metrics := in.Do("GET", "/metrics", nil, nil)
	for _, want := range []string{
		`paystate_ripple_deliveries_total{effect="webhook",outcome="dead"}`,
		`paystate_ripple_deliveries_total{effect="receipt",outcome="done"}`,
		`paystate_ripple_dead_letters`, `paystate_ripple_outbox_lag_seconds`,
	} {
		if !strings.Contains(string(metrics.Body), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
