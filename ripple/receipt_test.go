package ripple_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/store"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/receipt"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
)

// Credentials of the mail servers of these tests.
const (
	mailUser = "paystate@shop.example"
	mailPass = "s3cret-Pa55word-of-the-relay"
)

// testCert is a self-signed certificate for 127.0.0.1 and localhost, and
// the pool that trusts it.
type testCert struct {
	cert tls.Certificate
	pool *x509.CertPool
}

func newTestCert(t *testing.T) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mail.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return testCert{
		cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		pool: pool,
	}
}

// mailServerOptions say what a mailServer demands.
type mailServerOptions struct {
	cert        *testCert // offers STARTTLS with it (or speaks TLS at once, with implicit)
	implicit    bool      // TLS from the first byte
	requireAuth bool      // AUTH PLAIN as mailUser/mailPass before MAIL; AUTH only inside TLS
	rejectRcpt  bool      // refuses every recipient with a 550
}

// received is one message a mailServer accepted.
type received struct {
	from string
	to   []string
	data []byte
	tls  bool   // the message came inside TLS
	user string // who authenticated
}

// mailServer is a real SMTP server (go-smtp) on 127.0.0.1 that counts
// every MAIL and DATA command, so a test sees that nothing was sent.
type mailServer struct {
	addr string

	mu        sync.Mutex
	mails     int // MAIL commands
	datas     int // DATA commands
	authFails int
	msgs      []received
}

func newMailServer(t *testing.T, o mailServerOptions) *mailServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := &mailServer{addr: ln.Addr().String()}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &mailSession{ms: ms, conn: c, o: o}, nil
	}))
	srv.Domain = "localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	if o.cert != nil {
		cfg := &tls.Config{Certificates: []tls.Certificate{o.cert.cert}, MinVersion: tls.VersionTLS12}
		if o.implicit {
			ln = tls.NewListener(ln, cfg)
		} else {
			srv.TLSConfig = cfg
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ms
}

// counts returns the MAIL and DATA commands seen.
func (ms *mailServer) counts() (mails, datas int) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.mails, ms.datas
}

func (ms *mailServer) messages() []received {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]received(nil), ms.msgs...)
}

// mailSession is one SMTP conversation with a mailServer.
type mailSession struct {
	ms   *mailServer
	conn *smtp.Conn
	o    mailServerOptions
	user string
	from string
	to   []string
}

var _ smtp.AuthSession = (*mailSession)(nil)

func (s *mailSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *mailSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != mailUser || password != mailPass {
			s.ms.mu.Lock()
			s.ms.authFails++
			s.ms.mu.Unlock()
			return smtp.ErrAuthFailed
		}
		s.user = username
		return nil
	}), nil
}

func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	s.ms.mu.Lock()
	s.ms.mails++
	s.ms.mu.Unlock()
	if s.o.requireAuth && s.user == "" {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.o.rejectRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}
	s.to = append(s.to, to)
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.ms.mu.Lock()
	defer s.ms.mu.Unlock()
	s.ms.datas++
	s.ms.msgs = append(s.ms.msgs, received{from: s.from, to: append([]string(nil), s.to...), data: data, tls: isTLS, user: s.user})
	return nil
}

func (s *mailSession) Reset()        { s.from, s.to = "", nil }
func (s *mailSession) Logout() error { return nil }

// parsedMail is a receipt read back with net/mail and mime/multipart.
type parsedMail struct {
	header mail.Header
	from   *mail.Address
	subj   string
	parts  map[string]string // media type → decoded body
}

func parseMail(t *testing.T, data []byte) parsedMail {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	from, err := msg.Header.AddressList("From")
	if err != nil || len(from) != 1 {
		t.Fatalf("From=%q (%v), want one address", msg.Header.Get("From"), err)
	}
	subj, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type=%s (%v), want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	parts := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ct, ps, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if err != nil {
			t.Fatal(err)
		}
		if cs := strings.ToLower(ps["charset"]); cs != "utf-8" {
			t.Fatalf("%s part in charset %q, want utf-8", ct, cs)
		}
		b, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		parts[ct] = string(b)
	}
	return parsedMail{header: msg.Header, from: from[0], subj: subj, parts: parts}
}

// receiptEnv is a ripple service whose receipts go to a mail server, and
// one captured payment of 12.50 EUR with an e-mail address.
func receiptEnv(t *testing.T, rc receipt.Config, maxAttempts int) (*env, pay.Payment) {
	t.Helper()
	e := newEnv(t, t0, ripple.Config{MaxAttempts: maxAttempts, Receipt: rc})
	p := e.payment(1, 1250, "EUR", pay.Customer{ID: "cus_ada", Email: "ada@example.com"})
	e.finalize(p.ID, pay.Captured)
	return e, p
}

// TestReceipt_StartTLSAndAuth: a server that offers STARTTLS with a
// self-signed certificate (trusted through RootCAs, as receipt.ca_file
// does) and accepts MAIL only after AUTH PLAIN, which it offers only
// inside TLS, gets the receipt inside TLS from the authenticated user: a
// multipart/alternative message whose text and HTML parts carry the
// merchant's name, the order id, the amount in major units with its
// currency, the payment id and the date.
func TestReceipt_StartTLSAndAuth(t *testing.T) {
	t.Parallel()
	cert := newTestCert(t)
	srv := newMailServer(t, mailServerOptions{cert: &cert, requireAuth: true})
	e, p := receiptEnv(t, receipt.Config{
		Addr: srv.addr, From: "receipts@shop.example", MerchantName: "Ada's Bakery",
		Username: mailUser, Password: mailPass, RootCAs: cert.pool, // TLS: "" is starttls
	}, 0)
	e.settle()

	d := e.delivery(p.ID, pay.EffectReceipt, pay.Captured)
	if d.State != pay.DeliveryDone || d.Attempts != 1 || d.Note != "receipt sent" {
		t.Fatalf("receipt delivery=%+v, want done at the first attempt", d)
	}
	msgs := srv.messages()
	if len(msgs) != 1 {
		t.Fatalf("messages=%d, want 1", len(msgs))
	}
	m := msgs[0]
	if !m.tls || m.user != mailUser {
		t.Fatalf("message over TLS=%v as %q, want TLS as %q", m.tls, m.user, mailUser)
	}
	if m.from != "receipts@shop.example" || strings.Join(m.to, ",") != "ada@example.com" {
		t.Fatalf("MAIL FROM=%s RCPT TO=%v, want receipts@shop.example and ada@example.com", m.from, m.to)
	}
	pm := parseMail(t, m.data)
	if pm.from.Name != "Ada's Bakery" || pm.from.Address != "receipts@shop.example" {
		t.Fatalf("From=%+v, want Ada's Bakery <receipts@shop.example>", pm.from)
	}
	if got, want := pm.header.Get("Message-Id"), "<receipt."+p.ID+"@shop.example>"; got != want {
		t.Fatalf("Message-ID=%s, want %s", got, want)
	}
	if got, want := pm.subj, "Your receipt from Ada's Bakery for order "+p.OrderID; got != want {
		t.Fatalf("Subject=%q, want %q", got, want)
	}
	if date, err := pm.header.Date(); err != nil || !date.Equal(t0) {
		t.Fatalf("Date=%s (%v), want the capture time %s", pm.header.Get("Date"), err, t0)
	}
	for _, ct := range []string{"text/plain", "text/html"} {
		body, ok := pm.parts[ct]
		if !ok {
			t.Fatalf("no %s part in %v", ct, pm.parts)
		}
		merchant := "Ada's Bakery"
		if ct == "text/html" {
			merchant = "Ada&#39;s Bakery" // html/template escapes it
		}
		for _, want := range []string{merchant, "12.50 EUR", p.OrderID, p.ID, "1 March 2025 12:00 UTC"} {
			if !strings.Contains(body, want) {
				t.Fatalf("%s part does not contain %q:\n%s", ct, want, body)
			}
		}
	}
	if len(pm.parts) != 2 {
		t.Fatalf("parts=%v, want text/plain and text/html", pm.parts)
	}
}

// TestReceipt_NoStartTLS: with tls = starttls (the default), a server
// that offers no STARTTLS gets nothing, no MAIL and no DATA: each attempt
// fails saying so, is retried with backoff, and the max_attempts-th makes
// a dead letter. With starttls_optional the same server gets the receipt
// in clear.
func TestReceipt_NoStartTLS(t *testing.T) {
	t.Parallel()
	srv := newMailServer(t, mailServerOptions{})
	e, p := receiptEnv(t, receipt.Config{Addr: srv.addr, From: "receipts@shop.example"}, 3)
	e.runOnce()
	d := e.delivery(p.ID, pay.EffectReceipt, pay.Captured)
	if d.State != pay.DeliveryPending || d.Attempts != 1 || !strings.Contains(d.LastError, "STARTTLS") || !strings.Contains(d.LastError, "tls=starttls") {
		t.Fatalf("receipt delivery after one attempt=%+v, want pending, its error naming STARTTLS and the mode", d)
	}
	if !d.NextAttemptAt.After(t0) {
		t.Fatalf("next attempt at %s, want a backoff after %s", d.NextAttemptAt, t0)
	}
	for range 4 {
		e.clock.Add(2 * time.Hour) // past any backoff
		e.runOnce()
	}
	d = e.delivery(p.ID, pay.EffectReceipt, pay.Captured)
	if d.State != pay.DeliveryDead || d.Attempts != 3 || !strings.Contains(d.LastError, "STARTTLS") {
		t.Fatalf("receipt delivery=%+v, want dead after 3 attempts", d)
	}
	if mails, datas := srv.counts(); mails != 0 || datas != 0 {
		t.Fatalf("the server saw %d MAIL and %d DATA commands, want none", mails, datas)
	}

	opt := newMailServer(t, mailServerOptions{})
	e2, p2 := receiptEnv(t, receipt.Config{Addr: opt.addr, From: "receipts@shop.example", TLS: receipt.TLSStartTLSOptional}, 3)
	e2.settle()
	if d := e2.delivery(p2.ID, pay.EffectReceipt, pay.Captured); d.State != pay.DeliveryDone {
		t.Fatalf("starttls_optional: receipt delivery=%+v, want done", d)
	}
	if msgs := opt.messages(); len(msgs) != 1 || msgs[0].tls {
		t.Fatalf("starttls_optional: messages=%+v, want one, in clear", msgs)
	}
}

// TestReceipt_StartTLSOptionalUsesTLS: starttls_optional still upgrades
// when the server offers STARTTLS, and a certificate it cannot verify
// stops the attempt rather than falling back to clear text.
func TestReceipt_StartTLSOptionalUsesTLS(t *testing.T) {
	t.Parallel()
	cert := newTestCert(t)
	srv := newMailServer(t, mailServerOptions{cert: &cert})
	e, p := receiptEnv(t, receipt.Config{Addr: srv.addr, From: "receipts@shop.example", TLS: receipt.TLSStartTLSOptional, RootCAs: cert.pool}, 0)
	e.settle()
	if d := e.delivery(p.ID, pay.EffectReceipt, pay.Captured); d.State != pay.DeliveryDone {
		t.Fatalf("receipt delivery=%+v, want done", d)
	}
	if msgs := srv.messages(); len(msgs) != 1 || !msgs[0].tls {
		t.Fatalf("messages=%+v, want one, inside TLS", msgs)
	}

	// The system's roots do not know the test's certificate.
	untrusted := newMailServer(t, mailServerOptions{cert: &cert})
	e2, p2 := receiptEnv(t, receipt.Config{Addr: untrusted.addr, From: "receipts@shop.example", TLS: receipt.TLSStartTLSOptional}, 3)
	e2.runOnce()
	if d := e2.delivery(p2.ID, pay.EffectReceipt, pay.Captured); d.State != pay.DeliveryPending || !strings.Contains(d.LastError, "certificate") {
		t.Fatalf("receipt delivery to an unverified server=%+v, want pending with a certificate error", d)
	}
	if mails, datas := untrusted.counts(); mails != 0 || datas != 0 {
		t.Fatalf("the unverified server saw %d MAIL and %d DATA commands, want none", mails, datas)
	}
}

// TestReceipt_ImplicitTLS: tls = "tls" speaks TLS from the first byte
// (port 465 style) and authenticates inside it.
func TestReceipt_ImplicitTLS(t *testing.T) {
	t.Parallel()
	cert := newTestCert(t)
	srv := newMailServer(t, mailServerOptions{cert: &cert, implicit: true, requireAuth: true})
	e, p := receiptEnv(t, receipt.Config{
		Addr: srv.addr, From: "receipts@shop.example", TLS: receipt.TLSImplicit,
		Username: mailUser, Password: mailPass, RootCAs: cert.pool,
	}, 0)
	e.settle()
	if d := e.delivery(p.ID, pay.EffectReceipt, pay.Captured); d.State != pay.DeliveryDone || d.Attempts != 1 {
		t.Fatalf("receipt delivery=%+v, want done at the first attempt", d)
	}
	msgs := srv.messages()
	if len(msgs) != 1 || !msgs[0].tls || msgs[0].user != mailUser {
		t.Fatalf("messages=%+v, want one, inside TLS, authenticated", msgs)
	}
	pm := parseMail(t, msgs[0].data)
	if !strings.Contains(pm.parts["text/plain"], "shop.example") { // no merchant name: the sender's domain
		t.Fatalf("text part does not name the merchant:\n%s", pm.parts["text/plain"])
	}
}

// TestReceipt_RefusedRecipient: a 5xx answer to the message (here RCPT)
// will come again: the delivery is dead at once, not retried.
func TestReceipt_RefusedRecipient(t *testing.T) {
	t.Parallel()
	cert := newTestCert(t)
	srv := newMailServer(t, mailServerOptions{cert: &cert, rejectRcpt: true})
	e, p := receiptEnv(t, receipt.Config{Addr: srv.addr, From: "receipts@shop.example", RootCAs: cert.pool}, 0)
	e.settle()
	if d := e.delivery(p.ID, pay.EffectReceipt, pay.Captured); d.State != pay.DeliveryDead || d.Attempts != 1 || !strings.Contains(d.LastError, "550") {
		t.Fatalf("receipt delivery=%+v, want dead at the first attempt with the 550", d)
	}
	if mails, datas := srv.counts(); mails != 1 || datas != 0 {
		t.Fatalf("the server saw %d MAIL and %d DATA commands, want 1 and 0", mails, datas)
	}
}

// TestReceipt_WrongPassword: a refused AUTH fails the attempt with the
// server's 535, sends nothing, is retried, and the password appears
// neither in the delivery's error nor in the log.
func TestReceipt_WrongPassword(t *testing.T) {
	t.Parallel()
	cert := newTestCert(t)
	srv := newMailServer(t, mailServerOptions{cert: &cert, requireAuth: true})
	const wrong = "not-the-Pa55word-at-all"
	e, p := receiptEnv(t, receipt.Config{
		Addr: srv.addr, From: "receipts@shop.example", Username: mailUser, Password: wrong, RootCAs: cert.pool,
	}, 3)
	var logs testkit.SyncBuffer
	e.svc.Logger = zerolog.New(&logs)
	e.runOnce()
	d := e.delivery(p.ID, pay.EffectReceipt, pay.Captured)
	if d.State != pay.DeliveryPending || d.Attempts != 1 || !strings.Contains(d.LastError, "535") {
		t.Fatalf("receipt delivery=%+v, want pending after a 535", d)
	}
	srv.mu.Lock()
	fails := srv.authFails
	srv.mu.Unlock()
	if mails, datas := srv.counts(); fails != 1 || mails != 0 || datas != 0 {
		t.Fatalf("the server saw %d refused AUTH, %d MAIL, %d DATA; want 1, 0, 0", fails, mails, datas)
	}
	if !strings.Contains(logs.String(), "535") {
		t.Fatalf("the failed attempt was not logged:\n%s", logs.String())
	}
	for _, s := range []string{d.LastError, logs.String()} {
		if strings.Contains(s, wrong) {
			t.Fatalf("the password appears in %q", s)
		}
	}
}

// TestReceipt_Templates: receipts rendered with the merchant's own text
// and HTML templates, a subject defined in the text one; html/template
// escapes the order id in the HTML part.
func TestReceipt_Templates(t *testing.T) {
	t.Parallel()
	srv := rippletest.NewSMTPServer(t, 0)
	e := newEnv(t, t0, ripple.Config{Receipt: receipt.Config{
		Addr: srv.Addr, From: "receipts@shop.example", MerchantName: "Bäckerei Ada", TLS: receipt.TLSNone,
		TextTemplate: `{{define "subject"}}Beleg {{.OrderID}} – {{.Merchant}}{{end}}Danke! {{.AmountMinor}} {{.Currency}} = {{.Amount}} am {{.Time.Format "02.01.2006"}} an {{.Email}}.`,
		HTMLTemplate: `<p>Bestellung <b>{{.OrderID}}</b> bei {{.Merchant}}: {{.Amount}}</p>`,
	}})
	p := insertPaymentOrder(t, e, "o<script>1", 1500, "JPY")
	e.finalize(p.ID, pay.Captured)
	e.settle()
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("messages=%d, want 1", len(msgs))
	}
	pm := parseMail(t, msgs[0].Data)
	if got, want := pm.subj, "Beleg o<script>1 – Bäckerei Ada"; got != want {
		t.Fatalf("Subject=%q, want %q", got, want)
	}
	if got, want := pm.parts["text/plain"], "Danke! 1500 JPY = 1500 JPY am 01.03.2025 an ada@example.com."; got != want {
		t.Fatalf("text part=%q, want %q", got, want)
	}
	if got, want := pm.parts["text/html"], "<p>Bestellung <b>o&lt;script&gt;1</b> bei Bäckerei Ada: 1500 JPY</p>"; got != want {
		t.Fatalf("HTML part=%q, want %q", got, want)
	}
}

// insertPaymentOrder stores a processing payment with the given order id.
func insertPaymentOrder(t *testing.T, e *env, orderID string, amount int64, currency string) pay.Payment {
	t.Helper()
	p := pay.Payment{
		ID: "pay_00000000000000000000000042", OrderID: orderID, Amount: amount, Currency: currency,
		Customer: pay.Customer{ID: "cus_ada", Email: "ada@example.com"}, Provider: "mock", Status: pay.Processing, Version: 1,
	}
	err := e.db.Update(context.Background(), func(tx store.Tx) error {
		p.CreatedAt, p.UpdatedAt = tx.Now(), tx.Now()
		return tx.InsertPayment(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNew_InvalidReceipt: receipt settings New refuses.
func TestNew_InvalidReceipt(t *testing.T) {
	t.Parallel()
	base := receipt.Config{Addr: "localhost:587", From: "r@example.com"}
	for name, mod := range map[string]func(*receipt.Config){
		"BadTLS":       func(c *receipt.Config) { c.TLS = "ssl" },
		"NoPassword":   func(c *receipt.Config) { c.Username = "u" },
		"NoUsername":   func(c *receipt.Config) { c.Password = mailPass },
		"BadText":      func(c *receipt.Config) { c.TextTemplate = "{{" },
		"BadHTML":      func(c *receipt.Config) { c.HTMLTemplate = "{{.Nope}}" },
		"MerchantLine": func(c *receipt.Config) { c.MerchantName = "Shop\r\nBcc: x@example.com" },
		"BadPort":      func(c *receipt.Config) { c.Addr = "localhost:nope" },
	} {
		cfg := base
		mod(&cfg)
		_, err := ripple.New(nil, ripple.Config{Receipt: cfg})
		if err == nil {
			t.Errorf("%s: New succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), mailPass) {
			t.Errorf("%s: error %q quotes the password", name, err)
		}
	}
}

// TestReceipt_OncePerPayment sends receipts to a real SMTP server that
// refuses the first three attempts: one message per captured payment, as
// multipart/alternative with the amount, currency, order and payment; a
// payment without an e-mail address gets none; a second capture record of
// the same payment sends nothing.
func TestReceipt_OncePerPayment(t *testing.T) {
	t.Parallel()
	smtpd := rippletest.NewSMTPServer(t, 3)
	e := newEnv(t, t0, ripple.Config{Receipt: receipt.Config{Addr: smtpd.Addr, From: "receipts@shop.example", TLS: receipt.TLSNone}})
	p := e.payment(1, 1250, "EUR", pay.Customer{ID: "cus_ada", Email: "ada@example.com"})
	noMail := e.payment(2, 500, "EUR", pay.Customer{ID: "cus_bob"})
	e.finalize(p.ID, pay.Captured)
	e.finalize(noMail.ID, pay.Captured)
	for range 8 {
		e.runOnce()
		e.clock.Add(2 * time.Hour) // past any backoff
	}
	if got, want := smtpd.Attempts(), 4; got != want {
		t.Fatalf("SMTP attempts=%d, want %d (three refused, one accepted)", got, want)
	}
	msgs := smtpd.Messages()
	if got, want := len(msgs), 1; got != want {
		t.Fatalf("messages=%d, want %d", got, want)
	}
	d := e.delivery(p.ID, pay.EffectReceipt, pay.Captured)
	if d.State != pay.DeliveryDone || d.Attempts != 4 || !strings.Contains(d.LastError, "451") {
		t.Fatalf("receipt delivery=%+v, want done after 4 attempts, the last error a 451", d)
	}
	if d := e.delivery(noMail.ID, pay.EffectReceipt, pay.Captured); d.State != pay.DeliveryDone || !strings.Contains(d.Note, "no e-mail") {
		t.Fatalf("receipt delivery without an address=%+v, want done with a note", d)
	}

	m := msgs[0]
	if got, want := strings.Join(m.To, ","), "ada@example.com"; got != want {
		t.Fatalf("RCPT TO=%s, want %s", got, want)
	}
	if got, want := m.From, "receipts@shop.example"; got != want {
		t.Fatalf("MAIL FROM=%s, want %s", got, want)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := msg.Header.Get("Message-Id"), "<receipt."+p.ID+"@shop.example>"; got != want {
		t.Fatalf("Message-ID=%s, want %s", got, want)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || !strings.Contains(subject, p.OrderID) {
		t.Fatalf("Subject=%q (%v), want the order id", subject, err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type=%s (%v), want multipart/alternative", mt, err)
	}
	parts := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		b, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		parts[ct] = string(b)
	}
	for _, ct := range []string{"text/plain", "text/html"} {
		body, ok := parts[ct]
		if !ok {
			t.Fatalf("no %s part in %v", ct, parts)
		}
		for _, want := range []string{"12.50 EUR", "EUR", p.OrderID, p.ID} {
			if !strings.Contains(body, want) {
				t.Fatalf("%s part does not contain %q:\n%s", ct, want, body)
			}
		}
	}

	// A second capture record of the same payment (a redelivery) sends
	// nothing: the receipt is per payment.
	err = e.db.Update(context.Background(), func(tx store.Tx) error {
		return tx.AppendOutbox(pay.OutboxRecord{
			ID: "evt_again", Type: "payment.captured", PaymentID: p.ID, Status: pay.Captured, Version: 9,
			OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, Customer: p.Customer,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	if got, want := len(smtpd.Messages()), 1; got != want {
		t.Fatalf("messages after a second capture record=%d, want %d", got, want)
	}
}
