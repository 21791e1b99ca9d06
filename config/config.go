// Package config holds paystate's configuration: the TOML file that
// config.example.toml documents key by key, its defaults (DefaultConfig), the
// environment variables that override it, and a validation that names the
// offending key in every message.
//
// Read (and LoadEnv, Parse) work in five steps: decode the TOML over
// DefaultConfig (a key that is absent keeps its default), reject every key
// paystate does not know, apply the environment, apply the command-line
// flags, then Validate. Durations are Go duration strings ("30s", "1h").
//
// # Environment
//
// Every key whose value is a scalar (a string, number, boolean or
// duration) or a list of scalars can be set as PAYSTATE_<TABLE>_<KEY>: the
// dotted key in upper case, dots and nesting turned into underscores. The
// list is derived from the toml tags of the structs below, so a key added
// to a section is covered as it is added:
//
//	PAYSTATE_SERVER_LISTEN                      server.listen
//	PAYSTATE_SERVER_ALLOWED_HOSTS               server.allowed_hosts (a list)
//	PAYSTATE_STORAGE_DSN                        storage.dsn
//	PAYSTATE_AUTH_API_KEYS                      auth.api_keys (a list)
//	PAYSTATE_SWEEPER_INTERVAL                   sweeper.interval ("30s")
//	PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY        providers.stripe.secret_key
//	PAYSTATE_PROVIDERS_MOCK_WEBHOOK_SECRET      providers.mock.webhook_secret
//	PAYSTATE_RELAY_NATS_URL                     relay.nats.url (it may carry a user and password, or a token)
//	PAYSTATE_WEBHOOKS_<i>_SECRET                webhooks[i].secret (i counts from 0, in file order)
//	PAYSTATE_WEBHOOKS_<i>_SECRETS               webhooks[i].secrets (a list)
//
// The rules:
//   - The environment wins over the file and over the embedded defaults (no
//     file); a command-line flag (serve -listen) wins over both.
//   - A variable that is unset or empty leaves the file's value in place:
//     the environment cannot empty a key.
//   - A list is comma-separated, spaces around items trimmed and empty
//     items dropped ("a, b," is ["a", "b"]); it replaces the file's list.
//   - Values are parsed as in the file: booleans true or false, integers in
//     decimal, durations as Go duration strings. A value that does not
//     parse is an error naming the variable and the key.
//   - PAYSTATE_PROVIDERS_<NAME>_ variables only fill provider tables the
//     configuration has (the file's, or mock and standard with no file):
//     a variable never adds a provider, which the presence of its table
//     turns on. Likewise PAYSTATE_WEBHOOKS_<i>_<KEY> sets keys of the i-th
//     [[webhooks]] entry of the file (all its keys, by index) and never
//     adds an endpoint. EnvWarnings reports such a variable, and a
//     misspelt one.
//
// Read reports which keys came from the environment (Origins); `paystate
// check` marks them in its output (Annotate).
package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/paystate/paystate/store"
)

// DevelopmentWebhookSecret is the Standard Webhooks secret that
// providers.mock.webhook_secret and providers.standard.webhook_secret default
// to, so that "paystate serve" runs with no config file and the README's tour
// can sign a webhook. It is "whsec_" followed by the base64 of the 32 bytes
// "paystate-development-secret-0000". It is public: set your own secret
// before anything but your own machine can reach the server. Validate refuses
// it for every provider and merchant endpoint in production (Production),
// and Warnings reports it wherever it is in use.
const DevelopmentWebhookSecret = "whsec_cGF5c3RhdGUtZGV2ZWxvcG1lbnQtc2VjcmV0LTAwMDA="

// Provider names, as payment.provider and the create request spell them.
const (
	ProviderMock     = "mock"
	ProviderStandard = "standard"
	ProviderStripe   = "stripe"
	ProviderPayPal   = "paypal"
	ProviderMollie   = "mollie"
)

// Config is paystate's whole configuration, one field per TOML section.
type Config struct {
	Server       Server       `toml:"server"`
	Storage      Storage      `toml:"storage"`
	Auth         Auth         `toml:"auth"`
	Log          Log          `toml:"log"`
	Lease        Lease        `toml:"lease"`
	Payment      Payment      `toml:"payment"`
	Idempotency  Idempotency  `toml:"idempotency"`
	WebhookInbox WebhookInbox `toml:"webhook_inbox"`
	Sweeper      Sweeper      `toml:"sweeper"`
	Ripple       Ripple       `toml:"ripple"`
	Loyalty      Loyalty      `toml:"loyalty"`
	Reconcile    Reconcile    `toml:"reconcile"`
	Receipt      Receipt      `toml:"receipt"`
	Webhooks     []Webhook    `toml:"webhooks"`
	Providers    Providers    `toml:"providers"`
	Relay        Relay        `toml:"relay"`
}

// Server is the [server] section: the HTTP listener.
type Server struct {
	// Listen is the host:port the HTTP server binds.
	Listen string `toml:"listen"`
	// MaxBody is the largest request body accepted, in bytes; larger → 413.
	MaxBody int `toml:"max_body"`
	// ShutdownTimeout bounds a graceful shutdown after SIGINT or SIGTERM.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// AllowedHosts are the Host names (without port, case-insensitive)
	// accepted when API keys are set; empty accepts any. In no-key mode only
	// localhost, 127.0.0.1 and [::1] are accepted, whatever this says.
	AllowedHosts []string `toml:"allowed_hosts"`
	// Pprof serves Go's profiles at /debug/pprof, behind the API key.
	Pprof bool `toml:"pprof"`
}

// Storage is the [storage] section: where the payments live.
type Storage struct {
	// Backend is "bolt", the embedded default, or "postgres": one
	// PostgreSQL database that several paystate instances share.
	Backend string `toml:"backend"`
	// Path is the bbolt data file.
	Path string `toml:"path"`
	// DSN is the PostgreSQL connection string for backend "postgres".
	DSN string `toml:"dsn"`
	// MaxConns caps the PostgreSQL connections of this instance; 0 is
	// the backend's default (16).
	MaxConns int `toml:"max_conns"`
}

// Auth is the [auth] section: the merchant API keys.
type Auth struct {
	// APIKeys are the accepted bearer tokens. With none, the server binds to
	// loopback only.
	APIKeys []string `toml:"api_keys"`
	// SessionTTL is how long a dashboard sign-in lasts.
	SessionTTL Duration `toml:"session_ttl"`
}

// Log is the [log] section.
type Log struct {
	// Level is one of trace, debug, info, warn, error.
	Level string `toml:"level"`
	// Format is "console" or "json".
	Format string `toml:"format"`
}

// Lease is the [lease] section: the per-payment lease taken before a PSP call.
type Lease struct {
	// TTL is how long a lease holds before another worker may take it.
	TTL Duration `toml:"ttl"`
}

// Payment is the [payment] section.
type Payment struct {
	// ExpireAfter is the age past which a payment stuck in created,
	// processing or requires_action is expired by the sweeper.
	ExpireAfter Duration `toml:"expire_after"`
	// Provider is the provider used when a create request names none:
	// "mock", "standard" or "stripe".
	Provider string `toml:"provider"`
}

// Idempotency is the [idempotency] section: merchant Idempotency-Key storage.
type Idempotency struct {
	// TTL is how long a key and its stored response are kept.
	TTL Duration `toml:"ttl"`
}

// WebhookInbox is the [webhook_inbox] section: incoming PSP webhooks.
type WebhookInbox struct {
	// ProcessedRetention is how long processed event ids are kept for
	// deduplication.
	ProcessedRetention Duration `toml:"processed_retention"`
	// Tolerance is the accepted distance between a webhook's signed
	// timestamp and now.
	Tolerance Duration `toml:"tolerance"`
	// MaxAttempts is how often an event is tried before it goes on the
	// review queue with its last error.
	MaxAttempts int `toml:"max_attempts"`
}

// Sweeper is the [sweeper] section: reconciliation and housekeeping.
type Sweeper struct {
	// Interval is the time between two passes.
	Interval Duration `toml:"interval"`
	// MinAge is how long a payment stays untouched before the sweeper asks
	// the PSP about it.
	MinAge Duration `toml:"min_age"`
	// GiveUpAfter is the age past which an unresolved payment goes to the
	// review queue.
	GiveUpAfter Duration `toml:"give_up_after"`
	// RatePerSecond limits PSP status calls, per provider.
	RatePerSecond float64 `toml:"rate_per_second"`
	// Parallel is how many candidates a pass handles at once.
	Parallel int `toml:"parallel"`
}

// Ripple is the [ripple] section: the outbox workers and their retries.
type Ripple struct {
	// Workers is the number of delivery goroutines.
	Workers int `toml:"workers"`
	// MaxAttempts is the number of tries before a delivery is dead-lettered.
	MaxAttempts int `toml:"max_attempts"`
	// BackoffBase is the first retry delay; each retry doubles it.
	BackoffBase Duration `toml:"backoff_base"`
	// BackoffCap is the longest retry delay.
	BackoffCap Duration `toml:"backoff_cap"`
	// Retention is how long delivered outbox records, their deliveries and
	// effect keys are kept before the sweeper purges them.
	Retention Duration `toml:"retention"`
}

// Loyalty is the [loyalty] section: the loyalty effect.
type Loyalty struct {
	// PointsPerUnit is the points credited per major currency unit.
	PointsPerUnit int64 `toml:"points_per_unit"`
}

// Reconcile is the [reconcile] section: settlement reconciliation.
type Reconcile struct {
	// SettleWithin is how long a captured payment may wait for the PSP's
	// settlement report: older and in no report, a run lists it
	// missing_at_psp.
	SettleWithin Duration `toml:"settle_within"`
}

// Receipt is the [receipt] section: the e-mail receipt effect, one
// message per captured payment to the customer's address.
type Receipt struct {
	// SMTPAddr is the SMTP server's host:port; empty turns receipts off.
	SMTPAddr string `toml:"smtp_addr"`
	// From is the sender address of receipts.
	From string `toml:"from"`
	// MerchantName is who the customer paid: the sender's name, in the
	// subject and in the built-in templates; empty: the domain of From.
	MerchantName string `toml:"merchant_name"`
	// TLS is how the connection is encrypted: "starttls" (the default:
	// STARTTLS required, a server without it gets nothing),
	// "starttls_optional" (STARTTLS when offered), "tls" (implicit TLS,
	// port 465) or "none".
	TLS string `toml:"tls"`
	// Username and Password authenticate to the server (AUTH); no
	// username, no AUTH. The password may come from
	// PAYSTATE_RECEIPT_PASSWORD and is masked by Masked.
	Username string `toml:"username"`
	Password string `toml:"password"`
	// CAFile is a PEM file of certificates (a private CA) trusted for the
	// server's certificate in addition to the system's roots.
	CAFile string `toml:"ca_file"`
	// TextTemplate and HTMLTemplate are files holding a Go text/template
	// and html/template for the text and the HTML part; empty: the
	// built-in ones. The text template may define "subject".
	TextTemplate string `toml:"text_template"`
	HTMLTemplate string `toml:"html_template"`
}

// Webhook is one [[webhooks]] entry: a merchant endpoint that receives
// outbox events signed per the Standard Webhooks spec.
type Webhook struct {
	// URL is the endpoint, an absolute http or https URL.
	URL string `toml:"url"`
	// Secret is the Standard Webhooks secret, "whsec_" + base64.
	Secret string `toml:"secret"`
	// Secrets are further secrets during a rotation; every secret, Secret
	// included, signs each delivery.
	Secrets []string `toml:"secrets"`
	// Events are the outbox event types sent, such as "payment.captured".
	Events []string `toml:"events"`
	// Timeout bounds one delivery request; a hanging endpoint delays
	// nothing else. Absent or 0: DefaultWebhookTimeout.
	Timeout Duration `toml:"timeout"`
	// MaxInFlight caps the deliveries to this endpoint running at once (and
	// its open connections); 0 means the ripple default, 32.
	MaxInFlight int `toml:"max_in_flight"`
}

// Relay is the [relay] section: outbox events relayed to a message broker,
// each one more ripple target with its own retries and dead letters.
type Relay struct {
	NATS NATS `toml:"nats"`
}

// NATS is the [relay.nats] section: every outbox event published to NATS
// JetStream on <subject_prefix>.<event type>, the body being the merchant
// webhook's JSON and Nats-Msg-Id the event id.
type NATS struct {
	// URL is the NATS server, nats://host:4222 (tls://, ws://, wss://
	// too), or several servers of one cluster separated by commas; empty
	// turns the relay off. It may carry credentials
	// (nats://user:password@host, nats://token@host).
	URL string `toml:"url"`
	// Stream is the JetStream stream, created with the subjects
	// <subject_prefix>.> when missing; an existing stream is used as it is.
	Stream string `toml:"stream"`
	// SubjectPrefix is the first tokens of every subject.
	SubjectPrefix string `toml:"subject_prefix"`
}

// Enabled reports whether the relay is on: url is set.
func (n NATS) Enabled() bool { return n.URL != "" }

// DefaultWebhookTimeout is webhooks[].timeout when the file leaves it out.
const DefaultWebhookTimeout = 10 * time.Second

// SigningSecrets returns Secret followed by Secrets, without empty strings:
// every secret a delivery must be signed with.
func (w Webhook) SigningSecrets() []string {
	out := make([]string, 0, 1+len(w.Secrets))
	for _, s := range append([]string{w.Secret}, w.Secrets...) {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Providers is the [providers] section, one table per provider adapter. A
// provider exists only if its table is present (nil: absent). With no config
// file, DefaultConfig enables mock and standard; with a file, only the tables
// the file has. Environment variables fill providers that are present; they
// never add one.
type Providers struct {
	Mock     *Mock     `toml:"mock,omitempty"`
	Standard *Standard `toml:"standard,omitempty"`
	Stripe   *Stripe   `toml:"stripe,omitempty"`
	PayPal   *PayPal   `toml:"paypal,omitempty"`
	Mollie   *Mollie   `toml:"mollie,omitempty"`
}

// Names returns the names of the configured providers, sorted.
func (p Providers) Names() []string {
	var out []string
	if p.Mock != nil {
		out = append(out, ProviderMock)
	}
	if p.Mollie != nil {
		out = append(out, ProviderMollie)
	}
	if p.PayPal != nil {
		out = append(out, ProviderPayPal)
	}
	if p.Standard != nil {
		out = append(out, ProviderStandard)
	}
	if p.Stripe != nil {
		out = append(out, ProviderStripe)
	}
	return out
}

// Mock is the [providers.mock] section: the simulated PSP inside the binary.
type Mock struct {
	// AllowPublic lets the mock run in production (Config.Production: an
	// API key, a non-loopback listen, allowed_hosts). Without it such a
	// configuration is refused: the mock captures
	// whatever it is asked to, so a reachable one moves no real money but
	// makes fake payments look real.
	AllowPublic bool `toml:"allow_public"`
	// WebhookSecret signs the mock's webhooks (Standard Webhooks).
	WebhookSecret string `toml:"webhook_secret"`
	// WebhookURL is where the mock sends its webhooks; empty means this
	// server's own /webhooks/mock.
	WebhookURL string `toml:"webhook_url"`
	// WebhookDelay is the wait before the mock sends a webhook.
	WebhookDelay Duration `toml:"webhook_delay"`
	// DuplicateRate is the share of webhooks sent twice, in [0, 1].
	DuplicateRate float64 `toml:"duplicate_rate"`
	// WebhookFirstRate is the share of charges whose first webhook is
	// delivered before the synchronous answer returns, in [0, 1]: the
	// webhook then wins the race (chaos testing, `paystate simulate`).
	WebhookFirstRate float64 `toml:"webhook_first_rate"`
	// Reorder lets the mock send a payment's webhooks out of order.
	Reorder bool `toml:"reorder"`
	// MaxCharges bounds the charges the mock remembers (its memory): past
	// it the oldest is forgotten, as a real PSP prunes old idempotency
	// keys (psp/mock's documentation).
	MaxCharges int `toml:"max_charges"`
	// DisputeAfter is how long the dispute the mock opens for an amount
	// ending in 05 stays open before it closes, lost.
	DisputeAfter Duration `toml:"dispute_after"`
}

// Standard is the [providers.standard] section: report mode plus Standard
// Webhooks, for any PSP bridge that speaks them.
type Standard struct {
	// WebhookSecret verifies incoming webhooks (Standard Webhooks).
	WebhookSecret string `toml:"webhook_secret"`
}

// Stripe is the [providers.stripe] section; SecretKey and WebhookSecret are
// required (from the file or the environment).
type Stripe struct {
	// SecretKey is the Stripe API key, "sk_..." or a restricted "rk_...".
	SecretKey string `toml:"secret_key"`
	// WebhookSecret is the endpoint's signing secret, "whsec_...".
	WebhookSecret string `toml:"webhook_secret"`
	// APIBase overrides Stripe's API URL (stripe-mock in tests); empty means
	// Stripe's own.
	APIBase string `toml:"api_base"`
	// Flow is how a payment whose create names no flow is taken:
	// "payment_intent" (the default, "" too: Stripe.js on the merchant's
	// page) or "checkout" (a Checkout Session, Stripe's hosted page).
	Flow string `toml:"flow"`
	// Checkout is [providers.stripe.checkout].
	Checkout StripeCheckout `toml:"checkout"`
}

// StripeCheckout is [providers.stripe.checkout]: the Checkout Sessions and
// Payment Links.
type StripeCheckout struct {
	// SuccessURL and CancelURL are where Stripe sends the customer back
	// after paying or giving up, when the create has no return_url.
	SuccessURL string `toml:"success_url"`
	CancelURL  string `toml:"cancel_url"`
	// AdoptPaymentLinks makes a completed Checkout Session of a Payment
	// Link (made in Stripe's dashboard, not by paystate) a payment.
	AdoptPaymentLinks bool `toml:"adopt_payment_links"`
}

// PayPal is the [providers.paypal] section (docs/paypal.md); ClientID,
// Secret and WebhookID are required (from the file or the environment).
type PayPal struct {
	// ClientID and Secret are the REST app's credentials (PayPal's
	// developer dashboard, Apps & Credentials).
	ClientID string `toml:"client_id"`
	Secret   string `toml:"secret"`
	// APIBase is PayPal's API URL: empty means the live API,
	// https://api-m.sandbox.paypal.com the sandbox; a fake in tests.
	APIBase string `toml:"api_base"`
	// WebhookID is the id PayPal shows for the app's webhook; PayPal signs
	// it with every delivery.
	WebhookID string `toml:"webhook_id"`
	// Verify is how webhook signatures are checked: "offline" (the
	// default: the certificate chain and the signature, here) or "api"
	// (PayPal's verify-webhook-signature call).
	Verify string `toml:"verify"`
	// CertHosts are the hosts a webhook's PAYPAL-CERT-URL may name; empty
	// means PayPal's live and sandbox API hosts.
	CertHosts []string `toml:"cert_hosts"`
	// CAFile is a PEM of the roots the signing certificate must chain to;
	// empty means the system roots.
	CAFile string `toml:"ca_file"`
	// ReturnURL and CancelURL are where PayPal sends the buyer after
	// approving or cancelling, for a create without return_url.
	ReturnURL string `toml:"return_url"`
	CancelURL string `toml:"cancel_url"`
	// BrandName is shown to the buyer on PayPal's page; empty: the
	// account's business name.
	BrandName string `toml:"brand_name"`
}

// Mollie is the [providers.mollie] section (docs/mollie.md); APIKey and
// WebhookURL are required.
type Mollie struct {
	// APIKey is the Mollie API key, "live_..." or "test_...".
	APIKey string `toml:"api_key"`
	// APIBase overrides Mollie's API URL (a fake in tests); empty means
	// https://api.mollie.com/.
	APIBase string `toml:"api_base"`
	// RedirectURL is where Mollie sends the customer after paying when the
	// create has no return_url.
	RedirectURL string `toml:"redirect_url"`
	// WebhookURL is paystate's /webhooks/mollie as Mollie reaches it, sent
	// with every payment.
	WebhookURL string `toml:"webhook_url"`
	// WebhookSecret, when set, accepts Mollie's signed next-generation
	// webhooks (X-Mollie-Signature).
	WebhookSecret string `toml:"webhook_secret"`
	// UnknownIDBackoff is how long a payment id paystate does not know is
	// left unasked after one fetch.
	UnknownIDBackoff Duration `toml:"unknown_id_backoff"`
	// RatePerSecond bounds the fetches the webhooks cause (the sweeper's
	// own calls are bounded by sweeper.rate_per_second).
	RatePerSecond float64 `toml:"rate_per_second"`
}

// DefaultMollie is [providers.mollie] with every key at its default.
func DefaultMollie() Mollie {
	return Mollie{UnknownIDBackoff: Duration{10 * time.Minute}, RatePerSecond: 10}
}

// DefaultMock is [providers.mock] with every key at its default, as a
// present table starts.
func DefaultMock() Mock {
	return Mock{WebhookSecret: DevelopmentWebhookSecret, WebhookDelay: Duration{50 * time.Millisecond}, MaxCharges: 25_000,
		DisputeAfter: Duration{2 * time.Second}}
}

// DefaultStandard is [providers.standard] with every key at its default.
func DefaultStandard() Standard {
	return Standard{WebhookSecret: DevelopmentWebhookSecret}
}

// DefaultConfig returns the configuration paystate runs with when no file
// is given; config.example.toml spells out the same values.
func DefaultConfig() Config {
	return Config{
		Server: Server{
			Listen:          "127.0.0.1:8080",
			MaxBody:         256 << 10,
			ShutdownTimeout: Duration{10 * time.Second},
			AllowedHosts:    []string{},
		},
		Storage: Storage{
			Backend:  "bolt",
			Path:     "./paystate.db",
			MaxConns: 16,
		},
		Auth: Auth{APIKeys: []string{}, SessionTTL: Duration{12 * time.Hour}},
		Log: Log{
			Level:  "info",
			Format: "console",
		},
		Lease:       Lease{TTL: Duration{30 * time.Second}},
		Payment:     Payment{ExpireAfter: Duration{time.Hour}, Provider: ProviderMock},
		Idempotency: Idempotency{TTL: Duration{24 * time.Hour}},
		WebhookInbox: WebhookInbox{
			ProcessedRetention: Duration{30 * 24 * time.Hour},
			Tolerance:          Duration{5 * time.Minute},
			MaxAttempts:        20,
		},
		Sweeper: Sweeper{
			Interval:      Duration{time.Minute},
			MinAge:        Duration{10 * time.Minute},
			GiveUpAfter:   Duration{24 * time.Hour},
			RatePerSecond: 5,
			Parallel:      8,
		},
		Ripple: Ripple{
			Workers:     4,
			MaxAttempts: 15,
			BackoffBase: Duration{time.Second},
			BackoffCap:  Duration{time.Hour},
			Retention:   Duration{30 * 24 * time.Hour},
		},
		Loyalty:   Loyalty{PointsPerUnit: 1},
		Reconcile: Reconcile{SettleWithin: Duration{7 * 24 * time.Hour}},
		Receipt:   Receipt{From: "receipts@example.com", TLS: "starttls"},
		Providers: defaultProviders(),
		Relay:     Relay{NATS: NATS{Stream: "PAYSTATE", SubjectPrefix: "paystate"}},
	}
}

// defaultProviders are the providers of the embedded defaults (no config
// file): the mock and the standard provider, on the development secret.
func defaultProviders() Providers {
	m, s := DefaultMock(), DefaultStandard()
	return Providers{Mock: &m, Standard: &s}
}

// LoadEnv reads the TOML file at path and returns the validated
// configuration, with the environment read through getenv (nil reads
// nothing). An empty path means no file: DefaultConfig plus the
// environment.
func LoadEnv(path string, getenv func(string) string) (Config, error) {
	cfg, _, err := Read(Source{Path: path, Getenv: getenv})
	return cfg, err
}

// Read builds the validated configuration from src and reports which keys
// the environment and the flags set. Errors about the file start with its
// path.
func Read(src Source) (Config, Origins, error) {
	var data []byte
	if src.Path != "" {
		var err error
		if data, err = os.ReadFile(src.Path); err != nil {
			return Config{}, nil, fmt.Errorf("config: %w", err)
		}
	}
	cfg, origins, err := parse(data, src)
	if err != nil && src.Path != "" {
		err = fmt.Errorf("%s: %w", src.Path, err)
	}
	return cfg, origins, err
}

// Parse decodes TOML data over DefaultConfig, rejects unknown keys, applies
// the environment through getenv (nil reads nothing) and validates the
// result. Empty data yields the defaults.
func Parse(data []byte, getenv func(string) string) (Config, error) {
	cfg, _, err := parse(data, Source{Getenv: getenv})
	return cfg, err
}

// parse is Read of data (nil: no file).
func parse(data []byte, src Source) (Config, Origins, error) {
	cfg, err := decode(data)
	if err != nil {
		return Config{}, nil, err
	}
	origins, err := applyOverrides(&cfg, src.Getenv, src.Flags)
	if err != nil {
		return Config{}, nil, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, nil, blame(err, origins)
	}
	return cfg, origins, nil
}

// decode decodes data over DefaultConfig and rejects every key that does not
// map exactly, case included, onto a Config field.
func decode(data []byte) (Config, error) {
	cfg := DefaultConfig()
	if data == nil {
		return cfg, nil
	}
	// Every provider table starts at its defaults; those the file does not
	// have are removed after decoding.
	m, st, sp, pp, mo := DefaultMock(), DefaultStandard(), Stripe{}, PayPal{}, DefaultMollie()
	cfg.Providers = Providers{Mock: &m, Standard: &st, Stripe: &sp, PayPal: &pp, Mollie: &mo}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&cfg)
	if err != nil {
		return Config{}, fmt.Errorf("config: %s", clip(err.Error(), maxErrorText))
	}
	if !md.IsDefined("providers", ProviderMock) {
		cfg.Providers.Mock = nil
	}
	if !md.IsDefined("providers", ProviderStandard) {
		cfg.Providers.Standard = nil
	}
	if !md.IsDefined("providers", ProviderStripe) {
		cfg.Providers.Stripe = nil
	}
	if !md.IsDefined("providers", ProviderPayPal) {
		cfg.Providers.PayPal = nil
	}
	if !md.IsDefined("providers", ProviderMollie) {
		cfg.Providers.Mollie = nil
	}
	if !md.IsDefined("payment", "provider") {
		// The default provider is the only one configured; with several,
		// payment.provider must say which (Validate).
		if names := cfg.Providers.Names(); len(names) == 1 {
			cfg.Payment.Provider = names[0]
		} else if cfg.Providers.Mock == nil {
			cfg.Payment.Provider = ""
		}
	}
	for i := range cfg.Webhooks {
		if cfg.Webhooks[i].Timeout.Duration == 0 {
			cfg.Webhooks[i].Timeout = Duration{DefaultWebhookTimeout}
		}
	}

	// The decoder matches field names without regard to case; a key must
	// be spelled as documented, so "Listen" is as unknown as "listne".
	// Below an unknown table only the table itself is reported.
	known := knownKeys()
	var errs []error
	unknown := make(map[string]bool)
	count := 0
	report := func(k toml.Key) {
		for i := 1; i <= len(k); i++ {
			if unknown[k[:i].String()] {
				return
			}
		}
		unknown[k.String()] = true
		if count++; count <= maxUnknownReported {
			errs = append(errs, fmt.Errorf("config: unknown key %q", clip(k.String(), maxKeyText)))
		}
	}
	undecoded := make(map[string]bool)
	for _, k := range md.Undecoded() {
		undecoded[k.String()] = true
	}
	for _, k := range md.Keys() {
		if undecoded[k.String()] || !known[k.String()] {
			report(k)
		}
	}
	if count > maxUnknownReported {
		errs = append(errs, fmt.Errorf("config: %d unknown keys in all; the first %d are listed", count, maxUnknownReported))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// Bounds of what an error message repeats from the file: a config with
// thousands of unknown keys, or one huge value, gives a short message.
const (
	maxUnknownReported = 5
	maxKeyText         = 80
	maxValueText       = 80
	maxErrorText       = 400
)

// clip shortens s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("...(%d bytes)", len(s))
}

// knownKeys returns every dotted key a config file may contain, spelled as
// the toml tags spell it; keys inside [[webhooks]] carry no index.
func knownKeys() map[string]bool {
	keys := make(map[string]bool)
	addKeys(keys, "", reflect.TypeFor[Config]())
	return keys
}

// addKeys adds the keys of struct type t, under prefix, to keys. A struct
// that unmarshals itself from text (Duration) is one key, not a table.
func addKeys(keys map[string]bool, prefix string, t reflect.Type) {
	textType := reflect.TypeFor[encoding.TextUnmarshaler]()
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if prefix != "" {
			name = prefix + "." + name
		}
		keys[name] = true
		ft := f.Type
		if ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(textType) {
			addKeys(keys, name, ft)
		}
	}
}

// StoreConfig returns c with the backend of the [storage] section, and
// its file, DSN and connection cap where c leaves them unset (a command's
// -db FILE wins): what store.Open needs besides the clock and the logger.
func (s Storage) StoreConfig(c store.Config) store.Config {
	c.Backend = s.Backend
	if c.Path == "" {
		c.Path = s.Path
	}
	if c.DSN == "" {
		c.DSN = s.DSN
	}
	if c.MaxConns == 0 {
		c.MaxConns = s.MaxConns
	}
	return c
}

// Where names the database for a log line or a message: the file of
// "bolt", the DSN of "postgres" (mask it first: Config.Masked).
func (s Storage) Where() string {
	if s.Backend == "postgres" {
		return s.DSN
	}
	return s.Path
}
