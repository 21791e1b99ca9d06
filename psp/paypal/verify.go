package paypal

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paystate/paystate/pay"
)

// Headers of a PayPal webhook delivery.
const (
	HeaderTransmissionID   = "Paypal-Transmission-Id"
	HeaderTransmissionTime = "Paypal-Transmission-Time"
	HeaderTransmissionSig  = "Paypal-Transmission-Sig"
	HeaderCertURL          = "Paypal-Cert-Url"
	HeaderAuthAlgo         = "Paypal-Auth-Algo"
)

// AuthAlgo is the only signature algorithm paystate accepts.
const AuthAlgo = "SHA256withRSA"

// maxCertBytes bounds a fetched certificate file; maxCerts the cache.
const (
	maxCertBytes = 64 << 10
	maxCerts     = 32
)

var certFetches = metrics.NewCounter(`paystate_paypal_cert_fetches_total`)

// SignedMessage is what PayPal signs for a webhook:
// "<transmission id>|<transmission time>|<webhook id>|<CRC32 of the body>",
// the CRC32 (IEEE) as an unsigned decimal.
func SignedMessage(transmissionID, transmissionTime, webhookID string, body []byte) []byte {
	return []byte(transmissionID + "|" + transmissionTime + "|" + webhookID + "|" + strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
}

// transmission is the signature headers of a delivery, checked for form.
type transmission struct {
	id, time, sig, certURL string
	at                     time.Time
}

// readTransmission reads and checks the signature headers, and the
// transmission time against now and the tolerance (either side: a
// delivery from the future is as suspect as a stale one).
func (p *Provider) readTransmission(h http.Header, now time.Time) (transmission, error) {
	t := transmission{
		id: h.Get(HeaderTransmissionID), time: h.Get(HeaderTransmissionTime),
		sig: h.Get(HeaderTransmissionSig), certURL: h.Get(HeaderCertURL),
	}
	for _, k := range []struct{ name, v string }{
		{HeaderTransmissionID, t.id}, {HeaderTransmissionTime, t.time}, {HeaderTransmissionSig, t.sig},
	} {
		if k.v == "" {
			return t, pay.Errorf(pay.ESIGNATURE, "missing %s header", k.name)
		}
		if len(h.Values(k.name)) > 1 {
			return t, pay.Errorf(pay.ESIGNATURE, "%s header given more than once", k.name)
		}
	}
	if len(t.id) > 255 || strings.Contains(t.id, "|") {
		return t, pay.Errorf(pay.ESIGNATURE, "malformed %s header", HeaderTransmissionID)
	}
	at, err := time.Parse(time.RFC3339, t.time)
	if err != nil {
		return t, pay.Errorf(pay.ESIGNATURE, "%s header is not an RFC 3339 time", HeaderTransmissionTime)
	}
	if d := now.Sub(at); d > p.tolerance || d < -p.tolerance {
		return t, pay.Errorf(pay.ESIGNATURE, "%s is %s from now, beyond the tolerance (%s)", HeaderTransmissionTime, d.Round(time.Second), p.tolerance)
	}
	t.at = at
	if algo := h.Get(HeaderAuthAlgo); algo != "" && algo != AuthAlgo {
		return t, pay.Errorf(pay.ESIGNATURE, "%s %q is not %s", HeaderAuthAlgo, cut(algo, 40), AuthAlgo)
	}
	return t, nil
}

// verifyOffline checks the delivery's signature with the certificate its
// PAYPAL-CERT-URL names: fetched only from an allowed host, chained to the
// roots and valid at now, issued to DefaultCertName.
func (p *Provider) verifyOffline(ctx context.Context, body []byte, t transmission, now time.Time) error {
	if t.certURL == "" {
		return pay.Errorf(pay.ESIGNATURE, "missing %s header", HeaderCertURL)
	}
	cert, err := p.certs.get(ctx, t.certURL, now)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(t.sig)
	if err != nil {
		return pay.Errorf(pay.ESIGNATURE, "%s is not base64", HeaderTransmissionSig)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return pay.Errorf(pay.ESIGNATURE, "the signing certificate's key is not RSA")
	}
	sum := sha256.Sum256(SignedMessage(t.id, t.time, p.webhookID, body))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return pay.Errorf(pay.ESIGNATURE, "the signature does not match the body")
	}
	return nil
}

// verifyAPI asks PayPal's verify-webhook-signature call.
func (p *Provider) verifyAPI(ctx context.Context, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(string(body)))
	if err != nil {
		return pay.Errorf(pay.EINTERNAL, "paypal verify: %v", err)
	}
	req.Header = h.Clone()
	res, err := p.api.VerifyWebhookSignature(ctx, req, p.webhookID)
	if err != nil {
		// PayPal could not be asked: the delivery is refused and PayPal
		// delivers it again later.
		return pay.Errorf(pay.ESIGNATURE, "verify-webhook-signature: %s", pay.ErrorMessage(apiError("verify webhook signature", err)))
	}
	if res.VerificationStatus != "SUCCESS" {
		return pay.Errorf(pay.ESIGNATURE, "verify-webhook-signature answered %q", cut(res.VerificationStatus, 40))
	}
	return nil
}

// certCache fetches signing certificates from the allowed hosts and keeps
// them by URL. A certificate is checked (chain, validity at now, name) at
// every use, so one that expires while cached is refused.
type certCache struct {
	hosts  map[string]bool
	roots  *x509.CertPool // nil: the system roots
	client *http.Client
	name   string

	mu    sync.Mutex
	certs map[string]certEntry
}

type certEntry struct {
	leaf          *x509.Certificate
	intermediates *x509.CertPool
}

func newCertCache(hosts []string, roots *x509.CertPool, client *http.Client) *certCache {
	c := &certCache{hosts: map[string]bool{}, roots: roots, client: client, name: DefaultCertName, certs: map[string]certEntry{}}
	for _, h := range hosts {
		c.hosts[strings.ToLower(h)] = true
	}
	return c
}

// get returns the certificate at raw, checked at now.
func (c *certCache) get(ctx context.Context, raw string, now time.Time) (*x509.Certificate, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Host == "" {
		return nil, pay.Errorf(pay.ESIGNATURE, "%s must be an https URL", HeaderCertURL)
	}
	if !c.hosts[strings.ToLower(u.Host)] && !c.hosts[strings.ToLower(u.Hostname())] {
		return nil, pay.Errorf(pay.ESIGNATURE, "%s names host %q, which is not in providers.paypal.cert_hosts", HeaderCertURL, cut(u.Host, 80))
	}
	key := u.String()
	c.mu.Lock()
	e, ok := c.certs[key]
	c.mu.Unlock()
	if !ok {
		if e, err = c.fetch(ctx, key); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if len(c.certs) >= maxCerts {
			clear(c.certs)
		}
		c.certs[key] = e
		c.mu.Unlock()
	}
	if _, err := e.leaf.Verify(x509.VerifyOptions{
		Roots: c.roots, Intermediates: e.intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}); err != nil {
		return nil, pay.Errorf(pay.ESIGNATURE, "the signing certificate is not trusted: %s", cut(err.Error(), 200))
	}
	if e.leaf.Subject.CommonName != c.name && e.leaf.VerifyHostname(c.name) != nil {
		return nil, pay.Errorf(pay.ESIGNATURE, "the signing certificate is issued to %q, not %s", cut(e.leaf.Subject.CommonName, 80), c.name)
	}
	return e.leaf, nil
}

// fetch downloads and parses a PEM certificate chain, leaf first.
func (c *certCache) fetch(ctx context.Context, u string) (certEntry, error) {
	certFetches.Inc()
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return certEntry{}, pay.Errorf(pay.ESIGNATURE, "%s: %v", HeaderCertURL, err)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return certEntry{}, pay.Errorf(pay.ESIGNATURE, "fetch the signing certificate: %s", pay.NoAnswer("paypal", "certificate", err).Message)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return certEntry{}, pay.Errorf(pay.ESIGNATURE, "fetch the signing certificate: HTTP %d", res.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxCertBytes+1))
	if err != nil {
		return certEntry{}, pay.Errorf(pay.ESIGNATURE, "fetch the signing certificate: %v", err)
	}
	if len(data) > maxCertBytes {
		return certEntry{}, pay.Errorf(pay.ESIGNATURE, "the signing certificate file is larger than %d bytes", maxCertBytes)
	}
	certs, err := parsePEM(data)
	if err != nil {
		return certEntry{}, pay.Errorf(pay.ESIGNATURE, "the signing certificate: %v", err)
	}
	e := certEntry{leaf: certs[0], intermediates: x509.NewCertPool()}
	for _, ct := range certs[1:] {
		e.intermediates.AddCert(ct)
	}
	return e, nil
}

// parsePEM reads the certificates of a PEM file, in order.
func parsePEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}
