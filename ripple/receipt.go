package ripple

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/paystate/paystate/pay"
)

// SMTPTimeout bounds one receipt's SMTP conversation.
const SMTPTimeout = 30 * time.Second

// ReceiptConfig configures e-mail receipts.
type ReceiptConfig struct {
	// Addr is the SMTP server's host:port. The conversation is plain SMTP
	// without authentication: point it at a relay (an MTA on the same host
	// or network) that takes mail from paystate and handles TLS onward.
	Addr string
	// From is the sender address, "receipts@example.com"; its domain also
	// names the Message-ID.
	From string
}

// receipt sends one e-mail per captured payment to the customer.
type receipt struct {
	s      *Service
	addr   string
	from   string
	domain string
}

func newReceipt(s *Service, cfg ReceiptConfig) (*receipt, error) {
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("ripple: receipt address %q is not host:port", cfg.Addr)
	}
	a, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("ripple: receipt sender %q is not an e-mail address", cfg.From)
	}
	_, domain, _ := strings.Cut(a.Address, "@")
	return &receipt{s: s, addr: cfg.Addr, from: a.Address, domain: domain}, nil
}

func (*receipt) name() string                    { return pay.EffectReceipt }
func (*receipt) endpoint() string                { return "" }
func (*receipt) wants(rec pay.OutboxRecord) bool { return rec.Status == pay.Captured }

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
	if err := r.send(ctx, to, msg); err != nil {
		var se *smtp.SMTPError
		// A 5xx answer is permanent: the same message will be refused again.
		return outcome{permanent: errors.As(err, &se) && se.Code >= 500}, fmt.Errorf("receipt: %w", err)
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

// send delivers msg to one recipient over SMTP within SMTPTimeout.
func (r *receipt) send(ctx context.Context, to string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, SMTPTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() }) // shutdown ends the conversation
	defer stop()
	c := smtp.NewClient(conn)
	defer c.Close()
	c.CommandTimeout, c.SubmissionTimeout = SMTPTimeout, SMTPTimeout
	if err := c.SendMail(r.from, []string{to}, bytes.NewReader(msg)); err != nil {
		return err
	}
	return c.Quit()
}

// receiptData fills the receipt templates.
type receiptData struct {
	Amount    string
	Currency  string
	OrderID   string
	PaymentID string
	Date      string
}

var receiptHTML = template.Must(template.New("receipt").Parse(`<!DOCTYPE html>
<html><body>
<h1>Thank you for your payment</h1>
<table>
<tr><th align="left">Amount</th><td>{{.Amount}}</td></tr>
<tr><th align="left">Currency</th><td>{{.Currency}}</td></tr>
<tr><th align="left">Order</th><td>{{.OrderID}}</td></tr>
<tr><th align="left">Payment</th><td>{{.PaymentID}}</td></tr>
<tr><th align="left">Date</th><td>{{.Date}}</td></tr>
</table>
</body></html>
`))

// message builds the receipt: headers, then multipart/alternative with a
// text and an HTML part, both quoted-printable UTF-8, lines ending CRLF.
func (r *receipt) message(rec pay.OutboxRecord, to string) ([]byte, error) {
	data := receiptData{
		Amount: FormatAmount(rec.Amount, rec.Currency), Currency: rec.Currency,
		OrderID: rec.OrderID, PaymentID: rec.PaymentID,
		Date: rec.CreatedAt.UTC().Format("2 January 2006 15:04 MST"),
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := func(k, v string) { fmt.Fprintf(&buf, "%s: %s\r\n", k, v) }
	h("From", (&mail.Address{Address: r.from}).String())
	h("To", (&mail.Address{Address: to}).String())
	h("Subject", mime.QEncoding.Encode("utf-8", "Receipt for order "+rec.OrderID))
	h("Date", rec.CreatedAt.UTC().Format(time.RFC1123Z))
	h("Message-ID", "<receipt."+rec.PaymentID+"@"+r.domain+">")
	h("MIME-Version", "1.0")
	h("Content-Type", `multipart/alternative; boundary="`+mw.Boundary()+`"`)
	buf.WriteString("\r\n")

	text := fmt.Sprintf("Thank you for your payment.\n\nAmount:   %s\nCurrency: %s\nOrder:    %s\nPayment:  %s\nDate:     %s\n",
		data.Amount, data.Currency, data.OrderID, data.PaymentID, data.Date)
	var html bytes.Buffer
	if err := receiptHTML.Execute(&html, data); err != nil {
		return nil, fmt.Errorf("render receipt: %w", err)
	}
	for _, part := range []struct {
		ctype string
		body  []byte
	}{{"text/plain; charset=utf-8", []byte(text)}, {"text/html; charset=utf-8", html.Bytes()}} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.ctype},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		qw := quotedprintable.NewWriter(pw)
		if _, err := qw.Write(part.body); err != nil {
			return nil, err
		}
		if err := qw.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
