package config

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
)

// validWebhook returns a merchant endpoint that passes Validate.
func validWebhook() Webhook {
	return Webhook{
		URL:    "https://shop.example.com/hooks",
		Secret: testSecret("endpoint"),
		Events: []string{"payment.captured"},
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	d := func(s string) Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			panic(err)
		}
		return Duration{v}
	}
	// hook sets webhooks to one valid endpoint edited by edit; hook1 puts a
	// valid endpoint before it, so the edited one is webhooks[1].
	hook := func(edit func(*Webhook)) func(*Config) {
		return func(c *Config) { w := validWebhook(); edit(&w); c.Webhooks = []Webhook{w} }
	}
	hook1 := func(edit func(*Webhook)) func(*Config) {
		return func(c *Config) { w := validWebhook(); edit(&w); c.Webhooks = []Webhook{validWebhook(), w} }
	}
	// public listens off loopback with an API key, then applies edit.
	public := func(edit func(*Config)) func(*Config) {
		return func(c *Config) {
			c.Server.Listen = "0.0.0.0:8080"
			c.Auth.APIKeys = []string{"0123456789abcdef"}
			edit(c)
		}
	}
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		key    string // the key the message must name; "" means valid
	}{
		{"Default", func(*Config) {}, ""},
		{"ListenPortZero", func(c *Config) { c.Server.Listen = "127.0.0.1:0" }, ""},
		{"ListenLocalhost", func(c *Config) { c.Server.Listen = "localhost:8080" }, ""},
		{"ListenIPv6Loopback", func(c *Config) { c.Server.Listen = "[::1]:8080" }, ""},
		{"ListenPublicWithKey", public(func(c *Config) {
			c.Providers.Mock = nil
			c.Payment.Provider = "standard"
			c.Providers.Standard.WebhookSecret = testSecret("standard")
		}), ""},
		{"ListenNoPort", func(c *Config) { c.Server.Listen = "127.0.0.1" }, "server.listen"},
		{"ListenBadPort", func(c *Config) { c.Server.Listen = "127.0.0.1:http" }, "server.listen"},
		{"ListenPortRange", func(c *Config) { c.Server.Listen = "127.0.0.1:70000" }, "server.listen"},
		{"ListenPublicNoKey", func(c *Config) { c.Server.Listen = "0.0.0.0:8080" }, "server.listen"},
		{"ListenAllNoKey", func(c *Config) { c.Server.Listen = ":8080" }, "server.listen"},
		{"MaxBodyZero", func(c *Config) { c.Server.MaxBody = 0 }, "server.max_body"},
		{"MaxBodyHuge", func(c *Config) { c.Server.MaxBody = MaxBodyLimit + 1 }, "server.max_body"},
		{"MaxBodyLimit", func(c *Config) { c.Server.MaxBody = MaxBodyLimit }, ""},
		{"ShutdownTimeoutZero", func(c *Config) { c.Server.ShutdownTimeout = Duration{} }, "server.shutdown_timeout"},
		{"BackendUnknown", func(c *Config) { c.Storage.Backend = "sqlite" }, "storage.backend"},
		{"BackendPostgres", func(c *Config) { c.Storage.Backend = "postgres"; c.Storage.DSN = "postgres://db/x" }, ""},
		{"BackendPostgresMaxConns", func(c *Config) {
			c.Storage.Backend, c.Storage.DSN, c.Storage.MaxConns = "postgres", "postgres://db/x", -1
		}, "storage.max_conns"},
		{"BackendPostgresNoDSN", func(c *Config) { c.Storage.Backend = "postgres" }, "storage.dsn"},
		{"PathEmpty", func(c *Config) { c.Storage.Path = "" }, "storage.path"},
		{"APIKeyEmpty", func(c *Config) { c.Auth.APIKeys = []string{"0123456789abcdef", ""} }, "auth.api_keys[1]"},
		{"APIKeyShort", func(c *Config) { c.Auth.APIKeys = []string{"short"} }, "auth.api_keys[0]"},
		{"APIKeySpace", func(c *Config) { c.Auth.APIKeys = []string{"0123456789 abcdef"} }, "auth.api_keys[0]"},
		{"LogLevel", func(c *Config) { c.Log.Level = "verbose" }, "log.level"},
		{"LogFormat", func(c *Config) { c.Log.Format = "text" }, "log.format"},
		{"LeaseTTLZero", func(c *Config) { c.Lease.TTL = Duration{} }, "lease.ttl"},
		{"ExpireAfterNegative", func(c *Config) { c.Payment.ExpireAfter = d("-1h") }, "payment.expire_after"},
		{"ProviderUnknown", func(c *Config) { c.Payment.Provider = "paypal" }, "payment.provider"},
		{"ProviderStripeNoKey", func(c *Config) { c.Payment.Provider = "stripe" }, "payment.provider"},
		{"ProviderStripe", func(c *Config) {
			c.Payment.Provider = "stripe"
			c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123", WebhookSecret: "whsec_123"}
		}, ""},
		{"ProviderStandardAbsent", func(c *Config) {
			c.Payment.Provider = "standard"
			c.Providers.Standard = nil
		}, "payment.provider"},
		{"ProviderMockAbsent", func(c *Config) { c.Providers.Mock = nil }, "payment.provider"},
		{"ProviderNone", func(c *Config) { c.Providers = Providers{} }, "providers"},
		{"ProviderSeveralUnnamed", func(c *Config) { c.Payment.Provider = "" }, "payment.provider"},
		{"MockSecretEmpty", func(c *Config) { c.Providers.Mock.WebhookSecret = "" }, "providers.mock.webhook_secret"},
		{"StandardSecretEmpty", func(c *Config) { c.Providers.Standard.WebhookSecret = "" }, "providers.standard.webhook_secret"},
		{"LeaseTTLNanosecond", func(c *Config) { c.Lease.TTL = d("1ns") }, "lease.ttl"},
		{"LeaseTTLSecond", func(c *Config) { c.Lease.TTL = d("1s") }, ""},
		{"SweeperIntervalTiny", func(c *Config) { c.Sweeper.Interval = d("99ms") }, "sweeper.interval"},
		{"SweeperInterval100ms", func(c *Config) { c.Sweeper.Interval = d("100ms") }, ""},
		{"InboxMaxAttemptsZero", func(c *Config) { c.WebhookInbox.MaxAttempts = 0 }, "webhook_inbox.max_attempts"},
		{"InboxMaxAttemptsHuge", func(c *Config) { c.WebhookInbox.MaxAttempts = MaxInboxAttempts + 1 }, "webhook_inbox.max_attempts"},
		{"RippleMaxAttemptsHuge", func(c *Config) { c.Ripple.MaxAttempts = 1 << 40 }, "ripple.max_attempts"},
		{"RateHuge", func(c *Config) { c.Sweeper.RatePerSecond = 1e12 }, "sweeper.rate_per_second"},
		{"SweeperParallelZero", func(c *Config) { c.Sweeper.Parallel = 0 }, "sweeper.parallel"},
		{"PointsHuge", func(c *Config) { c.Loyalty.PointsPerUnit = 1 << 50 }, "loyalty.points_per_unit"},
		{"RippleRetentionShort", func(c *Config) { c.Ripple.Retention = d("1m") }, "ripple.retention"},
		{"SessionTTLZero", func(c *Config) { c.Auth.SessionTTL = Duration{} }, "auth.session_ttl"},
		{"AllowedHosts", func(c *Config) {
			c.Server.AllowedHosts = []string{"pay.example.com", "10.0.0.1"}
			c.Providers.Mock.AllowPublic, c.Providers.Mock.WebhookSecret, c.Providers.Standard = true, testSecret("mock"), nil
		}, ""},
		{"AllowedHostsPort", func(c *Config) { c.Server.AllowedHosts = []string{"pay.example.com:443"} }, "server.allowed_hosts[0]"},
		{"ListenBadHost", func(c *Config) { c.Server.Listen = "no such host:8080" }, "server.listen"},
		{"WebhookMaxInFlightHuge", hook(func(w *Webhook) { w.MaxInFlight = 1000 }), "webhooks[0].max_in_flight"},
		{"WebhookTimeoutLong", hook(func(w *Webhook) { w.Timeout = d("1m") }), "webhooks[0].timeout"},
		{"MockPublic", public(func(c *Config) { c.Providers.Standard = nil; c.Providers.Mock.WebhookSecret = testSecret("mock") }), "providers.mock.allow_public"},
		{"MockPublicAllowed", public(func(c *Config) {
			c.Providers.Standard = nil
			c.Providers.Mock.WebhookSecret = testSecret("mock")
			c.Providers.Mock.AllowPublic = true
		}), ""},
		{"MockDevSecretPublic", public(func(c *Config) { c.Providers.Standard = nil; c.Providers.Mock.AllowPublic = true }), "providers.mock.webhook_secret"},
		{"StripeDevSecretPublic", public(func(c *Config) {
			c.Providers = Providers{Stripe: &Stripe{SecretKey: "sk_test_123", WebhookSecret: DevelopmentWebhookSecret}}
			c.Payment.Provider = "stripe"
		}), "providers.stripe.webhook_secret"},
		{"StripeNoKey", func(c *Config) { c.Providers.Stripe = &Stripe{WebhookSecret: "whsec_123"} }, "providers.stripe.secret_key"},
		{"IdempotencyTTLZero", func(c *Config) { c.Idempotency.TTL = Duration{} }, "idempotency.ttl"},
		{"ProcessedRetentionZero", func(c *Config) { c.WebhookInbox.ProcessedRetention = Duration{} }, "webhook_inbox.processed_retention"},
		{"ProcessedRetentionShort", func(c *Config) { c.WebhookInbox.ProcessedRetention = d("1m") }, "webhook_inbox.processed_retention"},
		{"ToleranceZero", func(c *Config) { c.WebhookInbox.Tolerance = Duration{} }, "webhook_inbox.tolerance"},
		{"SweeperIntervalZero", func(c *Config) { c.Sweeper.Interval = Duration{} }, "sweeper.interval"},
		{"SweeperMinAgeZero", func(c *Config) { c.Sweeper.MinAge = Duration{} }, ""},
		{"SweeperMinAgeNegative", func(c *Config) { c.Sweeper.MinAge = d("-1s") }, "sweeper.min_age"},
		{"GiveUpAfterZero", func(c *Config) { c.Sweeper.GiveUpAfter = Duration{} }, "sweeper.give_up_after"},
		{"GiveUpBeforeMinAge", func(c *Config) { c.Sweeper.GiveUpAfter = d("5m") }, "sweeper.give_up_after"},
		{"RateZero", func(c *Config) { c.Sweeper.RatePerSecond = 0 }, "sweeper.rate_per_second"},
		{"RateNaN", func(c *Config) { c.Sweeper.RatePerSecond = math.NaN() }, "sweeper.rate_per_second"},
		{"RateInf", func(c *Config) { c.Sweeper.RatePerSecond = math.Inf(1) }, "sweeper.rate_per_second"},
		{"WorkersZero", func(c *Config) { c.Ripple.Workers = 0 }, "ripple.workers"},
		{"WorkersMany", func(c *Config) { c.Ripple.Workers = MaxWorkers + 1 }, "ripple.workers"},
		{"MaxAttemptsZero", func(c *Config) { c.Ripple.MaxAttempts = 0 }, "ripple.max_attempts"},
		{"BackoffBaseZero", func(c *Config) { c.Ripple.BackoffBase = Duration{} }, "ripple.backoff_base"},
		{"BackoffCapZero", func(c *Config) { c.Ripple.BackoffCap = Duration{} }, "ripple.backoff_cap"},
		{"BackoffBaseOverCap", func(c *Config) { c.Ripple.BackoffBase = d("2h") }, "ripple.backoff_base"},
		{"PointsNegative", func(c *Config) { c.Loyalty.PointsPerUnit = -1 }, "loyalty.points_per_unit"},
		{"PointsZero", func(c *Config) { c.Loyalty.PointsPerUnit = 0 }, ""},
		{"SMTPAddr", func(c *Config) { c.Receipt.SMTPAddr = "localhost:2525" }, ""},
		{"SMTPAddrNoPort", func(c *Config) { c.Receipt.SMTPAddr = "localhost" }, "receipt.smtp_addr"},
		{"SMTPAddrNoHost", func(c *Config) { c.Receipt.SMTPAddr = ":25" }, "receipt.smtp_addr"},
		{"ReceiptFromEmpty", func(c *Config) { c.Receipt.SMTPAddr = "localhost:25"; c.Receipt.From = "" }, "receipt.from"},
		{"ReceiptFromBad", func(c *Config) { c.Receipt.From = "receipts" }, "receipt.from"},
		{"Webhook", func(c *Config) { c.Webhooks = []Webhook{validWebhook()} }, ""},
		{"WebhookURLRelative", hook1(func(w *Webhook) { w.URL = "/hooks" }), "webhooks[1].url"},
		{"WebhookURLScheme", hook(func(w *Webhook) { w.URL = "ftp://shop.example.com/hooks" }), "webhooks[0].url"},
		{"WebhookNoSecret", hook(func(w *Webhook) { w.Secret = "" }), "webhooks[0].secret"},
		{"WebhookOnlySecrets", hook(func(w *Webhook) { w.Secret, w.Secrets = "", []string{testSecret("next")} }), ""},
		{"WebhookSecretNoPrefix", hook1(func(w *Webhook) { w.Secret = strings.TrimPrefix(w.Secret, "whsec_") }), "webhooks[1].secret"},
		{"WebhookSecretBadBase64", hook(func(w *Webhook) { w.Secret = "whsec_not base64!" }), "webhooks[0].secret"},
		{"WebhookSecretShort", hook(func(w *Webhook) { w.Secret = "whsec_c2hvcnQ=" }), "webhooks[0].secret"},
		{"WebhookSecretsBad", hook(func(w *Webhook) { w.Secrets = []string{testSecret("next"), "whsec_"} }), "webhooks[0].secrets[1]"},
		{"WebhookNoEvents", hook(func(w *Webhook) { w.Events = nil }), "webhooks[0].events"},
		{"WebhookBadEvent", hook(func(w *Webhook) { w.Events = []string{"payment.captured", "captured"} }), "webhooks[0].events[1]"},
		{"WebhookBareEvent", hook(func(w *Webhook) { w.Events = []string{"payment."} }), "webhooks[0].events[0]"},
		{"WebhookEventStraySpace", hook(func(w *Webhook) { w.Events = []string{"payment.failed", "payment.captured "} }), "webhooks[0].events[1]"},
		{"WebhookEventTypo", hook(func(w *Webhook) { w.Events = []string{"payment.refund_succeeded"} }), "webhooks[0].events[0]"},
		{"WebhookEventUnknown", hook(func(w *Webhook) { w.Events = []string{"payment.nope"} }), "webhooks[0].events[0]"},
		{"WebhookEventsAll", hook(func(w *Webhook) { w.Events = pay.EventTypes() }), ""},
		{"MockSecretBad", func(c *Config) { c.Providers.Mock.WebhookSecret = "secret" }, "providers.mock.webhook_secret"},
		{"MockURL", func(c *Config) { c.Providers.Mock.WebhookURL = "http://127.0.0.1:9/webhooks/mock" }, ""},
		{"MockURLBad", func(c *Config) { c.Providers.Mock.WebhookURL = "127.0.0.1:9/webhooks/mock" }, "providers.mock.webhook_url"},
		{"MockDelayNegative", func(c *Config) { c.Providers.Mock.WebhookDelay = d("-1ms") }, "providers.mock.webhook_delay"},
		{"MockDelayZero", func(c *Config) { c.Providers.Mock.WebhookDelay = Duration{} }, ""},
		{"DuplicateRateHigh", func(c *Config) { c.Providers.Mock.DuplicateRate = 1.5 }, "providers.mock.duplicate_rate"},
		{"DuplicateRateNegative", func(c *Config) { c.Providers.Mock.DuplicateRate = -0.1 }, "providers.mock.duplicate_rate"},
		{"DuplicateRateNaN", func(c *Config) { c.Providers.Mock.DuplicateRate = math.NaN() }, "providers.mock.duplicate_rate"},
		{"DuplicateRateOne", func(c *Config) { c.Providers.Mock.DuplicateRate = 1 }, ""},
		{"MaxChargesZero", func(c *Config) { c.Providers.Mock.MaxCharges = 0 }, "providers.mock.max_charges"},
		{"MaxChargesHuge", func(c *Config) { c.Providers.Mock.MaxCharges = 20_000_000 }, "providers.mock.max_charges"},
		{"WebhookFirstRateHigh", func(c *Config) { c.Providers.Mock.WebhookFirstRate = 2 }, "providers.mock.webhook_first_rate"},
		{"StandardSecretBad", func(c *Config) { c.Providers.Standard.WebhookSecret = "whsec_%%%" }, "providers.standard.webhook_secret"},
		{"StandardDevSecretPublic", public(func(c *Config) { c.Providers.Mock = nil; c.Payment.Provider = "standard" }), "providers.standard.webhook_secret"},
		{"StandardAbsentPublic", public(func(c *Config) {
			c.Providers.Standard = nil
			c.Providers.Mock.WebhookSecret = testSecret("mock")
			c.Providers.Mock.AllowPublic = true
		}), ""},
		{"Mollie", func(c *Config) { c.Providers.Mollie = mollieConfig(nil) }, ""},
		{"MollieNoKey", func(c *Config) { c.Providers.Mollie = mollieConfig(func(m *Mollie) { m.APIKey = "" }) }, "providers.mollie.api_key"},
		{"MollieKeyPrefix", func(c *Config) { c.Providers.Mollie = mollieConfig(func(m *Mollie) { m.APIKey = "sk_test_1" }) }, "providers.mollie.api_key"},
		{"MollieNoWebhookURL", func(c *Config) { c.Providers.Mollie = mollieConfig(func(m *Mollie) { m.WebhookURL = "" }) }, "providers.mollie.webhook_url"},
		{"MollieRedirectBad", func(c *Config) { c.Providers.Mollie = mollieConfig(func(m *Mollie) { m.RedirectURL = "/back" }) }, "providers.mollie.redirect_url"},
		{"MollieAPIBaseBad", func(c *Config) { c.Providers.Mollie = mollieConfig(func(m *Mollie) { m.APIBase = "localhost:1" }) }, "providers.mollie.api_base"},
		{"MollieBackoff", func(c *Config) {
			c.Providers.Mollie = mollieConfig(func(m *Mollie) { m.UnknownIDBackoff.Duration = 0 })
		}, "providers.mollie.unknown_id_backoff"},
		{"MollieRate", func(c *Config) { c.Providers.Mollie = mollieConfig(func(m *Mollie) { m.RatePerSecond = -1 }) }, "providers.mollie.rate_per_second"},
		{"StripeKeyPublishable", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "pk_test_123", WebhookSecret: "whsec_123"}
		}, "providers.stripe.secret_key"},
		{"StripeNoWebhookSecret", func(c *Config) { c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123"} }, "providers.stripe.webhook_secret"},
		{"StripeWebhookSecretPrefix", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "rk_test_123", WebhookSecret: "secret"}
		}, "providers.stripe.webhook_secret"},
		{"StripeAPIBase", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123", WebhookSecret: "whsec_123", APIBase: "http://localhost:12111"}
		}, ""},
		{"StripeAPIBaseBad", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123", WebhookSecret: "whsec_123", APIBase: "localhost:12111"}
		}, "providers.stripe.api_base"},
		{"StripeFlowCheckout", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123", WebhookSecret: "whsec_123", Flow: "checkout",
				Checkout: StripeCheckout{SuccessURL: "https://shop.example/paid", CancelURL: "https://shop.example/cart", AdoptPaymentLinks: true}}
		}, ""},
		{"StripeFlowBad", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123", WebhookSecret: "whsec_123", Flow: "hosted"}
		}, "providers.stripe.flow"},
		{"StripeSuccessURLBad", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123", WebhookSecret: "whsec_123", Checkout: StripeCheckout{SuccessURL: "/paid"}}
		}, "providers.stripe.checkout.success_url"},
		{"StripeCancelURLBad", func(c *Config) {
			c.Providers.Stripe = &Stripe{SecretKey: "sk_test_123", WebhookSecret: "whsec_123", Checkout: StripeCheckout{CancelURL: "ftp://x"}}
		}, "providers.stripe.checkout.cancel_url"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.key == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate()=nil, want an error naming %s", tt.key)
			}
			if want := "config: " + tt.key + ": "; !strings.Contains(err.Error(), want) {
				t.Fatalf("Validate()=%q, want it to contain %q", err, want)
			}
		})
	}
}

func TestConfig_Validate_AllProblems(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.Server.MaxBody = -1
	c.Log.Level = "loud"
	c.Ripple.Workers = 0
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate()=nil, want three problems")
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Validate()=%T, want joined errors", err)
	}
	if got, want := len(joined.Unwrap()), 3; got != want {
		t.Fatalf("%d problems, want %d: %v", got, want, err)
	}
	for _, key := range []string{"server.max_body", "log.level", "ripple.workers"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("Validate()=%q, want it to name %s", err, key)
		}
	}
}

// TestConfig_Validate_NoSecretInMessage: a rejected secret is named by its
// key, never quoted.
func TestConfig_Validate_NoSecretInMessage(t *testing.T) {
	t.Parallel()
	const apiKey, hookSecret, stripeKey = "tiny-api-key", "whsec_dG9vLXNob3J0LXNlY3JldA==", "pk_live_LEAKED"
	c := DefaultConfig()
	c.Auth.APIKeys = []string{apiKey}
	c.Webhooks = []Webhook{{URL: "https://a.example/h", Secret: hookSecret, Events: []string{"payment.captured"}}}
	c.Providers.Stripe = &Stripe{SecretKey: stripeKey, WebhookSecret: "whsec_x"}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate()=nil, want errors")
	}
	for _, s := range []string{apiKey, hookSecret, stripeKey} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("Validate()=%q contains the secret %q", err, s)
		}
	}
}

func TestConfig_Loopback(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		listen string
		want   bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2:8080", true},
		{"localhost:8080", true},
		{"LOCALHOST:0", true},
		{"[::1]:8080", true},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
		{"10.0.0.1:8080", false},
		{"example.com:8080", false},
		{"127.0.0.1", false},
		{"", false},
	} {
		c := DefaultConfig()
		c.Server.Listen = tt.listen
		if got := c.Loopback(); got != tt.want {
			t.Errorf("Loopback() for %q=%v, want %v", tt.listen, got, tt.want)
		}
	}
}

func TestConfig_Warnings(t *testing.T) {
	t.Parallel()

	t.Run("Default", func(t *testing.T) {
		t.Parallel()
		got := strings.Join(DefaultConfig().Warnings(), "\n")
		for _, key := range []string{"auth.api_keys", "providers.mock", "providers.mock.webhook_secret", "providers.standard.webhook_secret"} {
			if !strings.Contains(got, key) {
				t.Errorf("Warnings()=%q, want one about %s", got, key)
			}
		}
	})

	t.Run("Configured", func(t *testing.T) {
		t.Parallel()
		c := DefaultConfig()
		c.Auth.APIKeys = []string{"0123456789abcdef"}
		c.Providers.Mock = nil
		c.Providers.Standard.WebhookSecret = testSecret("standard")
		c.Payment.Provider = "standard"
		if got := c.Warnings(); len(got) != 0 {
			t.Fatalf("Warnings()=%q, want none", got)
		}
	})
}

// mollieConfig is a valid [providers.mollie], changed by mutate.
func mollieConfig(mutate func(*Mollie)) *Mollie {
	m := DefaultMollie()
	m.APIKey, m.WebhookURL = "test_abc", "https://pay.example/webhooks/mollie"
	if mutate != nil {
		mutate(&m)
	}
	return &m
}
