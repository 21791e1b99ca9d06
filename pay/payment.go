package pay

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxOrderIDLen is the longest order id accepted, in bytes.
const MaxOrderIDLen = 128

// MaxAmount is the largest amount of one payment, in minor units: 10^15
// (ten trillion euros in cents). The ledger sums amounts in int64, whose
// maximum is about 9.2·10^18, so at least 9,000 payments of the largest
// amount fit in one account before the ledger refuses a posting; no real
// charge comes near it.
const MaxAmount int64 = 1_000_000_000_000_000

// Customer is who pays. ID is needed for loyalty, Email for receipts.
type Customer struct {
	ID    string
	Email string
}

// Payment is paystate's record of one charge.
type Payment struct {
	ID          string // "pay_" + ULID
	OrderID     string
	Amount      int64 // minor units, > 0
	Currency    string
	Customer    Customer
	Provider    string
	ProviderRef string
	// SecondRef is a second PSP reference that also finds the payment
	// (PaymentByRef): the PSP's object that holds the money under
	// ProviderRef (a Stripe Checkout Session's PaymentIntent, a PayPal
	// order's capture), kept once an observation names it. "" otherwise.
	SecondRef    string
	Status       Status
	Version      uint64
	ClientSecret string // sensitive: see finalize.View
	RedirectURL  string // sensitive: see finalize.View
	ReturnURL    string
	// Flow is how the provider takes the payment when it offers more than
	// one way (Provider.Flow): Stripe's "payment_intent" or "checkout"; "" for a
	// provider with one way. Set at creation, never changed.
	Flow string
	// Description is the merchant's text about what is paid for, shown to
	// the customer where the provider shows one (a Stripe Checkout line
	// item); optional.
	Description string
	// AmountRefunded is the sum of the payment's succeeded refunds, and
	// AmountRefundPending that of its pending ones: finalize moves them
	// with the refunds, and their sum never exceeds Amount (Refundable).
	AmountRefunded      int64
	AmountRefundPending int64
	// Dispute is the status of the payment's dispute (DisputeOfPayment of
	// its disputes), "" if it has none: finalize sets it with every
	// change of a dispute. While it is open or lost the payment cannot be
	// refunded (RefundBlocked).
	Dispute   DisputeStatus
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Source says which path made an observation.
type Source string

const (
	SourceAPI     Source = "api"     // the merchant API created the payment
	SourceSync    Source = "sync"    // the synchronous PSP answer to a charge or refund
	SourceReport  Source = "report"  // the merchant reported a PSP answer (/sync)
	SourceWebhook Source = "webhook" // a PSP webhook
	SourceSweeper Source = "sweeper" // the reconciliation sweeper
	SourceReview  Source = "review"  // a human resolving a review item
	// SourcePaymentLink: the PSP's evidence of money taken on a page
	// paystate did not create (a Stripe Payment Link) made the payment.
	SourcePaymentLink Source = "payment_link"
)

// Observation is one report of a payment's status, from any source. It is
// the only input of finalize.
type Observation struct {
	PaymentID   string
	Source      Source
	Status      Status
	ProviderRef string // optional: set when the PSP id becomes known
	// SecondRef is the PSP's reference of the object that holds the
	// money (Stripe's PaymentIntent, PayPal's capture), where the PSP
	// names it: on an observation of what holds it (ProviderRef a Checkout
	// Session's, a PayPal order's), and
	// on one of that object itself (ProviderRef the same, or "" where the
	// PSP names only that object: a PayPal refund naming its capture).
	// Equal to ProviderRef on a payment that is not on a hosted page, it
	// is the same object and not a second reference (Payment.SecondRef).
	SecondRef       string
	ClientSecret    string // optional
	RedirectURL     string // optional
	Provider        string // with EventID: the provider the event came from
	EventID         string // optional: a webhook event, recorded as processed
	ExpectedVersion uint64 // optional: the version the caller read; 0 = none
	LeaseToken      uint64 // optional: the caller's lease; 0 = none
	Note            string // optional: free text for the timeline
	// Amount and Currency are what the PSP says the payment is for, when it
	// says it (0 and "" = not reported). An observation whose amount or
	// currency differs from the payment's is not applied: the payment goes
	// on the review queue (ReasonAmountMismatch). Currencies are compared
	// case-insensitively (Stripe sends them in lower case).
	Amount   int64
	Currency string
	// Refund, when set, makes the observation one about a refund of the
	// payment (a merchant's request, the PSP's answer or webhook, the
	// sweeper): Status is then "" and the payment's status moves only
	// when the refund completes it (captured → refunded).
	Refund *RefundChange
	// Dispute, when set, makes the observation one about a dispute of the
	// payment; Status is then "" and the payment's status does not move.
	Dispute *DisputeChange
}

// Result is what finalize did with an observation.
type Result struct {
	Payment   Payment // the committed payment
	Decision  Decision
	Flipped   bool // the stored status changed (a real transition)
	Conflict  bool // the expected version did not match; the rules ran on the fresh record
	Stale     bool // the observation was older than the stored status and was ignored
	Anomaly   bool // conflicting terminal outcomes: the payment is on the review queue
	Duplicate bool // the payment already had this status, or the event was processed before
	// Rejected is the review reason (ReasonAmountMismatch,
	// ReasonProviderRefConflict) when the observation contradicted the
	// payment and was not applied (Decision then says what the state
	// machine would have done); "" otherwise.
	Rejected string
	// Refund and Dispute are the refund or dispute an observation of one
	// is about, as committed.
	Refund  Refund
	Dispute Dispute
}

// Step kinds in a payment's timeline.
const (
	StepCreated         = "created"          // the payment was stored (version 1)
	StepTransition      = "transition"       // the status changed
	StepUpdate          = "update"           // same status, new provider data (version bumped)
	StepDuplicate       = "duplicate"        // an observation of the current status
	StepStale           = "stale"            // an older observation, ignored
	StepConflict        = "version_conflict" // the caller's expected version was behind
	StepAnomaly         = "conflicting_terminal"
	StepFailedAttempt   = "failed_attempt"   // the PSP reported a failed attempt; status unchanged
	StepReview          = "review"           // put on the review queue
	StepPSPError        = "psp_error"        // a PSP call failed
	StepIgnoredEvent    = "ignored_event"    // a webhook event that carries no status
	StepRefundRequested = "refund_requested" // a refund was requested or learnt from the PSP (pending)
)

// Step is one entry of a payment's timeline. Steps that wrote the payment
// (created, transition, update) carry the version they wrote; the others
// carry the version they saw.
type Step struct {
	PaymentID string
	Seq       uint64 // position in the payment's timeline, from 1
	At        time.Time
	Source    Source
	Kind      string
	From      Status
	To        Status
	Version   uint64
	EventID   string
	Note      string
}

// Wrote reports whether the step wrote a new version of the payment.
func (s Step) Wrote() bool {
	return s.Kind == StepCreated || s.Kind == StepTransition || s.Kind == StepUpdate || MoneyStep(s.Kind)
}

// ValidateOrderID checks the merchant's order reference.
func ValidateOrderID(s string) error {
	switch {
	case s == "":
		return Invalidf("order_id", "order_id is required")
	case len(s) > MaxOrderIDLen:
		return Invalidf("order_id", "order_id is longer than %d bytes", MaxOrderIDLen)
	case !utf8.ValidString(s):
		return Invalidf("order_id", "order_id is not valid UTF-8")
	}
	for _, r := range s {
		if !printable(r) {
			return Invalidf("order_id", "order_id contains a control, format or bidirectional character (%U)", r)
		}
	}
	return nil
}

// ValidateText checks an optional free-text field (customer id, e-mail).
func ValidateText(field, s string, max int) error {
	if len(s) > max {
		return Invalidf(field, "%s is longer than %d bytes", field, max)
	}
	if !utf8.ValidString(s) {
		return Invalidf(field, "%s is not valid UTF-8", field)
	}
	for _, r := range s {
		if !printable(r) {
			return Invalidf(field, "%s contains a control, format or bidirectional character (%U)", field, r)
		}
	}
	return nil
}

// printable rejects control characters, format characters (which include the
// bidirectional overrides and zero-width characters) and the replacement rune.
func printable(r rune) bool {
	return r != utf8.RuneError && !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) && unicode.IsPrint(r) || r == ' '
}

// ValidateCurrency checks an ISO 4217 code: three upper-case ASCII letters.
func ValidateCurrency(s string) error {
	if len(s) != 3 || strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return Invalidf("currency", "currency must be an ISO 4217 code of three upper-case letters, got %q", s)
	}
	return nil
}

// ValidateAmount checks an amount in minor units: positive and at most
// MaxAmount.
func ValidateAmount(n int64) error {
	if n <= 0 {
		return Invalidf("amount", "amount must be a positive number of minor units, got %d", n)
	}
	if n > MaxAmount {
		return Invalidf("amount", "amount must be at most %d minor units (10^15), got %d", MaxAmount, n)
	}
	return nil
}

// EventType is the outbox and merchant-webhook type of a transition to s.
func EventType(s Status) string { return "payment." + string(s) }

// EventTypes lists every merchant event type, in the order of the API
// document's catalog: "payment." and each status (EventType), then the
// events of refunds and disputes. A merchant endpoint subscribes to some
// of them ([[webhooks]] events); nothing else is ever sent.
func EventTypes() []string {
	types := make([]string, 0, len(Statuses)+4)
	for _, s := range Statuses {
		types = append(types, EventType(s))
	}
	return append(types, EventRefundSucceeded, EventRefundFailed, EventDisputeCreated, EventDisputeClosed)
}

// String formats a payment for logs; it never includes secrets.
func (p Payment) String() string {
	return fmt.Sprintf("%s(%s v%d)", p.ID, p.Status, p.Version)
}

// ValidateEmail checks an optional e-mail address: printable, at most 254
// bytes, one "@" with something on both sides.
func ValidateEmail(field, s string) error {
	if s == "" {
		return nil
	}
	if err := ValidateText(field, s, 254); err != nil {
		return err
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 || strings.ContainsAny(s, " <>,;\"") {
		return Invalidf(field, "%s is not an e-mail address", field)
	}
	return nil
}
