package paypaltest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/psp/paypal"
)

// CA is a test certificate authority: a root, an intermediate that issues
// the webhook signing certificates (as PayPal's chain has one), and a TLS
// certificate for 127.0.0.1 so the certificate host is served over https
// trusted by the same roots.
type CA struct {
	root, inter       *x509.Certificate
	rootKey, interKey crypto.Signer
	rootPEM           []byte
	serial            atomic.Int64
}

// NewCA makes a CA whose certificates are valid from a day before now for
// ten years.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	ca := &CA{}
	ca.serial.Store(1)
	now := time.Now()
	var err error
	if ca.rootKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		tb.Fatal(err)
	}
	ca.root = ca.sign(tb, &x509.Certificate{
		Subject:   pkix.Name{CommonName: "paystate test root"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, ca.rootKey.Public(), nil, ca.rootKey)
	if ca.interKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		tb.Fatal(err)
	}
	ca.inter = ca.sign(tb, &x509.Certificate{
		Subject:   pkix.Name{CommonName: "paystate test intermediate"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, ca.interKey.Public(), ca.root, ca.rootKey)
	ca.rootPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.root.Raw})
	return ca
}

func (ca *CA) sign(tb testing.TB, tmpl *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, key crypto.Signer) *x509.Certificate {
	tb.Helper()
	tmpl.SerialNumber = big.NewInt(ca.serial.Add(1))
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// WriteRoot writes the root PEM to a file in dir and returns its path.
func (ca *CA) WriteRoot(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "paypal-test-ca.pem")
	if err := os.WriteFile(path, ca.rootPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Signer is a webhook signing certificate and its key.
type Signer struct {
	Key   *rsa.PrivateKey
	Cert  *x509.Certificate
	chain []byte // PEM: the leaf, then the intermediate
}

// Issue makes a signing certificate for name (paypal.DefaultCertName for
// one paystate accepts) valid from notBefore to notAfter.
func (ca *CA) Issue(tb testing.TB, name string, notBefore, notAfter time.Time) *Signer {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	leaf := ca.sign(tb, &x509.Certificate{
		Subject: pkix.Name{CommonName: name, Organization: []string{"PayPal, Inc."}}, DNSNames: []string{name},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}, &key.PublicKey, ca.inter, ca.interKey)
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.inter.Raw})...)
	return &Signer{Key: key, Cert: leaf, chain: chain}
}

// PEM is the signer's chain as its certificate URL serves it.
func (s *Signer) PEM() []byte { return s.chain }

// tlsCert is a server certificate for 127.0.0.1 issued by the root.
func (ca *CA) tlsCert(tb testing.TB) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	c := ca.sign(tb, &x509.Certificate{
		Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, key.Public(), ca.root, ca.rootKey)
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: key, Leaf: c}
}

// CertHost serves signing certificates over https on 127.0.0.1, as
// PayPal's API host serves /v1/notifications/certs/<name>, and counts the
// fetches.
type CertHost struct {
	srv     *httptest.Server
	mu      sync.Mutex
	certs   map[string][]byte
	fetches atomic.Int64
}

// NewCertHost starts a certificate host with a TLS certificate of ca.
func NewCertHost(tb testing.TB, ca *CA) *CertHost {
	tb.Helper()
	h := &CertHost{certs: map[string][]byte{}}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fetches.Add(1)
		h.mu.Lock()
		b, ok := h.certs[r.URL.Path]
		h.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(b)
	}))
	h.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.tlsCert(tb)}}
	h.srv.StartTLS()
	tb.Cleanup(h.srv.Close)
	return h
}

// Host is the host:port of the certificate host (for cert_hosts).
func (h *CertHost) Host() string { return strings.TrimPrefix(h.srv.URL, "https://") }

// Serve publishes s's chain under name and returns its URL.
func (h *CertHost) Serve(name string, s *Signer) string {
	path := "/v1/notifications/certs/" + name
	h.mu.Lock()
	h.certs[path] = s.PEM()
	h.mu.Unlock()
	return h.srv.URL + path
}

// Fetches is how often a certificate was asked for.
func (h *CertHost) Fetches() int64 { return h.fetches.Load() }

// Delivery is what Sign needs to sign a webhook delivery.
type Delivery struct {
	WebhookID      string
	TransmissionID string    // "" = a fresh one
	At             time.Time // the transmission time
	CertURL        string
}

var transmissions atomic.Int64

// Sign returns the headers PayPal sends with body: the transmission id and
// time, the RSA-SHA256 signature over paypal.SignedMessage, the
// certificate URL and the algorithm.
func (s *Signer) Sign(body []byte, d Delivery) http.Header {
	id := d.TransmissionID
	if id == "" {
		id = "b2384410-f8d2-11eb-8487-" + strings.Repeat("0", 4) + big.NewInt(transmissions.Add(1)+1e7).String()
	}
	ts := d.At.UTC().Format(time.RFC3339)
	sum := sha256.Sum256(paypal.SignedMessage(id, ts, d.WebhookID, body))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.Key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err) // a 2048-bit key signs any digest
	}
	h := http.Header{}
	h.Set(paypal.HeaderTransmissionID, id)
	h.Set(paypal.HeaderTransmissionTime, ts)
	h.Set(paypal.HeaderTransmissionSig, base64.StdEncoding.EncodeToString(sig))
	h.Set(paypal.HeaderCertURL, d.CertURL)
	h.Set(paypal.HeaderAuthAlgo, paypal.AuthAlgo)
	h.Set("Content-Type", "application/json")
	return h
}
