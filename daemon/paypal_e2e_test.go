package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/paypal"
	"github.com/paystate/paystate/psp/paypal/paypaltest"
)

const paypalWebhookID = "1JE4291016473214C"

// paypalEnv is a paystate whose default provider is paypal, against the
// PayPal fake, with a test CA whose signing certificate a certificate host
// on 127.0.0.1 serves, and a clock the test moves.
type paypalEnv struct {
	in      *daemontest.Instance
	fake    *paypaltest.Fake
	ca      *paypaltest.CA
	host    *paypaltest.CertHost
	signer  *paypaltest.Signer
	certURL string
	offset  atomic.Int64
}

func bootPayPal(t *testing.T) *paypalEnv {
	t.Helper()
	e := &paypalEnv{fake: paypaltest.NewFake(t), ca: paypaltest.NewCA(t)}
	e.host = paypaltest.NewCertHost(t, e.ca)
	now := time.Now()
	e.signer = e.ca.Issue(t, paypal.DefaultCertName, now.Add(-time.Hour), now.Add(30*24*time.Hour))
	e.certURL = e.host.Serve("CERT-360caa42-fca2a594-e2e", e.signer)
	caFile := e.ca.WriteRoot(t, t.TempDir())
	e.in = daemontest.BootMain(t, func(c *config.Config) {
		c.Payment.Provider = paypal.Name
		c.Providers.PayPal = &config.PayPal{
			ClientID: paypaltest.ClientID, Secret: paypaltest.Secret, APIBase: e.fake.URL(), WebhookID: paypalWebhookID,
			CertHosts: []string{e.host.Host()}, CAFile: caFile, ReturnURL: "https://shop.example/paid",
		}
	}, func(m *daemon.Main) {
		m.Now = func() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }
	})
	return e
}

func (e *paypalEnv) now() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }

// webhook posts body signed by s with the certificate at certURL, at t.
func (e *paypalEnv) webhook(body []byte, s *paypaltest.Signer, certURL string, at time.Time) daemontest.Response {
	h := s.Sign(body, paypaltest.Delivery{WebhookID: paypalWebhookID, At: at, CertURL: certURL})
	hdr := map[string]string{"Authorization": ""}
	for k := range h {
		hdr[k] = h.Get(k)
	}
	return e.in.Do("POST", "/webhooks/paypal", body, hdr)
}

// sweep moves the clock past sweeper.min_age and runs a sweeper pass.
func (e *paypalEnv) sweep(t *testing.T) {
	t.Helper()
	e.offset.Add(int64(e.in.Main.Config.Sweeper.MinAge.Duration + time.Minute))
	if _, err := e.in.Main.Sweeper.RunOnce(context.Background()); err != nil {
		t.Fatalf("sweeper: %v", err)
	}
}

// approved creates a payment of amount EUR cents for order and has the
// buyer approve its PayPal order; it returns the payment's id and the
// order's.
func (e *paypalEnv) approved(t *testing.T, order string, amount int) (id, orderID string) {
	t.Helper()
	r := e.in.Create(fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"EUR"}`, order, amount), "k-"+order)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id, orderID = r.Str("id"), r.Str("provider_ref")
	e.fake.Approve(orderID)
	return id, orderID
}

func (e *paypalEnv) status(t *testing.T, id string) string {
	t.Helper()
	return e.in.Do("GET", "/v1/payments/"+id, nil, nil).Str("status")
}

// TestE2E_PayPal: a create makes an order under charge-<payment_id> and
// answers the approve link; a delivery whose certificate comes from a host
// not allowed, is expired, whose body was changed or whose transmission
// time is stale is 400 and stores nothing; the buyer's approval
// (CHECKOUT.ORDER.APPROVED, delivered twice, through the pull worker)
// captures the order with one
// capture call under capture-<payment_id>; PAYMENT.CAPTURE.COMPLETED
// after the capture answer is no second transition.
func TestE2E_PayPal(t *testing.T) {
	t.Parallel()
	e := bootPayPal(t)

	r := e.in.Create(`{"order_id":"o-paypal-1","amount":2500,"currency":"EUR","description":"Two tickets"}`, "k-paypal-1")
	if r.Status != http.StatusCreated || r.Str("status") != "requires_action" {
		t.Fatalf("create: %d %s, want 201 requires_action", r.Status, r.Body)
	}
	id, order := r.Str("id"), r.Str("provider_ref")
	if !strings.Contains(r.Str("redirect_url"), "checkoutnow?token="+order) {
		t.Fatalf("redirect_url=%q, want the order's approve link", r.Str("redirect_url"))
	}
	if creates := e.fake.Find("POST", "/v2/checkout/orders"); len(creates) != 1 || creates[0].RequestID != "charge-"+id {
		t.Fatalf("order creates %+v, want one under charge-%s", creates, id)
	}

	// Refused deliveries store nothing.
	settle(t, e.in)
	before := dump(t, e.in)
	now := e.now()
	completed := paypaltest.Event(paypaltest.EventSpec{Type: paypal.TypeCaptureCompleted, At: now, PaymentID: id, OrderID: order, Amount: "25.00", Currency: "EUR"})
	other := paypaltest.NewCertHost(t, e.ca)
	expired := e.ca.Issue(t, paypal.DefaultCertName, now.Add(-60*24*time.Hour), now.Add(-time.Minute))
	for name, w := range map[string]daemontest.Response{
		"host not allowed": e.webhook(completed, e.signer, other.Serve("CERT-other", e.signer), now),
		"expired cert":     e.webhook(completed, expired, e.host.Serve("CERT-expired", expired), now),
		"changed body": func() daemontest.Response {
			h := e.signer.Sign(completed, paypaltest.Delivery{WebhookID: paypalWebhookID, At: now, CertURL: e.certURL})
			hdr := map[string]string{"Authorization": ""}
			for k := range h {
				hdr[k] = h.Get(k)
			}
			return e.in.Do("POST", "/webhooks/paypal", bytes.Replace(completed, []byte(`"25.00"`), []byte(`"0.25"`), 1), hdr)
		}(),
		"stale": e.webhook(completed, e.signer, e.certURL, now.Add(-paypal.DefaultTolerance-time.Minute)),
	} {
		if w.Status != http.StatusBadRequest || w.ErrCode() != "invalid_signature" {
			t.Fatalf("%s: %d %s, want 400 invalid_signature", name, w.Status, w.Body)
		}
	}
	if after := dump(t, e.in); after != before {
		t.Fatal("refused deliveries changed the stored state")
	}
	if other.Fetches() != 0 {
		t.Fatal("a certificate was fetched from a host not allowed")
	}

	// The buyer approves; PayPal announces it. The webhook is a trigger:
	// the pull worker captures the order under the payment's lease and
	// finalizes the capture's status, without waiting for the sweeper.
	e.fake.Approve(order)
	approved := paypaltest.Event(paypaltest.EventSpec{Type: paypal.TypeOrderApproved, At: e.now(), PaymentID: id, OrderID: order, Amount: "25.00", Currency: "EUR"})
	for range 2 {
		if w := e.webhook(approved, e.signer, e.certURL, e.now()); w.Status != http.StatusOK {
			t.Fatalf("CHECKOUT.ORDER.APPROVED: %d %s", w.Status, w.Body)
		}
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if st := e.status(t, id); st != "captured" {
			return fmt.Errorf("status=%s, want captured", st)
		}
		return nil
	})
	// The sweeper afterwards captures nothing more.
	e.sweep(t)
	if got := e.fake.CaptureCalls(); got != 1 {
		t.Fatalf("captures at PayPal: %d, want 1", got)
	}
	for _, c := range e.fake.Find("POST", "/capture") {
		if c.RequestID != "capture-"+id {
			t.Fatalf("capture PayPal-Request-Id=%q, want capture-%s", c.RequestID, id)
		}
	}

	// PayPal's PAYMENT.CAPTURE.COMPLETED after the capture answer: one
	// transition, whatever the number of deliveries.
	for range 2 {
		late := paypaltest.Event(paypaltest.EventSpec{ID: "WH-E2E-COMPLETED", Type: paypal.TypeCaptureCompleted, At: e.now(), PaymentID: id, OrderID: order, Amount: "25.00", Currency: "EUR"})
		if w := e.webhook(late, e.signer, e.certURL, e.now()); w.Status != http.StatusOK {
			t.Fatalf("PAYMENT.CAPTURE.COMPLETED: %d %s", w.Status, w.Body)
		}
	}
	settle(t, e.in)
	if n := transitionsTo(t, e.in, id, "captured"); n != 1 {
		t.Fatalf("transitions to captured: %d, want 1", n)
	}
	if r := e.in.Do("GET", "/v1/review", nil, nil); strings.Contains(string(r.Body), id) {
		t.Fatalf("the capture's events put the payment on the review queue: %s", r.Body)
	}

	// A refund goes to the capture under refund-<refund_id>.
	rf := e.in.Do("POST", "/v1/payments/"+id+"/refund", []byte(`{"amount":500}`), map[string]string{"Idempotency-Key": "k-paypal-refund-1"})
	if rf.Status != http.StatusCreated && rf.Status != http.StatusOK {
		t.Fatalf("refund: %d %s", rf.Status, rf.Body)
	}
	refunds := e.fake.Find("POST", "/refund")
	if len(refunds) != 1 || refunds[0].RequestID != "refund-"+rf.Str("id") {
		t.Fatalf("refund calls %+v, want one under refund-%s", refunds, rf.Str("id"))
	}
}

// TestE2E_PayPal_CompletedBeforeCaptureAnswer: PayPal's
// PAYMENT.CAPTURE.COMPLETED arrives while the sweeper's capture call
// still waits for its answer (the payment's lease is held): the webhook
// is acknowledged and stored, the capture answer captures the payment,
// and the stored event applied afterwards is no second transition.
func TestE2E_PayPal_CompletedBeforeCaptureAnswer(t *testing.T) {
	t.Parallel()
	e := bootPayPal(t)
	id, order := e.approved(t, "o-paypal-2", 1200)
	held := e.fake.HoldCaptureAnswers()

	done := make(chan error, 1)
	go func() {
		e.offset.Add(int64(e.in.Main.Config.Sweeper.MinAge.Duration + time.Minute))
		_, err := e.in.Main.Sweeper.RunOnce(context.Background())
		done <- err
	}()
	<-held // captured at PayPal; the answer waits
	completed := paypaltest.Event(paypaltest.EventSpec{Type: paypal.TypeCaptureCompleted, At: e.now(), PaymentID: id, OrderID: order, Amount: "12.00", Currency: "EUR"})
	if w := e.webhook(completed, e.signer, e.certURL, e.now()); w.Status != http.StatusOK {
		t.Fatalf("PAYMENT.CAPTURE.COMPLETED: %d %s", w.Status, w.Body)
	}
	e.fake.ReleaseCaptures()
	if err := <-done; err != nil {
		t.Fatalf("sweeper: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if _, err := e.in.Main.Inbox.RunOnce(context.Background()); err != nil {
			return err
		}
		if st := e.status(t, id); st != "captured" {
			return fmt.Errorf("status=%s, want captured", st)
		}
		return nil
	})
	settle(t, e.in)
	if n := transitionsTo(t, e.in, id, "captured"); n != 1 {
		t.Fatalf("transitions to captured: %d, want 1", n)
	}
	if got := e.fake.CaptureCalls(); got != 1 {
		t.Fatalf("captures at PayPal: %d, want 1", got)
	}
}

// TestE2E_PayPal_CaptureRef: once the order is captured, the payment's
// view links it to the capture in PayPal's activity (provider_url), and
// what names only the capture finds the payment: a dispute whose disputed
// transaction has no custom (seller_transaction_id), a settlement report
// line without its Custom Field (the transaction id).
func TestE2E_PayPal_CaptureRef(t *testing.T) {
	t.Parallel()
	e := bootPayPal(t)
	id, order := e.approved(t, "o-paypal-ref", 2500)
	if got := e.in.Do("GET", "/v1/payments/"+id, nil, nil).Str("provider_url"); got != "" {
		t.Fatalf("provider_url=%q before the capture, want none", got)
	}
	e.sweep(t)
	capture := e.fake.CaptureID(order)
	got := e.in.Do("GET", "/v1/payments/"+id, nil, nil)
	if got.Str("status") != "captured" || capture == "" {
		t.Fatalf("payment %s (capture %q), want captured", got.Body, capture)
	}
	if url, want := got.Str("provider_url"), "https://www.paypal.com/activity/payment/"+capture; url != want {
		t.Fatalf("provider_url=%q, want %q", url, want)
	}

	dispute := paypaltest.Event(paypaltest.EventSpec{
		Type: paypal.TypeDisputeCreated, At: e.now(), CaptureID: capture, Amount: "25.00", Currency: "EUR",
		DisputeID: "PP-D-CAPTURE-ONLY", DisputeStatus: "WAITING_FOR_SELLER_RESPONSE",
	})
	if bytes.Contains(dispute, []byte(id)) || bytes.Contains(dispute, []byte(order)) {
		t.Fatal("the dispute names the payment by more than its capture")
	}
	if w := e.webhook(dispute, e.signer, e.certURL, e.now()); w.Status != http.StatusOK {
		t.Fatalf("CUSTOMER.DISPUTE.CREATED: %d %s", w.Status, w.Body)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if _, err := e.in.Main.Inbox.RunOnce(context.Background()); err != nil {
			return err
		}
		if d := e.in.Do("GET", "/v1/payments/"+id, nil, nil).Str("dispute"); d != "needs_response" {
			return fmt.Errorf("dispute=%q, want needs_response", d)
		}
		return nil
	})

	// The settlement report's line for the capture, without its Custom
	// Field, is matched by its transaction id.
	stl := strings.Join([]string{
		`"RH",2025/03/09 12:00:00 -0800,"A","MERCHANTACCT1",011`, `"FH",01`,
		`"SH",2025/03/08 00:00:00 -0800,2025/03/08 23:59:59 -0800,"MERCHANTACCT1",""`,
		`"CH","Transaction ID","Transaction Event Code","Transaction Completion Date","Transaction  Debit or Credit","Gross Transaction Amount","Gross Transaction Currency","Fee Debit or Credit","Fee Amount","Custom Field"`,
		`"SB","` + capture + `","T0006",2025/03/08 10:00:05 -0800,"CR",2500,"EUR","DR",0,""`,
		`"SF",1`, `"SC",1`, `"RF",1`, `"RC",1`, `"FF",1`, "",
	}, "\n")
	run := e.in.Do("POST", "/v1/reconciliation/runs?format=paypal&provider=paypal&name=stl.csv", []byte(stl), map[string]string{"Content-Type": "text/csv"})
	if run.Status != http.StatusCreated {
		t.Fatalf("import: %d %s", run.Status, run.Body)
	}
	if m, ml := run.JSON["matched"], run.JSON["missing_locally"]; m != float64(1) || ml != float64(0) {
		t.Fatalf("matched=%v missing_locally=%v, want the capture's line matched: %s", m, ml, run.Body)
	}
}

// TestBrowser_PayPalLink: the dashboard links a captured PayPal payment's
// reference (its order id) to its capture in PayPal's activity, in the
// list and on the payment's page.
func TestBrowser_PayPalLink(t *testing.T) {
	t.Parallel()
	e := bootPayPal(t)
	id, order := e.approved(t, "o-paypal-link", 1200)
	e.sweep(t)
	checkPSPLink(t, e.in.Base, id, "https://www.paypal.com/activity/payment/"+e.fake.CaptureID(order))
}
