package ripple

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/receipt"
	"github.com/paystate/paystate/store"
)

// SMTPTimeout bounds one receipt's SMTP conversation: the connection,
// STARTTLS or the TLS handshake, AUTH and the message.
const SMTPTimeout = 30 * time.Second

// emailReceipt sends one e-mail per captured payment to the customer.
type emailReceipt struct {
	s        *Service
	addr     string // host:port
	host     string
	port     int
	from     string // the address alone
	domain   string
	merchant string
	mode     receipt.TLSMode
	user     string
	pass     string
	tls      *tls.Config
	tpl      *receipt.Templates
}

func newReceipt(s *Service, cfg receipt.Config) (*emailReceipt, error) {
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
	r := &emailReceipt{
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
		r.mode = receipt.TLSStartTLS
	}
	if _, err := receipt.ParseTLSMode(string(r.mode)); err != nil {
		return nil, fmt.Errorf("ripple: receipt tls: %w", err)
	}
	switch {
	case r.user == "" && r.pass != "":
		return nil, errors.New("ripple: receipt password set without a username")
	case r.user != "" && r.pass == "":
		return nil, errors.New("ripple: receipt username set without a password")
	}
	if r.tpl, err = receipt.ParseTemplates(cfg); err != nil {
		return nil, fmt.Errorf("ripple: receipt %w", err)
	}
	return r, nil
}

func (*emailReceipt) name() string                    { return pay.EffectReceipt }
func (*emailReceipt) endpoint() string                { return "" }
func (*emailReceipt) wants(rec pay.OutboxRecord) bool { return rec.Type == pay.EventType(pay.Captured) }

// receiptKey is the dedupe key of a payment's receipt.
func receiptKey(paymentID string) string { return "payment_receipt:" + paymentID }

func (r *emailReceipt) deliver(ctx context.Context, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	to := rec.Customer.Email
	if to == "" {
		return outcome{note: "no e-mail address: no receipt", skipped: true}, nil
	}
	if strings.ContainsAny(to, "\r\n") {
		return outcome{permanent: true}, errors.New("receipt: the e-mail address has a line break")
	}
	key := receiptKey(rec.PaymentID)
	var sent bool
	err := store.View(ctx, r.s.Store, asRippleTx, func(tx rippleTx) error {
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
	err = store.Update(ctx, r.s.Store, asRippleTx, func(tx rippleTx) error {
		return tx.PutEffect(store.EffectRecord{Key: key, DeliveryID: d.ID})
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
func (r *emailReceipt) send(ctx context.Context, msg *gomail.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, SMTPTimeout)
	defer cancel()
	var stop func() bool
	dial := func(dctx context.Context, network, _ string) (net.Conn, error) {
		nd := &net.Dialer{}
		var conn net.Conn
		var err error
		if r.mode == receipt.TLSImplicit {
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
	case receipt.TLSStartTLS:
		policy = gomail.TLSMandatory
	case receipt.TLSStartTLSOptional:
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
func (r *emailReceipt) message(rec pay.OutboxRecord, to string) (*gomail.Msg, error) {
	at := rec.CreatedAt.UTC()
	subject, text, html, err := r.tpl.Render(receipt.Data{
		Merchant: r.merchant, OrderID: rec.OrderID, PaymentID: rec.PaymentID,
		Amount: pay.FormatAmount(rec.Amount, rec.Currency), AmountMinor: rec.Amount, Currency: rec.Currency,
		Date: at.Format(receipt.DateLayout), Time: at, Email: to,
	})
	if err != nil {
		return nil, err
	}

	m := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := m.FromFormat(r.merchant, r.from); err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	if err := m.To(to); err != nil {
		return nil, errors.New("the customer's e-mail address is not valid")
	}
	m.Subject(subject)
	m.SetDateWithValue(at)
	m.SetMessageIDWithValue("receipt." + rec.PaymentID + "@" + r.domain)
	m.SetBodyString(gomail.TypeTextPlain, text)
	m.AddAlternativeString(gomail.TypeTextHTML, html)
	return m, nil
}
