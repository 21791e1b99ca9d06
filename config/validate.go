package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
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
)

// problems collects validation errors, each naming its key.
type problems []error

func (p *problems) addf(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
}

// positive reports a duration that is not greater than zero.
func (p *problems) positive(key string, d Duration) {
	if d.Duration <= 0 {
		p.addf(key, "must be greater than 0, got %q", d.String())
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
	if err := checkHostPort(c.Server.Listen, false); err != nil {
		p.addf("server.listen", "%v", err)
	} else if len(c.Auth.APIKeys) == 0 && !c.Loopback() {
		p.addf("server.listen", "%q is not a loopback address and auth.api_keys is empty: set an API key or listen on 127.0.0.1", c.Server.Listen)
	}
	if c.Server.MaxBody <= 0 || c.Server.MaxBody > MaxBodyLimit {
		p.addf("server.max_body", "must be between 1 and %d bytes, got %d", MaxBodyLimit, c.Server.MaxBody)
	}
	p.positive("server.shutdown_timeout", c.Server.ShutdownTimeout)

	// [storage]
	switch c.Storage.Backend {
	case "bolt":
		if c.Storage.Path == "" {
			p.addf("storage.path", "required for backend \"bolt\"")
		}
	case "postgres":
		if c.Storage.DSN == "" {
			p.addf("storage.dsn", "required for backend \"postgres\"")
		}
		p.addf("storage.backend", "postgres backend is not available in this build; use \"bolt\"")
	default:
		p.addf("storage.backend", "unknown backend %q, want \"bolt\"", c.Storage.Backend)
	}

	// [auth]
	for i, k := range c.Auth.APIKeys {
		if err := checkAPIKey(k); err != nil {
			p.addf(fmt.Sprintf("auth.api_keys[%d]", i), "%v", err)
		}
	}

	// [log]
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		p.addf("log.level", "unknown level %q, want trace, debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		p.addf("log.format", "unknown format %q, want console or json", c.Log.Format)
	}

	// [lease], [payment], [idempotency]
	p.positive("lease.ttl", c.Lease.TTL)
	p.positive("payment.expire_after", c.Payment.ExpireAfter)
	switch c.Payment.Provider {
	case ProviderMock:
		if !c.Providers.Mock.Enabled() {
			p.addf("payment.provider", "\"mock\" is disabled: providers.mock.webhook_secret is empty")
		}
	case ProviderStandard:
		if !c.Providers.Standard.Enabled() {
			p.addf("payment.provider", "\"standard\" is disabled: providers.standard.webhook_secret is empty")
		}
	case ProviderStripe:
		if !c.Providers.Stripe.Enabled() {
			p.addf("payment.provider", "\"stripe\" is disabled: providers.stripe.secret_key is empty")
		}
	default:
		p.addf("payment.provider", "unknown provider %q, want mock, standard or stripe", c.Payment.Provider)
	}
	p.positive("idempotency.ttl", c.Idempotency.TTL)

	// [webhook_inbox]: an event id must outlive the window in which its
	// signature is still accepted, or a replay would count as new.
	p.positive("webhook_inbox.processed_retention", c.WebhookInbox.ProcessedRetention)
	p.positive("webhook_inbox.tolerance", c.WebhookInbox.Tolerance)
	if c.WebhookInbox.ProcessedRetention.Duration > 0 && c.WebhookInbox.ProcessedRetention.Duration < c.WebhookInbox.Tolerance.Duration {
		p.addf("webhook_inbox.processed_retention", "%q is shorter than webhook_inbox.tolerance %q", c.WebhookInbox.ProcessedRetention.String(), c.WebhookInbox.Tolerance.String())
	}

	// [sweeper]
	p.positive("sweeper.interval", c.Sweeper.Interval)
	p.nonNegative("sweeper.min_age", c.Sweeper.MinAge)
	p.positive("sweeper.give_up_after", c.Sweeper.GiveUpAfter)
	if c.Sweeper.GiveUpAfter.Duration > 0 && c.Sweeper.GiveUpAfter.Duration < c.Sweeper.MinAge.Duration {
		p.addf("sweeper.give_up_after", "%q is shorter than sweeper.min_age %q", c.Sweeper.GiveUpAfter.String(), c.Sweeper.MinAge.String())
	}
	if r := c.Sweeper.RatePerSecond; !(r > 0) || math.IsInf(r, 0) {
		p.addf("sweeper.rate_per_second", "must be a finite number greater than 0, got %v", r)
	}

	// [ripple]
	if w := c.Ripple.Workers; w < 1 || w > MaxWorkers {
		p.addf("ripple.workers", "must be between 1 and %d, got %d", MaxWorkers, w)
	}
	if c.Ripple.MaxAttempts < 1 {
		p.addf("ripple.max_attempts", "must be at least 1, got %d", c.Ripple.MaxAttempts)
	}
	p.positive("ripple.backoff_base", c.Ripple.BackoffBase)
	p.positive("ripple.backoff_cap", c.Ripple.BackoffCap)
	if c.Ripple.BackoffBase.Duration > c.Ripple.BackoffCap.Duration {
		p.addf("ripple.backoff_base", "%q is longer than ripple.backoff_cap %q", c.Ripple.BackoffBase.String(), c.Ripple.BackoffCap.String())
	}

	// [loyalty], [receipt]
	if c.Loyalty.PointsPerUnit < 0 {
		p.addf("loyalty.points_per_unit", "must not be negative, got %d", c.Loyalty.PointsPerUnit)
	}
	if c.Receipt.SMTPAddr != "" {
		if err := checkHostPort(c.Receipt.SMTPAddr, true); err != nil {
			p.addf("receipt.smtp_addr", "%v", err)
		}
		if c.Receipt.From == "" {
			p.addf("receipt.from", "required when receipt.smtp_addr is set")
		}
	}
	if c.Receipt.From != "" {
		if _, err := mail.ParseAddress(c.Receipt.From); err != nil {
			p.addf("receipt.from", "%q is not an e-mail address", c.Receipt.From)
		}
	}

	// [[webhooks]]
	for i, w := range c.Webhooks {
		key := fmt.Sprintf("webhooks[%d]", i)
		if err := checkHTTPURL(w.URL); err != nil {
			p.addf(key+".url", "%v", err)
		}
		if len(w.SigningSecrets()) == 0 {
			p.addf(key+".secret", "required: set secret or secrets")
		}
		if w.Secret != "" {
			if err := checkWebhookSecret(w.Secret); err != nil {
				p.addf(key+".secret", "%v", err)
			}
		}
		for j, s := range w.Secrets {
			if err := checkWebhookSecret(s); err != nil {
				p.addf(fmt.Sprintf("%s.secrets[%d]", key, j), "%v", err)
			}
		}
		if len(w.Events) == 0 {
			p.addf(key+".events", "required: list the events to send, such as [\"payment.captured\"]")
		}
		for j, e := range w.Events {
			if !strings.HasPrefix(e, "payment.") || len(e) == len("payment.") {
				p.addf(fmt.Sprintf("%s.events[%d]", key, j), "%q is not an event type such as \"payment.captured\"", e)
			}
		}
	}

	// [providers.mock]
	mock := c.Providers.Mock
	if mock.WebhookSecret != "" {
		if err := checkWebhookSecret(mock.WebhookSecret); err != nil {
			p.addf("providers.mock.webhook_secret", "%v", err)
		}
	}
	if mock.WebhookURL != "" {
		if err := checkHTTPURL(mock.WebhookURL); err != nil {
			p.addf("providers.mock.webhook_url", "%v", err)
		}
	}
	p.nonNegative("providers.mock.webhook_delay", mock.WebhookDelay)
	if r := mock.DuplicateRate; !(r >= 0 && r <= 1) {
		p.addf("providers.mock.duplicate_rate", "must be between 0 and 1, got %v", r)
	}
	if r := mock.WebhookFirstRate; !(r >= 0 && r <= 1) {
		p.addf("providers.mock.webhook_first_rate", "must be between 0 and 1, got %v", r)
	}

	// [providers.standard]: its webhooks finalize payments, so the public
	// development secret must not be reachable from the network.
	std := c.Providers.Standard
	if std.WebhookSecret != "" {
		if err := checkWebhookSecret(std.WebhookSecret); err != nil {
			p.addf("providers.standard.webhook_secret", "%v", err)
		} else if std.WebhookSecret == DevelopmentWebhookSecret && !c.Loopback() {
			p.addf("providers.standard.webhook_secret", "is the public development secret and server.listen is not loopback: set your own secret, or \"\" to disable the standard provider")
		}
	}

	// [providers.stripe]
	st := c.Providers.Stripe
	if st.SecretKey != "" {
		if !strings.HasPrefix(st.SecretKey, "sk_") && !strings.HasPrefix(st.SecretKey, "rk_") {
			p.addf("providers.stripe.secret_key", "must start with sk_ or rk_ (a publishable pk_ key cannot charge)")
		}
		if st.WebhookSecret == "" {
			p.addf("providers.stripe.webhook_secret", "required when providers.stripe.secret_key is set")
		}
	}
	if st.WebhookSecret != "" && !strings.HasPrefix(st.WebhookSecret, "whsec_") {
		p.addf("providers.stripe.webhook_secret", "must start with whsec_")
	}
	if st.APIBase != "" {
		if err := checkHTTPURL(st.APIBase); err != nil {
			p.addf("providers.stripe.api_base", "%v", err)
		}
	}

	return errors.Join(p...)
}

// Loopback reports whether server.listen names a loopback host: "localhost"
// or a loopback IP address such as 127.0.0.1 or ::1. An empty host (":8080")
// listens on every interface and is not loopback.
func (c Config) Loopback() bool {
	host, _, err := net.SplitHostPort(c.Server.Listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.IsLoopback()
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
	if c.Providers.Mock.WebhookSecret == DevelopmentWebhookSecret {
		out = append(out, "providers.mock.webhook_secret is the public development secret")
	}
	if c.Providers.Standard.WebhookSecret == DevelopmentWebhookSecret {
		out = append(out, "providers.standard.webhook_secret is the public development secret: anyone who can reach the server can sign webhooks for it")
	}
	if c.Providers.Stripe.WebhookSecret != "" && c.Providers.Stripe.SecretKey == "" {
		out = append(out, "providers.stripe.webhook_secret is set but providers.stripe.secret_key is empty: the stripe provider is disabled")
	}
	return out
}

// checkHostPort checks a host:port address with a numeric port. With
// needHost an empty host is refused and the port must not be 0.
func checkHostPort(addr string, needHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if needHost && host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	n, err := strconv.Atoi(port)
	lo := 0
	if needHost {
		lo = 1
	}
	if err != nil || n < lo || n > 65535 {
		return fmt.Errorf("%q: port must be a number between %d and 65535", addr, lo)
	}
	return nil
}

// checkHTTPURL checks an absolute http or https URL with a host.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL", redactURL(s))
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
