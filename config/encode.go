package config

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Mask is the text Masked puts in place of a secret.
const Mask = "***"

// Masked returns a copy of c with every secret replaced by Mask: API keys,
// webhook secrets, the Stripe and Mollie keys, receipt.password, the password in
// storage.dsn and in any URL (relay.nats.url included). An empty secret
// stays empty, so the output still shows what is unset.
// c itself is not changed.
func (c Config) Masked() Config {
	m := c
	m.Auth.APIKeys = maskAll(c.Auth.APIKeys)
	m.Storage.DSN = maskDSN(c.Storage.DSN)
	if c.Webhooks != nil {
		m.Webhooks = make([]Webhook, len(c.Webhooks))
		for i, w := range c.Webhooks {
			m.Webhooks[i] = Webhook{
				URL:         redactURL(w.URL),
				Secret:      mask(w.Secret),
				Secrets:     maskAll(w.Secrets),
				Events:      slices.Clone(w.Events),
				Timeout:     w.Timeout,
				MaxInFlight: w.MaxInFlight,
			}
		}
	}
	m.Providers.Mock = maskedCopy(c.Providers.Mock, func(mm *Mock) {
		mm.WebhookSecret = mask(mm.WebhookSecret)
		mm.WebhookURL = redactURL(mm.WebhookURL)
	})
	m.Providers.Standard = maskedCopy(c.Providers.Standard, func(ms *Standard) {
		ms.WebhookSecret = mask(ms.WebhookSecret)
	})
	m.Providers.Stripe = maskedCopy(c.Providers.Stripe, func(ms *Stripe) {
		ms.SecretKey = mask(ms.SecretKey)
		ms.WebhookSecret = mask(ms.WebhookSecret)
		ms.APIBase = redactURL(ms.APIBase)
	})
	m.Providers.PayPal = maskedCopy(c.Providers.PayPal, func(mp *PayPal) {
		mp.Secret = mask(mp.Secret)
		mp.APIBase = redactURL(mp.APIBase)
		mp.CertHosts = slices.Clone(mp.CertHosts)
	})
	m.Providers.Mollie = maskedCopy(c.Providers.Mollie, func(mo *Mollie) {
		mo.APIKey = mask(mo.APIKey)
		mo.WebhookSecret = mask(mo.WebhookSecret)
		mo.APIBase = redactURL(mo.APIBase)
		mo.RedirectURL = redactURL(mo.RedirectURL)
		mo.WebhookURL = redactURL(mo.WebhookURL)
	})
	m.Relay.NATS.URL = maskNATSURL(c.Relay.NATS.URL)
	m.Receipt.Password = mask(c.Receipt.Password)
	return m
}

// maskedCopy returns nil for a provider table that is absent, else a copy
// of it with hide applied; the table itself is not changed.
func maskedCopy[T any](table *T, hide func(*T)) *T {
	if table == nil {
		return nil
	}
	c := *table
	hide(&c)
	return &c
}

// maskNATSURL hides the credentials of every server in a NATS URL list.
func maskNATSURL(s string) string {
	if s == "" {
		return ""
	}
	items := strings.Split(s, ",")
	for i, item := range items {
		items[i] = redactURL(strings.TrimSpace(item))
	}
	return strings.Join(items, ",")
}

// TOML returns c as a TOML document that Parse reads back to the same
// Config; durations are written as strings ("30s"). It prints secrets as
// they are: call Masked first to show a configuration to a person.
func (c Config) TOML() ([]byte, error) {
	if c.Auth.APIKeys == nil {
		// The encoder leaves out a nil list; show the key anyway.
		c.Auth.APIKeys = []string{}
	}
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	return buf.Bytes(), nil
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return Mask
}

func maskAll(list []string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = mask(s)
	}
	return out
}

// maskDSN hides the password of a URL-form DSN and keeps the rest readable.
// A DSN in key=value form, or one with anything password-like in its query,
// is hidden whole.
func maskDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" ||
		strings.Contains(strings.ToLower(u.RawQuery), "pass") {
		return Mask
	}
	if _, ok := u.User.Password(); !ok {
		return dsn
	}
	r := *u
	r.User = url.UserPassword(u.User.Username(), Mask)
	return strings.ReplaceAll(r.String(), "%2A", "*")
}

// redactURL hides what may be a credential in a URL: the password of the
// userinfo (a user name without a password may be a token, so it is masked
// too), every query value
// (?token=...) and the fragment. A string that does not parse as a URL is
// returned as it is, or as Mask when it holds an "@", "?" or "#" and so
// perhaps credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.ContainsAny(s, "@?#") {
			return Mask
		}
		return s
	}
	if u.User == nil && u.RawQuery == "" && u.Fragment == "" {
		return s
	}
	r := *u
	if r.User != nil {
		if _, ok := r.User.Password(); ok {
			r.User = url.UserPassword(r.User.Username(), Mask)
		} else {
			r.User = url.User(Mask)
		}
	}
	if r.RawQuery != "" {
		var parts []string
		for kv := range strings.SplitSeq(r.RawQuery, "&") {
			k, _, _ := strings.Cut(kv, "=")
			parts = append(parts, k+"="+Mask)
		}
		r.RawQuery = strings.Join(parts, "&")
	}
	if r.Fragment != "" || r.RawFragment != "" {
		r.Fragment, r.RawFragment = Mask, ""
	}
	// url.String escapes the mask's asterisks in userinfo; keep them plain.
	return strings.ReplaceAll(r.String(), "%2A", "*")
}

// Annotate marks, in doc (a document of Config.TOML), each key that origins
// says was set by the environment or a flag with a trailing comment naming
// it: `listen = "127.0.0.1:9090" # from PAYSTATE_SERVER_LISTEN`. It adds
// names only, never a value, so a masked document stays masked.
func Annotate(doc []byte, origins Origins) []byte {
	if len(origins) == 0 {
		return doc
	}
	var out bytes.Buffer
	table := ""
	arrays := make(map[string]int) // [[name]] → entries seen
	for line := range strings.Lines(string(doc)) {
		text := strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimSpace(text)
		switch {
		case strings.HasPrefix(trimmed, "[["):
			name := strings.TrimSpace(strings.Trim(trimmed, "[]"))
			table = fmt.Sprintf("%s[%d]", name, arrays[name])
			arrays[name]++
		case strings.HasPrefix(trimmed, "["):
			table = strings.TrimSpace(strings.Trim(trimmed, "[]"))
		default:
			name, _, ok := strings.Cut(trimmed, "=")
			if !ok || strings.HasPrefix(trimmed, "#") {
				break
			}
			key := strings.TrimSpace(name)
			if table != "" {
				key = table + "." + key
			}
			if by, ok := origins[key]; ok {
				out.WriteString(text + " # from " + by + line[len(text):])
				continue
			}
		}
		out.WriteString(line)
	}
	return out.Bytes()
}
