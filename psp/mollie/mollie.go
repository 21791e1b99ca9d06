// Package mollie is the Mollie provider: the Payments API through
// github.com/VictorAvelar/mollie-api-go (v4), the Go client library most
// Mollie merchants use (Mollie publishes none for Go).
//
// Create makes a Mollie payment: the amount as Mollie's decimal string in
// the payment's currency, the description (else "Order <order id>"),
// redirectUrl from the create's return_url or providers.mollie.redirect_url,
// webhookUrl = providers.mollie.webhook_url, metadata.paystate_payment_id,
// under the header Idempotency-Key: charge-<payment_id>. A payment's
// status maps as follows:
//
//	Mollie status                 payment status    redirect URL
//	open                          requires_action   _links.checkout.href
//	pending, authorized           processing        -
//	paid                          captured          -
//	failed, canceled, expired     failed            -
//
// Mollie's webhook is a form POST that carries only id=tr_... and no
// signature: it is a trigger, never evidence. ParseWebhook returns it as a
// pay.WebhookEvent with Pull set, and paystate fetches the payment
// (Status: GET /v2/payments/{id}, and its refunds and chargebacks when
// its links say it has some) under the payment's lease (finalize.Pull). A
// malformed id is EINVALID and stores nothing. With
// providers.mollie.webhook_secret set, Mollie's signed next-generation
// webhooks (a JSON event, header X-Mollie-Signature: sha256=<hex
// HMAC-SHA256 of the body>, compared in constant time) are accepted too;
// an event about a payment (entityId tr_...) is a trigger as well, still
// confirmed by a fetch, and any other is ignored. A signed body without a
// valid signature is ESIGNATURE.
//
// Refunds go through Mollie's refunds API with Idempotency-Key
// refund-<refund_id> and metadata.paystate_refund_id; queued, pending and
// processing are pending, refunded succeeded, failed and canceled failed.
// A fetch reports every refund of the payment (PSPResult.Money), so a
// refund is settled by what the next fetch shows. Chargebacks are
// disputes: a chargeback is lost when Mollie reports it (the money is
// already taken back), won when it is reversed (reversedAt set).
package mollie

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/VictorAvelar/mollie-api-go/v4/mollie"

	"github.com/paystate/paystate/pay"
)

// Name is the provider's name, in configuration and in /webhooks/mollie.
const Name = "mollie"

// Metadata keys paystate puts on the objects it creates at Mollie.
const (
	MetadataPaymentID = "paystate_payment_id"
	MetadataRefundID  = "paystate_refund_id"
)

// HeaderSignature carries the signature of a next-generation webhook.
const HeaderSignature = "X-Mollie-Signature"

// DefaultTimeout bounds one HTTP request to Mollie when no client is given.
const DefaultTimeout = 30 * time.Second

// TypeTrigger is the type of every trigger ParseWebhook returns.
const TypeTrigger = "payment.changed"

// paymentID is the shape of a Mollie payment id.
var paymentID = regexp.MustCompile(`^tr_[A-Za-z0-9]{1,64}$`)

// Config is the [providers.mollie] section of the configuration.
type Config struct {
	// APIKey is the API key, "live_..." or "test_...". Required.
	APIKey string
	// APIBase is Mollie's API URL; empty means https://api.mollie.com/.
	// Tests point it at a fake.
	APIBase string
	// RedirectURL is where Mollie sends the customer after paying, when
	// the create names no return_url.
	RedirectURL string
	// WebhookURL is paystate's /webhooks/mollie as Mollie reaches it.
	// Required: without it Mollie never says that a payment changed.
	WebhookURL string
	// WebhookSecret, when set, accepts Mollie's signed next-generation
	// webhooks.
	WebhookSecret string
}

// Provider is the Mollie adapter. It implements pay.Provider and is safe
// for concurrent use.
type Provider struct {
	api           *mollie.Client
	redirectURL   string
	webhookURL    string
	webhookSecret []byte
}

var _ pay.Provider = (*Provider)(nil)

// New returns a Mollie provider. client may be nil (DefaultTimeout, a
// transport of its own). Configuration errors name their key
// (providers.mollie.*) and never quote a secret.
func New(cfg Config, client *http.Client) (*Provider, error) {
	switch {
	case cfg.APIKey == "":
		return nil, errors.New("providers.mollie.api_key: required")
	case !strings.HasPrefix(cfg.APIKey, "live_") && !strings.HasPrefix(cfg.APIKey, "test_"):
		return nil, errors.New("providers.mollie.api_key: must start with live_ or test_")
	case cfg.WebhookURL == "":
		return nil, errors.New("providers.mollie.webhook_url: required (paystate's /webhooks/mollie as Mollie reaches it)")
	}
	if err := checkURL("providers.mollie.webhook_url", cfg.WebhookURL); err != nil {
		return nil, err
	}
	if cfg.RedirectURL != "" {
		if err := checkURL("providers.mollie.redirect_url", cfg.RedirectURL); err != nil {
			return nil, err
		}
	}
	base := mollie.BaseURL
	if cfg.APIBase != "" {
		if err := checkURL("providers.mollie.api_base", cfg.APIBase); err != nil {
			return nil, err
		}
		base = strings.TrimSuffix(cfg.APIBase, "/") + "/"
	}
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// The library sets one idempotency key generator per client; paystate's
	// key is per request (charge-<payment_id>), so a transport of ours
	// sets the header from the request's context.
	c := *client
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = keyTransport{rt}
	api, err := mollie.NewClient(&c, mollie.NewConfig(false, ""))
	if err != nil {
		return nil, fmt.Errorf("mollie client: %w", err)
	}
	if err := api.WithAuthenticationValue(cfg.APIKey); err != nil {
		return nil, errors.New("providers.mollie.api_key: refused by the client library")
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, errors.New("providers.mollie.api_base: not a URL")
	}
	api.BaseURL = u
	return &Provider{api: api, redirectURL: cfg.RedirectURL, webhookURL: cfg.WebhookURL, webhookSecret: []byte(cfg.WebhookSecret)}, nil
}

// checkURL checks that a configured URL is absolute http(s) without
// credentials.
func checkURL(key, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%s: must be an absolute http or https URL without credentials", key)
	}
	return nil
}

// keyCtx is the context key of a request's idempotency key.
type keyCtx struct{}

// withKey returns ctx carrying an Idempotency-Key for the POST or DELETE
// made with it.
func withKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// keyTransport sets Idempotency-Key on a POST or DELETE (the methods of
// Mollie's API that change something) from its context.
type keyTransport struct{ next http.RoundTripper }

func (t keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if key, ok := r.Context().Value(keyCtx{}).(string); ok && key != "" && (r.Method == http.MethodPost || r.Method == http.MethodDelete) {
		r = r.Clone(r.Context())
		r.Header.Set(mollie.IdempotencyKeyHeader, key)
	}
	return t.next.RoundTrip(r)
}

// Name returns "mollie".
func (p *Provider) Name() string { return Name }

// Flow accepts only the default flow (a Mollie payment paid on Mollie's
// page) and needs a redirect URL: the create's return_url or
// providers.mollie.redirect_url.
func (p *Provider) Flow(pm pay.Payment) (string, error) {
	if _, err := pay.OneFlow(Name, pm); err != nil {
		return "", err
	}
	if pm.ReturnURL == "" && p.redirectURL == "" {
		return "", pay.Invalidf("return_url", "mollie needs a return_url (or providers.mollie.redirect_url) to send the customer back to")
	}
	return "", nil
}

// Create creates the Mollie payment under key ("charge-<payment_id>").
// A payment whose Mollie id is known (a resumed create) is fetched
// instead, so no second payment is made after Mollie forgot the key.
func (p *Provider) Create(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if err := pay.CheckCreate(Name, "idempotency key", pm, key); err != nil {
		return pay.PSPResult{}, err
	}
	if pm.ProviderRef != "" {
		return p.Status(ctx, pm)
	}
	redirect := pm.ReturnURL
	if redirect == "" {
		redirect = p.redirectURL
	}
	desc := pm.Description
	if desc == "" {
		desc = "Order " + pm.OrderID
	}
	_, mp, err := p.api.Payments.Create(withKey(ctx, key), mollie.CreatePayment{
		Amount:      amount(pm.Amount, pm.Currency),
		Description: desc,
		RedirectURL: redirect,
		WebhookURL:  p.webhookURL,
		Metadata:    map[string]string{MetadataPaymentID: pm.ID},
	}, nil)
	if err != nil {
		return pay.PSPResult{}, apiError("create payment", err)
	}
	return paymentResult(mp)
}

// Status fetches the payment by its Mollie id (provider_ref), with its
// refunds and chargebacks when Mollie's links say it has some. A payment
// Mollie does not know is Found false. Without a Mollie id (the create's
// answer was lost) there is nothing to ask: Mollie cannot be searched by
// metadata, so the answer is Found false and says so; Mollie's webhook
// names the payment, and the pull path finds it by its metadata.
func (p *Provider) Status(ctx context.Context, pm pay.Payment) (pay.PSPResult, error) {
	if pm.ProviderRef == "" {
		return pay.PSPResult{Found: false, Raw: "mollie: no payment id recorded; Mollie cannot be searched by metadata"}, nil
	}
	_, mp, err := p.api.Payments.Get(ctx, pm.ProviderRef, nil)
	if isMissing(err) {
		return pay.PSPResult{Found: false, Raw: "mollie payment " + pm.ProviderRef + " not found"}, nil
	}
	if err != nil {
		return pay.PSPResult{}, apiError("get payment", err)
	}
	res, err := paymentResult(mp)
	if err != nil {
		return res, err
	}
	if mp.Links.Refunds == nil && mp.Links.ChargeBacks == nil {
		return res, nil
	}
	res.Money = &pay.MoneyChanges{}
	if mp.Links.Refunds != nil {
		if res.Money.Refunds, err = p.refunds(ctx, mp); err != nil {
			return pay.PSPResult{}, err
		}
	}
	if mp.Links.ChargeBacks != nil {
		if res.Money.Disputes, err = p.chargebacks(ctx, mp); err != nil {
			return pay.PSPResult{}, err
		}
	}
	return res, nil
}

// refunds lists a payment's refunds as refund changes.
func (p *Provider) refunds(ctx context.Context, mp *mollie.Payment) ([]pay.RefundChange, error) {
	_, list, err := p.api.Refunds.ListPaymentRefunds(ctx, mp.ID, nil)
	if err != nil {
		return nil, apiError("list refunds", err)
	}
	var out []pay.RefundChange
	for _, re := range list.Embedded.Refunds {
		if re == nil || re.ID == "" {
			continue
		}
		st, ok := RefundStatusOf(re.Status)
		if !ok {
			continue
		}
		c := pay.RefundChange{ID: metadata(re.Metadata, MetadataRefundID), ProviderRef: re.ID, Status: st}
		if re.Amount != nil {
			if c.Amount, err = pay.ParseAmount(re.Amount.Value, re.Amount.Currency); err != nil {
				return nil, pay.Errorf(pay.EPSP, "mollie refund %s: amount: %v", re.ID, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// chargebacks lists a payment's chargebacks as dispute changes.
func (p *Provider) chargebacks(ctx context.Context, mp *mollie.Payment) ([]pay.DisputeChange, error) {
	_, list, err := p.api.Chargebacks.ListForPayment(ctx, mp.ID, nil)
	if err != nil {
		return nil, apiError("list chargebacks", err)
	}
	var out []pay.DisputeChange
	for _, cb := range list.Embedded.Chargebacks {
		if cb == nil || cb.ID == "" {
			continue
		}
		c := pay.DisputeChange{ID: cb.ID, Status: pay.DisputeLost}
		if cb.ReversedAt != nil {
			c.Status = pay.DisputeWon
		}
		if cb.Reason != nil {
			c.Reason = cb.Reason.Code
		}
		if cb.Amount != nil {
			if c.Amount, err = pay.ParseAmount(cb.Amount.Value, cb.Amount.Currency); err != nil {
				return nil, pay.Errorf(pay.EPSP, "mollie chargeback %s: amount: %v", cb.ID, err)
			}
			c.Currency = strings.ToUpper(cb.Amount.Currency)
		}
		out = append(out, c)
	}
	return out, nil
}

// Refund refunds r at Mollie under key ("refund-<refund_id>").
func (p *Provider) Refund(ctx context.Context, pm pay.Payment, r pay.Refund, key string) (pay.RefundResult, error) {
	if key == "" {
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mollie: idempotency key is required")
	}
	if pm.ProviderRef == "" {
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "mollie: the payment has no Mollie id to refund")
	}
	desc := r.Reason
	if desc == "" {
		desc = "Refund " + r.ID
	}
	_, re, err := p.api.Refunds.CreatePaymentRefund(withKey(ctx, key), pm.ProviderRef, mollie.CreatePaymentRefund{
		Amount:      amount(r.Amount, pm.Currency),
		Description: desc,
		Metadata:    map[string]string{MetadataRefundID: r.ID},
	}, nil)
	if err != nil {
		return pay.RefundResult{}, apiError("create refund", err)
	}
	return refundResult(re)
}

// RefundStatus fetches refund r of payment pm: by its Mollie id, else
// among the payment's refunds by metadata.paystate_refund_id.
func (p *Provider) RefundStatus(ctx context.Context, pm pay.Payment, r pay.Refund) (pay.RefundResult, error) {
	if pm.ProviderRef == "" {
		return pay.RefundResult{Found: false, Raw: "mollie: the payment has no Mollie id"}, nil
	}
	if r.ProviderRef != "" {
		_, re, err := p.api.Refunds.GetPaymentRefund(ctx, pm.ProviderRef, r.ProviderRef, nil)
		if isMissing(err) {
			return pay.RefundResult{Found: false, Raw: "mollie refund " + r.ProviderRef + " not found"}, nil
		}
		if err != nil {
			return pay.RefundResult{}, apiError("get refund", err)
		}
		return refundResult(re)
	}
	_, list, err := p.api.Refunds.ListPaymentRefunds(ctx, pm.ProviderRef, nil)
	if isMissing(err) {
		return pay.RefundResult{Found: false, Raw: "mollie payment " + pm.ProviderRef + " not found"}, nil
	}
	if err != nil {
		return pay.RefundResult{}, apiError("list refunds", err)
	}
	for _, re := range list.Embedded.Refunds {
		if re != nil && metadata(re.Metadata, MetadataRefundID) == r.ID {
			return refundResult(re)
		}
	}
	return pay.RefundResult{Found: false, Raw: "mollie has no refund with metadata." + MetadataRefundID + "=" + r.ID}, nil
}

// Cancel cancels an open payment at Mollie (DELETE /v2/payments/{id}).
// Mollie refuses it for a payment that cannot be canceled (most methods
// while open); then the payment's current status is the answer. The
// DELETE carries key ("cancel-<payment_id>") as its Idempotency-Key, as
// every request of paystate's that changes something at Mollie does. A
// payment without a Mollie id has nothing to cancel: the answer has no
// status.
func (p *Provider) Cancel(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if pm.ProviderRef == "" {
		// Nothing at Mollie to cancel: no status, so the sweeper expires it.
		return pay.PSPResult{Raw: "mollie: no payment id recorded, nothing to cancel"}, nil
	}
	_, mp, err := p.api.Payments.Cancel(withKey(ctx, key), pm.ProviderRef)
	var be *mollie.BaseError
	if errors.As(err, &be) && be.Status == http.StatusUnprocessableEntity {
		return p.Status(ctx, pm)
	}
	if err != nil {
		return pay.PSPResult{}, apiError("cancel payment", err)
	}
	return paymentResult(mp)
}

// StatusOf maps a Mollie payment status; ok is false for one paystate
// does not know.
func StatusOf(s string) (pay.Status, bool) {
	switch s {
	case "paid":
		return pay.Captured, true
	case "failed", "canceled", "expired":
		return pay.Failed, true
	case "pending", "authorized":
		return pay.Processing, true
	case "open":
		return pay.RequiresAction, true
	}
	return "", false
}

// RefundStatusOf maps a Mollie refund status.
func RefundStatusOf(s mollie.RefundStatus) (pay.RefundStatus, bool) {
	switch s {
	case mollie.Queued, mollie.Pending, mollie.Processing:
		return pay.RefundPending, true
	case mollie.Refunded:
		return pay.RefundSucceeded, true
	case mollie.Failed, "canceled":
		return pay.RefundFailed, true
	}
	return "", false
}

// paymentResult maps a Mollie payment. An unknown status is "" (nothing
// to finalize), with the status in Raw.
func paymentResult(mp *mollie.Payment) (pay.PSPResult, error) {
	if mp == nil || mp.ID == "" {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "mollie answered a payment without an id")
	}
	st, _ := StatusOf(mp.Status)
	res := pay.PSPResult{
		Status: st, ProviderRef: mp.ID, Found: true,
		PaymentID: metadata(mp.Metadata, MetadataPaymentID),
		Raw:       fmt.Sprintf("mollie payment=%s status=%s", mp.ID, mp.Status),
	}
	if mp.Amount != nil {
		a, err := pay.ParseAmount(mp.Amount.Value, mp.Amount.Currency)
		if err != nil {
			return pay.PSPResult{}, pay.Errorf(pay.EPSP, "mollie payment %s: amount: %v", mp.ID, err)
		}
		res.Amount, res.Currency = a, strings.ToUpper(mp.Amount.Currency)
		res.Raw += " amount=" + pay.FormatAmount(a, res.Currency)
	}
	if st == pay.RequiresAction && mp.Links.Checkout != nil {
		res.RedirectURL = mp.Links.Checkout.Href
	}
	return res, nil
}

// refundResult maps a Mollie refund.
func refundResult(re *mollie.Refund) (pay.RefundResult, error) {
	if re == nil || re.ID == "" {
		return pay.RefundResult{}, pay.Errorf(pay.EPSP, "mollie answered a refund without an id")
	}
	st, ok := RefundStatusOf(re.Status)
	if !ok {
		st = pay.RefundPending // an unknown status is not an outcome
	}
	return pay.RefundResult{Status: st, ProviderRef: re.ID, Found: true, Raw: fmt.Sprintf("mollie refund=%s status=%s", re.ID, re.Status)}, nil
}

// amount writes minor units as Mollie's decimal string.
func amount(minor int64, currency string) *mollie.Amount {
	cur := strings.ToUpper(currency)
	return &mollie.Amount{Currency: cur, Value: strings.TrimSuffix(pay.FormatAmount(minor, cur), " "+cur)}
}

// metadata reads a string key of an object's metadata.
func metadata(md any, key string) string {
	m, ok := md.(map[string]any)
	if !ok {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

// isMissing reports whether err is Mollie's 404.
func isMissing(err error) bool {
	var be *mollie.BaseError
	return errors.As(err, &be) && be.Status == http.StatusNotFound
}

// apiError turns a failed API call into a pay error: Mollie's 4xx
// refusal of a request as EINVALID (the key refused, a rate limit and
// anything else as EPSP), with Mollie's title and detail, never the key.
func apiError(op string, err error) error {
	var be *mollie.BaseError
	if !errors.As(err, &be) {
		var ue *url.Error
		if errors.As(err, &ue) {
			return pay.Errorf(pay.EPSP, "mollie %s: no answer: %v", op, ue.Err)
		}
		return pay.Errorf(pay.EPSP, "mollie %s: %v", op, err)
	}
	detail := be.Detail
	if len(detail) > 300 {
		detail = detail[:300] + "..."
	}
	switch be.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusNotFound:
		return pay.Errorf(pay.EINVALID, "mollie %s: %s: %s", op, be.Title, detail)
	case http.StatusUnauthorized, http.StatusForbidden:
		return pay.Errorf(pay.EPSP, "mollie %s: the API key was refused (HTTP %d)", op, be.Status)
	}
	return pay.Errorf(pay.EPSP, "mollie %s: %s: %s (HTTP %d)", op, be.Title, detail, be.Status)
}

// ParseWebhook reads Mollie's webhook: the classic form POST (id=tr_...,
// unsigned) or, with a webhook secret configured, a signed
// next-generation event. Either way the result is a trigger (Pull) for the
// payment it names; a malformed id is EINVALID, a bad signature
// ESIGNATURE.
func (p *Provider) ParseWebhook(body []byte, header http.Header, now time.Time) (pay.WebhookEvent, error) {
	if sig := header.Get(HeaderSignature); sig != "" || strings.HasPrefix(strings.TrimSpace(string(body)), "{") {
		return p.parseSigned(body, sig, now)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return pay.WebhookEvent{}, pay.Invalidf("id", "mollie webhook: the body is not a form")
	}
	id := form.Get("id")
	if !paymentID.MatchString(id) {
		return pay.WebhookEvent{}, pay.Invalidf("id", "mollie webhook: id must be a Mollie payment id (tr_...)")
	}
	return pay.WebhookEvent{EventID: "trigger_" + id, Type: TypeTrigger, ProviderRef: id, OccurredAt: now, Pull: true}, nil
}

// parseSigned checks and reads a next-generation webhook.
func (p *Provider) parseSigned(body []byte, sig string, now time.Time) (pay.WebhookEvent, error) {
	if len(p.webhookSecret) == 0 {
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "mollie webhook: a signed event needs providers.mollie.webhook_secret")
	}
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "mollie webhook: %s must be sha256=<hex>", HeaderSignature)
	}
	mac := hmac.New(sha256.New, p.webhookSecret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "mollie webhook: the signature does not match the body")
	}
	var ev mollie.WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return pay.WebhookEvent{}, pay.Invalidf("body", "mollie webhook: not a JSON event")
	}
	if ev.ID == "" || len(ev.ID) > 255 {
		return pay.WebhookEvent{}, pay.Invalidf("id", "mollie webhook: the event has no id")
	}
	out := pay.WebhookEvent{EventID: ev.ID, Type: ev.Type, ProviderRef: ev.EntityID, OccurredAt: now}
	if !paymentID.MatchString(ev.EntityID) {
		out.Ignore = true // not about a payment
		return out, nil
	}
	out.Type, out.Pull = TypeTrigger, true
	return out, nil
}
