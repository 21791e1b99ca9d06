// Package stripe is the Stripe provider: PaymentIntents through the official
// Go library (github.com/stripe/stripe-go) and webhooks verified with its
// webhook package (Stripe-Signature, 300 s tolerance by default).
//
// Create makes a PaymentIntent with the payment's amount, its currency in
// lower case and metadata.paystate_payment_id, under the Idempotency-Key it
// is given ("charge-<payment_id>"). Nothing is confirmed on the server: the
// customer pays on the merchant's page with Stripe.js and the client secret.
// A PaymentIntent's status maps to a payment status as follows:
//
//	PaymentIntent status                           payment status    client secret   redirect URL
//	requires_payment_method, requires_confirmation created           yes             -
//	requires_action                                requires_action   yes             next_action.redirect_to_url.url
//	processing                                     processing        yes             -
//	requires_capture                               processing        yes             -
//	succeeded                                      captured          -               -
//	canceled                                       failed            -               -
//
// A failed attempt (last_payment_error set, status back to
// requires_payment_method) stays created: on Stripe the customer may retry
// on the same PaymentIntent, so only canceled makes a payment failed.
// requires_capture means the money is authorized but not taken; paystate
// creates PaymentIntents with automatic capture, so it only happens when
// someone changed the capture method at Stripe. Calling that captured would
// post money to the ledger that has not moved, so it stays processing and
// the sweeper puts it on the review queue after sweeper.give_up_after.
//
// Webhooks map by event type: payment_intent.succeeded → captured,
// payment_intent.canceled → failed, payment_intent.processing → processing,
// payment_intent.requires_action → requires_action,
// payment_intent.payment_failed → a failed_attempt step in the timeline
// (status unchanged), charge.refunded → refunded when the charge is refunded
// in full (a partial one is recorded as an ignored_event step: its refund's
// own event says more). charge.refund.updated, refund.updated and
// refund.failed are about one refund (its status: succeeded, pending and
// requires_action → pending, failed and canceled → failed), found by
// metadata.paystate_refund_id (every refund paystate makes carries it) or
// its id; a refund made at Stripe is learnt from them. charge.dispute.created,
// .updated and .closed are about a dispute (needs_response, under_review,
// won, lost; an inquiry's warning_* statuses map as a chargeback's,
// warning_closed and charge_refunded to won), found by its payment_intent.
// checkout.session.completed, .async_payment_succeeded,
// .async_payment_failed and .expired are about a Checkout Session (see
// checkout.go): its id is the provider_ref, its payment_intent the second
// reference (WebhookEvent.SecondRef). Every event whose reference is a
// PaymentIntent's (a PaymentIntent's, a charge's, a refund's, a
// dispute's) carries it as SecondRef too, so that on a Checkout payment
// finalize reads it as the session's PaymentIntent, not as its session.
// Every other event type is answered
// 2xx and not stored (WebhookEvent.Ignore). An event names its payment by
// metadata.paystate_payment_id and by the PaymentIntent id (for a charge:
// its payment_intent), which is the payment's provider_ref. Every
// PaymentIntent paystate creates carries that metadata, so an event without
// it is marked WebhookEvent.Untagged: if its provider_ref is unknown too,
// the inbox acknowledges it as not paystate's (counted, not stored, never
// an orphan). The object's amount and currency (upper-cased) go with the
// event; finalize refuses an event whose amount or currency is not the
// payment's.
//
// Webhook signatures and their timestamps are checked by stripe-go's
// webhook.ConstructEventWithOptions. That function measures the timestamp's
// age with the wall clock (time.Since), not with the now that ParseWebhook
// is given, and it accepts timestamps from the future: an injected clock
// does not move the Stripe tolerance window.
//
// Events of another Stripe API version than the library's
// (stripe.APIVersion) are accepted: paystate reads only a handful of fields
// (id, type, created, and of the object id, object, metadata, payment_intent,
// refunded, amount, currency, status, reason, evidence_details.due_by) that
// have kept their shape across API versions, and decodes them
// itself rather than into the library's types. The first event of each
// other version is logged as a warning and every one is counted in
// paystate_stripe_webhook_version_mismatch_total, so a webhook endpoint
// that should be pinned to the library's version is seen.
package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	stripego "github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/paystate/paystate/pay"
)

// Name is the provider's name, in configuration and in /webhooks/stripe.
const Name = "stripe"

// MetadataPaymentID is the PaymentIntent metadata key that carries
// paystate's payment id.
const MetadataPaymentID = "paystate_payment_id"

// HeaderSignature is the header that carries Stripe's webhook signature.
const HeaderSignature = "Stripe-Signature"

// APIVersion is the Stripe API version of every request, the one of the
// stripe-go release paystate is built with. Webhook endpoints should be
// created with it.
const APIVersion = stripego.APIVersion

// DefaultTolerance is how old a webhook's signature timestamp may be when
// Config.Tolerance is 0.
const DefaultTolerance = webhook.DefaultTolerance

// DefaultTimeout bounds one HTTP request to Stripe when no client is given.
const DefaultTimeout = 30 * time.Second

// Event types paystate maps.
const (
	TypeSucceeded      = "payment_intent.succeeded"
	TypeCanceled       = "payment_intent.canceled"
	TypePaymentFailed  = "payment_intent.payment_failed"
	TypeProcessing     = "payment_intent.processing"
	TypeRequiresAction = "payment_intent.requires_action"
	TypeChargeRefunded = "charge.refunded"

	// Events about one refund (the object is a refund).
	TypeChargeRefundUpdated = "charge.refund.updated"
	TypeRefundUpdated       = "refund.updated"
	TypeRefundFailed        = "refund.failed"

	// Events about a dispute (the object is a dispute).
	TypeDisputeCreated = "charge.dispute.created"
	TypeDisputeUpdated = "charge.dispute.updated"
	TypeDisputeClosed  = "charge.dispute.closed"

	// Events about a Checkout Session (checkout.go).
	TypeSessionCompleted      = "checkout.session.completed"
	TypeSessionAsyncSucceeded = "checkout.session.async_payment_succeeded"
	TypeSessionAsyncFailed    = "checkout.session.async_payment_failed"
	TypeSessionExpired        = "checkout.session.expired"
)

// MetadataRefundID is the refund metadata key that carries paystate's
// refund id.
const MetadataRefundID = "paystate_refund_id"

// maxIDLen bounds the ids read from an event (event, PaymentIntent, payment).
const maxIDLen = 255

var versionMismatches = metrics.NewCounter(`paystate_stripe_webhook_version_mismatch_total`)

// Config is the [providers.stripe] section of the configuration, plus the
// webhook tolerance of [webhook_inbox].
type Config struct {
	// SecretKey is the API key, "sk_..." or a restricted "rk_...". Required.
	SecretKey string
	// WebhookSecret is the webhook endpoint's signing secret, "whsec_...".
	// Required.
	WebhookSecret string
	// APIBase is Stripe's API URL; empty means Stripe's own. Tests point it
	// at stripe-mock.
	APIBase string
	// Tolerance is how old a webhook's signature timestamp may be; 0 means
	// DefaultTolerance (300 s).
	Tolerance time.Duration
	// Flow is how a payment is taken when its create names none:
	// pay.FlowPaymentIntent (the default, "" too) or pay.FlowCheckout.
	Flow string
	// Checkout configures the Checkout Sessions (checkout.go).
	Checkout CheckoutConfig
	// ExpireAfter is payment.expire_after: a Checkout Session expires at
	// Stripe that long after the payment was created, within Stripe's
	// 30 minutes to 24 hours (0: 24 hours).
	ExpireAfter time.Duration
}

// Option changes a Provider built by New.
type Option func(*options)

type options struct {
	logger  zerolog.Logger
	client  *http.Client
	retries int64
	now     func() time.Time
}

// WithLogger sets the logger; New adds component=psp_stripe to it.
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.logger = l } }

// WithNow sets the clock the provider compares a payment's creation with
// (how long Stripe still keeps its create's idempotency key); time.Now by
// default.
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithHTTPClient sets the client of the API calls. By default it has a
// DefaultTimeout timeout and a transport of its own.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// WithMaxNetworkRetries sets how often stripe-go retries a request that got
// no answer (a network failure) or a lock timeout (default 2); an error
// answer from Stripe is not retried. A retry carries the same
// Idempotency-Key, so it cannot charge twice.
func WithMaxNetworkRetries(n int) Option {
	return func(o *options) { o.retries = int64(max(n, 0)) }
}

// Provider is the Stripe adapter. It implements pay.Provider, with a
// cancel API and two flows, and is safe for concurrent use. Its API client is its own
// (stripe.NewClient with its own backend): the global stripe.Key is never
// set.
type Provider struct {
	// Logger logs webhooks of another API version; zerolog.Nop() by
	// default. No line holds a key, a client secret or a signature.
	Logger zerolog.Logger

	api           *stripego.Client
	webhookSecret string
	tolerance     time.Duration
	warned        sync.Map // API versions already logged
	flow          string   // the default flow
	now           func() time.Time
	checkout      CheckoutConfig
	expireAfter   time.Duration
}

var _ pay.Provider = (*Provider)(nil)

// New returns a Stripe provider. Configuration errors name their key
// (providers.stripe.*) and never quote a secret.
func New(cfg Config, opts ...Option) (*Provider, error) {
	switch {
	case cfg.SecretKey == "":
		return nil, errors.New("providers.stripe.secret_key: required")
	case !strings.HasPrefix(cfg.SecretKey, "sk_") && !strings.HasPrefix(cfg.SecretKey, "rk_"):
		return nil, errors.New("providers.stripe.secret_key: must start with sk_ or rk_")
	case cfg.WebhookSecret == "":
		return nil, errors.New("providers.stripe.webhook_secret: required to verify the webhooks")
	case !strings.HasPrefix(cfg.WebhookSecret, "whsec_"):
		return nil, errors.New("providers.stripe.webhook_secret: must start with whsec_")
	case cfg.Tolerance < 0:
		return nil, fmt.Errorf("webhook_inbox.tolerance: must not be negative, got %s", cfg.Tolerance)
	case cfg.Flow != "" && cfg.Flow != pay.FlowPaymentIntent && cfg.Flow != pay.FlowCheckout:
		return nil, fmt.Errorf("providers.stripe.flow: must be %q or %q, got %q", pay.FlowPaymentIntent, pay.FlowCheckout, cut(cfg.Flow, 40))
	}
	if err := cfg.Checkout.check(); err != nil {
		return nil, err
	}
	if cfg.APIBase != "" {
		u, err := url.Parse(cfg.APIBase)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, errors.New("providers.stripe.api_base: must be an absolute http or https URL without credentials")
		}
	}

	o := options{logger: zerolog.Nop(), retries: stripego.DefaultMaxNetworkRetries, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.client == nil {
		o.client = &http.Client{Timeout: DefaultTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	bc := &stripego.BackendConfig{
		HTTPClient: o.client,
		// Errors come back to the caller, who logs them once; the library's
		// own lines could carry request details.
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
		MaxNetworkRetries: stripego.Int64(o.retries),
	}
	if cfg.APIBase != "" {
		bc.URL = stripego.String(cfg.APIBase)
	}
	backends := &stripego.Backends{API: stripego.GetBackendWithConfig(stripego.APIBackend, bc)}

	tol := cfg.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	flow := cfg.Flow
	if flow == "" {
		flow = pay.FlowPaymentIntent
	}
	return &Provider{
		Logger:        o.logger.With().Str("component", "psp_stripe").Logger(),
		api:           stripego.NewClient(cfg.SecretKey, stripego.WithBackends(backends)),
		webhookSecret: cfg.WebhookSecret,
		tolerance:     tol,
		flow:          flow,
		checkout:      cfg.Checkout,
		expireAfter:   cfg.ExpireAfter,
		now:           o.now,
	}, nil
}

// Name returns "stripe".
func (p *Provider) Name() string { return Name }

// Tolerance returns how old a webhook's signature timestamp may be.
func (p *Provider) Tolerance() time.Duration { return p.tolerance }

// Create creates the payment's PaymentIntent under key ("charge-<payment_id>")
// and maps its status (see the package documentation). Stripe answers a
// repeated key with the first PaymentIntent for 24 hours; a payment whose
// PaymentIntent is already known (ProviderRef set, for example on a resumed
// create) is retrieved instead, so no second PaymentIntent is made after
// the key has expired.
func (p *Provider) Create(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if err := pay.CheckCreate(Name, "idempotency key", pm, key); err != nil {
		return pay.PSPResult{}, err
	}
	if pm.OnHostedPage() {
		return p.createSession(ctx, pm, key)
	}
	if pm.ProviderRef != "" {
		pi, err := p.api.V1PaymentIntents.Retrieve(ctx, pm.ProviderRef, &stripego.PaymentIntentRetrieveParams{})
		if err != nil {
			return pay.PSPResult{}, apiError("retrieve PaymentIntent", err)
		}
		return intentResult(pi)
	}

	params := &stripego.PaymentIntentCreateParams{
		Amount:   stripego.Int64(pm.Amount),
		Currency: stripego.String(strings.ToLower(pm.Currency)),
	}
	params.AddMetadata(MetadataPaymentID, pm.ID)
	params.SetIdempotencyKey(key)
	pi, err := p.api.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return pay.PSPResult{}, apiError("create PaymentIntent", err)
	}
	return intentResult(pi)
}

// Status retrieves the payment's PaymentIntent by its provider_ref and maps
// its status; a PaymentIntent Stripe does not know is Found false. Without
// a provider_ref (the create answer was lost) the PaymentIntent is searched
// by metadata.paystate_payment_id; Stripe's search index can lag about a
// minute behind, so a PaymentIntent created just before may not be found
// yet (Found false, the sweeper asks again on its next pass). Raw never
// holds the client secret.
func (p *Provider) Status(ctx context.Context, pm pay.Payment) (pay.PSPResult, error) {
	if pm.OnHostedPage() {
		return p.sessionStatus(ctx, pm)
	}
	if pm.ProviderRef == "" {
		return p.search(ctx, pm)
	}
	pi, err := p.api.V1PaymentIntents.Retrieve(ctx, pm.ProviderRef, &stripego.PaymentIntentRetrieveParams{})
	if isMissing(err) {
		return pay.PSPResult{Found: false, Raw: "stripe payment_intent=" + pm.ProviderRef + " not found"}, nil
	}
	if err != nil {
		return pay.PSPResult{}, apiError("retrieve PaymentIntent", err)
	}
	return intentResult(pi)
}

// search finds a payment's PaymentIntent by its metadata.
func (p *Provider) search(ctx context.Context, pm pay.Payment) (pay.PSPResult, error) {
	if !searchable(pm.ID) {
		return pay.PSPResult{}, pay.Errorf(pay.EINVALID, "stripe: payment id %q cannot be searched", pm.ID)
	}
	params := &stripego.PaymentIntentSearchParams{}
	params.Query = fmt.Sprintf("metadata['%s']:'%s'", MetadataPaymentID, pm.ID)
	params.Limit = stripego.Int64(10)
	params.Single = true
	var found []*stripego.PaymentIntent
	for pi, err := range p.api.V1PaymentIntents.Search(ctx, params).All(ctx) {
		if err != nil {
			return pay.PSPResult{}, apiError("search PaymentIntents", err)
		}
		// Only an exact metadata match counts, whatever the search answered.
		if pi != nil && pi.Metadata[MetadataPaymentID] == pm.ID {
			found = append(found, pi)
		}
	}
	switch len(found) {
	case 0:
		return pay.PSPResult{Found: false, Raw: "stripe: no PaymentIntent with metadata." + MetadataPaymentID + "=" + pm.ID}, nil
	case 1:
		return intentResult(found[0])
	default:
		ids := make([]string, len(found))
		for i, pi := range found {
			ids[i] = pi.ID
		}
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "stripe: %d PaymentIntents carry metadata.%s=%s (%s)", len(found), MetadataPaymentID, pm.ID, strings.Join(ids, ", "))
	}
}

// searchable reports whether id can go into a search query as it is: the
// characters of a paystate id, nothing that could end the quoted value.
func searchable(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Refund refunds r, part or all of the payment's PaymentIntent (intentOf:
// a checkout payment's is its session's), under key
// ("refund-<refund id>"), with its amount and metadata.paystate_refund_id
// (and paystate_payment_id), and maps what Stripe answers: succeeded →
// succeeded; pending or requires_action → pending (the outcome follows by
// charge.refund.updated, or the sweeper asks); failed or canceled →
// failed. A PaymentIntent refunded in full already
// (charge_already_refunded, for example from the Stripe dashboard) refunds
// nothing more: the refund failed, and the charge.refunded event of the
// refund made elsewhere settles the payment.
func (p *Provider) Refund(ctx context.Context, pm pay.Payment, r pay.Refund, key string) (pay.RefundResult, error) {
	switch {
	case key == "":
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "stripe: idempotency key is required")
	case r.Amount <= 0:
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "stripe: refund amount must be positive, got %d", r.Amount)
	}
	intent, err := p.intentOf(ctx, pm)
	if err != nil {
		return pay.RefundResult{}, err
	}
	if intent == "" {
		return pay.RefundResult{}, pay.Errorf(pay.EINVALID, "stripe: payment %s has no PaymentIntent to refund", pm.ID)
	}
	params := &stripego.RefundCreateParams{PaymentIntent: stripego.String(intent), Amount: stripego.Int64(r.Amount)}
	if pm.ID != "" {
		params.AddMetadata(MetadataPaymentID, pm.ID)
	}
	if r.ID != "" {
		params.AddMetadata(MetadataRefundID, r.ID)
	}
	params.SetIdempotencyKey(key)
	re, err := p.api.V1Refunds.Create(ctx, params)
	if code := errorCode(err); code == stripego.ErrorCodeChargeAlreadyRefunded {
		return pay.RefundResult{
			Status: pay.RefundFailed, Found: true,
			Raw: "stripe payment_intent=" + intent + " already refunded in full",
		}, nil
	}
	if err != nil {
		return pay.RefundResult{}, apiError("create refund", err)
	}
	return refundResult(re)
}

// RefundStatus retrieves a refund by its provider reference, or, without
// one (the answer to the refund was lost), finds it among the
// PaymentIntent's refunds by metadata.paystate_refund_id; a refund Stripe
// does not know is Found false.
func (p *Provider) RefundStatus(ctx context.Context, pm pay.Payment, r pay.Refund) (pay.RefundResult, error) {
	if r.ProviderRef != "" {
		re, err := p.api.V1Refunds.Retrieve(ctx, r.ProviderRef, &stripego.RefundRetrieveParams{})
		if isMissing(err) {
			return pay.RefundResult{Found: false, Raw: "stripe refund=" + r.ProviderRef + " not found"}, nil
		}
		if err != nil {
			return pay.RefundResult{}, apiError("retrieve refund", err)
		}
		return refundResult(re)
	}
	intent, err := p.intentOf(ctx, pm)
	if err != nil {
		return pay.RefundResult{}, err
	}
	if intent == "" {
		return pay.RefundResult{Found: false, Raw: "stripe: payment " + pm.ID + " has no PaymentIntent"}, nil
	}
	params := &stripego.RefundListParams{PaymentIntent: stripego.String(intent)}
	params.Limit = stripego.Int64(100)
	for re, err := range p.api.V1Refunds.List(ctx, params).All(ctx) {
		if err != nil {
			return pay.RefundResult{}, apiError("list refunds", err)
		}
		if re != nil && re.Metadata[MetadataRefundID] == r.ID {
			return refundResult(re)
		}
	}
	return pay.RefundResult{Found: false, Raw: "stripe: no refund of " + intent + " with metadata." + MetadataRefundID + "=" + r.ID}, nil
}

// RefundStatusOf maps a Stripe refund status to a refund status; ok is
// false for a status paystate does not know.
func RefundStatusOf(s stripego.RefundStatus) (pay.RefundStatus, bool) {
	switch s {
	case stripego.RefundStatusSucceeded:
		return pay.RefundSucceeded, true
	case stripego.RefundStatusPending, stripego.RefundStatusRequiresAction:
		return pay.RefundPending, true
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		return pay.RefundFailed, true
	}
	return "", false
}

// refundResult maps a Stripe refund to the provider's answer.
func refundResult(re *stripego.Refund) (pay.RefundResult, error) {
	if re == nil || re.ID == "" {
		return pay.RefundResult{}, pay.Errorf(pay.EPSP, "stripe: answer without a refund id")
	}
	st, ok := RefundStatusOf(re.Status)
	if !ok {
		return pay.RefundResult{}, pay.Errorf(pay.EPSP, "stripe: refund %s has unknown status %q", re.ID, re.Status)
	}
	return pay.RefundResult{
		Status: st, ProviderRef: re.ID, Found: true,
		Raw: fmt.Sprintf("stripe refund=%s status=%s amount=%d", re.ID, re.Status, re.Amount),
	}, nil
}

// Cancel cancels the payment's PaymentIntent under key
// ("cancel-<payment_id>", cancellation_reason abandoned) and maps what
// Stripe answers: canceled → failed. A PaymentIntent that can no longer be
// canceled (payment_intent_unexpected_state: it succeeded or is processing)
// is retrieved and mapped instead, so succeeded → captured. A payment
// without provider_ref is searched first (see Status); one Stripe does not
// know is Found false. A checkout payment's session is expired instead
// (expireSession).
func (p *Provider) Cancel(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if key == "" {
		return pay.PSPResult{}, pay.Errorf(pay.EINVALID, "stripe: idempotency key is required")
	}
	if pm.OnHostedPage() {
		return p.expireSession(ctx, pm, key)
	}
	ref := pm.ProviderRef
	if ref == "" {
		res, err := p.search(ctx, pm)
		if err != nil || !res.Found {
			return res, err
		}
		ref = res.ProviderRef
	}
	params := &stripego.PaymentIntentCancelParams{
		CancellationReason: stripego.String(string(stripego.PaymentIntentCancellationReasonAbandoned)),
	}
	params.SetIdempotencyKey(key)
	pi, err := p.api.V1PaymentIntents.Cancel(ctx, ref, params)
	switch code := errorCode(err); {
	case err == nil:
		return intentResult(pi)
	case code == stripego.ErrorCodeResourceMissing:
		return pay.PSPResult{Found: false, Raw: "stripe payment_intent=" + ref + " not found"}, nil
	case code == stripego.ErrorCodePaymentIntentUnexpectedState:
		// Too late to cancel: Stripe's current answer decides.
		pi, err := p.api.V1PaymentIntents.Retrieve(ctx, ref, &stripego.PaymentIntentRetrieveParams{})
		if err != nil {
			return pay.PSPResult{}, apiError("retrieve PaymentIntent", err)
		}
		return intentResult(pi)
	default:
		return pay.PSPResult{}, apiError("cancel PaymentIntent", err)
	}
}

// StatusOf maps a PaymentIntent status to a payment status; ok is false for
// a status paystate does not know.
func StatusOf(s stripego.PaymentIntentStatus) (st pay.Status, ok bool) {
	switch s {
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusRequiresConfirmation:
		return pay.Created, true
	case stripego.PaymentIntentStatusRequiresAction:
		return pay.RequiresAction, true
	case stripego.PaymentIntentStatusProcessing, stripego.PaymentIntentStatusRequiresCapture:
		return pay.Processing, true
	case stripego.PaymentIntentStatusSucceeded:
		return pay.Captured, true
	case stripego.PaymentIntentStatusCanceled:
		return pay.Failed, true
	}
	return "", false
}

// intentResult maps a PaymentIntent to the provider's answer. An unknown
// status is an EPSP error: paystate does not guess.
func intentResult(pi *stripego.PaymentIntent) (pay.PSPResult, error) {
	if pi == nil || pi.ID == "" {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "stripe: answer without a PaymentIntent id")
	}
	st, ok := StatusOf(pi.Status)
	if !ok {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "stripe: PaymentIntent %s has unknown status %q", pi.ID, pi.Status)
	}
	raw := fmt.Sprintf("stripe payment_intent=%s status=%s", pi.ID, pi.Status)
	if e := pi.LastPaymentError; e != nil {
		raw += " last_payment_error=" + firstOf(string(e.Code), string(e.DeclineCode), string(e.Type), "set")
	}
	r := pay.PSPResult{
		Status: st, ProviderRef: pi.ID, Found: true, Raw: raw,
		Amount: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)),
	}
	if st.ShowsSecrets() {
		r.ClientSecret = pi.ClientSecret
	}
	if st == pay.RequiresAction && pi.NextAction != nil && pi.NextAction.RedirectToURL != nil {
		r.RedirectURL = pi.NextAction.RedirectToURL.URL
	}
	return r, nil
}

// firstOf returns the first non-empty string.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// errorCode returns the Stripe error code of err, "" if err is not a Stripe
// API error.
func errorCode(err error) stripego.ErrorCode {
	var se *stripego.Error
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

// isMissing reports whether err says the object does not exist.
func isMissing(err error) bool {
	var se *stripego.Error
	return errors.As(err, &se) && (se.Code == stripego.ErrorCodeResourceMissing || se.HTTPStatusCode == http.StatusNotFound)
}

// apiError turns a failed API call into a pay error. Only the message and
// code of Stripe's answer are kept: the error's own text is its whole JSON,
// which may hold a PaymentIntent with its client secret. A request Stripe
// refused as invalid is EINVALID; a rejected key, a conflict, a rate limit,
// a server error or no answer at all is EPSP.
func apiError(op string, err error) error {
	var se *stripego.Error
	if !errors.As(err, &se) {
		return pay.NoAnswer("stripe", op, err)
	}
	switch {
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden:
		return pay.Errorf(pay.EPSP, "stripe %s: the API key was refused (HTTP %d)", op, se.HTTPStatusCode)
	case se.Type == stripego.ErrorTypeInvalidRequest && (se.HTTPStatusCode == http.StatusBadRequest || se.HTTPStatusCode == http.StatusNotFound):
		return pay.Errorf(pay.EINVALID, "stripe %s: %s", op, errorText(se))
	default:
		return pay.Errorf(pay.EPSP, "stripe %s: %s (HTTP %d)", op, errorText(se), se.HTTPStatusCode)
	}
}

// errorText is the code and message of a Stripe error, cut to a length that
// fits a log line and a client answer.
func errorText(se *stripego.Error) string {
	msg := se.Msg
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	if se.Code != "" {
		return string(se.Code) + ": " + msg
	}
	if msg == "" {
		return string(se.Type)
	}
	return msg
}

// ParseWebhook verifies the Stripe-Signature header with the endpoint's
// secret and the tolerance (stripe-go's webhook.ConstructEventWithOptions:
// the timestamp's age is measured with the wall clock, not now) and maps
// the event (see the package documentation). A missing, malformed or
// wrong signature or a stale timestamp is ESIGNATURE; a signed body that is
// not a Stripe event, or an event that lacks what paystate needs, is
// EINVALID; an event type paystate does not map is Ignore.
func (p *Provider) ParseWebhook(body []byte, header http.Header, now time.Time) (pay.WebhookEvent, error) {
	sigs := header.Values(HeaderSignature)
	switch {
	case len(sigs) == 0 || sigs[0] == "":
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "missing %s header", HeaderSignature)
	case len(sigs) > 1:
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "%s header given more than once", HeaderSignature)
	}
	ev, err := webhook.ConstructEventWithOptions(body, sigs[0], p.webhookSecret, webhook.ConstructEventOptions{
		Tolerance:                p.tolerance,
		IgnoreAPIVersionMismatch: true,
	})
	switch {
	case errors.Is(err, webhook.ErrTooOld):
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "%s timestamp is older than the tolerance (%s)", HeaderSignature, p.tolerance)
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader):
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "malformed %s header", HeaderSignature)
	case errors.Is(err, webhook.ErrNoValidSignature):
		return pay.WebhookEvent{}, pay.Errorf(pay.ESIGNATURE, "no matching signature in %s header", HeaderSignature)
	case err != nil:
		// The signature held: the signed body is not a Stripe event.
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event: %s", cut(err.Error(), 200))
	}
	e, err := mapEvent(ev)
	if err != nil {
		return pay.WebhookEvent{}, err
	}
	if !p.checkout.AdoptPaymentLinks {
		e.Adopt = nil
	}
	p.checkVersion(ev.APIVersion, e)
	return e, nil
}

// object is what paystate reads of an event's data.object: a
// PaymentIntent or a Charge. payment_intent is a charge's PaymentIntent, an
// id or, when expanded, an object with an id.
type object struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent json.RawMessage   `json:"payment_intent"`
	Refunded      *bool             `json:"refunded"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	// A refund's or a dispute's status, a dispute's reason and evidence
	// deadline.
	Status          string `json:"status"`
	Reason          string `json:"reason"`
	EvidenceDetails *struct {
		DueBy int64 `json:"due_by"`
	} `json:"evidence_details"`
	// A Checkout Session's total and payment status (its currency is
	// Currency, its PaymentIntent PaymentIntent).
	AmountTotal   int64  `json:"amount_total"`
	PaymentStatus string `json:"payment_status"`
	// A Payment Link's session: the link (an id or an expanded object),
	// the merchant's reference and the customer.
	PaymentLink       json.RawMessage `json:"payment_link"`
	ClientReferenceID string          `json:"client_reference_id"`
	Customer          json.RawMessage `json:"customer"`
	CustomerEmail     string          `json:"customer_email"`
	CustomerDetails   *struct {
		Email string `json:"email"`
	} `json:"customer_details"`
}

// mapEvent maps a verified Stripe event to paystate's event.
func mapEvent(ev stripego.Event) (pay.WebhookEvent, error) {
	if ev.ID == "" {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event: id is required")
	}
	if err := pay.ValidateText("id", ev.ID, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	if ev.Type == "" {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: type is required", ev.ID)
	}
	if err := pay.ValidateText("type", string(ev.Type), maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	if ev.Created <= 0 {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: created must be a positive unix time", ev.ID)
	}
	e := pay.WebhookEvent{EventID: ev.ID, Type: string(ev.Type), OccurredAt: time.Unix(ev.Created, 0).UTC()}

	var want string // the object the event type carries
	switch e.Type {
	case TypeSucceeded:
		e.Status, want = pay.Captured, "payment_intent"
	case TypeCanceled:
		e.Status, want = pay.Failed, "payment_intent"
	case TypeProcessing:
		e.Status, want = pay.Processing, "payment_intent"
	case TypeRequiresAction:
		e.Status, want = pay.RequiresAction, "payment_intent"
	case TypePaymentFailed:
		e.StepKind, want = pay.StepFailedAttempt, "payment_intent"
	case TypeChargeRefunded:
		want = "charge"
	case TypeChargeRefundUpdated, TypeRefundUpdated, TypeRefundFailed:
		want = "refund"
	case TypeDisputeCreated, TypeDisputeUpdated, TypeDisputeClosed:
		want = "dispute"
	case TypeSessionCompleted, TypeSessionAsyncSucceeded, TypeSessionAsyncFailed, TypeSessionExpired:
		want = "checkout.session"
	default:
		e.Ignore = true
		return e, nil
	}

	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: data.object is required", ev.ID)
	}
	var obj object
	if err := json.Unmarshal(ev.Data.Raw, &obj); err != nil {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: data.object: %s", ev.ID, cut(err.Error(), 200))
	}
	if obj.Object != want {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: %s carries a %q object, want %s", ev.ID, e.Type, cut(obj.Object, 40), want)
	}
	if obj.ID == "" {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: data.object.id is required", ev.ID)
	}
	e.PaymentID = obj.Metadata[MetadataPaymentID]
	if err := pay.ValidateText("data.object.metadata."+MetadataPaymentID, e.PaymentID, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	// Every PaymentIntent paystate creates carries its payment id: one
	// without it is someone else's unless its id is a known provider_ref.
	e.Untagged = e.PaymentID == ""
	// A PaymentIntent's amount, or a charge's (the amount charged, before
	// refunds), is evidence finalize checks against the payment.
	if obj.Amount < 0 {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: data.object.amount must not be negative", ev.ID)
	}
	e.Amount, e.Currency = obj.Amount, strings.ToUpper(obj.Currency)
	if e.Currency != "" && pay.ValidateCurrency(e.Currency) != nil {
		return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: data.object.currency %q is not a currency code", ev.ID, cut(obj.Currency, 40))
	}

	switch want {
	case "payment_intent":
		e.ProviderRef = obj.ID
	case "checkout.session":
		if err := sessionEvent(ev.ID, &e, obj); err != nil {
			return pay.WebhookEvent{}, err
		}
	case "refund", "dispute":
		if err := moneyEvent(ev.ID, &e, obj, want); err != nil {
			return pay.WebhookEvent{}, err
		}
	default:
		ref, err := intentRef(obj.PaymentIntent)
		if err != nil {
			return pay.WebhookEvent{}, pay.Errorf(pay.EINVALID, "stripe event %s: data.object.payment_intent: %s", ev.ID, err)
		}
		// A charge made without a PaymentIntent and without paystate's
		// metadata is not paystate's: Untagged with no reference.
		e.ProviderRef = ref
		if obj.Refunded != nil && *obj.Refunded {
			e.Status = pay.Refunded
		} else {
			// A partial refund made at Stripe: evidence, not a transition.
			e.StepKind = pay.StepIgnoredEvent
		}
	}
	if err := pay.ValidateText("data.object.id", e.ProviderRef, maxIDLen); err != nil {
		return pay.WebhookEvent{}, err
	}
	if want != "checkout.session" {
		// The reference is a PaymentIntent's: on a checkout payment, its
		// second reference (pay.Observation.SecondRef).
		e.SecondRef = e.ProviderRef
	}
	return e, nil
}

// intentRef reads a charge's payment_intent: null, an id, or an expanded
// object with an id.
func intentRef(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err == nil {
		return id, nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.ID == "" {
		return "", errors.New("must be an id or an object with an id")
	}
	return obj.ID, nil
}

// checkVersion counts an event of another API release train than the
// library's and logs the first one of each version.
func (p *Provider) checkVersion(v string, e pay.WebhookEvent) {
	if train(v) == train(stripego.APIVersion) {
		return
	}
	versionMismatches.Inc()
	v = cut(v, 40)
	if _, seen := p.warned.LoadOrStore(v, true); seen {
		return
	}
	log := p.Logger.Warn().Str("event_id", e.EventID).Str("type", e.Type).
		Str("api_version", v).Str("library_api_version", stripego.APIVersion)
	if e.PaymentID != "" {
		log = log.Str("payment_id", e.PaymentID)
	}
	log.Msg("stripe webhook of another API version accepted; create the webhook endpoint with the library's API version")
}

// train is the release train of an API version ("2026-03-25.dahlia" →
// "dahlia"); versions from before release trains have none.
func train(v string) string {
	if _, t, ok := strings.Cut(v, "."); ok {
		return t
	}
	return ""
}

// cut shortens s to at most n bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// DisputeStatusOf maps a Stripe dispute status to a dispute status; ok is
// false for a status paystate does not know. An inquiry's statuses
// (warning_*) map as a chargeback's; an inquiry closed without becoming
// one (warning_closed), or a dispute closed because the charge was
// refunded (charge_refunded), is won: the disputed amount is not lost.
func DisputeStatusOf(s string) (pay.DisputeStatus, bool) {
	switch s {
	case "needs_response", "warning_needs_response":
		return pay.DisputeNeedsResponse, true
	case "under_review", "warning_under_review":
		return pay.DisputeUnderReview, true
	case "won", "warning_closed", "charge_refunded":
		return pay.DisputeWon, true
	case "lost":
		return pay.DisputeLost, true
	}
	return "", false
}

// moneyEvent fills in the event about a refund or a dispute (kind): the
// object's payment_intent is the payment's provider_ref, its amount is
// the refund's or dispute's (not evidence about the payment).
func moneyEvent(id string, e *pay.WebhookEvent, obj object, kind string) error {
	ref, err := intentRef(obj.PaymentIntent)
	if err != nil {
		return pay.Errorf(pay.EINVALID, "stripe event %s: data.object.payment_intent: %s", id, err)
	}
	e.ProviderRef = ref
	amount := obj.Amount
	e.Amount = 0
	if kind == "refund" {
		st, ok := RefundStatusOf(stripego.RefundStatus(obj.Status))
		if !ok {
			return pay.Errorf(pay.EINVALID, "stripe event %s: refund status %q is not one paystate knows", id, cut(obj.Status, 40))
		}
		c := &pay.RefundChange{ProviderRef: obj.ID, Amount: amount, Status: st}
		rid := obj.Metadata[MetadataRefundID]
		if err := pay.ValidateText("data.object.metadata."+MetadataRefundID, rid, maxIDLen); err != nil {
			return err
		}
		c.ID = rid
		e.Refund = c
		return nil
	}
	st, ok := DisputeStatusOf(obj.Status)
	if !ok {
		return pay.Errorf(pay.EINVALID, "stripe event %s: dispute status %q is not one paystate knows", id, cut(obj.Status, 40))
	}
	if err := pay.ValidateText("data.object.reason", obj.Reason, pay.MaxRefundReason); err != nil {
		return err
	}
	d := &pay.DisputeChange{ID: obj.ID, Amount: amount, Currency: e.Currency, Reason: obj.Reason, Status: st}
	if obj.EvidenceDetails != nil && obj.EvidenceDetails.DueBy > 0 {
		d.EvidenceDueBy = time.Unix(obj.EvidenceDetails.DueBy, 0).UTC()
	}
	// A dispute carries no metadata of paystate's: its PaymentIntent,
	// when paystate knows it, names the payment.
	e.Dispute, e.Untagged = d, true
	return nil
}
