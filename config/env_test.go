package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fullConfig is DefaultConfig with every provider table and two
// endpoints: every key the environment can reach.
func fullConfig() Config {
	c := DefaultConfig()
	m, st, sp, pp, mo := DefaultMock(), DefaultStandard(), Stripe{}, PayPal{}, DefaultMollie()
	c.Providers = Providers{Mock: &m, Standard: &st, Stripe: &sp, PayPal: &pp, Mollie: &mo}
	c.Webhooks = []Webhook{{URL: "https://a.example.com/h"}, {URL: "https://b.example.com/h"}}
	return c
}

// TestSettings_EveryKey: every key a file may hold that is not a table has
// an environment variable, found from the toml tags, so a key added later
// is covered without a change here; the variables are unique.
func TestSettings_EveryKey(t *testing.T) {
	t.Parallel()
	c := fullConfig()
	byKey := make(map[string]string)
	seen := make(map[string]string)
	for _, s := range settings(&c) {
		if other, dup := seen[s.env]; dup {
			t.Errorf("%s names both %s and %s", s.env, other, s.key)
		}
		seen[s.env] = s.key
		byKey[strings.ReplaceAll(strings.ReplaceAll(s.key, "[0]", ""), "[1]", "")] = s.env
	}
	known := knownKeys()
	for k := range known {
		if isTable(known, k) {
			continue
		}
		if _, ok := byKey[k]; !ok {
			t.Errorf("key %q has no environment variable", k)
		}
	}
	for key, want := range map[string]string{
		"server.listen":                     "PAYSTATE_SERVER_LISTEN",
		"providers.stripe.secret_key":       "PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY",
		"providers.mollie.api_key":          "PAYSTATE_PROVIDERS_MOLLIE_API_KEY",
		"relay.nats.url":                    "PAYSTATE_RELAY_NATS_URL",
		"storage.dsn":                       "PAYSTATE_STORAGE_DSN",
		"webhook_inbox.max_attempts":        "PAYSTATE_WEBHOOK_INBOX_MAX_ATTEMPTS",
		"providers.mock.webhook_delay":      "PAYSTATE_PROVIDERS_MOCK_WEBHOOK_DELAY",
		"server.allowed_hosts":              "PAYSTATE_SERVER_ALLOWED_HOSTS",
		"webhooks.secret":                   "PAYSTATE_WEBHOOKS_1_SECRET", // the last entry's
		"providers.standard.webhook_secret": "PAYSTATE_PROVIDERS_STANDARD_WEBHOOK_SECRET",
	} {
		if got := byKey[key]; got != want {
			t.Errorf("variable of %s=%q, want %q", key, got, want)
		}
	}
	if got, want := EnvName("webhooks[0].secrets"), "PAYSTATE_WEBHOOKS_0_SECRETS"; got != want {
		t.Errorf("EnvName=%q, want %q", got, want)
	}
}

// TestApplyOverrides_EveryKind sets each key from the environment alone,
// with a value of its kind, and reads the field back by reflection.
func TestApplyOverrides_EveryKind(t *testing.T) {
	t.Parallel()
	base := fullConfig()
	for _, s := range settings(&base) {
		t.Run(s.env, func(t *testing.T) {
			t.Parallel()
			c := fullConfig()
			i := slices.IndexFunc(settings(&c), func(o setting) bool { return o.key == s.key })
			field := settings(&c)[i].v
			var val string
			var want any
			switch field.Interface().(type) {
			case Duration:
				val, want = "7m30s", Duration{7*time.Minute + 30*time.Second}
			case string:
				val, want = "from-env-"+s.key, "from-env-"+s.key
			case []string:
				val, want = " a, b ,", []string{"a", "b"}
			case bool:
				val, want = fmt.Sprint(!field.Bool()), !field.Bool()
			case int:
				val, want = "7", 7
			case int64:
				val, want = "7", int64(7)
			case float64:
				val, want = "0.25", 0.25
			default:
				t.Fatalf("no test value for a %s: add one", field.Type())
			}
			origins, err := applyOverrides(&c, env(map[string]string{s.env: val}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := field.Interface(); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s=%q: %s=%v, want %v", s.env, val, s.key, got, want)
			}
			if got, want := origins, (Origins{s.key: s.env}); !reflect.DeepEqual(got, want) {
				t.Fatalf("origins=%v, want %v", got, want)
			}
		})
	}
}

func TestParse_EnvOverrides(t *testing.T) {
	t.Parallel()
	const file = `
[server]
listen = "127.0.0.1:8080"
max_body = 1000
[sweeper]
interval = "5m"
[providers.mock]
allow_public = true
webhook_secret = "whsec_bW9jay1zZWNyZXQtZm9yLWVudi10ZXN0cy0wMDAw"
duplicate_rate = 0.5
[providers.stripe]
secret_key = "sk_test_file"
webhook_secret = "whsec_file"
[payment]
provider = "mock"
`
	t.Run("WinsOverFile", func(t *testing.T) {
		t.Parallel()
		c, origins, err := (Source{Getenv: env(map[string]string{
			"PAYSTATE_SERVER_LISTEN":                 "127.0.0.1:9191",
			"PAYSTATE_SERVER_MAX_BODY":               "2048",
			"PAYSTATE_SERVER_ALLOWED_HOSTS":          "pay.example.com, api.example.com",
			"PAYSTATE_SERVER_PPROF":                  "true",
			"PAYSTATE_SWEEPER_INTERVAL":              "30s",
			"PAYSTATE_PROVIDERS_MOCK_DUPLICATE_RATE": "0",
			"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY":   "sk_test_env",
			"PAYSTATE_RELAY_NATS_URL":                "nats://127.0.0.1:4222",
			"PAYSTATE_LOG_LEVEL":                     "debug",
		})}.with(file))
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			key       string
			got, want any
		}{
			{"server.listen", c.Server.Listen, "127.0.0.1:9191"},
			{"server.max_body", c.Server.MaxBody, 2048},
			{"server.allowed_hosts", c.Server.AllowedHosts, []string{"pay.example.com", "api.example.com"}},
			{"server.pprof", c.Server.Pprof, true},
			{"sweeper.interval", c.Sweeper.Interval, Duration{30 * time.Second}},
			{"providers.mock.duplicate_rate", c.Providers.Mock.DuplicateRate, 0.0},
			{"providers.stripe.secret_key", c.Providers.Stripe.SecretKey, "sk_test_env"},
			{"providers.stripe.webhook_secret", c.Providers.Stripe.WebhookSecret, "whsec_file"},
			{"relay.nats.url", c.Relay.NATS.URL, "nats://127.0.0.1:4222"},
			{"log.level", c.Log.Level, "debug"},
		} {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s=%v, want %v", tt.key, tt.got, tt.want)
			}
		}
		if got, want := origins["server.listen"], "PAYSTATE_SERVER_LISTEN"; got != want {
			t.Errorf("origin of server.listen=%q, want %q", got, want)
		}
		if _, ok := origins["providers.stripe.webhook_secret"]; ok {
			t.Errorf("providers.stripe.webhook_secret came from the file, origins say otherwise")
		}
	})

	t.Run("WinsOverDefaults", func(t *testing.T) {
		t.Parallel()
		c, err := Parse(nil, env(map[string]string{"PAYSTATE_SERVER_LISTEN": "127.0.0.1:9292", "PAYSTATE_STORAGE_PATH": "/var/lib/paystate/p.db"}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Server.Listen, "127.0.0.1:9292"; got != want {
			t.Errorf("Listen=%q, want %q", got, want)
		}
		if got, want := c.Storage.Path, "/var/lib/paystate/p.db"; got != want {
			t.Errorf("Path=%q, want %q", got, want)
		}
	})

	t.Run("StorageDSN", func(t *testing.T) {
		t.Parallel()
		c, err := Parse([]byte("[storage]\nbackend = \"postgres\"\n[providers.mock]\n"), env(map[string]string{"PAYSTATE_STORAGE_DSN": "postgres://u:p@db:5432/paystate"}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Storage.DSN, "postgres://u:p@db:5432/paystate"; got != want {
			t.Errorf("DSN=%q, want %q", got, want)
		}
	})

	t.Run("FlagWinsOverEnv", func(t *testing.T) {
		t.Parallel()
		c, origins, err := Read(Source{
			Getenv: env(map[string]string{"PAYSTATE_SERVER_LISTEN": "127.0.0.1:9191"}),
			Flags:  []Flag{{Name: "-listen", Key: "server.listen", Value: "127.0.0.1:9393"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Server.Listen, "127.0.0.1:9393"; got != want {
			t.Errorf("Listen=%q, want %q", got, want)
		}
		if got, want := origins["server.listen"], "-listen"; got != want {
			t.Errorf("origin=%q, want %q", got, want)
		}
	})

	t.Run("ErrValueNamesVariableAndKey", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct{ name, key, val string }{
			{"PAYSTATE_SERVER_MAX_BODY", "server.max_body", "lots"},
			{"PAYSTATE_SWEEPER_INTERVAL", "sweeper.interval", "90"},
			{"PAYSTATE_SERVER_PPROF", "server.pprof", "yes please"},
			{"PAYSTATE_PROVIDERS_MOCK_DUPLICATE_RATE", "providers.mock.duplicate_rate", "half"},
			{"PAYSTATE_LOYALTY_POINTS_PER_UNIT", "loyalty.points_per_unit", "1.5"},
		} {
			name, key, val := tt.name, tt.key, tt.val
			_, err := Parse([]byte(file), env(map[string]string{name: val}))
			if err == nil {
				t.Errorf("%s=%q accepted", name, val)
				continue
			}
			for _, want := range []string{name, key, val} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s=%q: err=%q, want it to name %q", name, val, err, want)
				}
			}
		}
	})

	t.Run("ErrValidationNamesVariable", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte(file), env(map[string]string{"PAYSTATE_SERVER_LISTEN": "nowhere"}))
		if err == nil || !strings.Contains(err.Error(), "config: server.listen: ") || !strings.Contains(err.Error(), "(set by PAYSTATE_SERVER_LISTEN)") {
			t.Fatalf("err=%v, want server.listen set by PAYSTATE_SERVER_LISTEN", err)
		}
		_, err = Parse([]byte(file), env(map[string]string{"PAYSTATE_SERVER_ALLOWED_HOSTS": "ok.example.com,bad host"}))
		if err == nil || !strings.Contains(err.Error(), "server.allowed_hosts[1]") || !strings.Contains(err.Error(), "(set by PAYSTATE_SERVER_ALLOWED_HOSTS)") {
			t.Fatalf("err=%v, want server.allowed_hosts[1] set by PAYSTATE_SERVER_ALLOWED_HOSTS", err)
		}
	})

	t.Run("WebhookEntriesOfTheFileOnly", func(t *testing.T) {
		t.Parallel()
		const hooks = "[providers.mock]\n[[webhooks]]\nurl = \"https://shop.example.com/h\"\nsecret = \"placeholder\"\nevents = [\"payment.captured\"]\n"
		secret := testSecret("hook")
		c, err := Parse([]byte(hooks), env(map[string]string{
			"PAYSTATE_WEBHOOKS_0_SECRET":  secret,
			"PAYSTATE_WEBHOOKS_0_TIMEOUT": "3s",
			"PAYSTATE_WEBHOOKS_0_EVENTS":  "payment.captured,payment.refunded",
			"PAYSTATE_WEBHOOKS_1_URL":     "https://other.example.com/h",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(c.Webhooks), 1; got != want {
			t.Fatalf("len(Webhooks)=%d, want %d: the environment added an endpoint", got, want)
		}
		w := c.Webhooks[0]
		if w.Secret != secret || w.Timeout.Duration != 3*time.Second || !reflect.DeepEqual(w.Events, []string{"payment.captured", "payment.refunded"}) {
			t.Fatalf("webhooks[0]=%+v, want the environment's secret, timeout and events", w)
		}
	})
}

// with returns src reading data as its file.
func (src Source) with(data string) (Config, Origins, error) {
	return parse([]byte(data), src)
}

func TestAnnotate(t *testing.T) {
	t.Parallel()
	file := "[providers.mock]\nallow_public = true\n[[webhooks]]\nurl = \"https://a.example.com/h\"\nsecret = \"" + testSecret("a") + "\"\nevents = [\"payment.captured\"]\n" +
		"[[webhooks]]\nurl = \"https://b.example.com/h\"\nsecret = \"x\"\nevents = [\"payment.captured\"]\n"
	c, origins, err := Source{Getenv: env(map[string]string{
		"PAYSTATE_SERVER_LISTEN":                 "127.0.0.1:9494",
		"PAYSTATE_AUTH_API_KEYS":                 "key-0123456789abcdef",
		"PAYSTATE_WEBHOOKS_1_SECRET":             testSecret("b"),
		"PAYSTATE_PROVIDERS_MOCK_WEBHOOK_SECRET": testSecret("m"),
	})}.with(file)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.Masked().TOML()
	if err != nil {
		t.Fatal(err)
	}
	out := string(Annotate(doc, origins))
	for _, want := range []string{
		"listen = \"127.0.0.1:9494\" # from PAYSTATE_SERVER_LISTEN\n",
		"api_keys = [\"***\"] # from PAYSTATE_AUTH_API_KEYS\n",
		"secret = \"***\" # from PAYSTATE_WEBHOOKS_1_SECRET\n",
		"webhook_secret = \"***\" # from PAYSTATE_PROVIDERS_MOCK_WEBHOOK_SECRET\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("annotated document lacks %q:\n%s", want, out)
		}
	}
	if got, want := strings.Count(out, "# from "), 4; got != want {
		t.Errorf("%d marks, want %d (webhooks[0].secret came from the file):\n%s", got, want, out)
	}
	for _, s := range []string{"key-0123456789abcdef", testSecret("b"), testSecret("m")} {
		if strings.Contains(out, s) {
			t.Errorf("a secret is printed:\n%s", out)
		}
	}
	// The marks are comments: the document still parses to the same.
	plain, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(Annotate(plain, origins), nil)
	if err != nil {
		t.Fatalf("annotated document does not parse: %v", err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("the annotated document parses to\n%+v\nwant\n%+v", back, c)
	}
}

func TestEnvWarnings(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("[providers.mock]\n[[webhooks]]\nurl = \"https://a.example.com/h\"\nsecret = \""+testSecret("a")+"\"\nevents = [\"payment.captured\"]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := EnvWarnings(c, []string{
		"PAYSTATE_SERVER_LISTEN=127.0.0.1:1",             // sets a key: fine
		"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY=sk_test_x", // no [providers.stripe]
		"PAYSTATE_WEBHOOKS_3_SECRET=whsec_x",             // no 4th endpoint
		"PAYSTATE_SERVER_LISTN=127.0.0.1:1",              // misspelt
		"PAYSTATE_API_KEY=k",                             // the client's, not configuration
		"PAYSTATE_TEST_PG_DSN=postgres://x",              // not configuration
		"PAYSTATE_STORAGE_PATH=",                         // empty: unset
		"HOME=/root",
	})
	want := []string{
		"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY is set, but the configuration has no [providers.stripe]: ignored (the environment adds no provider)",
		"PAYSTATE_SERVER_LISTN is set, but names no configuration key: ignored",
		"PAYSTATE_WEBHOOKS_3_SECRET is set, but the file has no [[webhooks]] entry 3: ignored (the environment adds no endpoint; webhooks[3].secret)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("EnvWarnings=\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range got {
		if strings.Contains(w, "sk_test_x") || strings.Contains(w, "whsec_x") {
			t.Errorf("a warning repeats a value: %s", w)
		}
	}
}
