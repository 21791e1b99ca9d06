// Package receipt is an e-mail receipt apart from sending it: its
// settings (Config, the SMTP TLSMode) and its templates, tried on a
// sample receipt when parsed and rendered by Templates. config checks the
// settings with it; ripple's receipt effect renders and sends.
package receipt

import (
	"bytes"
	"cmp"
	"crypto/x509"
	"fmt"
	htmltemplate "html/template"
	"io"
	"strings"
	texttemplate "text/template"
	"time"
)

// TLSMode says how the connection to the receipt's SMTP server is
// encrypted (receipt.tls).
type TLSMode string

// The TLS modes of receipt.tls.
const (
	// TLSStartTLS connects in clear and requires STARTTLS (submission,
	// port 587 style): a server that does not offer it gets nothing, not
	// even the sender, and the attempt fails. The default.
	TLSStartTLS TLSMode = "starttls"
	// TLSStartTLSOptional uses STARTTLS when the server offers it and
	// goes on in clear when it does not. A server that offers it but
	// whose handshake fails still gets nothing.
	TLSStartTLSOptional TLSMode = "starttls_optional"
	// TLSImplicit speaks TLS from the first byte (port 465 style).
	TLSImplicit TLSMode = "tls"
	// TLSNone never encrypts: for a relay on the same host or network.
	TLSNone TLSMode = "none"
)

// ParseTLSMode returns the TLS mode named s, one of "starttls",
// "starttls_optional", "tls" and "none".
func ParseTLSMode(s string) (TLSMode, error) {
	switch m := TLSMode(s); m {
	case TLSStartTLS, TLSStartTLSOptional, TLSImplicit, TLSNone:
		return m, nil
	}
	return "", fmt.Errorf(`%q is not a TLS mode: use "starttls", "starttls_optional", "tls" or "none"`, s)
}

// Config configures e-mail receipts.
type Config struct {
	// Addr is the SMTP server's host:port.
	Addr string
	// From is the sender address, "receipts@example.com"; its domain also
	// names the Message-ID.
	From string
	// MerchantName is who the customer paid, shown as the sender's name,
	// in the subject and in the built-in templates; empty: the domain of
	// From.
	MerchantName string
	// TLS is how the connection is encrypted; empty: TLSStartTLS.
	TLS TLSMode
	// Username and Password authenticate to the server (AUTH PLAIN or
	// LOGIN, else the strongest mechanism the server offers); no
	// Username, no AUTH. The password crosses the network only inside
	// TLS (or to a loopback address) and is never logged.
	Username, Password string
	// RootCAs verify the server's certificate; nil: the system's roots.
	RootCAs *x509.CertPool
	// TextTemplate and HTMLTemplate are the sources of the text and the
	// HTML part, a Go text/template and html/template executed with a
	// Data; empty: the built-in ones. The text template may define a
	// "subject" template for the Subject line.
	TextTemplate, HTMLTemplate string
}

// Data is what the receipt templates are executed with.
type Data struct {
	Merchant    string    // receipt.merchant_name (or the domain of receipt.from)
	OrderID     string    // the merchant's order id
	PaymentID   string    // "pay_..."
	Amount      string    // in major units with the currency: "12.50 EUR", "1500 JPY"
	AmountMinor int64     // in minor units: 1250
	Currency    string    // "EUR"
	Date        string    // the capture time in UTC, in DateLayout: "1 March 2025 12:00 UTC"
	Time        time.Time // the same, for a layout of your own: {{.Time.Format "02.01.2006"}}
	Email       string    // the customer's address
}

// DateLayout formats Data.Date.
const DateLayout = "2 January 2006 15:04 MST"

// sample is what a template is tried with when it is parsed, so a
// misspelt field is a configuration error, not a dead letter.
var sample = Data{
	Merchant: "Example Shop", OrderID: "order-1", PaymentID: "pay_01JNMX2Q5C7V8W9X0Y1Z2A3B4C",
	Amount: "12.50 EUR", AmountMinor: 1250, Currency: "EUR",
	Date: "1 March 2025 12:00 UTC", Time: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	Email: "customer@example.com",
}

const defaultText = `{{define "subject"}}Your receipt from {{.Merchant}} for order {{.OrderID}}{{end -}}
Thank you for your payment to {{.Merchant}}.

Amount:   {{.Amount}}
Order:    {{.OrderID}}
Payment:  {{.PaymentID}}
Date:     {{.Date}}

{{.Merchant}}
`

const defaultHTML = `<!DOCTYPE html>
<html><body>
<h1>Thank you for your payment to {{.Merchant}}</h1>
<table>
<tr><th align="left">Amount</th><td>{{.Amount}}</td></tr>
<tr><th align="left">Order</th><td>{{.OrderID}}</td></tr>
<tr><th align="left">Payment</th><td>{{.PaymentID}}</td></tr>
<tr><th align="left">Date</th><td>{{.Date}}</td></tr>
</table>
<p>{{.Merchant}}</p>
</body></html>
`

// ParseText parses the text part's template (Go text/template) and
// tries it, and its "subject" template if it defines one, on sample
// data: an unknown field is an error here, not at delivery.
func ParseText(src string) (*texttemplate.Template, error) {
	t, err := tried(texttemplate.New("text").Option("missingkey=error").Parse(src))
	if err != nil {
		return nil, err
	}
	if s := t.Lookup("subject"); s != nil {
		if _, err := tried(s, nil); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// ParseHTML parses the HTML part's template (Go html/template, which
// escapes every value for its place in the page) and tries it on sample
// data.
func ParseHTML(src string) (*htmltemplate.Template, error) {
	return tried(htmltemplate.New("html").Option("missingkey=error").Parse(src))
}

// tried returns the template t that parsed with err, once it has also
// run on the sample receipt.
func tried[T interface{ Execute(io.Writer, any) error }](t T, err error) (T, error) {
	if err == nil {
		err = t.Execute(io.Discard, sample)
	}
	if err != nil {
		var none T
		return none, err
	}
	return t, nil
}

// defaultSubject is the subject when the text template defines none.
var defaultSubject = texttemplate.Must(texttemplate.Must(ParseText(defaultText)).Lookup("subject").Clone())

// Templates are a receipt's parsed templates: the subject, the text and
// the HTML part.
type Templates struct {
	subject, text *texttemplate.Template
	html          *htmltemplate.Template
}

// ParseTemplates parses and tries the text and the HTML template of cfg,
// the built-in ones where cfg has none.
func ParseTemplates(cfg Config) (*Templates, error) {
	t := &Templates{subject: defaultSubject}
	var err error
	if t.text, err = ParseText(cmp.Or(cfg.TextTemplate, defaultText)); err != nil {
		return nil, fmt.Errorf("text template: %w", err)
	}
	if t.html, err = ParseHTML(cmp.Or(cfg.HTMLTemplate, defaultHTML)); err != nil {
		return nil, fmt.Errorf("HTML template: %w", err)
	}
	if s := t.text.Lookup("subject"); s != nil {
		t.subject = s
	}
	return t, nil
}

// Render executes the templates with d: the subject, on one line, and
// the text and the HTML part.
func (t *Templates) Render(d Data) (subject, text, html string, err error) {
	var tb, hb, sb bytes.Buffer
	if err = t.text.Execute(&tb, d); err != nil {
		return "", "", "", fmt.Errorf("render the text part: %w", err)
	}
	if err = t.html.Execute(&hb, d); err != nil {
		return "", "", "", fmt.Errorf("render the HTML part: %w", err)
	}
	if err = t.subject.Execute(&sb, d); err != nil {
		return "", "", "", fmt.Errorf("render the subject: %w", err)
	}
	return strings.Join(strings.Fields(sb.String()), " "), tb.String(), hb.String(), nil
}
