package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// secretConfig returns a valid Config with every secret set to a distinct
// value, and those values.
func secretConfig() (Config, []string) {
	c := DefaultConfig()
	c.Server.Listen = "0.0.0.0:8443"
	c.Auth.APIKeys = []string{"apikey-one-0123456789", "apikey-two-0123456789"}
	c.Storage.DSN = "postgres://paystate:dsnpassword@db.internal:5432/paystate?sslmode=require"
	c.Webhooks = []Webhook{{
		URL:     "https://hookuser:hookpassword@shop.example.com/hooks",
		Secret:  testSecret("webhook-secret"),
		Secrets: []string{testSecret("rotation-next"), testSecret("rotation-old")},
		Events:  []string{"payment.captured", "payment.refunded"},
		Timeout: Duration{DefaultWebhookTimeout},
	}}
	c.Providers.Mock.WebhookSecret = testSecret("mock-secret")
	c.Providers.Mock.WebhookURL = "http://mockuser:mockpassword@127.0.0.1:8080/webhooks/mock"
	c.Providers.Standard.WebhookSecret = testSecret("standard-secret")
	c.Providers.Mock.AllowPublic = true
	c.Providers.Stripe = &Stripe{
		SecretKey:     "sk_test_stripekey0123456789",
		WebhookSecret: "whsec_stripewebhook0123456789",
		APIBase:       "http://stripeuser:stripepassword@localhost:12111",
	}
	c.Providers.PayPal = &PayPal{
		ClientID: "AeClientID0123456789", Secret: "EGpaypalsecret0123456789", WebhookID: "1JE4291016473214C",
		APIBase: "https://ppuser:pppassword@api-m.sandbox.paypal.com",
	}
	mo := DefaultMollie()
	mo.APIKey, mo.WebhookSecret = "live_molliekey0123456789", "mollie-signing-secret-0123"
	mo.WebhookURL = "https://shop.example.com/webhooks/mollie?token=mollietoken"
	c.Providers.Mollie = &mo
	secrets := []string{
		"apikey-one-0123456789", "apikey-two-0123456789", "dsnpassword",
		"hookpassword", c.Webhooks[0].Secret, c.Webhooks[0].Secrets[0], c.Webhooks[0].Secrets[1],
		c.Providers.Mock.WebhookSecret, "mockpassword", c.Providers.Standard.WebhookSecret,
		"sk_test_stripekey0123456789", "whsec_stripewebhook0123456789", "stripepassword",
		"EGpaypalsecret0123456789", "pppassword",
		"live_molliekey0123456789", "mollie-signing-secret-0123", "mollietoken",
	}
	return c, secrets
}

func TestConfig_Masked(t *testing.T) {
	t.Parallel()
	c, secrets := secretConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	before, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}

	out, err := c.Masked().TOML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(out), s) {
			t.Errorf("masked TOML contains the secret %q:\n%s", s, out)
		}
	}
	m := c.Masked()
	for _, tt := range []struct {
		key, got, want string
	}{
		{"auth.api_keys[0]", m.Auth.APIKeys[0], Mask},
		{"auth.api_keys[1]", m.Auth.APIKeys[1], Mask},
		{"storage.dsn", m.Storage.DSN, "postgres://paystate:***@db.internal:5432/paystate?sslmode=require"},
		{"webhooks[0].url", m.Webhooks[0].URL, "https://hookuser:***@shop.example.com/hooks"},
		{"webhooks[0].secret", m.Webhooks[0].Secret, Mask},
		{"webhooks[0].secrets[1]", m.Webhooks[0].Secrets[1], Mask},
		{"webhooks[0].events[1]", m.Webhooks[0].Events[1], "payment.refunded"},
		{"providers.mock.webhook_secret", m.Providers.Mock.WebhookSecret, Mask},
		{"providers.standard.webhook_secret", m.Providers.Standard.WebhookSecret, Mask},
		{"providers.stripe.secret_key", m.Providers.Stripe.SecretKey, Mask},
		{"providers.stripe.webhook_secret", m.Providers.Stripe.WebhookSecret, Mask},
		{"providers.mollie.api_key", m.Providers.Mollie.APIKey, Mask},
		{"providers.mollie.webhook_secret", m.Providers.Mollie.WebhookSecret, Mask},
		{"server.listen", m.Server.Listen, "0.0.0.0:8443"},
	} {
		if tt.got != tt.want {
			t.Errorf("masked %s=%q, want %q", tt.key, tt.got, tt.want)
		}
	}

	// The original keeps its secrets.
	after, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatalf("Masked changed its receiver:\n%s\nwant\n%s", after, before)
	}
}

func TestConfig_Masked_Empty(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.Providers.Mock.WebhookSecret = ""
	c.Providers.Stripe = &Stripe{}
	c.Payment.Provider = ProviderStandard
	m := c.Masked()
	for _, tt := range []struct {
		key, got, want string
	}{
		{"providers.mock.webhook_secret", m.Providers.Mock.WebhookSecret, ""},
		{"providers.stripe.secret_key", m.Providers.Stripe.SecretKey, ""},
		{"providers.stripe.webhook_secret", m.Providers.Stripe.WebhookSecret, ""},
		{"storage.dsn", m.Storage.DSN, ""},
	} {
		if tt.got != tt.want {
			t.Errorf("masked %s=%q, want %q", tt.key, tt.got, tt.want)
		}
	}
	if got, want := len(m.Auth.APIKeys), 0; got != want {
		t.Errorf("masked len(auth.api_keys)=%d, want %d", got, want)
	}
}

func TestMaskDSN(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		dsn, want string
	}{
		{"", ""},
		{"postgres://db.internal/paystate", "postgres://db.internal/paystate"},
		{"postgres://u:p@db/x", "postgres://u:***@db/x"},
		{"postgres://u@db/x?password=p", Mask},
		{"host=db user=u password=p", Mask},
		{"postgres:u:p@db", Mask},
	} {
		if got := maskDSN(tt.dsn); got != tt.want {
			t.Errorf("maskDSN(%q)=%q, want %q", tt.dsn, got, tt.want)
		}
	}
}

func TestConfig_TOML(t *testing.T) {
	t.Parallel()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		c, _ := secretConfig()
		out, err := c.TOML()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(out, nil)
		if err != nil {
			t.Fatalf("Parse(TOML()): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("Parse(TOML())=%+v, want %+v", got, c)
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		out, err := DefaultConfig().Masked().TOML()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"[server]\n", `listen = "127.0.0.1:8080"`, `shutdown_timeout = "10s"`,
			"api_keys = []", `ttl = "30s"`, `expire_after = "1h"`, `processed_retention = "720h"`,
			`webhook_delay = "50ms"`, "rate_per_second = 5.0", "[providers.mock]\n", "[providers.standard]\n",
			`webhook_secret = "***"`,
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("TOML() lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(string(out), "[[webhooks]]") {
			t.Errorf("TOML() has a [[webhooks]] table with no endpoint:\n%s", out)
		}
		if strings.Contains(string(out), "[providers.stripe]") {
			t.Errorf("TOML() has a [providers.stripe] table for an absent provider:\n%s", out)
		}
	})

	t.Run("NilAPIKeys", func(t *testing.T) {
		t.Parallel()
		c := DefaultConfig()
		c.Auth.APIKeys = nil
		out, err := c.TOML()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "api_keys = []") {
			t.Fatalf("TOML() lacks api_keys = []:\n%s", out)
		}
		if c.Auth.APIKeys != nil {
			t.Fatal("TOML changed its receiver")
		}
	})
}

func TestDuration(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want time.Duration
		text string
	}{
		{"30s", 30 * time.Second, "30s"},
		{"1h", time.Hour, "1h"},
		{"720h", 720 * time.Hour, "720h"},
		{"10m", 10 * time.Minute, "10m"},
		{"1h30m", 90 * time.Minute, "1h30m"},
		{"1h0m5s", time.Hour + 5*time.Second, "1h0m5s"},
		{"50ms", 50 * time.Millisecond, "50ms"},
		{"1.5s", 1500 * time.Millisecond, "1.5s"},
		{"0", 0, "0s"},
		{"-2m", -2 * time.Minute, "-2m"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var d Duration
			if err := d.UnmarshalText([]byte(tt.in)); err != nil {
				t.Fatal(err)
			}
			if got := d.Duration; got != tt.want {
				t.Fatalf("UnmarshalText(%q)=%v, want %v", tt.in, got, tt.want)
			}
			text, err := d.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			if got := string(text); got != tt.text {
				t.Fatalf("MarshalText()=%q, want %q", got, tt.text)
			}
			var back Duration
			if err := back.UnmarshalText(text); err != nil {
				t.Fatal(err)
			}
			if back != d {
				t.Fatalf("round trip=%v, want %v", back, d)
			}
		})
	}

	for _, in := range []string{"", "30", "soon", "1x", "1.5"} {
		var d Duration
		err := d.UnmarshalText([]byte(in))
		if err == nil {
			t.Errorf("UnmarshalText(%q)=nil, want an error", in)
			continue
		}
		if !strings.Contains(err.Error(), "30s") {
			t.Errorf("UnmarshalText(%q)=%q, want it to show the expected form", in, err)
		}
	}
}
