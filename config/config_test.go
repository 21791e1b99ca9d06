package config

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// env returns a getenv reading from m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// testSecret returns a valid Standard Webhooks secret built from seed.
func testSecret(seed string) string {
	b := []byte(strings.Repeat(seed, 32/len(seed)+1))[:32]
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func TestDevelopmentWebhookSecret(t *testing.T) {
	t.Parallel()
	rest, ok := strings.CutPrefix(DevelopmentWebhookSecret, "whsec_")
	if !ok {
		t.Fatalf("DevelopmentWebhookSecret=%q, want whsec_ prefix", DevelopmentWebhookSecret)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(key), "paystate-development-secret-0000"; got != want {
		t.Fatalf("decoded secret=%q, want %q", got, want)
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, tt := range []struct {
		key       string
		got, want any
	}{
		{"server.listen", c.Server.Listen, "127.0.0.1:8080"},
		{"server.max_body", c.Server.MaxBody, 262144},
		{"server.shutdown_timeout", c.Server.ShutdownTimeout.Duration, 10 * time.Second},
		{"storage.backend", c.Storage.Backend, "bolt"},
		{"storage.path", c.Storage.Path, "./paystate.db"},
		{"storage.dsn", c.Storage.DSN, ""},
		{"storage.max_conns", c.Storage.MaxConns, 16},
		{"auth.api_keys", len(c.Auth.APIKeys), 0},
		{"log.level", c.Log.Level, "info"},
		{"log.format", c.Log.Format, "console"},
		{"lease.ttl", c.Lease.TTL.Duration, 30 * time.Second},
		{"payment.expire_after", c.Payment.ExpireAfter.Duration, time.Hour},
		{"payment.provider", c.Payment.Provider, "mock"},
		{"idempotency.ttl", c.Idempotency.TTL.Duration, 24 * time.Hour},
		{"webhook_inbox.processed_retention", c.WebhookInbox.ProcessedRetention.Duration, 720 * time.Hour},
		{"webhook_inbox.tolerance", c.WebhookInbox.Tolerance.Duration, 5 * time.Minute},
		{"sweeper.interval", c.Sweeper.Interval.Duration, time.Minute},
		{"sweeper.min_age", c.Sweeper.MinAge.Duration, 10 * time.Minute},
		{"sweeper.give_up_after", c.Sweeper.GiveUpAfter.Duration, 24 * time.Hour},
		{"sweeper.rate_per_second", c.Sweeper.RatePerSecond, 5.0},
		{"ripple.workers", c.Ripple.Workers, 4},
		{"ripple.max_attempts", c.Ripple.MaxAttempts, 15},
		{"ripple.backoff_base", c.Ripple.BackoffBase.Duration, time.Second},
		{"ripple.backoff_cap", c.Ripple.BackoffCap.Duration, time.Hour},
		{"loyalty.points_per_unit", c.Loyalty.PointsPerUnit, int64(1)},
		{"receipt.smtp_addr", c.Receipt.SMTPAddr, ""},
		{"receipt.from", c.Receipt.From, "receipts@example.com"},
		{"webhooks", len(c.Webhooks), 0},
		{"providers.mock.webhook_secret", c.Providers.Mock.WebhookSecret, DevelopmentWebhookSecret},
		{"providers.mock.webhook_url", c.Providers.Mock.WebhookURL, ""},
		{"providers.mock.webhook_delay", c.Providers.Mock.WebhookDelay.Duration, 50 * time.Millisecond},
		{"providers.mock.duplicate_rate", c.Providers.Mock.DuplicateRate, 0.0},
		{"providers.mock.reorder", c.Providers.Mock.Reorder, false},
		{"providers.mock.max_charges", c.Providers.Mock.MaxCharges, 25_000},
		{"providers.standard.webhook_secret", c.Providers.Standard.WebhookSecret, DevelopmentWebhookSecret},
		{"providers.stripe", c.Providers.Stripe == nil, true},
		{"server.allowed_hosts", len(c.Server.AllowedHosts), 0},
		{"server.pprof", c.Server.Pprof, false},
		{"sweeper.parallel", c.Sweeper.Parallel, 8},
		{"auth.session_ttl", c.Auth.SessionTTL.Duration, 12 * time.Hour},
		{"webhook_inbox.max_attempts", c.WebhookInbox.MaxAttempts, 20},
		{"ripple.retention", c.Ripple.Retention.Duration, 720 * time.Hour},
		{"providers.mock.allow_public", c.Providers.Mock.AllowPublic, false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s=%v, want %v", tt.key, tt.got, tt.want)
		}
	}
	if got, want := c.Providers.Names(), []string{"mock", "standard"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Providers.Names()=%q, want %q", got, want)
	}
}

// TestExample keeps config.example.toml equal to DefaultConfig and makes it
// spell out every key, so the example never drifts.
func TestExample(t *testing.T) {
	t.Parallel()
	const path = "../config.example.toml"

	t.Run("EqualsDefaults", func(t *testing.T) {
		t.Parallel()
		got, err := LoadEnv(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := DefaultConfig(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s decodes to\n%+v\nwant DefaultConfig()\n%+v", path, got, want)
		}
	})

	t.Run("EveryKey", func(t *testing.T) {
		t.Parallel()
		var c Config
		md, err := toml.DecodeFile(path, &c)
		if err != nil {
			t.Fatal(err)
		}
		present := make(map[string]bool)
		for _, k := range md.Keys() {
			present[k.String()] = true
		}
		known := knownKeys()
		for k := range known {
			// The [[webhooks]] block is commented out: the default has no
			// merchant endpoint. testdata/webhooks.toml covers its keys.
			if k == "webhooks" || strings.HasPrefix(k, "webhooks.") {
				continue
			}
			// Likewise [providers.stripe]: a present table turns Stripe on.
			if k == "providers.stripe" || strings.HasPrefix(k, "providers.stripe.") || k == "providers.mollie" || strings.HasPrefix(k, "providers.mollie.") {
				continue
			}
			// And [providers.paypal].
			if k == "providers.paypal" || strings.HasPrefix(k, "providers.paypal.") {
				continue
			}
			if isTable(known, k) {
				continue
			}
			if !present[k] {
				t.Errorf("%s does not set key %q", path, k)
			}
		}
	})

	t.Run("CommentedWebhooksBlock", func(t *testing.T) {
		t.Parallel()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"[[webhooks]]", "url", "secret", "secrets", "events", "timeout", "max_in_flight", "[providers.stripe]", "secret_key", "webhook_secret", "api_base", "flow", "[providers.stripe.checkout]", "success_url", "cancel_url", "adopt_payment_links",
			"[providers.paypal]", "client_id", "secret", "webhook_id", "verify", "cert_hosts", "ca_file", "return_url", "brand_name",
			"[providers.mollie]", "api_key", "redirect_url", "webhook_url", "unknown_id_backoff", "rate_per_second"} {
			if !strings.Contains(string(data), "# "+k) {
				t.Errorf("%s has no commented-out %q line", path, k)
			}
		}
	})
}

// isTable reports whether some key in keys lies below k.
func isTable(keys map[string]bool, k string) bool {
	for other := range keys {
		if strings.HasPrefix(other, k+".") {
			return true
		}
	}
	return false
}

func TestLoad_Webhooks(t *testing.T) {
	t.Parallel()
	c, err := LoadEnv(filepath.Join("testdata", "webhooks.toml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Webhook{
		{
			URL:    "https://shop.example.com/hooks/paystate",
			Secret: "whsec_bWVyY2hhbnQtZW5kcG9pbnQtc2VjcmV0LWN1cnJlbnQ=",
			Secrets: []string{
				"whsec_bWVyY2hhbnQtZW5kcG9pbnQtc2VjcmV0LW5leHQtMDE=",
				"whsec_bWVyY2hhbnQtZW5kcG9pbnQtc2VjcmV0LW9sZC0wMDI=",
			},
			Events:  []string{"payment.captured", "payment.failed", "payment.refunded"},
			Timeout: Duration{3 * time.Second},
		},
		{
			URL:     "http://10.0.0.7:9000/audit",
			Secrets: []string{"whsec_YXVkaXQtZW5kcG9pbnQtc2VjcmV0LTAwMDAwMDAwMDA="},
			Events:  []string{"payment.captured"},
			Timeout: Duration{DefaultWebhookTimeout},
		},
	}
	if got := c.Webhooks; !reflect.DeepEqual(got, want) {
		t.Fatalf("Webhooks=%+v, want %+v", got, want)
	}
	if got, want := len(c.Webhooks[0].SigningSecrets()), 3; got != want {
		t.Errorf("webhooks[0] SigningSecrets: %d secrets, want %d", got, want)
	}
	if got, want := c.Webhooks[1].SigningSecrets(), []string{"whsec_YXVkaXQtZW5kcG9pbnQtc2VjcmV0LTAwMDAwMDAwMDA="}; !reflect.DeepEqual(got, want) {
		t.Errorf("webhooks[1] SigningSecrets=%q, want %q", got, want)
	}
	// Keys the file leaves out keep their defaults.
	if got, want := c.Ripple.Workers, DefaultConfig().Ripple.Workers; got != want {
		t.Errorf("Ripple.Workers=%d, want default %d", got, want)
	}
	if got, want := c.Payment.Provider, "standard"; got != want {
		t.Errorf("Payment.Provider=%q, want %q", got, want)
	}
	if got, want := c.Loopback(), false; got != want {
		t.Errorf("Loopback()=%v, want %v", got, want)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()

	t.Run("NoPath", func(t *testing.T) {
		t.Parallel()
		got, err := LoadEnv("", nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := DefaultConfig(); !reflect.DeepEqual(got, want) {
			t.Fatalf("LoadEnv(\"\")=%+v, want DefaultConfig()", got)
		}
	})

	t.Run("NoPathEnv", func(t *testing.T) {
		t.Parallel()
		got, err := LoadEnv("", env(map[string]string{
			"PAYSTATE_AUTH_API_KEYS":                     "0123456789abcdef",
			"PAYSTATE_PROVIDERS_MOCK_ALLOW_PUBLIC":       "true",
			"PAYSTATE_PROVIDERS_MOCK_WEBHOOK_SECRET":     testSecret("mock"),
			"PAYSTATE_PROVIDERS_STANDARD_WEBHOOK_SECRET": testSecret("std"),
		}))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"0123456789abcdef"}; !reflect.DeepEqual(got.Auth.APIKeys, want) {
			t.Fatalf("Auth.APIKeys=%q, want %q", got.Auth.APIKeys, want)
		}
	})

	t.Run("ErrMissingFile", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "nope.toml")
		_, err := LoadEnv(path, nil)
		if err == nil || !strings.Contains(err.Error(), "nope.toml") {
			t.Fatalf("err=%v, want one naming the file", err)
		}
	})

	t.Run("ErrNamesFile", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "bad.toml")
		if err := os.WriteFile(path, []byte("[server]\nlistne = \"127.0.0.1:1\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadEnv(path, nil)
		if err == nil {
			t.Fatal("err=nil, want unknown key")
		}
		for _, want := range []string{path, `unknown key "server.listne"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err=%q, want it to contain %q", err, want)
			}
		}
	})
}

func TestParse_UnknownKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		toml  string
		want  []string
		never []string
	}{
		{"Misspelled", "[server]\nlistne = \"127.0.0.1:8080\"\n", []string{`config: unknown key "server.listne"`}, nil},
		{"WrongCase", "[server]\nListen = \"127.0.0.1:8080\"\n", []string{`config: unknown key "server.Listen"`}, nil},
		{"WrongCaseTable", "[Server]\nlisten = \"127.0.0.1:8080\"\n", []string{`unknown key "Server"`}, []string{"Server.listen"}},
		{"UnknownTable", "[serverr]\nlisten = \"x\"\nport = 1\n", []string{`unknown key "serverr"`}, []string{"serverr.listen", "serverr.port"}},
		{"TopLevel", "listen = \"127.0.0.1:8080\"\n", []string{`unknown key "listen"`}, nil},
		{"Provider", "[providers.worldpay]\nsecret = \"x\"\n", []string{`unknown key "providers.worldpay"`}, nil},
		{"DottedKey", "[server]\nlisten.host = \"x\"\n", []string{`server.listen`}, nil},
		{"InWebhooks", "[[webhooks]]\nurl = \"https://a.example\"\nsecert = \"x\"\nevents = [\"payment.captured\"]\n", []string{`unknown key "webhooks.secert"`}, nil},
		{"Several", "[server]\nlistne = 1\n[ripple]\nworker = 2\n", []string{`"server.listne"`, `"ripple.worker"`}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.toml), nil)
			if err == nil {
				t.Fatal("err=nil, want an unknown key")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err=%q, want it to contain %q", err, w)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(err.Error(), n) {
					t.Errorf("err=%q, want no mention of %q", err, n)
				}
			}
		})
	}
}

func TestParse_WrongType(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, toml, key string
	}{
		{"IntAsString", "[server]\nmax_body = \"big\"\n", "server.max_body"},
		{"StringAsInt", "[server]\nlisten = 8080\n", "server.listen"},
		{"DurationAsInt", "[lease]\nttl = 30\n", "lease.ttl"},
		{"DurationBadText", "[sweeper]\ninterval = \"soon\"\n", "sweeper.interval"},
		{"DurationAsBool", "[ripple]\nbackoff_cap = true\n", "ripple.backoff_cap"},
		{"ListAsString", "[auth]\napi_keys = \"0123456789abcdef\"\n", "auth.api_keys"},
		{"ListOfInts", "[auth]\napi_keys = [1, 2]\n", "auth.api_keys"},
		{"BoolAsString", "[providers.mock]\nreorder = \"yes\"\n", "providers.mock.reorder"},
		{"FloatAsString", "[sweeper]\nrate_per_second = \"5\"\n", "sweeper.rate_per_second"},
		{"TableAsValue", "server = 1\n", "server"},
		{"WebhookURL", "[[webhooks]]\nurl = 1\n", "webhooks.url"},
		{"WebhooksAsTable", "[webhooks]\nurl = \"https://a.example\"\n", "webhooks"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.toml), nil)
			if err == nil {
				t.Fatal("err=nil, want a type error")
			}
			if !strings.Contains(err.Error(), `"`+tt.key+`"`) {
				t.Fatalf("err=%q, want it to name %q", err, tt.key)
			}
		})
	}
}

func TestParse_Syntax(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("[server\nlisten = \n"), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("err=%v, want a config: syntax error", err)
	}
}

func TestParse_Env(t *testing.T) {
	t.Parallel()
	const file = `
[storage]
dsn = ""

[providers.mock]

[providers.standard]

[providers.stripe]
secret_key = "sk_test_file"
webhook_secret = "whsec_file"

[[webhooks]]
url = "https://shop.example.com/hooks"
secret = "FILE_SECRET_REPLACED_BY_ENV"
events = ["payment.captured"]
`
	stdSecret, mockSecret := testSecret("standard"), testSecret("mock")
	hookSecret, hookNext, hookOld := testSecret("hook-current"), testSecret("hook-next"), testSecret("hook-old")
	for _, tt := range []struct {
		env  string
		val  string
		got  func(Config) any
		want any
	}{
		{"PAYSTATE_AUTH_API_KEYS", " 0123456789abcdef, fedcba9876543210 ,", func(c Config) any { return c.Auth.APIKeys }, []string{"0123456789abcdef", "fedcba9876543210"}},
		{"PAYSTATE_STORAGE_DSN", "postgres://u:p@db/paystate", func(c Config) any { return c.Storage.DSN }, "postgres://u:p@db/paystate"},
		{"PAYSTATE_PROVIDERS_MOCK_WEBHOOK_SECRET", mockSecret, func(c Config) any { return c.Providers.Mock.WebhookSecret }, mockSecret},
		{"PAYSTATE_PROVIDERS_STANDARD_WEBHOOK_SECRET", stdSecret, func(c Config) any { return c.Providers.Standard.WebhookSecret }, stdSecret},
		{"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY", "sk_test_env", func(c Config) any { return c.Providers.Stripe.SecretKey }, "sk_test_env"},
		{"PAYSTATE_PROVIDERS_STRIPE_WEBHOOK_SECRET", "whsec_env", func(c Config) any { return c.Providers.Stripe.WebhookSecret }, "whsec_env"},
		{"PAYSTATE_WEBHOOKS_0_SECRET", hookSecret, func(c Config) any { return c.Webhooks[0].Secret }, hookSecret},
		{"PAYSTATE_WEBHOOKS_0_SECRETS", hookNext + "," + hookOld, func(c Config) any { return c.Webhooks[0].Secrets }, []string{hookNext, hookOld}},
	} {
		t.Run(tt.env, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{tt.env: tt.val}
			if tt.env != "PAYSTATE_WEBHOOKS_0_SECRET" {
				// The file's endpoint secret is a placeholder that only
				// the environment makes valid.
				vars["PAYSTATE_WEBHOOKS_0_SECRET"] = hookSecret
			}
			if tt.env == "PAYSTATE_AUTH_API_KEYS" {
				// A key is production: no development secret, and
				// the mock only where allowed.
				vars["PAYSTATE_PROVIDERS_MOCK_ALLOW_PUBLIC"] = "true"
				vars["PAYSTATE_PROVIDERS_MOCK_WEBHOOK_SECRET"] = mockSecret
				vars["PAYSTATE_PROVIDERS_STANDARD_WEBHOOK_SECRET"] = stdSecret
			}
			c, err := Parse([]byte(file), env(vars))
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.got(c); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("after %s: got %q, want %q", tt.env, got, tt.want)
			}
		})
	}

	t.Run("EmptyKeepsFile", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte(file), env(map[string]string{
			"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY": "",
			"PAYSTATE_WEBHOOKS_0_SECRET":           hookSecret,
		}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Providers.Stripe.SecretKey, "sk_test_file"; got != want {
			t.Fatalf("SecretKey=%q, want %q", got, want)
		}
	})

	t.Run("NoEndpointAdded", func(t *testing.T) {
		t.Parallel()
		c, err := Parse(nil, env(map[string]string{"PAYSTATE_WEBHOOKS_0_SECRET": hookSecret}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(c.Webhooks), 0; got != want {
			t.Fatalf("len(Webhooks)=%d, want %d", got, want)
		}
	})
}

func TestKnownKeys(t *testing.T) {
	t.Parallel()
	keys := knownKeys()
	for _, k := range []string{
		"server.listen", "server.max_body", "server.shutdown_timeout",
		"storage.backend", "storage.path", "storage.dsn", "storage.max_conns",
		"auth.api_keys", "log.level", "log.format", "lease.ttl",
		"payment.expire_after", "payment.provider", "idempotency.ttl",
		"webhook_inbox.processed_retention", "webhook_inbox.tolerance",
		"sweeper.interval", "sweeper.min_age", "sweeper.give_up_after", "sweeper.rate_per_second",
		"ripple.workers", "ripple.max_attempts", "ripple.backoff_base", "ripple.backoff_cap",
		"loyalty.points_per_unit", "receipt.smtp_addr", "receipt.from",
		"webhooks", "webhooks.url", "webhooks.secret", "webhooks.secrets", "webhooks.events",
		"providers.mock.webhook_secret", "providers.mock.webhook_url", "providers.mock.webhook_delay",
		"providers.mock.duplicate_rate", "providers.mock.webhook_first_rate", "providers.mock.reorder", "providers.mock.max_charges",
		"providers.standard.webhook_secret",
		"providers.stripe.secret_key", "providers.stripe.webhook_secret", "providers.stripe.api_base",
		"providers.stripe.flow", "providers.stripe.checkout.success_url", "providers.stripe.checkout.cancel_url",
		"providers.stripe.checkout.adopt_payment_links",
		"providers.mollie.api_key", "providers.mollie.api_base", "providers.mollie.redirect_url", "providers.mollie.webhook_url",
		"providers.mollie.webhook_secret", "providers.mollie.unknown_id_backoff", "providers.mollie.rate_per_second",
	} {
		if !keys[k] {
			t.Errorf("knownKeys() lacks %q", k)
		}
	}
	// A Duration is a value, not a table.
	if keys["lease.ttl.Duration"] {
		t.Error("knownKeys() descends into Duration")
	}
}

// TestProviders_NamesSorted: Names lists every configured provider, in
// the sorted order its comment promises.
func TestProviders_NamesSorted(t *testing.T) {
	p := Providers{Mock: &Mock{}, Standard: &Standard{}, Stripe: &Stripe{}, PayPal: &PayPal{}, Mollie: &Mollie{}}
	got := p.Names()
	if len(got) != 5 || !slices.IsSorted(got) {
		t.Fatalf("Names()=%q, want the five providers sorted", got)
	}
}
