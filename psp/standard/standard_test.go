package standard_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/standard"
)

const (
	secret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret = "whsec_c2Vjb25kLXNlY3JldC1mb3ItdGhlLXRlc3RzLW9ubHk="
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func mustNew(t *testing.T, cfg standard.Config) *standard.Provider {
	t.Helper()
	if cfg.WebhookSecret == "" {
		cfg.WebhookSecret = secret
	}
	p, err := standard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := pay.ErrorCode(err); got != code {
		t.Fatalf("ErrorCode=%q (%v), want %q", got, err, code)
	}
}

func TestProvider_Create(t *testing.T) {
	t.Parallel()
	p := mustNew(t, standard.Config{})
	if got, want := p.Name(), "standard"; got != want {
		t.Fatalf("Name=%q, want %q", got, want)
	}
	pm := pay.Payment{ID: "pay_1", Amount: 1000, Currency: "EUR", Provider: "standard", Status: pay.Created, Version: 1}
	res, err := p.Create(context.Background(), pm, "charge-pay_1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != pay.Created || !res.Found || res.ProviderRef != "" || res.ClientSecret != "" || res.RedirectURL != "" {
		t.Fatalf("Create=%+v, want the payment left created", res)
	}
}

// TestProvider_Unsupported: a refund calls no PSP and is pending (its
// webhook settles it); there is no status API, for payments or refunds.
func TestProvider_Unsupported(t *testing.T) {
	t.Parallel()
	p := mustNew(t, standard.Config{})
	pm := pay.Payment{ID: "pay_1", Status: pay.Captured}
	r := pay.Refund{ID: "re_1", PaymentID: pm.ID, Amount: 100, Status: pay.RefundPending}
	res, err := p.Refund(context.Background(), pm, r, pay.RefundKey(r.ID))
	if err != nil || res.Status != pay.RefundPending || res.ProviderRef != "" {
		t.Fatalf("Refund=%+v, %v; want pending, no PSP reference", res, err)
	}
	_, err = p.RefundStatus(context.Background(), pm, r)
	wantCode(t, err, pay.EUNSUPPORTED)
	_, err = p.Status(context.Background(), pm)
	wantCode(t, err, pay.EUNSUPPORTED)
}

func TestProvider_ParseWebhook(t *testing.T) {
	t.Parallel()
	p := mustNew(t, standard.Config{})

	t.Run("BridgePayload", func(t *testing.T) {
		t.Parallel()
		// A bridge's event: no payment id, extra fields, found by reference.
		body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "standardwebhooks", "payment_refunded_ref_only.json"))
		if err != nil {
			t.Fatal(err)
		}
		h := testkit.StandardHeader(t, secret, "evt_bridge_9f8e7d6c5b4a", now, body)
		e, err := p.ParseWebhook(body, h, now)
		if err != nil {
			t.Fatal(err)
		}
		want := pay.WebhookEvent{
			EventID:     "evt_bridge_9f8e7d6c5b4a",
			Type:        "payment.refunded",
			ProviderRef: "pi_3PqR2sT4uV5wX6yZ",
			Status:      pay.Refunded,
			Amount:      2500,
			Currency:    "EUR",
			OccurredAt:  time.Unix(1767323049, 0).UTC(),
		}
		if e != want {
			t.Fatalf("event=%+v, want %+v", e, want)
		}
	})

	body := []byte(`{"id":"evt_1","type":"payment.captured","created":1767323045,"data":{"payment_id":"pay_1","provider_ref":"pi_1"}}`)

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e, err := p.ParseWebhook(body, testkit.StandardHeader(t, secret, "evt_1", now, body), now)
		if err != nil {
			t.Fatal(err)
		}
		if e.PaymentID != "pay_1" || e.Status != pay.Captured {
			t.Fatalf("event=%+v", e)
		}
	})

	t.Run("ErrMockSecret", func(t *testing.T) {
		t.Parallel()
		_, err := p.ParseWebhook(body, testkit.StandardHeader(t, otherSecret, "evt_1", now, body), now)
		wantCode(t, err, pay.ESIGNATURE)
	})

	t.Run("ErrTimestamp", func(t *testing.T) {
		t.Parallel()
		_, err := p.ParseWebhook(body, testkit.StandardHeader(t, secret, "evt_1", now.Add(-6*time.Minute), body), now)
		wantCode(t, err, pay.ESIGNATURE)
		short := mustNew(t, standard.Config{Tolerance: time.Minute})
		_, err = short.ParseWebhook(body, testkit.StandardHeader(t, secret, "evt_1", now.Add(-2*time.Minute), body), now)
		wantCode(t, err, pay.ESIGNATURE)
	})

	t.Run("ErrMissingHeaders", func(t *testing.T) {
		t.Parallel()
		_, err := p.ParseWebhook(body, http.Header{}, now)
		wantCode(t, err, pay.ESIGNATURE)
	})

	t.Run("ErrUnknownType", func(t *testing.T) {
		t.Parallel()
		b := []byte(strings.Replace(string(body), "payment.captured", "payment.succeeded", 1))
		_, err := p.ParseWebhook(b, testkit.StandardHeader(t, secret, "evt_1", now, b), now)
		wantCode(t, err, pay.EINVALID)
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "whsec_", "not-a-secret", "whsec_***"} {
		_, err := standard.New(standard.Config{WebhookSecret: s})
		if err == nil || !strings.HasPrefix(err.Error(), "providers.standard.webhook_secret: ") {
			t.Fatalf("secret %q: err=%v, want one naming providers.standard.webhook_secret", s, err)
		}
	}
}
