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
// webhook secrets, the Stripe keys, the password in storage.dsn and in any
// URL. An empty secret stays empty, so the output still shows what is unset.
// c itself is not changed.
func (c Config) Masked() Config {
	m := c
	m.Auth.APIKeys = maskAll(c.Auth.APIKeys)
	m.Storage.DSN = maskDSN(c.Storage.DSN)
	if c.Webhooks != nil {
		m.Webhooks = make([]Webhook, len(c.Webhooks))
		for i, w := range c.Webhooks {
			m.Webhooks[i] = Webhook{
				URL:     redactURL(w.URL),
				Secret:  mask(w.Secret),
				Secrets: maskAll(w.Secrets),
				Events:  slices.Clone(w.Events),
			}
		}
	}
	m.Providers.Mock.WebhookSecret = mask(c.Providers.Mock.WebhookSecret)
	m.Providers.Mock.WebhookURL = redactURL(c.Providers.Mock.WebhookURL)
	m.Providers.Standard.WebhookSecret = mask(c.Providers.Standard.WebhookSecret)
	m.Providers.Stripe.SecretKey = mask(c.Providers.Stripe.SecretKey)
	m.Providers.Stripe.WebhookSecret = mask(c.Providers.Stripe.WebhookSecret)
	m.Providers.Stripe.APIBase = redactURL(c.Providers.Stripe.APIBase)
	return m
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
	return redactPassword(u)
}

// redactURL replaces the password in a URL's userinfo with Mask. A string
// that does not parse as a URL is returned as it is, or as Mask when it
// holds an "@" and so perhaps credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return Mask
		}
		return s
	}
	if _, ok := u.User.Password(); !ok {
		return s
	}
	return redactPassword(u)
}

// redactPassword returns u as a string with its password, if any, written
// as Mask.
func redactPassword(u *url.URL) string {
	if _, ok := u.User.Password(); !ok {
		return u.String()
	}
	// Redacted writes "xxxxx" as the password; the first ":xxxxx@" is it,
	// since a colon in the user name is escaped.
	return strings.Replace(u.Redacted(), ":xxxxx@", ":"+Mask+"@", 1)
}
