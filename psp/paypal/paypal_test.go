package paypal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/paypal"
	"github.com/paystate/paystate/psp/paypal/paypaltest"
	"github.com/paystate/paystate/psp/psptest"
)

const webhookID = "1JE4291016473214C"

// env is a provider against the Fake, with a CA, a certificate host and a
// signer whose certificate it serves.
type env struct {
	fake    *paypaltest.Fake
	ca      *paypaltest.CA
	host    *paypaltest.CertHost
	signer  *paypaltest.Signer
	certURL string
	prov    *paypal.Provider
	now     time.Time
}

func newEnv(t testing.TB, mod func(*paypal.Config)) *env {
	t.Helper()
	e := &env{fake: paypaltest.NewFake(t), ca: paypaltest.NewCA(t), now: time.Now().Truncate(time.Second)}
	e.host = paypaltest.NewCertHost(t, e.ca)
	e.signer = e.ca.Issue(t, paypal.DefaultCertName, e.now.Add(-time.Hour), e.now.Add(30*24*time.Hour))
	e.certURL = e.host.Serve("CERT-360caa42-fca2a594-a5cafa77", e.signer)
	e.fake.SetVerifier(e.signer)
	cfg := paypal.Config{
		ClientID: paypaltest.ClientID, Secret: paypaltest.Secret, APIBase: e.fake.URL(), WebhookID: webhookID,
		CertHosts: []string{e.host.Host()}, CAFile: e.ca.WriteRoot(t, t.TempDir()),
		ReturnURL: "https://shop.example/return", CancelURL: "https://shop.example/cancel",
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := paypal.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.prov = p
	return e
}

// sign signs body as PayPal would at the env's time.
func (e *env) sign(body []byte) http.Header {
	return e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now, CertURL: e.certURL})
}

// approved creates a payment's order at the Fake and has the buyer approve
// it; the payment is returned as paystate stores it after the create.
func (e *env) approved(t *testing.T) pay.Payment {
	t.Helper()
	p := payment(ids.Payment(time.Now()))
	res, err := e.prov.Create(context.Background(), p, "charge-"+p.ID)
	if err != nil {
		t.Fatal(err)
	}
	p.ProviderRef, p.Status = res.ProviderRef, res.Status
	e.fake.Approve(p.ProviderRef)
	return p
}

func payment(id string) pay.Payment {
	return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 1000, Currency: "EUR", Status: pay.Created, Version: 1, Provider: paypal.Name}
}

// mapping is every event type of PayPal's wire format paystate reads, and
// one it does not.
var mapping = []psptest.Mapping{
	{Type: paypal.TypeOrderApproved, Kind: psptest.KindPull},
	{Type: paypal.TypeCaptureCompleted, Kind: psptest.KindCaptured},
	{Type: paypal.TypeCaptureDenied, Kind: psptest.KindFailed},
	{Type: paypal.TypeCaptureDeclined, Kind: psptest.KindFailed},
	{Type: paypal.TypeCapturePending, Kind: psptest.KindProcessing},
	{Type: paypal.TypeCaptureRefunded, Kind: psptest.KindRefundSucceeded},
	{Type: paypal.TypeCaptureReversed, Kind: psptest.KindRefundSucceeded},
	{Type: paypal.TypeDisputeCreated, Kind: psptest.KindDisputeOpened},
	{Type: paypal.TypeDisputeResolved, Kind: psptest.KindDisputeWon},
	{Type: paypal.TypeDisputeResolved + "/lost", Kind: psptest.KindDisputeLost},
	{Type: "PAYMENT.ORDER.CREATED", Kind: psptest.KindUnknown},
}

func TestConformance(t *testing.T) {
	e := newEnv(t, nil)
	psptest.Run(t, psptest.Harness{
		Provider: e.prov,
		Payment:  payment,
		Capture: func(t *testing.T, p pay.Payment) pay.Payment {
			e.fake.Approve(p.ProviderRef)
			res, err := e.prov.Status(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			p.Status, p.RedirectURL = res.Status, ""
			return p
		},
		Sign: func(t *testing.T, ev psptest.Event) ([]byte, http.Header, bool) {
			spec := paypaltest.EventSpec{
				ID: ev.ID, Type: ev.Type, At: ev.At, PaymentID: ev.PaymentID, OrderID: ev.ProviderRef, CaptureID: ev.SecondRef,
				Amount: paypal.Value(ev.Amount, ev.Currency), Currency: ev.Currency,
			}
			switch ev.Kind {
			case psptest.KindRefundSucceeded:
				spec.RefundID = "1J" + strings.ToUpper(strings.TrimPrefix(ev.RefundID, "re_"))
			case psptest.KindDisputeOpened:
				spec.DisputeID, spec.DisputeStatus = ev.DisputeID, "WAITING_FOR_SELLER_RESPONSE"
			case psptest.KindDisputeWon:
				spec.DisputeID, spec.DisputeStatus, spec.Outcome = ev.DisputeID, "RESOLVED", "RESOLVED_SELLER_FAVOUR"
			case psptest.KindDisputeLost:
				spec.Type = paypal.TypeDisputeResolved
				spec.DisputeID, spec.DisputeStatus, spec.Outcome = ev.DisputeID, "RESOLVED", "RESOLVED_BUYER_FAVOUR"
			}
			body := paypaltest.Event(spec)
			return body, e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: ev.At, CertURL: e.certURL}), true
		},
		SignRaw: func(t *testing.T, id string, body []byte, at time.Time) http.Header {
			return e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: at, CertURL: e.certURL})
		},
		Mapping: mapping,
		Calls: func() []psptest.Call {
			var out []psptest.Call
			for _, r := range e.fake.Requests() {
				// The OAuth2 token and the verify call change nothing.
				if r.Path == "/v1/oauth2/token" || r.Path == "/v1/notifications/verify-webhook-signature" {
					continue
				}
				out = append(out, psptest.Call{Method: r.Method, Path: r.Path, Key: r.RequestID})
			}
			return out
		},
		Now:            func() time.Time { return e.now },
		IgnoresUnknown: true,
		UnknownRef:     "5O000000000000000",
		Lacks:          []psptest.Feature{psptest.FeatureCancel},
		KeyPrefixes:    []string{"capture-"},
	})
}

func TestNew_ErrConfig(t *testing.T) {
	t.Parallel()
	ok := paypal.Config{ClientID: "id", Secret: "s3cr3t-value", WebhookID: "WH"}
	for _, tc := range []struct {
		key string
		mod func(*paypal.Config)
	}{
		{"providers.paypal.client_id", func(c *paypal.Config) { c.ClientID = "" }},
		{"providers.paypal.secret", func(c *paypal.Config) { c.Secret = "" }},
		{"providers.paypal.webhook_id", func(c *paypal.Config) { c.WebhookID = "" }},
		{"providers.paypal.verify", func(c *paypal.Config) { c.Verify = "maybe" }},
		{"providers.paypal.api_base", func(c *paypal.Config) { c.APIBase = "ftp://x" }},
		{"providers.paypal.return_url", func(c *paypal.Config) { c.ReturnURL = "/relative" }},
		{"providers.paypal.cert_hosts", func(c *paypal.Config) { c.CertHosts = []string{"https://api.paypal.com/"} }},
		{"providers.paypal.ca_file", func(c *paypal.Config) { c.CAFile = "/nonexistent/ca.pem" }},
	} {
		cfg := ok
		tc.mod(&cfg)
		_, err := paypal.New(cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.key) {
			t.Errorf("%s: err=%v, want an error naming the key", tc.key, err)
		}
		if err != nil && strings.Contains(err.Error(), ok.Secret) {
			t.Errorf("%s: the error quotes the secret: %v", tc.key, err)
		}
	}
	if _, err := paypal.New(ok); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
}

func TestCreate_Order(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := payment(ids.Payment(time.Now()))
	p.Description = "Two tickets"
	res, err := e.prov.Create(context.Background(), p, "charge-"+p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Status, pay.RequiresAction; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	if !strings.HasPrefix(res.RedirectURL, "https://www.sandbox.paypal.com/checkoutnow?token="+res.ProviderRef) {
		t.Fatalf("RedirectURL=%q, want the approve link", res.RedirectURL)
	}
	if res.Amount != 1000 || res.Currency != "EUR" {
		t.Fatalf("Amount=%d %s, want 1000 EUR", res.Amount, res.Currency)
	}
	reqs := e.fake.Find(http.MethodPost, "/v2/checkout/orders")
	if len(reqs) != 1 {
		t.Fatalf("create requests: %d, want 1", len(reqs))
	}
	if got, want := reqs[0].RequestID, "charge-"+p.ID; got != want {
		t.Fatalf("PayPal-Request-Id=%q, want %q", got, want)
	}
	var body struct {
		Intent        string `json:"intent"`
		PurchaseUnits []struct {
			CustomID    string `json:"custom_id"`
			InvoiceID   string `json:"invoice_id"`
			Description string `json:"description"`
			Amount      struct {
				CurrencyCode string `json:"currency_code"`
				Value        string `json:"value"`
			} `json:"amount"`
		} `json:"purchase_units"`
		ApplicationContext struct {
			ReturnURL string `json:"return_url"`
			CancelURL string `json:"cancel_url"`
		} `json:"application_context"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	u := body.PurchaseUnits[0]
	if body.Intent != "CAPTURE" || u.CustomID != p.ID || u.InvoiceID != p.OrderID || u.Amount.Value != "10.00" || u.Amount.CurrencyCode != "EUR" || u.Description != "Two tickets" {
		t.Fatalf("create body %s: want intent CAPTURE, custom_id %s, invoice_id %s, 10.00 EUR", reqs[0].Body, p.ID, p.OrderID)
	}
	if body.ApplicationContext.ReturnURL != "https://shop.example/return" || body.ApplicationContext.CancelURL != "https://shop.example/cancel" {
		t.Fatalf("application_context %+v, want the configured URLs", body.ApplicationContext)
	}
}

// TestStatus_CapturesApprovedOnce: an approved order is captured by
// Status under capture-<payment_id>; asked again (a retry, or another
// pass of the sweeper), the same request id is sent and PayPal captures
// nothing more.
func TestStatus_CapturesApprovedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := payment(ids.Payment(time.Now()))
	res, err := e.prov.Create(context.Background(), p, "charge-"+p.ID)
	if err != nil {
		t.Fatal(err)
	}
	p.ProviderRef, p.Status = res.ProviderRef, res.Status

	// Not approved yet: read, not captured.
	st, err := e.prov.Status(context.Background(), p)
	if err != nil || st.Status != pay.RequiresAction {
		t.Fatalf("Status before approval: %+v, %v; want requires_action", st, err)
	}
	if n := len(e.fake.Find(http.MethodPost, "/capture")); n != 0 {
		t.Fatalf("capture calls before approval: %d", n)
	}

	e.fake.Approve(p.ProviderRef)
	for i := range 3 {
		st, err := e.prov.Status(context.Background(), p)
		if err != nil {
			t.Fatalf("Status %d: %v", i, err)
		}
		if got, want := st.Status, pay.Captured; got != want {
			t.Fatalf("Status %d=%s, want %s (%s)", i, got, want, st.Raw)
		}
		if st.Amount != 1000 || st.Currency != "EUR" {
			t.Fatalf("Status %d: %d %s, want the payment's amount", i, st.Amount, st.Currency)
		}
	}
	if got := e.fake.CaptureCalls(); got != 1 {
		t.Fatalf("captures performed: %d, want 1", got)
	}
	for _, r := range e.fake.Find(http.MethodPost, "/capture") {
		if got, want := r.RequestID, "capture-"+p.ID; got != want {
			t.Fatalf("capture PayPal-Request-Id=%q, want %q", got, want)
		}
	}
}

// TestStatus_CaptureRetrySameRequestID: the answer to a capture is lost
// (the caller gave up); the order stays APPROVED for the caller, who
// asks again: the retry carries the same PayPal-Request-Id, and PayPal
// answers it with the first capture.
func TestStatus_CaptureRetrySameRequestID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := e.approved(t)
	held := e.fake.HoldCaptureAnswers()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := e.prov.Status(ctx, p); done <- err }()
	<-held // PayPal captured; the answer is on its way
	cancel()
	if err := <-done; pay.ErrorCode(err) != pay.EPSP {
		t.Fatalf("Status with the answer lost: %v, want a psp error", err)
	}
	e.fake.ReleaseCaptures()

	st, err := e.prov.Status(context.Background(), p)
	if err != nil || st.Status != pay.Captured {
		t.Fatalf("Status after the lost answer: %+v, %v; want captured", st, err)
	}
	if got := e.fake.CaptureCalls(); got != 1 {
		t.Fatalf("captures performed: %d, want 1", got)
	}
	for _, r := range e.fake.Find(http.MethodPost, "/capture") {
		if got, want := r.RequestID, "capture-"+p.ID; got != want {
			t.Fatalf("capture PayPal-Request-Id=%q, want %q", got, want)
		}
	}
}

func TestStatus_CaptureStatuses(t *testing.T) {
	t.Parallel()
	for capture, want := range map[string]pay.Status{
		"COMPLETED": pay.Captured, "PENDING": pay.Processing, "DECLINED": pay.Failed, "FAILED": pay.Failed,
	} {
		t.Run(capture, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			e.fake.SetCaptureStatus(capture)
			st, err := e.prov.Status(context.Background(), e.approved(t))
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != want {
				t.Fatalf("capture %s: Status=%s, want %s", capture, st.Status, want)
			}
		})
	}
}

func TestRefund_RequestID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := e.approved(t)
	if _, err := e.prov.Status(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	r := pay.Refund{ID: ids.Refund(time.Now()), PaymentID: p.ID, Amount: 400, Currency: "EUR"}
	rr, err := e.prov.Refund(context.Background(), p, r, pay.RefundKey(r.ID))
	if err != nil || rr.Status != pay.RefundSucceeded {
		t.Fatalf("Refund: %+v, %v", rr, err)
	}
	reqs := e.fake.Find(http.MethodPost, "/refund")
	if len(reqs) != 1 || reqs[0].RequestID != "refund-"+r.ID {
		t.Fatalf("refund requests %+v, want one with PayPal-Request-Id refund-%s", reqs, r.ID)
	}
	if !bytes.Contains(reqs[0].Body, []byte(`"value":"4.00"`)) || !bytes.Contains(reqs[0].Body, []byte(`"custom_id":"`+p.ID+`"`)) {
		t.Fatalf("refund body %s: want 4.00 and custom_id %s", reqs[0].Body, p.ID)
	}
}

// TestWebhook_Refused: what the signature check refuses, each
// ESIGNATURE (400 at /webhooks/paypal).
func TestWebhook_Refused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	pid := ids.Payment(e.now)
	body := paypaltest.Event(paypaltest.EventSpec{Type: paypal.TypeCaptureCompleted, At: e.now, PaymentID: pid, OrderID: "5O190127TN364715T", Amount: "10.00", Currency: "EUR"})
	if _, err := e.prov.ParseWebhook(body, e.sign(body), e.now); err != nil {
		t.Fatalf("the untouched delivery: %v", err)
	}

	other := paypaltest.NewCertHost(t, e.ca) // trusted TLS, but not an allowed host
	expired := e.ca.Issue(t, paypal.DefaultCertName, e.now.Add(-60*24*time.Hour), e.now.Add(-time.Hour))
	expiredURL := e.host.Serve("CERT-expired", expired)
	strangerCA := paypaltest.NewCA(t)
	stranger := strangerCA.Issue(t, paypal.DefaultCertName, e.now.Add(-time.Hour), e.now.Add(time.Hour))
	strangerURL := e.host.Serve("CERT-stranger", stranger)
	misnamed := e.ca.Issue(t, "evil.example", e.now.Add(-time.Hour), e.now.Add(time.Hour))
	misnamedURL := e.host.Serve("CERT-misnamed", misnamed)

	for name, tc := range map[string]struct {
		body []byte
		hdr  http.Header
	}{
		"HostNotAllowed": {body, e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now, CertURL: other.Serve("CERT-x", e.signer)})},
		"HTTP":           {body, e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now, CertURL: strings.Replace(e.certURL, "https:", "http:", 1)})},
		"ExpiredCert":    {body, expired.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now, CertURL: expiredURL})},
		"UntrustedCA":    {body, stranger.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now, CertURL: strangerURL})},
		"WrongName":      {body, misnamed.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now, CertURL: misnamedURL})},
		"ChangedBody":    {bytes.Replace(body, []byte(`"10.00"`), []byte(`"1.00"`), 1), e.sign(body)},
		"OtherWebhookID": {body, e.signer.Sign(body, paypaltest.Delivery{WebhookID: "WH-OTHER", At: e.now, CertURL: e.certURL})},
		"Stale":          {body, e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now.Add(-paypal.DefaultTolerance - time.Second), CertURL: e.certURL})},
		"Future":         {body, e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now.Add(paypal.DefaultTolerance + time.Second), CertURL: e.certURL})},
		"NoCertURL":      {body, func() http.Header { h := e.sign(body); h.Del(paypal.HeaderCertURL); return h }()},
		"OtherAlgo":      {body, func() http.Header { h := e.sign(body); h.Set(paypal.HeaderAuthAlgo, "SHA1withRSA"); return h }()},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.prov.ParseWebhook(tc.body, tc.hdr, e.now)
			if got, want := pay.ErrorCode(err), pay.ESIGNATURE; got != want {
				t.Fatalf("ErrorCode=%q (%v), want %q", got, err, want)
			}
		})
	}
	if n := other.Fetches(); n != 0 {
		t.Fatalf("the host not allowed was asked %d times, want never", n)
	}
}

// TestWebhook_CertCached: the certificate is fetched once for many
// deliveries, and checked at each: once expired, it is refused.
func TestWebhook_CertCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := range 5 {
		body := paypaltest.Event(paypaltest.EventSpec{Type: paypal.TypeCaptureCompleted, At: e.now, PaymentID: ids.Payment(e.now), OrderID: "5O190127TN364715T", Amount: "10.00", Currency: "EUR"})
		if _, err := e.prov.ParseWebhook(body, e.sign(body), e.now); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if got := e.host.Fetches(); got != 1 {
		t.Fatalf("certificate fetches: %d, want 1", got)
	}
	later := e.signer.Cert.NotAfter.Add(time.Minute)
	body := paypaltest.Event(paypaltest.EventSpec{Type: paypal.TypeCaptureCompleted, At: later, PaymentID: ids.Payment(e.now), OrderID: "5O190127TN364715T", Amount: "10.00", Currency: "EUR"})
	h := e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: later, CertURL: e.certURL})
	if _, err := e.prov.ParseWebhook(body, h, later); pay.ErrorCode(err) != pay.ESIGNATURE {
		t.Fatalf("a delivery after the cached certificate expired: %v, want ESIGNATURE", err)
	}
}

func TestWebhook_VerifyAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *paypal.Config) { c.Verify = paypal.VerifyAPI; c.CertHosts = []string{"api.paypal.com"} })
	body := paypaltest.Event(paypaltest.EventSpec{Type: paypal.TypeCaptureCompleted, At: e.now, PaymentID: ids.Payment(e.now), OrderID: "5O190127TN364715T", Amount: "10.00", Currency: "EUR"})
	ev, err := e.prov.ParseWebhook(body, e.sign(body), e.now)
	if err != nil || ev.Status != pay.Captured {
		t.Fatalf("verify=api, a good delivery: %+v, %v", ev, err)
	}
	changed := bytes.Replace(body, []byte(`"10.00"`), []byte(`"1.00"`), 1)
	if _, err := e.prov.ParseWebhook(changed, e.sign(body), e.now); pay.ErrorCode(err) != pay.ESIGNATURE {
		t.Fatalf("verify=api, a changed body: %v, want ESIGNATURE", err)
	}
	stale := e.signer.Sign(body, paypaltest.Delivery{WebhookID: webhookID, At: e.now.Add(-time.Hour), CertURL: e.certURL})
	if _, err := e.prov.ParseWebhook(body, stale, e.now); pay.ErrorCode(err) != pay.ESIGNATURE {
		t.Fatalf("verify=api, a stale delivery: %v, want ESIGNATURE", err)
	}
	if n := len(e.fake.Find(http.MethodPost, "/v1/notifications/verify-webhook-signature")); n != 2 {
		t.Fatalf("verify calls: %d, want 2 (the stale delivery is refused before asking)", n)
	}
	if e.host.Fetches() != 0 {
		t.Fatal("verify=api fetched a certificate")
	}
}

// TestWebhook_Mapping: every event type of SPEC §3 PayPal.
func TestWebhook_Mapping(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	pid := ids.Payment(e.now)
	const order = "5O190127TN364715T"
	for _, tc := range []struct {
		spec    paypaltest.EventSpec
		status  pay.Status
		refund  pay.RefundStatus
		dispute pay.DisputeStatus
		ignore  bool
		pull    bool
	}{
		{spec: paypaltest.EventSpec{Type: paypal.TypeOrderApproved}, pull: true},
		{spec: paypaltest.EventSpec{Type: paypal.TypeCaptureCompleted}, status: pay.Captured},
		{spec: paypaltest.EventSpec{Type: paypal.TypeCaptureDenied}, status: pay.Failed},
		{spec: paypaltest.EventSpec{Type: paypal.TypeCaptureDeclined}, status: pay.Failed},
		{spec: paypaltest.EventSpec{Type: paypal.TypeCapturePending}, status: pay.Processing},
		{spec: paypaltest.EventSpec{Type: paypal.TypeCaptureRefunded, RefundID: "1JU08902781691411"}, refund: pay.RefundSucceeded},
		{spec: paypaltest.EventSpec{Type: paypal.TypeCaptureReversed, RefundID: "1JU08902781691412"}, refund: pay.RefundSucceeded},
		{spec: paypaltest.EventSpec{Type: paypal.TypeDisputeCreated, DisputeID: "PP-D-27803", DisputeStatus: "WAITING_FOR_SELLER_RESPONSE"}, dispute: pay.DisputeNeedsResponse},
		{spec: paypaltest.EventSpec{Type: paypal.TypeDisputeUpdated, DisputeID: "PP-D-27803", DisputeStatus: "UNDER_REVIEW"}, dispute: pay.DisputeUnderReview},
		{spec: paypaltest.EventSpec{Type: paypal.TypeDisputeResolved, DisputeID: "PP-D-27803", DisputeStatus: "RESOLVED", Outcome: "RESOLVED_SELLER_FAVOUR"}, dispute: pay.DisputeWon},
		{spec: paypaltest.EventSpec{Type: paypal.TypeDisputeResolved, DisputeID: "PP-D-27804", DisputeStatus: "RESOLVED", Outcome: "RESOLVED_BUYER_FAVOUR"}, dispute: pay.DisputeLost},
		{spec: paypaltest.EventSpec{Type: "BILLING.SUBSCRIPTION.CREATED"}, ignore: true},
	} {
		t.Run(tc.spec.Type+"/"+string(tc.dispute), func(t *testing.T) {
			s := tc.spec
			s.At, s.PaymentID, s.OrderID, s.Amount, s.Currency = e.now, pid, order, "10.00", "EUR"
			body := paypaltest.Event(s)
			ev, err := e.prov.ParseWebhook(body, e.sign(body), e.now)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Ignore != tc.ignore {
				t.Fatalf("Ignore=%v, want %v", ev.Ignore, tc.ignore)
			}
			if tc.ignore {
				return
			}
			if ev.Status != tc.status || ev.PaymentID != pid || ev.Pull != tc.pull {
				t.Fatalf("Status=%q PaymentID=%q Pull=%v, want %q %q %v", ev.Status, ev.PaymentID, ev.Pull, tc.status, pid, tc.pull)
			}
			switch {
			case tc.refund != "":
				if ev.Refund == nil || ev.Refund.Status != tc.refund || ev.Refund.ProviderRef != s.RefundID || ev.Refund.Amount != 1000 {
					t.Fatalf("Refund=%+v, want %s %s 1000", ev.Refund, tc.refund, s.RefundID)
				}
			case tc.dispute != "":
				if ev.Dispute == nil || ev.Dispute.Status != tc.dispute || ev.Dispute.ID != s.DisputeID || ev.Dispute.Amount != 1000 || ev.Dispute.EvidenceDueBy.IsZero() {
					t.Fatalf("Dispute=%+v, want %s %s", ev.Dispute, tc.dispute, s.DisputeID)
				}
			default:
				if ev.ProviderRef != order || ev.Amount != 1000 || ev.Currency != "EUR" {
					t.Fatalf("ProviderRef=%q Amount=%d %s, want %s 1000 EUR", ev.ProviderRef, ev.Amount, ev.Currency, order)
				}
			}
		})
	}
}

// TestFake_SpecExample: the create-order example of PayPal's Orders v2
// document is an order the Fake makes (payer-action link, as
// payment_source.paypal.experience_context asks), read by the provider's
// mapping.
func TestFake_SpecExample(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("paypaltest/testdata/spec-examples.json")
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		OrdersCreateRequest json.RawMessage `json:"orders_create_request"`
	}
	if err := json.Unmarshal(raw, &ex); err != nil {
		t.Fatal(err)
	}
	f := paypaltest.NewFake(t)
	req, _ := http.NewRequest(http.MethodPost, f.URL()+"/v2/checkout/orders", bytes.NewReader(ex.OrdersCreateRequest))
	req.Header.Set("Authorization", "Bearer "+paypaltest.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var o struct {
		Status string                 `json:"status"`
		Links  []struct{ Rel string } `json:"links"`
	}
	if err := json.NewDecoder(res.Body).Decode(&o); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("HTTP %d, %v", res.StatusCode, err)
	}
	if st, _ := paypal.StatusOf(o.Status, ""); o.Status != "PAYER_ACTION_REQUIRED" || st != pay.RequiresAction {
		t.Fatalf("order status %q, want PAYER_ACTION_REQUIRED (requires_action)", o.Status)
	}
}

// TestStatus_SecondRef: the capture's id is the payment's second
// reference, in the capture's answer and in a later Status, and the
// payment's ActivityURL is the capture's page in PayPal's activity: the
// live website, the sandbox's against the sandbox API, "" before the
// capture.
func TestStatus_SecondRef(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := e.approved(t)
	if got := e.prov.ActivityURL(p); got != "" {
		t.Fatalf("ActivityURL before the capture=%q, want none", got)
	}
	for i := range 2 {
		res, err := e.prov.Status(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.SecondRef, e.fake.CaptureID(p.ProviderRef); got != want || got == "" {
			t.Fatalf("Status %d: SecondRef=%q, want the capture %q", i, got, want)
		}
		p.SecondRef = res.SecondRef
	}
	if got, want := e.prov.ActivityURL(p), "https://www.paypal.com/activity/payment/"+p.SecondRef; got != want {
		t.Fatalf("ActivityURL=%q, want %q", got, want)
	}
	sandbox := newEnv(t, func(c *paypal.Config) { c.APIBase = paypal.APIBaseSandBox })
	if got, want := sandbox.prov.ActivityURL(p), "https://www.sandbox.paypal.com/activity/payment/"+p.SecondRef; got != want {
		t.Fatalf("sandbox ActivityURL=%q, want %q", got, want)
	}
	other := p
	other.Provider = "stripe"
	if got := e.prov.ActivityURL(other); got != "" {
		t.Fatalf("ActivityURL of another provider's payment=%q, want none", got)
	}
}

// TestWebhook_CaptureOnly: events that name the payment only by its
// capture (no custom_id: a refund made in PayPal's dashboard, a dispute
// whose disputed transaction carries no custom) name the capture as the
// second reference, which finds the payment; a capture's event names it
// beside the order.
func TestWebhook_CaptureOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const order, capture = "5O190127TN364715T", "3C679366HH908993F"
	for _, s := range []paypaltest.EventSpec{
		{Type: paypal.TypeCaptureRefunded, RefundID: "1JU08902781691411"},
		{Type: paypal.TypeCaptureReversed, RefundID: "1JU08902781691412"},
		{Type: paypal.TypeDisputeCreated, DisputeID: "PP-D-27803", DisputeStatus: "WAITING_FOR_SELLER_RESPONSE"},
		{Type: paypal.TypeCaptureCompleted, OrderID: order},
	} {
		t.Run(s.Type, func(t *testing.T) {
			s.At, s.CaptureID, s.Amount, s.Currency = e.now, capture, "10.00", "EUR"
			body := paypaltest.Event(s)
			ev, err := e.prov.ParseWebhook(body, e.sign(body), e.now)
			if err != nil {
				t.Fatal(err)
			}
			if ev.PaymentID != "" || !ev.Untagged || ev.ProviderRef != s.OrderID {
				t.Fatalf("PaymentID=%q Untagged=%v ProviderRef=%q, want none, untagged, %q", ev.PaymentID, ev.Untagged, ev.ProviderRef, s.OrderID)
			}
			if got, want := ev.SecondRef, capture; got != want {
				t.Fatalf("SecondRef=%q, want the capture %q", got, want)
			}
		})
	}
}

// TestRefundStatus_LostAnswer: PayPal refunds and the answer is lost.
// RefundStatus asks again under the same PayPal-Request-Id with the same
// body and PayPal answers with the refund it made: one refund at PayPal,
// settled with its id. A refund older than RefundRepeatWithin is not
// asked again: Found false, no request.
func TestRefundStatus_LostAnswer(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := newEnv(t, nil)
	clock := now
	prov, err := paypal.New(paypal.Config{ClientID: paypaltest.ClientID, Secret: paypaltest.Secret, APIBase: e.fake.URL(), WebhookID: webhookID},
		paypal.WithNow(func() time.Time { return clock }))
	if err != nil {
		t.Fatal(err)
	}
	p := e.approved(t)
	if _, err := prov.Status(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	r := pay.Refund{ID: ids.Refund(now), PaymentID: p.ID, Amount: 400, Currency: "EUR", Status: pay.RefundPending, CreatedAt: now}
	e.fake.LoseRefundAnswer()
	if _, err := prov.Refund(context.Background(), p, r, pay.RefundKey(r.ID)); pay.ErrorCode(err) != pay.EPSP {
		t.Fatalf("Refund with its answer lost: %v, want EPSP (no answer)", err)
	}
	clock = now.Add(paypal.RefundRepeatWithin - time.Hour)
	for i := range 2 {
		res, err := prov.RefundStatus(context.Background(), p, r)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Found || res.Status != pay.RefundSucceeded || res.ProviderRef == "" {
			t.Fatalf("RefundStatus %d: %+v, want the refund PayPal made, succeeded", i, res)
		}
	}
	if got := e.fake.RefundCalls(); got != 1 {
		t.Fatalf("refunds at PayPal: %d, want 1", got)
	}
	reqs := e.fake.Find(http.MethodPost, "/refund")
	if len(reqs) != 3 {
		t.Fatalf("refund requests: %d, want 3 (the lost one, two repeats)", len(reqs))
	}
	for _, q := range reqs {
		if q.RequestID != pay.RefundKey(r.ID) || !bytes.Equal(q.Body, reqs[0].Body) {
			t.Fatalf("repeat %s %s, want PayPal-Request-Id %s and the first body %s", q.RequestID, q.Body, pay.RefundKey(r.ID), reqs[0].Body)
		}
	}

	aged := pay.Refund{ID: ids.Refund(now), PaymentID: p.ID, Amount: 300, Currency: "EUR", Status: pay.RefundPending, CreatedAt: now}
	clock = now.Add(paypal.RefundRepeatWithin)
	res, err := prov.RefundStatus(context.Background(), p, aged)
	if err != nil || res.Found {
		t.Fatalf("RefundStatus of an aged refund: %+v, %v; want Found false", res, err)
	}
	if n := len(e.fake.Find(http.MethodPost, "/refund")); n != 3 {
		t.Fatalf("refund requests after the aged refund's status: %d, want still 3", n)
	}
}
