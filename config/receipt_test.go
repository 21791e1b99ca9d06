package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/receipt"
)

const receiptPassword = "relay-Pa55word-0123"

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// caPEM returns a self-signed CA certificate in PEM.
func caPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "Shop private CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestDefaultConfig_Receipt(t *testing.T) {
	t.Parallel()
	r := DefaultConfig().Receipt
	want := Receipt{From: "receipts@example.com", TLS: "starttls"}
	if r != want {
		t.Fatalf("[receipt] defaults=%+v, want %+v", r, want)
	}
	rc, err := r.ReceiptConfig()
	if err != nil || rc.Addr != "" {
		t.Fatalf("ReceiptConfig()=%+v, %v; want receipts off", rc, err)
	}
}

// TestConfig_Validate_Receipt: each bad [receipt] value is an error naming
// its key, and no message quotes the password.
func TestConfig_Validate_Receipt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	goodCA := writeFile(t, dir, "ca.pem", caPEM(t))
	notPEM := writeFile(t, dir, "ca.txt", "not a certificate\n")
	goodText := writeFile(t, dir, "receipt.txt", `{{define "subject"}}Receipt {{.OrderID}}{{end}}{{.Merchant}}: {{.Amount}} on {{.Date}}`)
	goodHTML := writeFile(t, dir, "receipt.html", `<p>{{.Merchant}}: {{.Amount}}</p>`)
	badSyntax := writeFile(t, dir, "bad.txt", `{{.Amount`)
	badField := writeFile(t, dir, "bad.html", `<p>{{.Amout}}</p>`)
	missing := filepath.Join(dir, "missing.txt")
	on := func(f func(r *Receipt)) func(c *Config) {
		return func(c *Config) {
			c.Receipt.SMTPAddr = "smtp.example.com:587"
			f(&c.Receipt)
		}
	}
	for _, tt := range []struct {
		name   string
		mutate func(c *Config)
		key    string // "" = valid
	}{
		{"Auth", on(func(r *Receipt) { r.Username, r.Password = "u", receiptPassword }), ""},
		{"Every", on(func(r *Receipt) {
			r.MerchantName, r.TLS, r.Username, r.Password = "Ada's Bakery", "tls", "u", receiptPassword
			r.CAFile, r.TextTemplate, r.HTMLTemplate = goodCA, goodText, goodHTML
		}), ""},
		{"StartTLSOptional", on(func(r *Receipt) { r.TLS = "starttls_optional" }), ""},
		{"NoneLoopbackAuth", on(func(r *Receipt) {
			r.SMTPAddr, r.TLS, r.Username, r.Password = "127.0.0.1:25", "none", "u", receiptPassword
		}), ""},
		{"TLSBad", on(func(r *Receipt) { r.TLS = "ssl" }), "receipt.tls"},
		{"TLSEmpty", func(c *Config) { c.Receipt.TLS = "" }, "receipt.tls"},
		{"TLSUpper", on(func(r *Receipt) { r.TLS = "STARTTLS" }), "receipt.tls"},
		{"NoneRemoteAuth", on(func(r *Receipt) { r.TLS, r.Username, r.Password = "none", "u", receiptPassword }), "receipt.tls"},
		{"UsernameNoPassword", on(func(r *Receipt) { r.Username = "u" }), "receipt.password"},
		{"PasswordNoUsername", on(func(r *Receipt) { r.Password = receiptPassword }), "receipt.username"},
		{"MerchantLineBreak", on(func(r *Receipt) { r.MerchantName = "Shop\nBcc: x@example.com" }), "receipt.merchant_name"},
		{"CAMissing", on(func(r *Receipt) { r.CAFile = missing }), "receipt.ca_file"},
		{"CANotPEM", on(func(r *Receipt) { r.CAFile = notPEM }), "receipt.ca_file"},
		{"TextMissing", on(func(r *Receipt) { r.TextTemplate = missing }), "receipt.text_template"},
		{"TextSyntax", on(func(r *Receipt) { r.TextTemplate = badSyntax }), "receipt.text_template"},
		{"HTMLUnknownField", on(func(r *Receipt) { r.HTMLTemplate = badField }), "receipt.html_template"},
		{"HTMLMissing", on(func(r *Receipt) { r.HTMLTemplate = missing }), "receipt.html_template"},
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
			if strings.Contains(err.Error(), receiptPassword) {
				t.Fatalf("Validate()=%q quotes the password", err)
			}
		})
	}
}

// TestParse_Receipt reads a [receipt] section with its password from
// PAYSTATE_RECEIPT_PASSWORD, hands ripple the CA and the template sources,
// and masks the password for `check`.
func TestParse_Receipt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.pem", caPEM(t))
	text := writeFile(t, dir, "receipt.txt", "Thanks, {{.Merchant}}: {{.Amount}}")
	html := writeFile(t, dir, "receipt.html", "<p>{{.Amount}}</p>")
	file := writeFile(t, dir, "paystate.toml", `
[providers.mock]

[receipt]
smtp_addr = "smtp.example.com:465"
from = "receipts@shop.example"
merchant_name = "Ada's Bakery"
tls = "tls"
username = "apikey"
ca_file = "`+ca+`"
text_template = "`+text+`"
html_template = "`+html+`"
`)
	env := map[string]string{"PAYSTATE_RECEIPT_PASSWORD": receiptPassword}
	c, err := LoadEnv(file, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Receipt.Password != receiptPassword {
		t.Fatalf("receipt.password=%q, want the one from PAYSTATE_RECEIPT_PASSWORD", c.Receipt.Password)
	}
	rc, err := c.Receipt.ReceiptConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.Addr != "smtp.example.com:465" || rc.From != "receipts@shop.example" || rc.MerchantName != "Ada's Bakery" ||
		rc.TLS != receipt.TLSImplicit || rc.Username != "apikey" || rc.Password != receiptPassword {
		t.Fatalf("ReceiptConfig()=%+v", rc)
	}
	if rc.RootCAs == nil || rc.TextTemplate != "Thanks, {{.Merchant}}: {{.Amount}}" || rc.HTMLTemplate != "<p>{{.Amount}}</p>" {
		t.Fatalf("ReceiptConfig() CA=%v text=%q html=%q, want the files' contents", rc.RootCAs != nil, rc.TextTemplate, rc.HTMLTemplate)
	}

	m := c.Masked()
	if m.Receipt.Password != Mask || c.Receipt.Password != receiptPassword {
		t.Fatalf("Masked: receipt.password=%q (original %q), want %q and the original kept", m.Receipt.Password, c.Receipt.Password, Mask)
	}
	doc, err := m.TOML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), receiptPassword) {
		t.Fatalf("masked configuration shows the password:\n%s", doc)
	}

	// The template file broken after the check is still reported by name.
	if err := os.Remove(text); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Receipt.ReceiptConfig(); err == nil || !strings.Contains(err.Error(), "receipt.text_template") {
		t.Fatalf("ReceiptConfig() with the text template gone=%v, want an error naming receipt.text_template", err)
	}
}
