package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestParse_ProvidersPresentOnly: with a config file a provider exists only
// if its table is present; with no file the embedded defaults enable mock
// and standard.
func TestParse_ProvidersPresentOnly(t *testing.T) {
	t.Parallel()

	t.Run("NoFile", func(t *testing.T) {
		t.Parallel()
		c, err := Parse(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(c.Providers.Names(), ","), "mock,standard"; got != want {
			t.Fatalf("Names()=%q, want %q", got, want)
		}
		if got, want := c.Payment.Provider, ProviderMock; got != want {
			t.Fatalf("Payment.Provider=%q, want %q", got, want)
		}
	})

	t.Run("FileWithoutProviders", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte("[server]\nlisten = \"127.0.0.1:8080\"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "config: providers: no provider is configured") {
			t.Fatalf("err=%v, want one saying no provider is configured", err)
		}
	})

	t.Run("OnlyStandard", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte("[providers.standard]\nwebhook_secret = \""+testSecret("std")+"\"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Providers.Mock != nil || c.Providers.Stripe != nil {
			t.Fatalf("Providers=%q, want only standard", c.Providers.Names())
		}
		if got, want := c.Payment.Provider, ProviderStandard; got != want {
			t.Fatalf("Payment.Provider=%q, want %q (the only one configured)", got, want)
		}
	})

	t.Run("NamedAbsentProvider", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte("[payment]\nprovider = \"mock\"\n[providers.standard]\nwebhook_secret = \""+testSecret("std")+"\"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "config: payment.provider: \"mock\" is not configured") {
			t.Fatalf("err=%v, want payment.provider naming the absent mock", err)
		}
	})

	t.Run("EnvAddsNoProvider", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte("[providers.standard]\nwebhook_secret = \""+testSecret("std")+"\"\n"), env(map[string]string{
			"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY":   "sk_test_env",
			"PAYSTATE_PROVIDERS_MOCK_WEBHOOK_SECRET": testSecret("mock"),
		}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(c.Providers.Names(), ","), "standard"; got != want {
			t.Fatalf("Names()=%q, want %q", got, want)
		}
	})

	t.Run("EmptyStripeTableTakesEnv", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte("[payment]\nprovider = \"stripe\"\n[providers.stripe]\n"), env(map[string]string{
			"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY":     "sk_test_env",
			"PAYSTATE_PROVIDERS_STRIPE_WEBHOOK_SECRET": "whsec_env",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Providers.Stripe.SecretKey, "sk_test_env"; got != want {
			t.Fatalf("SecretKey=%q, want %q", got, want)
		}
	})
}

// TestParse_Public: on a non-loopback listen address the development secret
// is refused for every provider, and the mock needs allow_public.
func TestParse_Public(t *testing.T) {
	t.Parallel()
	const head = "[server]\nlisten = \"0.0.0.0:8080\"\n[auth]\napi_keys = [\"0123456789abcdef\"]\n"
	for _, tt := range []struct {
		name, toml, key string
	}{
		{"MockDefaultSecret", "[providers.mock]\nallow_public = true\n", "providers.mock.webhook_secret"},
		{"MockNotAllowed", "[providers.mock]\nwebhook_secret = \"" + testSecret("mock") + "\"\n", "providers.mock.allow_public"},
		{"StandardDefaultSecret", "[providers.standard]\n", "providers.standard.webhook_secret"},
		{"StandardDevSecret", "[providers.standard]\nwebhook_secret = \"" + DevelopmentWebhookSecret + "\"\n", "providers.standard.webhook_secret"},
		{"StripeDevSecret", "[providers.stripe]\nsecret_key = \"sk_test_x\"\nwebhook_secret = \"" + DevelopmentWebhookSecret + "\"\n", "providers.stripe.webhook_secret"},
		{"StandardOwnSecret", "[providers.standard]\nwebhook_secret = \"" + testSecret("std") + "\"\n", ""},
		{"MockAllowed", "[providers.mock]\nallow_public = true\nwebhook_secret = \"" + testSecret("mock") + "\"\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(head+tt.toml), nil)
			if tt.key == "" {
				if err != nil {
					t.Fatalf("err=%v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "config: "+tt.key+": ") {
				t.Fatalf("err=%v, want one naming %s", err, tt.key)
			}
			if strings.Count(err.Error(), "\n") != 0 {
				t.Fatalf("err=%q, want one line", err)
			}
		})
	}
}

// TestParse_Production: paystate is in production with an API key (in the
// file or the environment), a non-loopback listen or server.allowed_hosts;
// a TLS proxy in front of a loopback listener is production. Then the
// development secret (also when only the environment could have replaced
// it) and the mock without allow_public are refused, each in one line
// naming the key; the embedded defaults, with no key, stay the
// development mode.
func TestParse_Production(t *testing.T) {
	t.Parallel()
	const (
		loopback = "[server]\nlisten = \"127.0.0.1:8080\"\n"
		keyFile  = loopback + "[auth]\napi_keys = [\"0123456789abcdef\"]\n"
	)
	keyEnv := map[string]string{"PAYSTATE_AUTH_API_KEYS": "0123456789abcdef"}
	hook := func(secret string) string {
		return "[[webhooks]]\nurl = \"https://shop.example.com/h\"\nsecret = \"" + secret + "\"\nevents = [\"payment.captured\"]\n"
	}
	stripe := "[providers.stripe]\nsecret_key = \"sk_test_x\"\nwebhook_secret = \"whsec_x\"\n"
	for _, tt := range []struct {
		name, toml string
		env        map[string]string
		key        string // "" for valid
	}{
		{"KeyInFile/Mock", keyFile + "[providers.mock]\nwebhook_secret = \"" + testSecret("mock") + "\"\n", nil, "providers.mock.allow_public"},
		{"KeyInFile/StandardDefault", keyFile + "[providers.standard]\n", nil, "providers.standard.webhook_secret"},
		{"KeyInEnv/Mock", loopback + "[providers.mock]\nwebhook_secret = \"" + testSecret("mock") + "\"\n", keyEnv, "providers.mock.allow_public"},
		{"KeyInEnv/StandardDefault", loopback + "[providers.standard]\n", keyEnv, "providers.standard.webhook_secret"},
		{"KeyInEnv/StripeDevSecretFromEnv", loopback + "[providers.stripe]\n", map[string]string{
			"PAYSTATE_AUTH_API_KEYS": "0123456789abcdef", "PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY": "sk_test_env",
			"PAYSTATE_PROVIDERS_STRIPE_WEBHOOK_SECRET": DevelopmentWebhookSecret,
		}, "providers.stripe.webhook_secret"},
		{"KeyInEnv/StandardSecretFromEnv", loopback + "[providers.standard]\n", map[string]string{
			"PAYSTATE_AUTH_API_KEYS": "0123456789abcdef", "PAYSTATE_PROVIDERS_STANDARD_WEBHOOK_SECRET": testSecret("std"),
		}, ""},
		{"KeyInEnv/MerchantWebhookDevSecret", loopback + stripe + hook(DevelopmentWebhookSecret), keyEnv, "webhooks[0].secret"},
		{"AllowedHosts/Mock", loopback + "[providers.mock]\nwebhook_secret = \"" + testSecret("mock") + "\"\n",
			map[string]string{"PAYSTATE_SERVER_ALLOWED_HOSTS": "pay.example.com"}, "providers.mock.allow_public"},
		{"KeyInEnv/MockAllowed", loopback + "[providers.mock]\nallow_public = true\nwebhook_secret = \"" + testSecret("mock") + "\"\n", keyEnv, ""},
		{"KeyInEnv/Stripe", loopback + stripe + hook(testSecret("hook")), keyEnv, ""},
		{"Development/Mock", loopback + "[providers.mock]\n", nil, ""},
		{"Development/Merchant", loopback + stripe + hook(DevelopmentWebhookSecret), nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tt.toml), env(tt.env))
			if tt.key == "" {
				if err != nil {
					t.Fatalf("err=%v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "config: "+tt.key+": ") || !strings.Contains(err.Error(), "production") {
				t.Fatalf("err=%v (config %+v), want one naming %s and production", err, c.Server, tt.key)
			}
			if strings.Count(err.Error(), "\n") != 0 {
				t.Fatalf("err=%q, want one line", err)
			}
		})
	}

	t.Run("EmbeddedDefaults", func(t *testing.T) {
		t.Parallel()
		c, err := Parse(nil, nil)
		if err != nil || c.Production() {
			t.Fatalf("no file, no key: err=%v, Production()=%v, want the development mode", err, c.Production())
		}
		_, err = Parse(nil, env(keyEnv))
		if err == nil || !strings.Contains(err.Error(), "providers.mock.allow_public") {
			t.Fatalf("no file, a key: err=%v, want the mock refused", err)
		}
	})
}

// TestParse_Bounds: error messages stay short whatever the file holds.
func TestParse_Bounds(t *testing.T) {
	t.Parallel()

	t.Run("ThousandsOfUnknownKeys", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		b.WriteString("[server]\n")
		for i := range 3000 {
			fmt.Fprintf(&b, "k%d = 1\n", i)
		}
		_, err := Parse([]byte(b.String()), nil)
		if err == nil {
			t.Fatal("err=nil, want unknown keys")
		}
		msg := err.Error()
		if got, want := strings.Count(msg, "unknown key "), maxUnknownReported; got != want {
			t.Errorf("%d keys listed, want %d", got, want)
		}
		if !strings.Contains(msg, "3000 unknown keys in all") {
			t.Errorf("err=%q, want the count of unknown keys", msg)
		}
		if len(msg) > 1000 {
			t.Errorf("message is %d bytes, want a short one", len(msg))
		}
	})

	t.Run("HugeValue", func(t *testing.T) {
		t.Parallel()
		huge := strings.Repeat("x", 100000)
		for _, doc := range []string{
			"[server]\nlisten = \"" + huge + "\"\n",
			"[log]\nlevel = \"" + huge + "\"\n",
			"[server]\n" + huge + " = 1\n",
			"[lease]\nttl = \"" + huge + "\"\n",
		} {
			_, err := Parse([]byte(doc), nil)
			if err == nil {
				t.Fatal("err=nil, want an error")
			}
			if len(err.Error()) > 1000 {
				t.Errorf("message is %d bytes for a %d-byte value, want a short one", len(err.Error()), len(huge))
			}
		}
	})

	t.Run("InvalidListenIsInvalid", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte("[server]\nlisten = \"no such host:8080\"\n[providers.standard]\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "is not a host name or IP address") || strings.Contains(err.Error(), "loopback") {
			t.Fatalf("err=%v, want invalid listen address, not a loopback complaint", err)
		}
	})
}

// TestConfig_Masked_URLQuery: check masks credentials inside URLs, query
// values included.
func TestConfig_Masked_URLQuery(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	w := validWebhook()
	w.URL = "https://hook-user@shop.example.com/hooks?token=s3cr3t-token&v=2#frag-secret"
	c.Webhooks = []Webhook{w}
	out, err := c.Masked().TOML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s3cr3t-token", "hook-user", "frag-secret"} {
		if strings.Contains(string(out), s) {
			t.Errorf("masked config shows %q:\n%s", s, out)
		}
	}
	if want := "https://***@shop.example.com/hooks?token=***&v=***#***"; !strings.Contains(string(out), want) {
		t.Errorf("masked config lacks %q:\n%s", want, out)
	}
}
