package pay

import (
	"context"
	"net/http"
	"time"
)

// PSPResult is a provider's answer about a payment.
type PSPResult struct {
	Status       Status
	ProviderRef  string
	SecondRef    string // see Observation.SecondRef
	ClientSecret string
	RedirectURL  string
	Found        bool   // false: the PSP does not know the payment
	Raw          string // the answer as text, kept as evidence (no secrets)
	// Amount and Currency are what the PSP holds the payment for, where
	// its answer says so (0 and "" = not said); finalize checks them
	// against the payment.
	Amount   int64
	Currency string
	// PaymentID is paystate's id of the payment where the PSP's answer
	// echoes it (metadata.paystate_payment_id), "" otherwise: the pull
	// path finds a payment whose reference it did not record yet by it.
	PaymentID string
	// Money is what the answer says of the payment's refunds and
	// disputes, for a provider whose webhooks only say "fetch the
	// payment" (Mollie): the pull path finalizes each one that differs
	// from what paystate holds. Nil when the answer does not say. (A
	// pointer keeps PSPResult comparable.)
	Money *MoneyChanges
}

// MoneyChanges are a PSP answer's refunds and disputes (chargebacks) of
// one payment, each as an observation would carry it.
type MoneyChanges struct {
	Refunds  []RefundChange
	Disputes []DisputeChange
}

// WebhookEvent is a verified, parsed PSP webhook.
type WebhookEvent struct {
	EventID     string
	Type        string
	PaymentID   string // paystate's id, when the PSP echoes it (metadata)
	ProviderRef string
	SecondRef   string // see Observation.SecondRef
	Status      Status // "" when the event carries no status change
	StepKind    string // for events without status: the timeline step kind (e.g. StepFailedAttempt)
	OccurredAt  time.Time
	// Amount and Currency are what the event says the payment is for (0
	// and "" = not said); finalize checks them against the payment.
	Amount   int64
	Currency string
	// Adopt, when set, makes the event create its payment if paystate
	// does not know it (SourcePaymentLink), in the transaction that
	// applies it.
	Adopt *Adoption
	// Refund and Dispute are set on an event about a refund or a
	// dispute of the payment (Status is "" then).
	Refund  *RefundChange
	Dispute *DisputeChange
	// Ignore marks an event type paystate does not act on (for example a
	// Stripe event type it does not map): it is answered 2xx, counted and
	// not stored.
	Ignore bool
	// Untagged marks an event whose object carries none of the tags
	// paystate puts on every object it creates at the PSP (Stripe's
	// metadata.paystate_payment_id). If its ProviderRef is unknown too,
	// paystate did not create the object: the event is answered 2xx,
	// counted in paystate_webhooks_ignored_total{reason="not_ours"} and not
	// stored. Providers whose events may name a payment by reference only
	// (standard) never set it.
	Untagged bool
	// Pull marks a trigger, not evidence: the webhook only says that the
	// payment named by ProviderRef (and PaymentID, when the event names
	// it) changed at the PSP. paystate stores the trigger, answers 2xx,
	// and a worker asks the PSP (Provider.Status) under the payment's
	// lease and finalizes that answer (finalize.Pull). Status, Refund and
	// Dispute are not read on a pull event.
	Pull bool
}

// Provider is a PSP adapter.
type Provider interface {
	// Name is the provider's configured name ("mock", "stripe", ...).
	Name() string
	// Create charges the payment. key is derived from business data
	// ("charge-<payment_id>"), so a retry cannot charge twice. A provider
	// in report mode returns the payment's status unchanged.
	Create(ctx context.Context, p Payment, key string) (PSPResult, error)
	// Refund refunds r, a part or all of payment p, at the PSP under key
	// (RefundKey: "refund-<refund id>"), so a retry cannot refund twice.
	// Its answer is the refund's status: succeeded, pending (accepted,
	// the outcome follows by webhook or RefundStatus) or failed. A
	// provider in report mode calls no PSP and answers pending;
	// EUNSUPPORTED if it cannot refund.
	Refund(ctx context.Context, p Payment, r Refund, key string) (RefundResult, error)
	// RefundStatus asks the PSP for the status of refund r of payment p
	// (the sweeper, for a refund left pending); EUNSUPPORTED if the
	// provider has no API for it.
	RefundStatus(ctx context.Context, p Payment, r Refund) (RefundResult, error)
	// Status asks the PSP for the payment's status; EUNSUPPORTED if the
	// provider has no status API.
	Status(ctx context.Context, p Payment) (PSPResult, error)
	// ParseWebhook verifies the signature of a webhook (ESIGNATURE, with the
	// timestamp checked against now) and parses it (EINVALID).
	ParseWebhook(body []byte, header http.Header, now time.Time) (WebhookEvent, error)
	// Cancel cancels an open payment at the PSP under key
	// ("cancel-<payment_id>") and answers what the PSP then holds: the
	// sweeper expires a Stripe PaymentIntent this way and finalizes the
	// answer (canceled → failed, succeeded → captured). EUNSUPPORTED if
	// the PSP has no cancel API: the sweeper then expires the payment
	// itself.
	Cancel(ctx context.Context, p Payment, key string) (PSPResult, error)
	// Flow resolves the flow of a payment about to be created (p.Flow as
	// the create asks, "" = the provider's default) to the one it is made
	// with, stored in Payment.Flow, and checks that p can be taken that
	// way: EINVALID naming the field ("flow", "return_url") otherwise.
	// Stripe takes a payment in more than one way (a PaymentIntent paid on
	// the merchant's page, or a Checkout Session on Stripe's); a provider
	// that takes it one way only answers OneFlow.
	Flow(p Payment) (string, error)
}

// OneFlow is Provider.Flow of a provider that takes payments one way only:
// "" for a payment that asks no flow, else EINVALID naming "flow".
func OneFlow(provider string, p Payment) (string, error) {
	if p.Flow != "" {
		return "", Invalidf("flow", "provider %q takes payments one way only: leave flow out", provider)
	}
	return "", nil
}

// CheckCreate checks what Provider.Create needs before it calls its PSP:
// the idempotency key (keyName is what the PSP calls it), the payment id,
// the amount and the currency. The errors are EINVALID, prefixed with the
// provider's name.
func CheckCreate(provider, keyName string, p Payment, key string) error {
	switch {
	case key == "":
		return Errorf(EINVALID, "%s: %s is required", provider, keyName)
	case p.ID == "":
		return Errorf(EINVALID, "%s: payment id is required", provider)
	}
	if err := ValidateAmount(p.Amount); err != nil {
		return err
	}
	return ValidateCurrency(p.Currency)
}

// NoCancel is Provider.Cancel of a provider whose PSP has no cancel API.
func NoCancel(provider string) (PSPResult, error) {
	return PSPResult{}, Errorf(EUNSUPPORTED, "provider %s has no cancel API", provider)
}

// ProviderLabel is the value of a provider label on a metric: name if it is
// a configured provider (a key of known), else "unknown". Every metric with
// a provider label goes through it, so a request naming random providers
// (POST /webhooks/<anything>) cannot add series.
func ProviderLabel(name string, known map[string]Provider) string {
	if _, ok := known[name]; ok {
		return name
	}
	return "unknown"
}

// Flows of Payment.Flow.
const (
	// FlowPaymentIntent: the customer pays on the merchant's page (Stripe
	// PaymentIntents with Stripe.js).
	FlowPaymentIntent = "payment_intent"
	// FlowCheckout: the customer pays on a page the PSP hosts (a Stripe
	// Checkout Session), under the key "checkout-<payment_id>".
	FlowCheckout = "checkout"
	// FlowPaymentLink: the customer paid on a page the PSP hosts that
	// paystate did not create (a Stripe Payment Link's Checkout
	// Session): the payment was made from the PSP's evidence (Adoption).
	FlowPaymentLink = "payment_link"
)

// OnHostedPage reports whether p is paid on a page the PSP hosts
// (FlowCheckout, FlowPaymentLink): its ProviderRef is the page's, and the
// PSP object that holds the money under it is its SecondRef.
func (p Payment) OnHostedPage() bool { return p.Flow == FlowCheckout || p.Flow == FlowPaymentLink }

// Adoption is a payment a PSP event makes: money taken on a page paystate
// did not create (a Stripe Payment Link), with the PSP's evidence. The
// payment's provider references are the event's.
type Adoption struct {
	OrderID  string
	Amount   int64
	Currency string
	Customer Customer
	Flow     string
}

// MaxDescription is the longest Payment.Description, in bytes.
const MaxDescription = 500
