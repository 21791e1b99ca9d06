// Package paypal is the PayPal provider: Orders v2 with intent CAPTURE
// through github.com/plutov/paypal (PayPal publishes no Go SDK), webhooks
// verified offline with the standard library (verify.go) or by PayPal's
// verify-webhook-signature call.
//
// Create makes an order under the PayPal-Request-Id it is given
// ("charge-<payment_id>"): one purchase unit with the payment's amount
// (PayPal's decimal string), custom_id = the payment id, invoice_id = the
// merchant's order id, the description, and the return and cancel URLs.
// An order maps to a payment status as follows:
//
//	order status                    payment status    redirect URL
//	CREATED, PAYER_ACTION_REQUIRED  requires_action   the approve (or payer-action) link
//	APPROVED                        (Status captures it; in an answer that cannot: processing)
//	SAVED                           processing
//	COMPLETED                       the capture's: COMPLETED → captured, PENDING → processing,
//	                                DECLINED, FAILED → failed, REFUNDED → refunded,
//	                                PARTIALLY_REFUNDED → captured
//	VOIDED                          failed
//
// After the buyer approves, the order must be captured by the merchant.
// Status does it: it reads the order and captures an APPROVED one under
// PayPal-Request-Id "capture-<payment_id>", the same on every retry (also
// after a crash between the call and its answer: PayPal answers a repeated
// request id with the first capture), and maps the capture's status. The
// sweeper and the webhook CHECKOUT.ORDER.APPROVED both come through it, under
// the payment's lease. PayPal has no call that cancels an order (one nobody
// approves expires at PayPal), so Cancel is EUNSUPPORTED: past
// payment.expire_after the sweeper expires the payment, and an order
// approved later is still captured when Status next reads it.
//
// The order id is the payment's provider_ref; its capture's id, once an
// answer or an event names it, is the payment's second reference
// (pay.Payment.SecondRef), so that what names only the capture (a refund's
// event, a dispute's disputed transaction, the settlement report's
// transaction id) finds the payment too, and the dashboard links the
// payment to the capture's page in PayPal's activity (ActivityURL).
//
// Refunds go to the order's capture (found by reading the order) under
// PayPal-Request-Id "refund-<refund_id>", with custom_id = the payment id,
// so the refund's webhook names the payment as the capture's does. A
// refund whose answer was lost is asked again under the same request id
// while PayPal keeps it (RefundStatus).
//
// Webhooks map by event type: PAYMENT.CAPTURE.COMPLETED → captured,
// PAYMENT.CAPTURE.DENIED and .DECLINED → failed, PAYMENT.CAPTURE.PENDING →
// processing, PAYMENT.CAPTURE.REFUNDED and .REVERSED → the refund (a
// refund resource: its id, amount and status), CUSTOMER.DISPUTE.CREATED,
// .UPDATED and .RESOLVED → the dispute, CHECKOUT.ORDER.APPROVED → a trigger
// (WebhookEvent.Pull: the buyer approved, and finalize.Pull calls Status,
// which captures the order, under the payment's lease). Every other type is
// answered 2xx and not stored. An event names its payment by custom_id (a
// capture's and a refund's; a dispute's disputed transaction's custom) and
// by the order id (a capture's supplementary_data.related_ids.order_id, an
// approved order's id), which is the payment's provider_ref, and by the
// capture id (a capture's id, a refund's "up" link, a disputed
// transaction's seller_transaction_id) as SecondRef. An event without
// custom_id is Untagged: if its order and capture ids are unknown too,
// paystate did not create it.
package paypal

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	ppgo "github.com/plutov/paypal/v4"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/pay"
)

// Name is the provider's name, in configuration and in /webhooks/paypal.
const Name = "paypal"

// API bases of PayPal's live and sandbox environments.
const (
	APIBaseLive    = ppgo.APIBaseLive
	APIBaseSandBox = ppgo.APIBaseSandBox
)

// DefaultCertHosts are the hosts a webhook's PAYPAL-CERT-URL may name when
// Config.CertHosts is empty: PayPal's live and sandbox API hosts.
var DefaultCertHosts = []string{"api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"}

// DefaultCertName is the name PayPal's webhook signing certificate is
// issued to.
const DefaultCertName = "messageverificationcerts.paypal.com"

// DefaultTolerance is how far a webhook's transmission time may be from
// now when Config.Tolerance is 0.
const DefaultTolerance = 5 * time.Minute

// DefaultTimeout bounds one HTTP request to PayPal when no client is given.
const DefaultTimeout = 30 * time.Second

// Verification modes of Config.Verify.
const (
	VerifyOffline = "offline" // the certificate chain and the signature, here
	VerifyAPI     = "api"     // PayPal's verify-webhook-signature call
)

// Config is the [providers.paypal] section of the configuration, plus the
// webhook tolerance of [webhook_inbox].
type Config struct {
	// ClientID and Secret are the REST app's credentials. Required.
	ClientID string
	Secret   string
	// APIBase is PayPal's API URL; empty means APIBaseLive. Tests point
	// it at a fake.
	APIBase string
	// WebhookID is the id PayPal gave the webhook (developer dashboard):
	// it is part of what PayPal signs. Required.
	WebhookID string
	// Verify is VerifyOffline ("" too) or VerifyAPI.
	Verify string
	// CertHosts are the hosts (host or host:port) a webhook's
	// PAYPAL-CERT-URL may name; empty means DefaultCertHosts.
	CertHosts []string
	// CAFile is a PEM file of the roots the signing certificate must chain
	// to (and the certificate host's TLS certificate); empty means the
	// system roots.
	CAFile string
	// ReturnURL and CancelURL are where PayPal sends the buyer back after
	// approving or cancelling, unless the create names a return_url.
	ReturnURL string
	CancelURL string
	// BrandName is shown to the buyer on PayPal's page (optional).
	BrandName string
	// Tolerance is how far a webhook's transmission time may be from now;
	// 0 means DefaultTolerance.
	Tolerance time.Duration
}

// Option changes a Provider built by New.
type Option func(*options)

type options struct {
	logger zerolog.Logger
	now    func() time.Time
}

// WithLogger sets the logger; New adds component=psp_paypal to it.
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.logger = l } }

// WithNow sets the clock RefundStatus measures a refund's age with
// (time.Now by default).
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Provider is the PayPal adapter. It implements pay.Provider and is safe
// for concurrent use.
type Provider struct {
	// Logger logs certificate fetches; zerolog.Nop() by default. No line
	// holds the secret, a token or a signature.
	Logger zerolog.Logger

	api       *ppgo.Client
	now       func() time.Time
	web       string // PayPal's website of the API base's environment
	webhookID string
	verify    string
	tolerance time.Duration
	returnURL string
	cancelURL string
	brand     string
	certs     *certCache
}

var _ pay.Provider = (*Provider)(nil)

// New returns a PayPal provider. Configuration errors name their key
// (providers.paypal.*) and never quote a secret.
func New(cfg Config, opts ...Option) (*Provider, error) {
	switch {
	case cfg.ClientID == "":
		return nil, errors.New("providers.paypal.client_id: required")
	case cfg.Secret == "":
		return nil, errors.New("providers.paypal.secret: required")
	case cfg.WebhookID == "":
		return nil, errors.New("providers.paypal.webhook_id: required to verify the webhooks (PayPal signs it)")
	case cfg.Verify != "" && cfg.Verify != VerifyOffline && cfg.Verify != VerifyAPI:
		return nil, fmt.Errorf("providers.paypal.verify: must be %q or %q, got %q", VerifyOffline, VerifyAPI, cut(cfg.Verify, 40))
	case cfg.Tolerance < 0:
		return nil, fmt.Errorf("webhook_inbox.tolerance: must not be negative, got %s", cfg.Tolerance)
	}
	base := cfg.APIBase
	if base == "" {
		base = APIBaseLive
	}
	if err := CheckURL(base); err != nil {
		return nil, fmt.Errorf("providers.paypal.api_base: %w", err)
	}
	for _, k := range []struct{ key, v string }{{"return_url", cfg.ReturnURL}, {"cancel_url", cfg.CancelURL}} {
		if k.v == "" {
			continue
		}
		if err := CheckURL(k.v); err != nil {
			return nil, fmt.Errorf("providers.paypal.%s: %w", k.key, err)
		}
	}
	hosts := cfg.CertHosts
	if len(hosts) == 0 {
		hosts = DefaultCertHosts
	}
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, "/@?# ") {
			return nil, fmt.Errorf("providers.paypal.cert_hosts: %q is not a host name (host or host:port)", cut(h, 80))
		}
	}
	roots, err := loadRoots(cfg.CAFile)
	if err != nil {
		return nil, err
	}

	o := options{logger: zerolog.Nop(), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	// The API calls' client; the certificates' client trusts the same
	// roots as the chain (Config.CAFile, else the system's).
	client := &http.Client{Timeout: DefaultTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if roots != nil {
		tr.TLSClientConfig.RootCAs = roots
	}
	certClient := &http.Client{Timeout: DefaultTimeout, Transport: tr,
		// A redirect could lead off the allowed hosts.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	api, err := ppgo.NewClient(cfg.ClientID, cfg.Secret, strings.TrimRight(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("providers.paypal: %w", err)
	}
	api.SetHTTPClient(client)
	tol := cfg.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	verify := cfg.Verify
	if verify == "" {
		verify = VerifyOffline
	}
	logger := o.logger.With().Str("component", "psp_paypal").Logger()
	return &Provider{
		Logger:    logger,
		api:       api,
		now:       o.now,
		web:       website(base),
		webhookID: cfg.WebhookID,
		verify:    verify,
		tolerance: tol,
		returnURL: cfg.ReturnURL,
		cancelURL: cfg.CancelURL,
		brand:     cfg.BrandName,
		certs:     newCertCache(hosts, roots, certClient),
	}, nil
}

// Websites of PayPal's live and sandbox environments, where the merchant
// signs in to see a transaction.
const (
	WebsiteLive    = "https://www.paypal.com"
	WebsiteSandbox = "https://www.sandbox.paypal.com"
)

// website is PayPal's website of the environment whose API is at base:
// the sandbox's for a host under sandbox.paypal.com, else the live one
// (also for a fake on 127.0.0.1).
func website(base string) string {
	if u, err := url.Parse(base); err == nil && strings.HasSuffix(strings.ToLower(u.Hostname()), ".sandbox.paypal.com") {
		return WebsiteSandbox
	}
	return WebsiteLive
}

// ActivityURL is the address of a payment's transaction in the merchant's
// PayPal activity (https://www.paypal.com/activity/payment/<capture id>,
// www.sandbox.paypal.com against the sandbox API): "" until paystate knows
// its capture (Payment.SecondRef), and for a payment of another provider.
// The dashboard links the payment there.
func (p *Provider) ActivityURL(pm pay.Payment) string {
	if pm.Provider != Name || pm.SecondRef == "" {
		return ""
	}
	return p.web + "/activity/payment/" + url.PathEscape(pm.SecondRef)
}

// CheckURL checks an absolute http or https URL without credentials.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return errors.New("must be an absolute http or https URL without credentials")
	}
	return nil
}

// loadRoots reads ca_file; nil (the system roots) when it is empty.
func loadRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("providers.paypal.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("providers.paypal.ca_file: %s holds no PEM certificate", file)
	}
	return pool, nil
}

// Name returns "paypal".
func (p *Provider) Name() string { return Name }

// Tolerance returns how far a webhook's transmission time may be from now.
func (p *Provider) Tolerance() time.Duration { return p.tolerance }

// Flow accepts only "": PayPal takes a payment one way (an order the buyer
// approves on PayPal's page).
func (p *Provider) Flow(pm pay.Payment) (string, error) { return pay.OneFlow(Name, pm) }

// Cancel is EUNSUPPORTED: PayPal has no call that cancels an order (one
// nobody approves expires at PayPal), so the sweeper expires an open
// payment itself; an order approved later is still captured when Status
// next reads it.
func (p *Provider) Cancel(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	return pay.NoCancel(Name)
}

// Header names of PayPal's requests.
const headerRequestID = "PayPal-Request-Id"

// CaptureKey is the PayPal-Request-Id of a payment's capture.
func CaptureKey(paymentID string) string { return "capture-" + paymentID }

// Create creates the payment's order under key ("charge-<payment_id>") and
// maps it (see the package documentation). PayPal answers a repeated
// request id with the first order; a payment whose order is already known
// (ProviderRef set, a resumed create) is read instead.
func (p *Provider) Create(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if err := pay.CheckCreate(Name, "PayPal-Request-Id", pm, key); err != nil {
		return pay.PSPResult{}, err
	}
	if pm.ProviderRef != "" {
		o, err := p.api.GetOrder(ctx, pm.ProviderRef)
		if err != nil {
			return pay.PSPResult{}, apiError("get order", err)
		}
		return orderResult(o, false)
	}
	unit := ppgo.PurchaseUnitRequest{
		Amount:      &ppgo.PurchaseUnitAmount{Currency: strings.ToUpper(pm.Currency), Value: Value(pm.Amount, pm.Currency)},
		CustomID:    pm.ID,
		InvoiceID:   pm.OrderID,
		Description: cut(pm.Description, 127),
	}
	ret := p.returnURL
	if pm.ReturnURL != "" {
		ret = pm.ReturnURL
	}
	app := &ppgo.ApplicationContext{BrandName: p.brand, ReturnURL: ret, CancelURL: p.cancelURL, UserAction: ppgo.UserActionPayNow}
	o, err := p.api.CreateOrderWithPaypalRequestID(ctx, ppgo.OrderIntentCapture, []ppgo.PurchaseUnitRequest{unit}, nil, app, key)
	if err != nil {
		return pay.PSPResult{}, apiError("create order", err)
	}
	return orderResult(o, false)
}

// Status reads the payment's order and maps it; an APPROVED order is
// captured first (capture). An order PayPal does not know is Found
// false. Without a provider_ref (the create answer was lost) the create
// is asked again under its own request id ("charge-<payment_id>"), which
// PayPal answers with the order it made.
func (p *Provider) Status(ctx context.Context, pm pay.Payment) (pay.PSPResult, error) {
	if pm.ProviderRef == "" {
		if pm.ID == "" || pm.Amount <= 0 {
			return pay.PSPResult{Found: false, Raw: "paypal: no order id and nothing to ask the create again with"}, nil
		}
		return p.Create(ctx, pm, "charge-"+pm.ID)
	}
	o, err := p.api.GetOrder(ctx, pm.ProviderRef)
	if isMissing(err) {
		return pay.PSPResult{Found: false, Raw: "paypal order=" + pm.ProviderRef + " not found"}, nil
	}
	if err != nil {
		return pay.PSPResult{}, apiError("get order", err)
	}
	if o.Status == ppgo.OrderStatusApproved {
		return p.capture(ctx, pm, o.ID)
	}
	return orderResult(o, false)
}

// capture captures an approved order under CaptureKey and maps the
// answer. An order captured meanwhile (ORDER_ALREADY_CAPTURED: another
// request id, or PayPal's dashboard) is read again.
func (p *Provider) capture(ctx context.Context, pm pay.Payment, orderID string) (pay.PSPResult, error) {
	// The request is built here rather than with the library's
	// CaptureOrderWithPaypalRequestId, which sets a flag on the shared
	// client at every call (a data race between concurrent captures).
	req, err := p.api.NewRequest(ctx, http.MethodPost, p.api.APIBase+"/v2/checkout/orders/"+url.PathEscape(orderID)+"/capture", struct{}{})
	if err != nil {
		return pay.PSPResult{}, pay.Errorf(pay.EINTERNAL, "paypal capture: %v", err)
	}
	req.Header.Set(headerRequestID, CaptureKey(pm.ID))
	req.Header.Set("Prefer", "return=representation")
	o := &ppgo.Order{}
	err = p.api.SendWithAuth(req, o)
	if issue(err) == "ORDER_ALREADY_CAPTURED" {
		if o, err = p.api.GetOrder(ctx, orderID); err != nil {
			return pay.PSPResult{}, apiError("get order", err)
		}
		return orderResult(o, true)
	}
	if err != nil {
		return pay.PSPResult{}, apiError("capture order", err)
	}
	return orderResult(o, true)
}

// StatusOf maps an order's status, and for a COMPLETED order its capture's
// status, to a payment status; ok is false for a status paystate does not
// know.
func StatusOf(order, capture string) (pay.Status, bool) {
	switch order {
	case ppgo.OrderStatusCreated, "PAYER_ACTION_REQUIRED":
		return pay.RequiresAction, true
	case ppgo.OrderStatusApproved, ppgo.OrderStatusSaved:
		return pay.Processing, true
	case ppgo.OrderStatusVoided:
		return pay.Failed, true
	case ppgo.OrderStatusCompleted:
		if capture == "" {
			// A completed CAPTURE order without its capture in the answer.
			return pay.Captured, true
		}
		return CaptureStatusOf(capture)
	}
	return "", false
}

// CaptureStatusOf maps a capture's status to a payment status.
func CaptureStatusOf(s string) (pay.Status, bool) {
	switch s {
	case "COMPLETED", "PARTIALLY_REFUNDED":
		return pay.Captured, true
	case "PENDING":
		return pay.Processing, true
	case "DECLINED", "FAILED":
		return pay.Failed, true
	case "REFUNDED":
		return pay.Refunded, true
	}
	return "", false
}

// orderResult maps an order to the provider's answer. An unknown status is
// an EPSP error: paystate does not guess.
func orderResult(o *ppgo.Order, captured bool) (pay.PSPResult, error) {
	if o == nil || o.ID == "" {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "paypal: answer without an order id")
	}
	var capStatus, capID string
	if c := firstCapture(o); c != nil {
		capStatus, capID = c.Status, c.ID
	}
	st, ok := StatusOf(o.Status, capStatus)
	if !ok {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "paypal: order %s has unknown status %q (capture %q)", o.ID, cut(o.Status, 40), cut(capStatus, 40))
	}
	raw := fmt.Sprintf("paypal order=%s status=%s", o.ID, o.Status)
	if capID != "" {
		raw += fmt.Sprintf(" capture=%s capture_status=%s", capID, capStatus)
	}
	if captured {
		raw = "captured: " + raw
	}
	r := pay.PSPResult{Status: st, ProviderRef: o.ID, SecondRef: capID, Found: true, Raw: raw}
	if len(o.PurchaseUnits) > 0 && o.PurchaseUnits[0].Amount != nil {
		a := o.PurchaseUnits[0].Amount
		r.Currency = strings.ToUpper(a.Currency)
		amount, err := pay.ParseAmount(a.Value, a.Currency)
		if err != nil {
			return pay.PSPResult{}, pay.Errorf(pay.EPSP, "paypal: order %s: purchase_units[0].amount.value: %v", o.ID, err)
		}
		r.Amount = amount
	}
	if st == pay.RequiresAction {
		r.RedirectURL = link(o.Links, "approve", "payer-action")
	}
	return r, nil
}

// firstCapture returns the order's first capture, nil if it has none.
func firstCapture(o *ppgo.Order) *ppgo.CaptureAmount {
	for _, u := range o.PurchaseUnits {
		if u.Payments != nil && len(u.Payments.Captures) > 0 {
			return &u.Payments.Captures[0]
		}
	}
	return nil
}

// link returns the href of the first link with one of rels.
func link(links []ppgo.Link, rels ...string) string {
	for _, rel := range rels {
		for _, l := range links {
			if l.Rel == rel {
				return l.Href
			}
		}
	}
	return ""
}

// Value writes an amount in minor units as PayPal's decimal string
// ("10.00", "1500" for JPY).
func Value(amount int64, currency string) string {
	return strings.TrimSuffix(pay.FormatAmount(amount, currency), " "+strings.ToUpper(currency))
}

// refundRequest is the body of a capture's refund: the library's
// RefundCaptureRequest has no custom_id.
type refundRequest struct {
	Amount   *ppgo.Money `json:"amount"`
	CustomID string      `json:"custom_id,omitempty"`
}

// refund is what paypal reads of a refund (an answer or a webhook's
// resource).
type refund struct {
	ID       string      `json:"id"`
	Status   string      `json:"status"`
	Amount   *ppgo.Money `json:"amount"`
	CustomID string      `json:"custom_id"`
	Links    []ppgo.Link `json:"links"`
}

// Refund refunds r, part or all of the order's capture, under key
// ("refund-<refund id>") with custom_id = the payment id, and maps what
// PayPal answers: COMPLETED → succeeded, PENDING → pending, FAILED and
// CANCELLED → failed.
func (p *Provider) Refund(ctx context.Context, pm pay.Payment, r pay.Refund, key string) (pay.RefundResult, error) {
	switch {
	case key == "":
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "paypal: PayPal-Request-Id is required")
	case r.Amount <= 0:
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "paypal: refund amount must be positive, got %d", r.Amount)
	case pm.ProviderRef == "":
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "paypal: payment %s has no order to refund", pm.ID)
	}
	o, err := p.api.GetOrder(ctx, pm.ProviderRef)
	if err != nil {
		return pay.RefundResult{}, apiError("get order", err)
	}
	c := firstCapture(o)
	if c == nil || c.ID == "" {
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "paypal: order %s has no capture to refund", o.ID)
	}
	cur := r.Currency
	if cur == "" {
		cur = pm.Currency
	}
	body := refundRequest{Amount: &ppgo.Money{Currency: strings.ToUpper(cur), Value: Value(r.Amount, cur)}, CustomID: pm.ID}
	req, err := p.api.NewRequest(ctx, http.MethodPost, p.api.APIBase+"/v2/payments/captures/"+url.PathEscape(c.ID)+"/refund", body)
	if err != nil {
		return pay.RefundResult{}, pay.Errorf(pay.EINTERNAL, "paypal refund: %v", err)
	}
	req.Header.Set(headerRequestID, key)
	req.Header.Set("Prefer", "return=representation")
	var re refund
	if err := p.api.SendWithAuth(req, &re); err != nil {
		return pay.RefundResult{}, apiError("refund capture", err)
	}
	return refundResult(re)
}

// RefundKeyRetention is how long PayPal keeps a refund's PayPal-Request-Id
// and answers a repeated request with the refund it made ("The server
// stores keys for 45 days": the captures.refund operation of PayPal's
// Payments v2 specification).
const RefundKeyRetention = 45 * 24 * time.Hour

// RefundRepeatWithin is how old a refund may be for RefundStatus to repeat
// its request: RefundKeyRetention less a week's margin (PayPal counts from
// its own receipt of the first request, and clocks differ).
const RefundRepeatWithin = RefundKeyRetention - 7*24*time.Hour

// RefundStatus reads a refund by its PayPal id. Without one (the answer to
// the refund was lost: PayPal lists no refunds by request id) it repeats
// the refund, the same body under the same PayPal-Request-Id
// ("refund-<refund id>"), which PayPal answers with the refund it made
// rather than a second one (or makes it, if the first request never
// arrived), as long as the refund is younger than RefundRepeatWithin. A
// repeat PayPal refuses (400, 422) made no refund under that id: the refund
// is failed, as the refused first answer would have made it. An older
// refund is Found false: PayPal no longer knows the request id, a repeat
// could refund twice, and the order's refunds name no paystate refund (they
// all carry the payment's custom_id), so the sweeper puts it on the review
// queue for a person to match in PayPal's activity.
func (p *Provider) RefundStatus(ctx context.Context, pm pay.Payment, r pay.Refund) (pay.RefundResult, error) {
	if r.ProviderRef == "" {
		if age := p.now().Sub(r.CreatedAt); age >= RefundRepeatWithin {
			return pay.RefundResult{Found: false, Raw: fmt.Sprintf("paypal: refund %s has no PayPal refund id and was asked %s ago, past PayPal's %s retention of its PayPal-Request-Id (less a margin): not asked again",
				r.ID, age.Truncate(time.Hour), RefundKeyRetention)}, nil
		}
		res, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
		if code := pay.ErrorCode(err); code == pay.EINVALID {
			return pay.RefundResult{Status: pay.RefundFailed, Found: true, Raw: "paypal refused the repeated refund request: " + pay.ErrorMessage(err)}, nil
		}
		if err == nil {
			res.Raw = "repeated request " + pay.RefundKey(r.ID) + ": " + res.Raw
		}
		return res, err
	}
	req, err := p.api.NewRequest(ctx, http.MethodGet, p.api.APIBase+"/v2/payments/refunds/"+url.PathEscape(r.ProviderRef), nil)
	if err != nil {
		return pay.RefundResult{}, pay.Errorf(pay.EINTERNAL, "paypal refund status: %v", err)
	}
	var re refund
	err = p.api.SendWithAuth(req, &re)
	if isMissing(err) {
		return pay.RefundResult{Found: false, Raw: "paypal refund=" + r.ProviderRef + " not found"}, nil
	}
	if err != nil {
		return pay.RefundResult{}, apiError("get refund", err)
	}
	return refundResult(re)
}

// RefundStatusOf maps a PayPal refund status to a refund status.
func RefundStatusOf(s string) (pay.RefundStatus, bool) {
	switch s {
	case "COMPLETED":
		return pay.RefundSucceeded, true
	case "PENDING":
		return pay.RefundPending, true
	case "FAILED", "CANCELLED":
		return pay.RefundFailed, true
	}
	return "", false
}

func refundResult(re refund) (pay.RefundResult, error) {
	if re.ID == "" {
		return pay.RefundResult{}, pay.Errorf(pay.EPSP, "paypal: answer without a refund id")
	}
	st, ok := RefundStatusOf(re.Status)
	if !ok {
		return pay.RefundResult{}, pay.Errorf(pay.EPSP, "paypal: refund %s has unknown status %q", re.ID, cut(re.Status, 40))
	}
	raw := fmt.Sprintf("paypal refund=%s status=%s", re.ID, re.Status)
	if re.Amount != nil {
		raw += " amount=" + re.Amount.Value + " " + re.Amount.Currency
	}
	return pay.RefundResult{Status: st, ProviderRef: re.ID, Found: true, Raw: raw}, nil
}

// issue returns the first issue name of a PayPal error answer ("" if err
// is none).
func issue(err error) string {
	var er *ppgo.ErrorResponse
	if errors.As(err, &er) {
		for _, d := range er.Details {
			if d.Issue != "" {
				return d.Issue
			}
		}
		return er.Name
	}
	return ""
}

// isMissing reports whether err says the object does not exist.
func isMissing(err error) bool {
	var er *ppgo.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound
}

// apiError turns a failed API call into a pay error, keeping only the
// name, issue and debug id of PayPal's answer. A request PayPal refused
// as invalid (400, 422) is EINVALID; a refused credential, a rate limit, a
// server error or no answer is EPSP.
func apiError(op string, err error) error {
	var er *ppgo.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil {
		var je *json.SyntaxError
		if errors.As(err, &je) {
			return pay.Errorf(pay.EPSP, "paypal %s: the answer is not JSON", op)
		}
		return pay.NoAnswer("paypal", op, err)
	}
	code := er.Response.StatusCode
	text := cut(er.Name, 80)
	if is := issue(err); is != "" && is != er.Name {
		text += ": " + cut(is, 80)
	}
	if er.DebugID != "" {
		text += " (debug_id " + cut(er.DebugID, 40) + ")"
	}
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return pay.Errorf(pay.EPSP, "paypal %s: the credentials were refused (HTTP %d)", op, code)
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity:
		return pay.Errorf(pay.EINVALID, "paypal %s: %s", op, text)
	default:
		return pay.Errorf(pay.EPSP, "paypal %s: %s (HTTP %d)", op, text, code)
	}
}

// cut shortens s to at most n bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
