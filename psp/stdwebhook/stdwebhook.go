// Package stdwebhook signs and verifies webhooks per the Standard Webhooks
// specification (https://www.standardwebhooks.com) and encodes and parses the
// event body that the mock and standard providers share.
//
// The HMAC itself is computed and compared by the svix library
// (github.com/svix/svix-webhooks/go), the reference implementation of the
// specification, so any Standard Webhooks sender or receiver interoperates.
// The library checks timestamps against time.Now with a fixed five minutes;
// paystate has an injected clock and a configurable tolerance, so the
// Verifier checks the signature with the library and the timestamp itself,
// against the now it is given.
//
// Only the unbranded headers are read: webhook-id, webhook-timestamp and
// webhook-signature. The signature header may hold several space-separated
// signatures (secret rotation); one match is enough.
package stdwebhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every Standard Webhooks secret; the rest is the key in
// standard base64.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a webhook's timestamp may be from now, in
// either direction, when no tolerance is configured (webhook_inbox.tolerance).
const DefaultTolerance = 5 * time.Minute

// MaxIDLen is the longest webhook-id, event id, payment id or provider
// reference accepted, in bytes.
const MaxIDLen = 255

// ValidateSecret checks a configured secret: "whsec_" followed by a non-empty
// key in standard base64. The error names key (the configuration key, e.g.
// "providers.mock.webhook_secret") and never contains the secret.
func ValidateSecret(key, secret string) error {
	if _, err := decodeSecret(secret); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// GenerateSecret returns a new random secret ("whsec_" and 32 random bytes in
// base64), for a sender and receiver in the same process that share no
// configured secret.
func GenerateSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// decodeSecret returns the key of a secret. Its errors never quote the secret.
func decodeSecret(secret string) ([]byte, error) {
	if !strings.HasPrefix(secret, SecretPrefix) {
		return nil, errors.New(`must start with "whsec_" followed by the key in base64`)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, errors.New(`the part after "whsec_" is not valid base64`)
	}
	if len(key) == 0 {
		return nil, errors.New(`the key after "whsec_" is empty`)
	}
	return key, nil
}

// newWebhook builds the svix webhook for a secret checked by decodeSecret.
func newWebhook(secret string) (*svix.Webhook, error) {
	if _, err := decodeSecret(secret); err != nil {
		return nil, err
	}
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		return nil, errors.New(`the part after "whsec_" is not valid base64`)
	}
	return wh, nil
}

// Signer signs outgoing webhooks with one or more secrets. With several
// secrets (rotation) every one signs and the signatures are sent together,
// so a receiver that knows any of them accepts the message.
type Signer struct {
	whs []*svix.Webhook
}

// NewSigner returns a Signer for the given secrets, at least one. Errors
// name the secret by its position, never by its value.
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no webhook secret")
	}
	s := &Signer{whs: make([]*svix.Webhook, 0, len(secrets))}
	for i, secret := range secrets {
		wh, err := newWebhook(secret)
		if err != nil {
			if len(secrets) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		s.whs = append(s.whs, wh)
	}
	return s, nil
}

// Signature returns the value of the webhook-signature header for a message:
// "v1,<base64>" per secret, separated by spaces.
func (s *Signer) Signature(id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(s.whs))
	for _, wh := range s.whs {
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			return "", fmt.Errorf("sign webhook: %w", err)
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// Header returns the three Standard Webhooks headers for a message with the
// given id, sent at ts (whole seconds are signed).
func (s *Signer) Header(id string, ts time.Time, body []byte) (http.Header, error) {
	sig, err := s.Signature(id, ts, body)
	if err != nil {
		return nil, err
	}
	h := make(http.Header, 3)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return h, nil
}

// Sign returns the Standard Webhooks headers of a message signed with one
// secret.
func Sign(secret, id string, ts time.Time, body []byte) (http.Header, error) {
	s, err := NewSigner(secret)
	if err != nil {
		return nil, err
	}
	return s.Header(id, ts, body)
}

// Verifier checks incoming webhooks against one secret. It is safe for
// concurrent use.
type Verifier struct {
	wh        *svix.Webhook
	tolerance time.Duration
}

// NewVerifier returns a Verifier for secret that accepts timestamps at most
// tolerance away from now in either direction; tolerance <= 0 means
// DefaultTolerance. The error does not name the configuration key: the
// caller wraps it with the key it read the secret from.
func NewVerifier(secret string, tolerance time.Duration) (*Verifier, error) {
	wh, err := newWebhook(secret)
	if err != nil {
		return nil, err
	}
	tolerance = defaults.Or(tolerance, DefaultTolerance)
	return &Verifier{wh: wh, tolerance: tolerance}, nil
}

// Tolerance returns the accepted distance between a webhook's timestamp and now.
func (v *Verifier) Tolerance() time.Duration { return v.tolerance }

// Verify checks the signature of body against the webhook-* headers of h and
// the timestamp against now. Every failure is an ESIGNATURE error whose
// message says what was wrong (a missing header, no matching signature, a
// timestamp outside the tolerance) without echoing the signature.
func (v *Verifier) Verify(body []byte, h http.Header, now time.Time) error {
	// Read exactly one value of each header; the signature header may be
	// split over several lines, which count as one space-separated list.
	id, err := singleHeader(h, HeaderID)
	if err != nil {
		return err
	}
	tsText, err := singleHeader(h, HeaderTimestamp)
	if err != nil {
		return err
	}
	sigs := strings.TrimSpace(strings.Join(h.Values(HeaderSignature), " "))
	if sigs == "" {
		return pay.Errorf(pay.ESIGNATURE, "missing %s header", HeaderSignature)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return pay.Errorf(pay.ESIGNATURE, "%s header is not a unix time in seconds", HeaderTimestamp)
	}

	// Hand the library only the headers read above, so it verifies the same
	// id and timestamp whose tolerance is checked below (it would prefer
	// svix-* headers if they were present).
	only := make(http.Header, 3)
	only.Set(HeaderID, id)
	only.Set(HeaderTimestamp, tsText)
	only.Set(HeaderSignature, sigs)
	if err := v.wh.VerifyIgnoringTimestamp(body, only); err != nil {
		return pay.Errorf(pay.ESIGNATURE, "no matching signature in %s header", HeaderSignature)
	}

	// Check the signed timestamp against the injected clock.
	if d := now.Sub(time.Unix(ts, 0)); d > v.tolerance || d < -v.tolerance {
		return pay.Errorf(pay.ESIGNATURE, "%s %d: timestamp outside tolerance (%s) of now", HeaderTimestamp, ts, v.tolerance)
	}
	return nil
}

// Parse verifies a webhook (Verify), parses its body (ParseEvent) and checks
// that the webhook-id header is the body's event id. Signature failures are
// ESIGNATURE; a verified body that is not a valid event is EINVALID naming
// the field.
func (v *Verifier) Parse(body []byte, h http.Header, now time.Time) (pay.WebhookEvent, error) {
	if err := v.Verify(body, h, now); err != nil {
		return pay.WebhookEvent{}, err
	}
	e, err := ParseEvent(body)
	if err != nil {
		return pay.WebhookEvent{}, err
	}
	if id := h.Get(HeaderID); id != e.EventID {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "id %q differs from the %s header", e.EventID, HeaderID)
	}
	return e, nil
}

// singleHeader returns the one value of header name, or an ESIGNATURE error
// if it is missing, empty or given more than once.
func singleHeader(h http.Header, name string) (string, error) {
	switch vs := h.Values(name); {
	case len(vs) == 0 || vs[0] == "":
		return "", pay.Errorf(pay.ESIGNATURE, "missing %s header", name)
	case len(vs) > 1:
		return "", pay.Errorf(pay.ESIGNATURE, "%s header given more than once", name)
	default:
		return vs[0], nil
	}
}
