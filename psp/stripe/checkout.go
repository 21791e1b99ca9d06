package stripe

// Checkout Sessions: a payment taken on the page Stripe hosts (Flow
// pay.FlowCheckout) instead of with a PaymentIntent on the merchant's page.
//
// Create makes a session in mode payment with one line item (the payment's
// description, else its order id; its amount and currency),
// client_reference_id and metadata.paystate_payment_id = the payment id,
// the same metadata on the session's PaymentIntent
// (payment_intent_data.metadata), customer_email from the customer,
// success_url and cancel_url from the payment's return_url or
// CheckoutConfig, and expires_at = the payment's creation + ExpireAfter,
// within Stripe's 30 minutes to 24 hours, under the key
// "checkout-<payment_id>". expires_at is derived from the payment, not
// from the clock, so a create resumed with the same key sends the same
// parameters (Stripe refuses a key reused with others).
//
// A session's status maps to a payment status as follows:
//
//	session status   payment_status        payment status    redirect URL
//	open             (any)                 requires_action   the session's url
//	complete         paid                  captured          -
//	complete         unpaid                processing        -
//	complete         no_payment_required   (EPSP: a human decides)
//	expired          (any)                 failed            -
//
// A completed but unpaid session is a delayed method (SEPA debit, ...)
// whose outcome comes later: it is never failed on that answer.
//
// Status retrieves the session; Cancel (the sweeper, past
// payment.expire_after) expires it and maps Stripe's answer, or, when
// Stripe refuses because the session is no longer open, retrieves and
// maps it: a session paid meanwhile is captured.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v85"

	"github.com/paystate/paystate/pay"
)

// Bounds of a Checkout Session's expires_at after its creation, Stripe's.
const (
	MinSessionLife = 30 * time.Minute
	MaxSessionLife = 24 * time.Hour
)

// CheckoutConfig is [providers.stripe.checkout].
type CheckoutConfig struct {
	// SuccessURL and CancelURL are where Stripe sends the customer after
	// paying or giving up, for a payment created without return_url.
	SuccessURL string
	CancelURL  string
	// AdoptPaymentLinks makes a completed session of a Payment Link that
	// paystate did not create a payment of its own.
	AdoptPaymentLinks bool
}

// check validates the URLs, naming their keys.
func (c CheckoutConfig) check() error {
	for _, u := range []struct{ key, v string }{
		{"providers.stripe.checkout.success_url", c.SuccessURL},
		{"providers.stripe.checkout.cancel_url", c.CancelURL},
	} {
		if u.v != "" && !absoluteURL(u.v) {
			return fmt.Errorf("%s: must be an absolute http or https URL", u.key)
		}
	}
	return nil
}

// absoluteURL reports whether s is an absolute http or https URL.
func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Flow resolves the flow of a payment about to be created: its own, else
// providers.stripe.flow. A checkout payment needs somewhere to send the
// customer back: its return_url (an absolute http or https URL) or
// providers.stripe.checkout.success_url.
func (p *Provider) Flow(pm pay.Payment) (string, error) {
	flow := pm.Flow
	if flow == "" {
		flow = p.flow
	}
	switch flow {
	case pay.FlowPaymentIntent:
		return flow, nil
	case pay.FlowCheckout:
	default:
		return "", pay.Invalidf("flow", "flow must be %q or %q, got %q", pay.FlowPaymentIntent, pay.FlowCheckout, cut(flow, 40))
	}
	switch {
	case pm.ReturnURL != "" && !absoluteURL(pm.ReturnURL):
		return "", pay.Invalidf("return_url", "return_url must be an absolute http or https URL for a Stripe Checkout payment")
	case pm.ReturnURL == "" && p.checkout.SuccessURL == "":
		return "", pay.Invalidf("return_url", "return_url is required for a Stripe Checkout payment when providers.stripe.checkout.success_url is not set")
	}
	return flow, nil
}

// SessionExpiry is when the Checkout Session of a payment created at
// created expires: created + expireAfter (0: MaxSessionLife), within
// MinSessionLife and MaxSessionLife.
func SessionExpiry(created time.Time, expireAfter time.Duration) time.Time {
	if expireAfter == 0 {
		expireAfter = MaxSessionLife
	}
	return created.Add(min(max(expireAfter, MinSessionLife), MaxSessionLife))
}

// checkoutKey is the key of a payment's Checkout Session create, as
// finalize.CheckoutKey makes it.
func checkoutKey(paymentID string) string { return "checkout-" + paymentID }

// createSession creates the payment's Checkout Session under key
// ("checkout-<payment_id>"); a payment whose session is already known
// (ProviderRef set, a resumed create) gets it retrieved instead.
func (p *Provider) createSession(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if pm.ProviderRef != "" {
		return p.sessionStatus(ctx, pm)
	}
	success, cancel := pm.ReturnURL, pm.ReturnURL
	if success == "" {
		success, cancel = p.checkout.SuccessURL, p.checkout.CancelURL
	}
	if success == "" {
		return pay.PSPResult{}, pay.Invalidf("return_url", "stripe: a Checkout Session needs return_url or providers.stripe.checkout.success_url")
	}
	name := pm.Description
	if name == "" {
		name = pm.OrderID
	}
	params := &stripego.CheckoutSessionCreateParams{
		Mode:              stripego.String(string(stripego.CheckoutSessionModePayment)),
		ClientReferenceID: stripego.String(pm.ID),
		SuccessURL:        stripego.String(success),
		ExpiresAt:         stripego.Int64(SessionExpiry(pm.CreatedAt, p.expireAfter).Unix()),
		LineItems: []*stripego.CheckoutSessionCreateLineItemParams{{
			Quantity: stripego.Int64(1),
			PriceData: &stripego.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripego.String(strings.ToLower(pm.Currency)),
				UnitAmount:  stripego.Int64(pm.Amount),
				ProductData: &stripego.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripego.String(name)},
			},
		}},
		PaymentIntentData: &stripego.CheckoutSessionCreatePaymentIntentDataParams{
			Metadata: map[string]string{MetadataPaymentID: pm.ID},
		},
	}
	if cancel != "" {
		params.CancelURL = stripego.String(cancel)
	}
	if pm.Customer.Email != "" {
		params.CustomerEmail = stripego.String(pm.Customer.Email)
	}
	params.AddMetadata(MetadataPaymentID, pm.ID)
	params.SetIdempotencyKey(key)
	cs, err := p.api.V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		return pay.PSPResult{}, apiError("create Checkout Session", err)
	}
	return sessionResult(cs)
}

// KeyLife is how long Stripe keeps an idempotency key and answers a
// request repeated with it from the first one: at least 24 hours.
const KeyLife = 24 * time.Hour

// sessionStatus retrieves the payment's Checkout Session by its
// provider_ref; a session Stripe does not know is Found false.
//
// A payment whose create answer was lost has no provider_ref, and Stripe
// cannot search sessions by metadata. Within KeyLife of the payment's
// creation its create is issued again with the same key
// ("checkout-<payment_id>") and the same parameters (expires_at is the
// payment's creation + payment.expire_after): Stripe answers with the
// session the lost request made, or, if that request never reached it,
// makes the session now; the session is then retrieved, since a replay
// answers it as it was made. Later the key may be gone and a create would
// make a second session, so the payment is Found false: the sweeper puts
// it on the review queue.
func (p *Provider) sessionStatus(ctx context.Context, pm pay.Payment) (pay.PSPResult, error) {
	if pm.ProviderRef == "" {
		if pm.CreatedAt.IsZero() || p.now().Sub(pm.CreatedAt) >= KeyLife {
			return pay.PSPResult{Found: false, Raw: "stripe: payment " + pm.ID + " has no Checkout Session id, and its create's key may have expired at Stripe"}, nil
		}
		made, err := p.createSession(ctx, pm, checkoutKey(pm.ID))
		if err != nil || made.ProviderRef == "" {
			return made, err
		}
		// A replay answers the session as it was made: ask for it as it
		// is now.
		pm.ProviderRef = made.ProviderRef
	}
	cs, err := p.api.V1CheckoutSessions.Retrieve(ctx, pm.ProviderRef, &stripego.CheckoutSessionRetrieveParams{})
	if isMissing(err) {
		return pay.PSPResult{Found: false, Raw: "stripe checkout_session=" + pm.ProviderRef + " not found"}, nil
	}
	if err != nil {
		return pay.PSPResult{}, apiError("retrieve Checkout Session", err)
	}
	return sessionResult(cs)
}

// errNoPaymentRequired is a completed session that took no money: not a
// capture, not a failure.
var errNoPaymentRequired = errors.New("completed with no payment required")

// SessionStatusOf maps a Checkout Session's status and payment_status to
// a payment status (see the table of checkout.go); ok is false for a
// combination paystate does not decide (no_payment_required, an unknown
// status).
func SessionStatusOf(status stripego.CheckoutSessionStatus, paid stripego.CheckoutSessionPaymentStatus) (pay.Status, bool) {
	switch status {
	case stripego.CheckoutSessionStatusOpen:
		return pay.RequiresAction, true
	case stripego.CheckoutSessionStatusExpired:
		return pay.Failed, true
	case stripego.CheckoutSessionStatusComplete:
		switch paid {
		case stripego.CheckoutSessionPaymentStatusPaid:
			return pay.Captured, true
		case stripego.CheckoutSessionPaymentStatusUnpaid:
			return pay.Processing, true
		}
	}
	return "", false
}

// sessionResult maps a Checkout Session to the provider's answer.
func sessionResult(cs *stripego.CheckoutSession) (pay.PSPResult, error) {
	if cs == nil || cs.ID == "" {
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "stripe: answer without a Checkout Session id")
	}
	st, ok := SessionStatusOf(cs.Status, cs.PaymentStatus)
	if !ok {
		if cs.PaymentStatus == stripego.CheckoutSessionPaymentStatusNoPaymentRequired {
			return pay.PSPResult{}, pay.Errorf(pay.EPSP, "stripe: Checkout Session %s %s", cs.ID, errNoPaymentRequired)
		}
		return pay.PSPResult{}, pay.Errorf(pay.EPSP, "stripe: Checkout Session %s has unknown status %q (payment_status %q)", cs.ID, cut(string(cs.Status), 40), cut(string(cs.PaymentStatus), 40))
	}
	raw := fmt.Sprintf("stripe checkout_session=%s status=%s payment_status=%s", cs.ID, cs.Status, cs.PaymentStatus)
	// The PaymentIntent is evidence here, not a reference: the payment
	// keeps it once an event names it (SPEC §3), and stripe-mock answers
	// every session with one fixed PaymentIntent.
	if cs.PaymentIntent != nil && cs.PaymentIntent.ID != "" {
		raw += " payment_intent=" + cs.PaymentIntent.ID
	}
	r := pay.PSPResult{
		Status: st, ProviderRef: cs.ID, Found: true, Raw: raw,
		Amount: cs.AmountTotal, Currency: strings.ToUpper(string(cs.Currency)),
	}
	if st == pay.RequiresAction {
		r.RedirectURL = cs.URL
	}
	return r, nil
}

// sessionEvent fills in an event about a Checkout Session: its id is the
// payment's provider_ref, its payment_intent the second reference, its
// amount_total and currency the evidence. The status follows the event
// type: completed by the session's payment_status (paid → captured,
// unpaid → processing: a delayed method, never failed on this event,
// no_payment_required → the review queue, StepKind pay.StepReview),
// async_payment_succeeded → captured, async_payment_failed → failed,
// expired → failed.
func sessionEvent(id string, e *pay.WebhookEvent, obj object) error {
	ref, err := intentRef(obj.PaymentIntent)
	if err != nil {
		return pay.Errorf(pay.EINVALID, "stripe event %s: data.object.payment_intent: %s", id, err)
	}
	if err := pay.ValidateText("data.object.payment_intent", ref, maxIDLen); err != nil {
		return err
	}
	if obj.AmountTotal < 0 {
		return pay.Errorf(pay.EINVALID, "stripe event %s: data.object.amount_total must not be negative", id)
	}
	e.ProviderRef, e.SecondRef, e.Amount = obj.ID, ref, obj.AmountTotal
	switch e.Type {
	case TypeSessionCompleted:
		st, ok := SessionStatusOf(stripego.CheckoutSessionStatusComplete, stripego.CheckoutSessionPaymentStatus(obj.PaymentStatus))
		switch {
		case ok:
			e.Status = st
		case obj.PaymentStatus == string(stripego.CheckoutSessionPaymentStatusNoPaymentRequired):
			// Completed without money: neither captured nor failed.
			e.StepKind = pay.StepReview
		default:
			return pay.Errorf(pay.EINVALID, "stripe event %s: payment_status %q is not one paystate knows", id, cut(obj.PaymentStatus, 40))
		}
	case TypeSessionAsyncSucceeded:
		e.Status = pay.Captured
	case TypeSessionAsyncFailed, TypeSessionExpired:
		e.Status = pay.Failed
	}
	if e.Type != TypeSessionCompleted || e.PaymentID != "" {
		return nil
	}
	// A completed session paystate did not tag took money at the
	// merchant's Stripe account: never "not ours". It is an orphan for a
	// human, unless it is a Payment Link's, which the payment it makes
	// (Adopt, with providers.stripe.checkout.adopt_payment_links) records.
	e.Untagged = false
	link, err := intentRef(obj.PaymentLink)
	if err != nil || link == "" {
		return nil
	}
	order := obj.ClientReferenceID
	if pay.ValidateOrderID(order) != nil {
		order = obj.ID
	}
	a := &pay.Adoption{OrderID: order, Amount: obj.AmountTotal, Currency: e.Currency, Flow: pay.FlowPaymentLink}
	if cus, err := intentRef(obj.Customer); err == nil {
		a.Customer.ID = cus
	}
	a.Customer.Email = obj.CustomerEmail
	if d := obj.CustomerDetails; d != nil && d.Email != "" {
		a.Customer.Email = d.Email
	}
	e.Adopt = a
	return nil
}

// expireSession expires a checkout payment's Checkout Session under key
// ("cancel-<payment_id>") and maps what Stripe answers: expired → failed.
// A session that can no longer be expired (it completed meanwhile: Stripe
// answers 400) is retrieved and mapped instead, so a session paid in the
// meantime is captured, never failed. A payment without a session id, or
// a session Stripe does not know, is Found false.
func (p *Provider) expireSession(ctx context.Context, pm pay.Payment, key string) (pay.PSPResult, error) {
	if pm.ProviderRef == "" {
		return p.sessionStatus(ctx, pm)
	}
	params := &stripego.CheckoutSessionExpireParams{}
	params.SetIdempotencyKey(key)
	cs, err := p.api.V1CheckoutSessions.Expire(ctx, pm.ProviderRef, params)
	var se *stripego.Error
	switch {
	case err == nil:
		return sessionResult(cs)
	case isMissing(err):
		return pay.PSPResult{Found: false, Raw: "stripe checkout_session=" + pm.ProviderRef + " not found"}, nil
	case errors.As(err, &se) && se.Type == stripego.ErrorTypeInvalidRequest && se.HTTPStatusCode == http.StatusBadRequest:
		// Too late to expire: Stripe's current answer decides.
		return p.sessionStatus(ctx, pm)
	default:
		return pay.PSPResult{}, apiError("expire Checkout Session", err)
	}
}

// intentOf returns the PaymentIntent that holds the payment's money: its
// provider_ref, or for a checkout payment its second reference, else its
// session's payment_intent as Stripe answers it ("" while the session has
// none: nothing was paid).
func (p *Provider) intentOf(ctx context.Context, pm pay.Payment) (string, error) {
	switch {
	case !pm.OnHostedPage():
		return pm.ProviderRef, nil
	case pm.SecondRef != "":
		return pm.SecondRef, nil
	case pm.ProviderRef == "":
		return "", nil
	}
	cs, err := p.api.V1CheckoutSessions.Retrieve(ctx, pm.ProviderRef, &stripego.CheckoutSessionRetrieveParams{})
	if isMissing(err) {
		return "", nil
	}
	if err != nil {
		return "", apiError("retrieve Checkout Session", err)
	}
	if cs.PaymentIntent == nil {
		return "", nil
	}
	return cs.PaymentIntent.ID, nil
}
