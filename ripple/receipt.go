package ripple

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"io"
	"net"
	"net/mail"
	"strings"
	texttemplate "text/template"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/paystate/paystate/pay"
)

// SMTPTimeout bounds one receipt's SMTP conversation: the connection,
// STARTTLS or the TLS handshake, AUTH and the message.
const SMTPTimeout = 30 * time.Second

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

// ReceiptConfig configures e-mail receipts.
type ReceiptConfig struct {
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
	// ReceiptData; empty: the built-in ones. The text template may define
	// a "subject" template for the Subject line.
	TextTemplate, HTMLTemplate string
}

// ReceiptData is what the receipt templates are executed with.
type ReceiptData struct {
	Merchant    string    // receipt.merchant_name (or the domain of receipt.from)
	OrderID     string    // the merchant's order id
	PaymentID   string    // "pay_..."
	Amount      string    // in major units with the currency: "12.50 EUR", "1500 JPY"
	AmountMinor int64     // in minor units: 1250
	Currency    string    // "EUR"
	Date        string    // the capture time in UTC: "1 March 2025 12:00 UTC"
	Time        time.Time // the same, for a layout of your own: {{.Time.Format "02.01.2006"}}
	Email       string    // the customer's address
}

// sampleReceipt is what a template is tried with when it is parsed, so a
// misspelt field is a configuration error, not a dead letter.
var sampleReceipt = ReceiptData{
	Merchant: "Example Shop", OrderID: "order-1", PaymentID: "pay_01JNMX2Q5C7V8W9X0Y1Z2A3B4C",
	Amount: "12.50 EUR", AmountMinor: 1250, Currency: "EUR",
	Date: "1 March 2025 12:00 UTC", Time: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	Email: "customer@example.com",
}

// receiptDateLayout formats ReceiptData.Date.
const receiptDateLayout = "2 January 2006 15:04 MST"

const defaultReceiptText = `{{define "subject"}}Your receipt from {{.Merchant}} for order {{.OrderID}}{{end -}}
Thank you for your payment to {{.Merchant}}.

Amount:   {{.Amount}}
Order:    {{.OrderID}}
Payment:  {{.PaymentID}}
Date:     {{.Date}}

{{.Merchant}}
`

const defaultReceiptHTML = `<!DOCTYPE html>
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

// ParseReceiptText parses the text part's template (Go text/template)
// and tries it, and its "subject" template if it defines one, on sample
// data: an unknown field is an error here, not at delivery.
func ParseReceiptText(src string) (*texttemplate.Template, error) {
	t, err := texttemplate.New("text").Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, err
	}
	if err := t.Execute(io.Discard, sampleReceipt); err != nil {
		return nil, err
	}
	if s := t.Lookup("subject"); s != nil {
		if err := s.Execute(io.Discard, sampleReceipt); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// ParseReceiptHTML parses the HTML part's template (Go html/template,
// which escapes every value for its place in the page) and tries it on
// sample data.
func ParseReceiptHTML(src string) (*htmltemplate.Template, error) {
	t, err := htmltemplate.New("html").Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, err
	}
	if err := t.Execute(io.Discard, sampleReceipt); err != nil {
		return nil, err
	}
	return t, nil
}

// defaultSubject is the subject when the text template defines none.
var defaultSubject = texttemplate.Must(texttemplate.Must(ParseReceiptText(defaultReceiptText)).Lookup("subject").Clone())

// receipt sends one e-mail per captured payment to the customer.
type receipt struct {
	s        *Service
	addr     string // host:port
	host     string
	port     int
	from     string // the address alone
	domain   string
	merchant string
	mode     TLSMode
	user     string
	pass     string
	tls      *tls.Config
	text     *texttemplate.Template
	html     *htmltemplate.Template
}

func newReceipt(s *Service, cfg ReceiptConfig) (*receipt, error) {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" {
		return nil, fmt.Errorf("ripple: receipt address %q is not host:port", cfg.Addr)
	}
	portNum, err := net.LookupPort("tcp", port)
	if err != nil || portNum <= 0 {
		return nil, fmt.Errorf("ripple: receipt address %q has no valid port", cfg.Addr)
	}
	a, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("ripple: receipt sender %q is not an e-mail address", cfg.From)
	}
	_, domain, _ := strings.Cut(a.Address, "@")
	r := &receipt{
		s: s, addr: cfg.Addr, host: host, port: portNum, from: a.Address, domain: domain,
		merchant: strings.TrimSpace(cfg.MerchantName), mode: cfg.TLS, user: cfg.Username, pass: cfg.Password,
		tls: &tls.Config{ServerName: host, RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
	}
	if r.merchant == "" {
		r.merchant = domain
	}
	if strings.ContainsAny(r.merchant, "\r\n") {
		return nil, errors.New("ripple: receipt merchant name has a line break")
	}
	if r.mode == "" {
		r.mode = TLSStartTLS
	}
	if _, err := ParseTLSMode(string(r.mode)); err != nil {
		return nil, fmt.Errorf("ripple: receipt tls: %w", err)
	}
	switch {
	case r.user == "" && r.pass != "":
		return nil, errors.New("ripple: receipt password set without a username")
	case r.user != "" && r.pass == "":
		return nil, errors.New("ripple: receipt username set without a password")
	}
	textSrc, htmlSrc := cfg.TextTemplate, cfg.HTMLTemplate
	if textSrc == "" {
		textSrc = defaultReceiptText
	}
	if htmlSrc == "" {
		htmlSrc = defaultReceiptHTML
	}
	if r.text, err = ParseReceiptText(textSrc); err != nil {
		return nil, fmt.Errorf("ripple: receipt text template: %w", err)
	}
	if r.html, err = ParseReceiptHTML(htmlSrc); err != nil {
		return nil, fmt.Errorf("ripple: receipt HTML template: %w", err)
	}
	return r, nil
}

func (*receipt) name() string                    { return pay.EffectReceipt }
func (*receipt) endpoint() string                { return "" }
func (*receipt) wants(rec pay.OutboxRecord) bool { return rec.Type == pay.EventType(pay.Captured) }

// receiptKey is the dedupe key of a payment's receipt.
func receiptKey(paymentID string) string { return "payment_receipt:" + paymentID }

func (r *receipt) deliver(ctx context.Context, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	to := rec.Customer.Email
	if to == "" {
		return outcome{note: "no e-mail address: no receipt", skipped: true}, nil
	}
	if strings.ContainsAny(to, "\r\n") {
		return outcome{permanent: true}, errors.New("receipt: the e-mail address has a line break")
	}
	key := receiptKey(rec.PaymentID)
	var sent bool
	err := r.s.Store.View(ctx, func(tx pay.Tx) error {
		var err error
		_, sent, err = tx.Effect(key)
		return err
	})
	if err != nil {
		return outcome{}, fmt.Errorf("receipt: %w", err)
	}
	if sent {
		return outcome{note: "a receipt for this payment was sent before", skipped: true}, nil
	}
	msg, err := r.message(rec, to)
	if err != nil {
		return outcome{permanent: true}, fmt.Errorf("receipt: %w", err)
	}
	if err := r.send(ctx, msg); err != nil {
		return outcome{permanent: permanentSMTP(err)}, fmt.Errorf("receipt: %w", err)
	}
	err = r.s.Store.Update(ctx, func(tx pay.Tx) error {
		return tx.PutEffect(pay.EffectRecord{Key: key, DeliveryID: d.ID})
	})
	if err != nil {
		// Sent, but not marked: the next attempt sends it again.
		return outcome{}, fmt.Errorf("receipt sent, but not recorded: %w", err)
	}
	return outcome{note: "receipt sent"}, nil
}

// permanentSMTP reports whether err is a 5xx answer to the message
// (MAIL, RCPT, DATA): the same message will be refused again. Failures to
// connect, to secure the connection or to authenticate are retried: they
// are the server's or the configuration's, not the message's.
func permanentSMTP(err error) bool {
	var se *gomail.SendError
	return errors.As(err, &se) && se.ErrorCode() >= 500 && se.ErrorCode() < 600
}

// send delivers msg over SMTP within SMTPTimeout, with r's TLS mode and
// credentials. The caller's context ending (shutdown) closes the
// connection at once.
func (r *receipt) send(ctx context.Context, msg *gomail.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, SMTPTimeout)
	defer cancel()
	var stop func() bool
	dial := func(dctx context.Context, network, _ string) (net.Conn, error) {
		nd := &net.Dialer{}
		var conn net.Conn
		var err error
		if r.mode == TLSImplicit {
			conn, err = (&tls.Dialer{NetDialer: nd, Config: r.tls.Clone()}).DialContext(dctx, network, r.addr)
		} else {
			conn, err = nd.DialContext(dctx, network, r.addr)
		}
		if err != nil {
			return nil, err
		}
		stop = context.AfterFunc(ctx, func() { _ = conn.Close() })
		return conn, nil
	}
	policy := gomail.NoTLS // TLSImplicit: the dialer's TLS; TLSNone
	switch r.mode {
	case TLSStartTLS:
		policy = gomail.TLSMandatory
	case TLSStartTLSOptional:
		policy = gomail.TLSOpportunistic
	}
	opts := []gomail.Option{
		gomail.WithPort(r.port), gomail.WithTimeout(SMTPTimeout), gomail.WithDialContextFunc(dial),
		gomail.WithTLSPolicy(policy), gomail.WithTLSConfig(r.tls.Clone()),
	}
	if r.user != "" {
		opts = append(opts, gomail.WithUsername(r.user), gomail.WithPassword(r.pass),
			gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthPlain, gomail.SMTPAuthLogin))
	}
	c, err := gomail.NewClient(r.host, opts...)
	if err != nil {
		return fmt.Errorf("smtp %s: %w", r.addr, err)
	}
	err = c.DialAndSendWithContext(ctx, msg)
	if stop != nil {
		stop()
	}
	if err != nil && !msg.IsDelivered() {
		return fmt.Errorf("smtp %s (tls=%s): %w", r.addr, r.mode, err)
	}
	// Delivered: an error after the server took the message (RSET, QUIT)
	// must not send it again.
	return nil
}

// message builds the receipt: From with the merchant's name, To, Subject,
// Date, a Message-ID stable across attempts, and multipart/alternative
// with the text and the HTML part, quoted-printable UTF-8.
func (r *receipt) message(rec pay.OutboxRecord, to string) (*gomail.Msg, error) {
	at := rec.CreatedAt.UTC()
	data := ReceiptData{
		Merchant: r.merchant, OrderID: rec.OrderID, PaymentID: rec.PaymentID,
		Amount: pay.FormatAmount(rec.Amount, rec.Currency), AmountMinor: rec.Amount, Currency: rec.Currency,
		Date: at.Format(receiptDateLayout), Time: at, Email: to,
	}
	var text, html, subject bytes.Buffer
	if err := r.text.Execute(&text, data); err != nil {
		return nil, fmt.Errorf("render the text part: %w", err)
	}
	if err := r.html.Execute(&html, data); err != nil {
		return nil, fmt.Errorf("render the HTML part: %w", err)
	}
	st := defaultSubject
	if s := r.text.Lookup("subject"); s != nil {
		st = s
	}
	if err := st.Execute(&subject, data); err != nil {
		return nil, fmt.Errorf("render the subject: %w", err)
	}

	m := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := m.FromFormat(r.merchant, r.from); err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	if err := m.To(to); err != nil {
		return nil, errors.New("the customer's e-mail address is not valid")
	}
	m.Subject(strings.Join(strings.Fields(subject.String()), " ")) // one line
	m.SetDateWithValue(at)
	m.SetMessageIDWithValue("receipt." + rec.PaymentID + "@" + r.domain)
	m.SetBodyString(gomail.TypeTextPlain, text.String())
	m.AddAlternativeString(gomail.TypeTextHTML, html.String())
	return m, nil
}
