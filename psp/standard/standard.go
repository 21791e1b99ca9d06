// Package standard is the report-mode provider: the merchant's own code
// calls its PSP and reports the answer to paystate (POST
// /v1/payments/{id}/sync), and any PSP bridge that speaks Standard Webhooks
// feeds paystate its webhooks in the mock's wire format (see package
// stdwebhook), signed with providers.standard.webhook_secret.
//
// Create calls no PSP: the payment stays created until a report or a
// webhook. A refund calls no PSP either: it is recorded pending (the
// merchant's code refunds at its PSP, passing paystate's refund id) and
// settled by a signed payment.refund.succeeded or payment.refund.failed
// webhook whose data.refund is {id, amount}. Disputes arrive as
// payment.dispute.created and payment.dispute.closed. There is no status
// API (EUNSUPPORTED): the sweeper resolves these payments from the
// archived webhook history. A webhook finds its payment by
// data.payment_id (paystate's id, which the merchant passes to its PSP as
// metadata) or by data.provider_ref.
package standard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
)

// Name is the provider's name, in configuration and in /webhooks/standard.
const Name = "standard"

// Config is the [providers.standard] section of the configuration, plus the
// webhook tolerance of [webhook_inbox].
type Config struct {
	// WebhookSecret verifies the webhooks ("whsec_" + base64). Required.
	WebhookSecret string
	// Tolerance is how far a webhook's timestamp may be from now; 0 means
	// stdwebhook.DefaultTolerance.
	Tolerance time.Duration
}

// Provider is the report-mode provider. It implements pay.Provider, holds
// no state and is safe for concurrent use.
type Provider struct {
	verifier *stdwebhook.Verifier
}

var _ pay.Provider = (*Provider)(nil)

// New returns a report-mode provider. A missing or malformed secret is an
// error naming providers.standard.webhook_secret.
func New(cfg Config) (*Provider, error) {
	if cfg.WebhookSecret == "" {
		return nil, errors.New("providers.standard.webhook_secret: required to verify the webhooks")
	}
	v, err := stdwebhook.NewVerifier(cfg.WebhookSecret, cfg.Tolerance)
	if err != nil {
		return nil, fmt.Errorf("providers.standard.webhook_secret: %w", err)
	}
	return &Provider{verifier: v}, nil
}

// Name returns "standard".
func (p *Provider) Name() string { return Name }

// Create calls no PSP: it answers the payment's own status (created for a
// new payment), so the payment waits for a report or a webhook.
func (p *Provider) Create(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	st := pm.Status
	if st == "" {
		st = pay.Created
	}
	return pay.PSPResult{
		Status:      st,
		ProviderRef: pm.ProviderRef,
		Found:       true,
		Raw:         "standard: report mode, no PSP call",
	}, nil
}

// Refund calls no PSP: the refund is pending until the bridge reports its
// outcome (payment.refund.succeeded or payment.refund.failed, data.refund
// naming paystate's refund id or the PSP's reference).
func (p *Provider) Refund(ctx context.Context, pm pay.Payment, r pay.Refund, key string) (pay.RefundResult, error) {
	return pay.RefundResult{Status: pay.RefundPending, Found: true, Raw: "standard: report mode, no PSP call"}, nil
}

// RefundStatus is EUNSUPPORTED: the provider has no status API; a
// pending refund waits for its webhook.
func (p *Provider) RefundStatus(ctx context.Context, pm pay.Payment, r pay.Refund) (pay.RefundResult, error) {
	return pay.RefundResult{}, pay.Errorf(pay.EUNSUPPORTED, "provider standard has no status API")
}

// Status is EUNSUPPORTED: the provider has no status API, so the sweeper
// uses the archived webhook history.
func (p *Provider) Status(ctx context.Context, pm pay.Payment) (pay.PSPResult, error) {
	return pay.PSPResult{}, pay.Errorf(pay.EUNSUPPORTED, "provider standard has no status API")
}

// Cancel is EUNSUPPORTED: report mode calls no PSP, so the sweeper expires
// an open payment itself.
func (p *Provider) Cancel(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	return pay.NoCancel(Name)
}

// Flow accepts only "": the merchant's code takes the payment its own way.
func (p *Provider) Flow(pm pay.Payment) (string, error) { return pay.OneFlow(Name, pm) }

// ParseWebhook verifies a Standard Webhooks signature with the configured
// secret and parses the body (see stdwebhook.Verifier.Parse).
func (p *Provider) ParseWebhook(body []byte, header http.Header, now time.Time) (pay.WebhookEvent, error) {
	return p.verifier.Parse(body, header, now)
}
