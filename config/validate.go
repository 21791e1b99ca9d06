package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/paystate/paystate/receipt"
)

// Limits Validate enforces.
const (
	// MaxBodyLimit is the largest server.max_body accepted: 64 MiB.
	MaxBodyLimit = 64 << 20
	// MaxWorkers is the largest ripple.workers accepted.
	MaxWorkers = 256
	// MinAPIKeyLength is the shortest API key accepted.
	MinAPIKeyLength = 16
	// MinWebhookSecretBytes is the shortest Standard Webhooks secret
	// accepted, in decoded bytes (the Standard Webhooks spec recommends 24
	// to 64).
	MinWebhookSecretBytes = 24
	// MaxInboxAttempts is the largest webhook_inbox.max_attempts accepted.
	MaxInboxAttempts = 1000
	// MaxRippleAttempts is the largest ripple.max_attempts accepted.
	MaxRippleAttempts = 100
	// MaxRatePerSecond is the largest sweeper.rate_per_second accepted.
	MaxRatePerSecond = 10000
	// MaxPointsPerUnit is the largest loyalty.points_per_unit accepted, so
	// points for the largest amount cannot overflow.
	MaxPointsPerUnit = 1000
	// MaxWebhookTimeout is the longest webhooks[].timeout: the Standard
	// Webhooks sender rules count a 2xx within 15 s.
	MaxWebhookTimeout = 15 * time.Second
	// MaxInFlight is the largest webhooks[].max_in_flight accepted.
	MaxInFlight = 256
)

// problems collects validation errors, each naming its key.
type problems []error

func (p *problems) addf(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
}

// check reports err, if any, under key.
func (p *problems) check(key string, err error) {
	if err != nil {
		p.addf(key, "%v", err)
	}
}

// url reports a value of key that is set and is not an absolute http or
// https URL (checkHTTPURL).
func (p *problems) url(key, v string) {
	if v != "" {
		p.check(key, checkHTTPURL(v))
	}
}

// positive reports a duration that is not greater than zero.
func (p *problems) positive(key string, d Duration) {
	if d.Duration <= 0 {
		p.addf(key, "must be greater than 0, got %q", d.String())
	}
}

// within reports a duration outside [lo, hi]; hi 0 means no upper bound.
func (p *problems) within(key string, d Duration, lo, hi time.Duration) {
	switch {
	case d.Duration < lo && hi > 0:
		p.addf(key, "must be between %s and %s, got %q", Duration{lo}, Duration{hi}, d.String())
	case d.Duration < lo:
		p.addf(key, "must be at least %s, got %q", Duration{lo}, d.String())
	case hi > 0 && d.Duration > hi:
		p.addf(key, "must be between %s and %s, got %q", Duration{lo}, Duration{hi}, d.String())
	}
}

// count reports an integer outside [lo, hi].
func (p *problems) count(key string, n, lo, hi int) {
	if n < lo || n > hi {
		p.addf(key, "must be between %d and %d, got %d", lo, hi, n)
	}
}

// nonNegative reports a negative duration.
func (p *problems) nonNegative(key string, d Duration) {
	if d.Duration < 0 {
		p.addf(key, "must not be negative, got %q", d.String())
	}
}

// Validate checks every field and returns all problems found, joined, each
// message starting with "config: " and the key's dotted name, such as
// "config: server.max_body: ..." or "config: webhooks[1].secret: ...".
// Messages never repeat a secret's value.
func (c Config) Validate() error {
	var p problems

	// [server]
	listenOK := true
	if err := checkHostPort(c.Server.Listen, false); err != nil {
		listenOK = false
		p.addf("server.listen", "%v", err)
	} else if len(c.Auth.APIKeys) == 0 && !c.Loopback() {
		p.addf("server.listen", "%s is not a loopback address and auth.api_keys is empty: set an API key or listen on 127.0.0.1", quote(c.Server.Listen))
	}
	// prod: in production (Production) nothing public - the development
	// secret, the mock - may move payment state; why names the reason in
	// the messages.
	why, prod := c.production(listenOK)
	if c.Server.MaxBody <= 0 || c.Server.MaxBody > MaxBodyLimit {
		p.addf("server.max_body", "must be between 1 and %d bytes, got %d", MaxBodyLimit, c.Server.MaxBody)
	}
	p.within("server.shutdown_timeout", c.Server.ShutdownTimeout, 100*time.Millisecond, time.Hour)
	for i, h := range c.Server.AllowedHosts {
		if !validHostname(h) {
			p.addf(fmt.Sprintf("server.allowed_hosts[%d]", i), "%s is not a host name or IP address (no port, no scheme)", quote(h))
		}
	}

	// [storage]
	switch c.Storage.Backend {
	case "bolt":
		if c.Storage.Path == "" {
			p.addf("storage.path", "required for backend \"bolt\"")
		}
	case "postgres":
		if c.Storage.DSN == "" {
			p.addf("storage.dsn", "required for backend \"postgres\" (or PAYSTATE_STORAGE_DSN)")
		}
		if n := c.Storage.MaxConns; n < 0 || n > 1000 {
			p.addf("storage.max_conns", "must be between 1 and 1000, or 0 for the default, got %d", n)
		}
	default:
		p.addf("storage.backend", "unknown backend %s, want \"bolt\" or \"postgres\"", quote(c.Storage.Backend))
	}

	// [auth]
	for i, k := range c.Auth.APIKeys {
		p.check(fmt.Sprintf("auth.api_keys[%d]", i), checkAPIKey(k))
	}
	p.within("auth.session_ttl", c.Auth.SessionTTL, time.Minute, 30*24*time.Hour)

	// [log]
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		p.addf("log.level", "unknown level %s, want trace, debug, info, warn or error", quote(c.Log.Level))
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		p.addf("log.format", "unknown format %s, want console or json", quote(c.Log.Format))
	}

	// [lease], [payment], [idempotency]
	// A lease shorter than a second cannot cover a PSP call: the sweeper
	// would lose every lease it takes and settle nothing.
	p.within("lease.ttl", c.Lease.TTL, time.Second, time.Hour)
	p.within("payment.expire_after", c.Payment.ExpireAfter, time.Minute, 0)
	names := c.Providers.Names()
	switch {
	case len(names) == 0:
		p.addf("providers", "no provider is configured: add a [providers.mock], [providers.standard], [providers.stripe], [providers.paypal] or [providers.mollie] table")
	case c.Payment.Provider == "":
		p.addf("payment.provider", "required when several providers are configured: one of %s", strings.Join(names, ", "))
	case !slices.Contains(names, c.Payment.Provider):
		p.addf("payment.provider", "%s is not configured: want one of %s (a provider exists only if its [providers.*] table is present)", quote(c.Payment.Provider), strings.Join(names, ", "))
	}
	p.within("idempotency.ttl", c.Idempotency.TTL, time.Minute, 0)

	// [webhook_inbox]: an event id must outlive the window in which its
	// signature is still accepted, or a replay would count as new.
	p.positive("webhook_inbox.processed_retention", c.WebhookInbox.ProcessedRetention)
	p.within("webhook_inbox.tolerance", c.WebhookInbox.Tolerance, time.Second, 24*time.Hour)
	p.count("webhook_inbox.max_attempts", c.WebhookInbox.MaxAttempts, 1, MaxInboxAttempts)
	if c.WebhookInbox.ProcessedRetention.Duration > 0 && c.WebhookInbox.ProcessedRetention.Duration < c.WebhookInbox.Tolerance.Duration {
		p.addf("webhook_inbox.processed_retention", "%q is shorter than webhook_inbox.tolerance %q", c.WebhookInbox.ProcessedRetention.String(), c.WebhookInbox.Tolerance.String())
	}

	// [sweeper]
	p.within("sweeper.interval", c.Sweeper.Interval, 100*time.Millisecond, 24*time.Hour)
	p.nonNegative("sweeper.min_age", c.Sweeper.MinAge)
	p.positive("sweeper.give_up_after", c.Sweeper.GiveUpAfter)
	if c.Sweeper.GiveUpAfter.Duration > 0 && c.Sweeper.GiveUpAfter.Duration < c.Sweeper.MinAge.Duration {
		p.addf("sweeper.give_up_after", "%q is shorter than sweeper.min_age %q", c.Sweeper.GiveUpAfter.String(), c.Sweeper.MinAge.String())
	}
	p.count("sweeper.parallel", c.Sweeper.Parallel, 1, MaxWorkers)
	if r := c.Sweeper.RatePerSecond; !(r > 0) || r > MaxRatePerSecond {
		p.addf("sweeper.rate_per_second", "must be greater than 0 and at most %d, got %v", MaxRatePerSecond, r)
	}

	// [ripple]
	if w := c.Ripple.Workers; w < 1 || w > MaxWorkers {
		p.addf("ripple.workers", "must be between 1 and %d, got %d", MaxWorkers, w)
	}
	p.count("ripple.max_attempts", c.Ripple.MaxAttempts, 1, MaxRippleAttempts)
	p.within("ripple.backoff_base", c.Ripple.BackoffBase, 10*time.Millisecond, 0)
	p.positive("ripple.backoff_cap", c.Ripple.BackoffCap)
	p.within("ripple.retention", c.Ripple.Retention, time.Hour, 0)
	if c.Ripple.BackoffBase.Duration > c.Ripple.BackoffCap.Duration {
		p.addf("ripple.backoff_base", "%q is longer than ripple.backoff_cap %q", c.Ripple.BackoffBase.String(), c.Ripple.BackoffCap.String())
	}

	// [loyalty], [receipt]
	if n := c.Loyalty.PointsPerUnit; n < 0 || n > MaxPointsPerUnit {
		p.addf("loyalty.points_per_unit", "must be between 0 and %d, got %d", MaxPointsPerUnit, n)
	}
	p.within("reconcile.settle_within", c.Reconcile.SettleWithin, time.Hour, 0)
	if c.Receipt.SMTPAddr != "" {
		p.check("receipt.smtp_addr", checkHostPort(c.Receipt.SMTPAddr, true))
		if c.Receipt.From == "" {
			p.addf("receipt.from", "required when receipt.smtp_addr is set")
		}
	}
	if c.Receipt.From != "" {
		if _, err := mail.ParseAddress(c.Receipt.From); err != nil {
			p.addf("receipt.from", "%s is not an e-mail address", quote(c.Receipt.From))
		}
	}
	p.receipt(c.Receipt)

	// [[webhooks]]
	for i, w := range c.Webhooks {
		key := fmt.Sprintf("webhooks[%d]", i)
		p.check(key+".url", checkHTTPURL(w.URL))
		if len(w.SigningSecrets()) == 0 {
			p.addf(key+".secret", "required: set secret or secrets")
		}
		if w.Secret != "" {
			p.check(key+".secret", checkWebhookSecret(w.Secret))
		}
		for j, s := range w.Secrets {
			p.check(fmt.Sprintf("%s.secrets[%d]", key, j), checkWebhookSecret(s))
		}
		if w.Timeout.Duration != 0 { // 0: DefaultWebhookTimeout
			p.within(key+".timeout", w.Timeout, 100*time.Millisecond, MaxWebhookTimeout)
		}
		p.count(key+".max_in_flight", w.MaxInFlight, 0, MaxInFlight)
		if len(w.Events) == 0 {
			p.addf(key+".events", "required: list the events to send, such as [\"payment.captured\"]")
		}
		for j, e := range w.Events {
			p.check(fmt.Sprintf("%s.events[%d]", key, j), checkEventType(e))
		}
	}

	// [providers.*]: a provider exists only if its table is present.
	if mock := c.Providers.Mock; mock != nil {
		if prod && !mock.AllowPublic {
			p.addf("providers.mock.allow_public", "paystate is in production (%s) and [providers.mock] is present: the mock PSP captures anything it is asked to; remove [providers.mock] (and set payment.provider to a real one), or set allow_public = true for a public demo", why)
		}
		p.webhookSecret("providers.mock.webhook_secret", mock.WebhookSecret, why)
		p.url("providers.mock.webhook_url", mock.WebhookURL)
		p.within("providers.mock.webhook_delay", mock.WebhookDelay, 0, time.Minute)
		p.within("providers.mock.dispute_after", mock.DisputeAfter, time.Millisecond, 24*time.Hour)
		if n := mock.MaxCharges; n < 1 || n > 10_000_000 {
			p.addf("providers.mock.max_charges", "must be between 1 and 10000000 (about 400 bytes of memory each), got %d", n)
		}
		if r := mock.DuplicateRate; !(r >= 0 && r <= 1) {
			p.addf("providers.mock.duplicate_rate", "must be between 0 and 1, got %v", r)
		}
		if r := mock.WebhookFirstRate; !(r >= 0 && r <= 1) {
			p.addf("providers.mock.webhook_first_rate", "must be between 0 and 1, got %v", r)
		}
	}
	if std := c.Providers.Standard; std != nil {
		p.webhookSecret("providers.standard.webhook_secret", std.WebhookSecret, why)
	}
	if st := c.Providers.Stripe; st != nil {
		switch {
		case st.SecretKey == "":
			p.addf("providers.stripe.secret_key", "required (or PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY); remove [providers.stripe] to turn Stripe off")
		case !strings.HasPrefix(st.SecretKey, "sk_") && !strings.HasPrefix(st.SecretKey, "rk_"):
			p.addf("providers.stripe.secret_key", "must start with sk_ or rk_ (a publishable pk_ key cannot charge)")
		}
		switch {
		case st.WebhookSecret == "":
			p.addf("providers.stripe.webhook_secret", "required (or PAYSTATE_PROVIDERS_STRIPE_WEBHOOK_SECRET): the endpoint's signing secret, whsec_...")
		case !strings.HasPrefix(st.WebhookSecret, "whsec_"):
			p.addf("providers.stripe.webhook_secret", "must start with whsec_")
		case prod && st.WebhookSecret == DevelopmentWebhookSecret:
			p.addf("providers.stripe.webhook_secret", "is the public development secret and paystate is in production (%s): set the endpoint's own signing secret", why)
		}
		p.url("providers.stripe.api_base", st.APIBase)
		if st.Flow != "" && st.Flow != "payment_intent" && st.Flow != "checkout" {
			p.addf("providers.stripe.flow", "must be \"payment_intent\" or \"checkout\", got %q", st.Flow)
		}
		p.url("providers.stripe.checkout.success_url", st.Checkout.SuccessURL)
		p.url("providers.stripe.checkout.cancel_url", st.Checkout.CancelURL)
	}
	if mo := c.Providers.Mollie; mo != nil {
		p.mollie(mo)
	}

	if pp := c.Providers.PayPal; pp != nil {
		for _, k := range []struct{ key, v, why string }{
			{"providers.paypal.client_id", pp.ClientID, "the REST app's client id"},
			{"providers.paypal.secret", pp.Secret, "the REST app's secret"},
			{"providers.paypal.webhook_id", pp.WebhookID, "the id PayPal shows for the webhook; it is part of what PayPal signs"},
		} {
			if k.v == "" {
				p.addf(k.key, "required (or %s): %s; remove [providers.paypal] to turn PayPal off", EnvName(k.key), k.why)
			}
		}
		if pp.Verify != "" && pp.Verify != "offline" && pp.Verify != "api" {
			p.addf("providers.paypal.verify", "must be \"offline\" or \"api\", got %q", pp.Verify)
		}
		p.url("providers.paypal.api_base", pp.APIBase)
		p.url("providers.paypal.return_url", pp.ReturnURL)
		p.url("providers.paypal.cancel_url", pp.CancelURL)
		for i, h := range pp.CertHosts {
			if h == "" || strings.ContainsAny(h, "/@?# ") {
				p.addf(fmt.Sprintf("providers.paypal.cert_hosts[%d]", i), "%q is not a host name (host or host:port, no scheme or path)", h)
			}
		}
		if pp.CAFile != "" {
			if _, err := os.Stat(pp.CAFile); err != nil {
				p.addf("providers.paypal.ca_file", "%v", err)
			}
		}
	}

	// [[webhooks]] signing secrets: the development secret would let
	// anyone sign events the merchant's endpoint believes.
	for i, w := range c.Webhooks {
		for j, sec := range append([]string{w.Secret}, w.Secrets...) {
			if prod && sec == DevelopmentWebhookSecret {
				key := fmt.Sprintf("webhooks[%d].secret", i)
				if j > 0 {
					key = fmt.Sprintf("webhooks[%d].secrets[%d]", i, j-1)
				}
				p.addf(key, "is the public development secret and paystate is in production (%s): set your own secret", why)
			}
		}
	}

	// [relay.nats]: the names are checked even while url is empty, so a
	// typo shows before the relay is turned on.
	if n := c.Relay.NATS; n.URL != "" {
		p.check("relay.nats.url", checkNATSURL(n.URL))
	}
	p.check("relay.nats.stream", checkStreamName(c.Relay.NATS.Stream))
	p.check("relay.nats.subject_prefix", checkSubjectPrefix(c.Relay.NATS.SubjectPrefix))

	return errors.Join(p...)
}

// webhookSecret checks a provider's Standard Webhooks secret: required, well
// formed, and not the public development secret in production (prodWhy is
// why paystate is in production, "" when it is not).
func (p *problems) webhookSecret(key, secret, prodWhy string) {
	switch {
	case secret == "":
		p.addf(key, "required: a Standard Webhooks secret, whsec_ followed by base64 (echo whsec_$(openssl rand -base64 32))")
	case prodWhy != "" && secret == DevelopmentWebhookSecret:
		p.addf(key, "is the public development secret and paystate is in production (%s): anyone could sign webhooks; set your own secret (echo whsec_$(openssl rand -base64 32)) in the file or the environment (%s)", prodWhy, EnvName(key))
	default:
		p.check(key, checkWebhookSecret(secret))
	}
}

// receipt checks the [receipt] keys after smtp_addr and from: the TLS
// mode, the credentials (never quoted), the CA file and the templates,
// which are read and tried on a sample receipt.
func (p *problems) receipt(r Receipt) {
	mode, err := receipt.ParseTLSMode(r.TLS)
	if err != nil {
		p.addf("receipt.tls", "%v", err)
	}
	if strings.ContainsFunc(r.MerchantName, unicode.IsControl) {
		p.addf("receipt.merchant_name", "must be one line of printable text")
	}
	switch {
	case r.Username != "" && r.Password == "":
		p.addf("receipt.password", "required when receipt.username is set (or set PAYSTATE_RECEIPT_PASSWORD)")
	case r.Username == "" && r.Password != "":
		p.addf("receipt.username", "required when receipt.password is set")
	}
	if strings.ContainsFunc(r.Username, unicode.IsControl) {
		p.addf("receipt.username", "must not contain control characters")
	}
	if mode == receipt.TLSNone && r.Username != "" && r.SMTPAddr != "" {
		if host, _, err := net.SplitHostPort(r.SMTPAddr); err == nil && !loopbackHost(host) {
			p.addf("receipt.tls", `is "none" with receipt.username set: the password would cross the network to %s in clear; use "starttls" or "tls"`, quote(host))
		}
	}
	if r.CAFile != "" {
		if _, err := r.RootCAs(); err != nil {
			p.addf("receipt.ca_file", "%v", err)
		}
	}
	for _, t := range []struct {
		key, path string
		parse     func(string) error
	}{
		{"receipt.text_template", r.TextTemplate, func(src string) error { _, err := receipt.ParseText(src); return err }},
		{"receipt.html_template", r.HTMLTemplate, func(src string) error { _, err := receipt.ParseHTML(src); return err }},
	} {
		if t.path == "" {
			continue
		}
		src, err := readTemplate(t.path)
		if err == nil {
			err = t.parse(src)
		}
		if err != nil {
			p.addf(t.key, "%s: %v", quote(t.path), err)
		}
	}
}

// loopbackHost reports whether host is "localhost" or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.IsLoopback()
}

// Loopback reports whether server.listen names a loopback host: "localhost"
// or a loopback IP address such as 127.0.0.1 or ::1. An empty host (":8080")
// listens on every interface and is not loopback.
func (c Config) Loopback() bool {
	host, _, err := net.SplitHostPort(c.Server.Listen)
	return err == nil && loopbackHost(host)
}

// Production reports whether paystate runs in production: an API key is
// configured (in the file or the environment), server.listen is not
// loopback, or server.allowed_hosts is set. A TLS proxy in front of a
// loopback listener is production. Then the development webhook secret
// and the mock (without providers.mock.allow_public) are refused
// (Validate); the embedded defaults, with no key, are the development
// mode.
func (c Config) Production() bool {
	_, prod := c.production(true)
	return prod
}

// production is Production with the reason, for messages; listenOK false
// (server.listen does not parse) leaves the listen address out of it.
func (c Config) production(listenOK bool) (string, bool) {
	switch {
	case len(c.Auth.APIKeys) > 0:
		return "auth.api_keys is set", true
	case listenOK && !c.Loopback():
		return fmt.Sprintf("server.listen %s is not loopback", quote(c.Server.Listen)), true
	case len(c.Server.AllowedHosts) > 0:
		return "server.allowed_hosts is set", true
	}
	return "", false
}

// Warnings returns advice about a configuration that Validate accepts but
// an operator should know about: no API key, the public development secret
// in use, a Stripe webhook secret without a key. The caller decides where to
// log them.
func (c Config) Warnings() []string {
	var out []string
	if len(c.Auth.APIKeys) == 0 {
		out = append(out, "auth.api_keys is empty: the API accepts every request from this machine; the server listens on loopback only")
	}
	if m := c.Providers.Mock; m != nil {
		out = append(out, "providers.mock is enabled: payments are charged by the simulated PSP, not a real one")
		if m.WebhookSecret == DevelopmentWebhookSecret {
			out = append(out, "providers.mock.webhook_secret is the public development secret")
		}
	}
	if s := c.Providers.Standard; s != nil && s.WebhookSecret == DevelopmentWebhookSecret {
		out = append(out, "providers.standard.webhook_secret is the public development secret: anyone who can reach the server can sign webhooks for it")
	}
	return out
}

// checkHostPort checks a host:port address with a numeric port and a host
// that is a host name or an IP address. With needHost an empty host is
// refused and the port must not be 0.
func checkHostPort(addr string, needHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s is not host:port", quote(addr))
	}
	if needHost && host == "" {
		return fmt.Errorf("%s has no host", quote(addr))
	}
	if host != "" && !validHostname(host) {
		return fmt.Errorf("%s: %s is not a host name or IP address", quote(addr), quote(host))
	}
	n, err := strconv.Atoi(port)
	lo := 0
	if needHost {
		lo = 1
	}
	if err != nil || n < lo || n > 65535 {
		return fmt.Errorf("%s: port must be a number between %d and 65535", quote(addr), lo)
	}
	return nil
}

// validHostname reports whether h is an IP address (an IPv6 one without
// brackets, as SplitHostPort returns it) or a DNS name of letters, digits,
// hyphens and dots, each label 1 to 63 bytes, 253 in all.
func validHostname(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// quote quotes a value from the file for a message, clipped so that a
// huge value is never echoed whole.
func quote(s string) string { return strconv.Quote(clip(s, maxValueText)) }

// checkHTTPURL checks an absolute http or https URL with a host.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s is not an absolute http or https URL", quote(redactURL(s)))
	}
	return nil
}

// checkAPIKey checks one API key without quoting it.
func checkAPIKey(k string) error {
	if k == "" {
		return errors.New("empty key")
	}
	for _, r := range k {
		if r < 0x21 || r > 0x7e {
			return errors.New("must be printable ASCII without spaces")
		}
	}
	if len(k) < MinAPIKeyLength {
		return fmt.Errorf("%d characters, want at least %d (for example: openssl rand -hex 32)", len(k), MinAPIKeyLength)
	}
	return nil
}

// checkWebhookSecret checks a Standard Webhooks secret, "whsec_" followed by
// standard base64, without quoting it.
func checkWebhookSecret(s string) error {
	rest, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return errors.New("must start with whsec_ (Standard Webhooks secret)")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return errors.New("must be whsec_ followed by standard base64")
	}
	if len(key) < MinWebhookSecretBytes {
		return fmt.Errorf("decodes to %d bytes, want at least %d (for example: echo whsec_$(openssl rand -base64 32))", len(key), MinWebhookSecretBytes)
	}
	return nil
}

// checkNATSURL checks a NATS URL, or a comma-separated list of them (the
// servers of one cluster), quoting each only with its credentials masked.
func checkNATSURL(s string) error {
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		u, err := url.Parse(item)
		if err != nil || u.Host == "" || u.Opaque != "" {
			return fmt.Errorf("server %d, %s, is not an absolute URL such as \"nats://127.0.0.1:4222\"", i+1, quote(redactURL(item)))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("server %d, %s: the scheme must be nats, tls, ws or wss", i+1, quote(redactURL(item)))
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("server %d, %s: port must be a number between 1 and 65535", i+1, quote(redactURL(item)))
			}
		}
	}
	return nil
}

// maxNATSName bounds relay.nats.stream and relay.nats.subject_prefix.
const maxNATSName = 200

// checkStreamName checks a JetStream stream name: printable, without the
// characters a stream name may not have (dots, wildcards, slashes, spaces).
func checkStreamName(s string) error {
	switch {
	case s == "":
		return errors.New("required: the JetStream stream, such as \"PAYSTATE\"")
	case len(s) > maxNATSName:
		return fmt.Errorf("%d bytes, at most %d", len(s), maxNATSName)
	case strings.ContainsAny(s, ".*>/\\") || !printableASCII(s):
		return fmt.Errorf("%s: a stream name is printable ASCII without dots, wildcards (* >), slashes or spaces", quote(s))
	}
	return nil
}

// checkSubjectPrefix checks the first tokens of a NATS subject: non-empty
// tokens separated by dots, printable, without wildcards, and not one of
// the server's own ($JS, $SYS, ...).
func checkSubjectPrefix(s string) error {
	switch {
	case s == "":
		return errors.New("required: the subjects' first tokens, such as \"paystate\"")
	case len(s) > maxNATSName:
		return fmt.Errorf("%d bytes, at most %d", len(s), maxNATSName)
	case strings.HasPrefix(s, "$"):
		return fmt.Errorf("%s: subjects starting with $ are the server's own", quote(s))
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*>") || !printableASCII(tok) {
			return fmt.Errorf("%s: want tokens separated by dots, printable ASCII without wildcards (* >) or spaces, such as \"paystate\" or \"shop.paystate\"", quote(s))
		}
	}
	return nil
}

// printableASCII reports whether s is ASCII from '!' to '~': no space, no
// control character.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// mollie checks [providers.mollie].
func (p *problems) mollie(mo *Mollie) {
	switch {
	case mo.APIKey == "":
		p.addf("providers.mollie.api_key", "required (or PAYSTATE_PROVIDERS_MOLLIE_API_KEY); remove [providers.mollie] to turn Mollie off")
	case !strings.HasPrefix(mo.APIKey, "live_") && !strings.HasPrefix(mo.APIKey, "test_"):
		p.addf("providers.mollie.api_key", "must start with live_ or test_ (an organization access token is not supported)")
	}
	if mo.WebhookURL == "" {
		p.addf("providers.mollie.webhook_url", "required: paystate's /webhooks/mollie as Mollie reaches it (https://<your host>/webhooks/mollie)")
	}
	p.url("providers.mollie.api_base", mo.APIBase)
	p.url("providers.mollie.redirect_url", mo.RedirectURL)
	p.url("providers.mollie.webhook_url", mo.WebhookURL)
	if mo.UnknownIDBackoff.Duration <= 0 {
		p.addf("providers.mollie.unknown_id_backoff", "must be positive, got %s", mo.UnknownIDBackoff.Duration)
	}
	if !(mo.RatePerSecond > 0) {
		p.addf("providers.mollie.rate_per_second", "must be positive, got %v", mo.RatePerSecond)
	}
}
