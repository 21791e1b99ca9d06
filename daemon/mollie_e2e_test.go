package daemon_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/api"
	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/mollie"
	"github.com/paystate/paystate/psp/mollie/mollietest"
)

// bootMollie starts a paystate whose default provider is mollie, pointed
// at a fake Mollie API.
func bootMollie(t *testing.T) (*daemontest.Instance, *mollietest.Fake) {
	t.Helper()
	fake := mollietest.New(t)
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Payment.Provider = mollie.Name
		mc := config.DefaultMollie()
		mc.APIKey, mc.APIBase = mollietest.APIKey, fake.URL
		mc.WebhookURL, mc.RedirectURL = "https://shop.example/webhooks/mollie", "https://shop.example/thanks"
		c.Providers.Mollie = &mc
	})
	return in, fake
}

// mollieWebhook posts Mollie's webhook, a form with the payment's id,
// and checks the request and its answer against api/openapi.yaml.
func mollieWebhook(c *openapiClient, ref string, want int) daemontest.Response {
	return c.do("POST", "/webhooks/mollie", []byte("id="+ref), map[string]string{
		"Content-Type":  "application/x-www-form-urlencoded",
		"Authorization": "",
	}, want)
}

// TestE2E_Mollie drives a paystate with the mollie provider over HTTP
// only: the create goes to Mollie with charge-<payment_id>, the customer
// is sent to Mollie's checkout, Mollie's triggers (repeated, before and
// after the payment is paid, and for ids paystate never made) are answered
// 200 at once, and the payment is captured once.
func TestE2E_Mollie(t *testing.T) {
	t.Parallel()
	in, fake := bootMollie(t)
	c := newOpenAPIClient(t, in, api.YAML())

	r := in.Create(`{"order_id":"o-mollie-1","amount":2500,"currency":"EUR","description":"Bike bell"}`, "k-mollie-1")
	if got, want := r.Status, http.StatusCreated; got != want {
		t.Fatalf("create: status=%d, want %d: %s", got, want, r.Body)
	}
	id, ref := r.Str("id"), r.Str("provider_ref")
	if r.Str("status") != "requires_action" || !strings.HasPrefix(ref, "tr_") || !strings.HasPrefix(r.Str("redirect_url"), "https://www.mollie.com/checkout/") {
		t.Fatalf("create answer %s, want requires_action with Mollie's checkout link", r.Body)
	}
	if hs := fake.PostHeaders(); len(hs) != 1 || hs[0].Get("Idempotency-Key") != "charge-"+id {
		t.Fatalf("Idempotency-Key at Mollie: %v", hs)
	}

	// Unknown and malformed ids.
	mollieWebhook(c, "tr_neverMade1", http.StatusOK)
	c.refused("POST", "/webhooks/mollie", []byte("id=pay_123"), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Authorization": "",
	}, http.StatusBadRequest, "invalid_request", "id", false) // the validator does not read form bodies

	fake.SetStatus(ref, "paid")
	for range 3 {
		mollieWebhook(c, ref, http.StatusOK)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if s := in.Do("GET", "/v1/payments/"+id, nil, nil).Str("status"); s != "captured" {
			return fmt.Errorf("status %s", s)
		}
		return nil
	})
	// Once more after the capture: nothing changes.
	mollieWebhook(c, ref, http.StatusOK)
	testkit.WaitFor(t, 10*time.Second, func() error {
		r := in.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
		if strings.Count(string(r.Body), `"to":"captured"`) < 1 {
			return fmt.Errorf("no capture step yet")
		}
		return nil
	})
	r = in.Do("GET", "/v1/payments/"+id, nil, nil)
	if r.Str("status") != "captured" || r.Str("redirect_url") != "" {
		t.Fatalf("payment %s, want captured without its redirect URL", r.Body)
	}
	transitions := 0
	for _, k := range stepKinds(in, id) {
		if k == "transition" {
			transitions++
		}
	}
	if transitions != 2 { // created → requires_action → captured
		t.Fatalf("transitions=%d, want 2: %v", transitions, stepKinds(in, id))
	}
}

// TestBrowser_MollieLink: the dashboard shows a Mollie payment's provider
// and links its reference to the payment in Mollie's dashboard, in the
// list and on the payment's page.
func TestBrowser_MollieLink(t *testing.T) {
	t.Parallel()
	in, _ := bootMollie(t)
	r := in.Create(`{"order_id":"o-mollie-link","amount":1200,"currency":"EUR"}`, "k-mollie-link")
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id, ref := r.Str("id"), r.Str("provider_ref")
	checkPSPLink(t, in.Base, id, "https://my.mollie.com/dashboard/payments/"+ref)
}
