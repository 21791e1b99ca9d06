package pay

import "time"

// ERefundExceeds is the error code of a refund that would take the sum of
// a payment's pending and succeeded refunds past its amount. The store
// refuses it inside the transaction that would insert the refund, so
// concurrent refunds cannot over-refund (HTTP 409).
const ERefundExceeds = "refund_exceeds_amount"

// EChargeDisputed is the error code of a refund requested while the
// payment's dispute is open or was lost (HTTP 409): the customer's bank
// already took or holds the money, and a refund would pay the customer
// twice. A won dispute makes the payment refundable again.
const EChargeDisputed = "charge_disputed"

// ReasonRefundUnresolved is the review reason of a refund left pending
// past sweeper.give_up_after that the PSP does not settle (or cannot say
// about): a human looks at it at the PSP.
const ReasonRefundUnresolved = "refund_unresolved"

// MaxRefundReason is the longest refund reason accepted, in bytes.
const MaxRefundReason = 500

// RefundStatus is the state of one refund. The wire strings are part of
// the contract.
type RefundStatus string

const (
	// RefundPending is set when the refund is requested (before the PSP
	// is called) and kept while the PSP has accepted it without a final
	// answer. The PSP's answer, webhook or the sweeper moves it on. Its
	// amount counts against what may still be refunded.
	RefundPending RefundStatus = "pending"
	// RefundSucceeded is terminal: the money went back to the customer.
	// Its amount is in the payment's AmountRefunded and the ledger.
	RefundSucceeded RefundStatus = "succeeded"
	// RefundFailed is terminal: the PSP refused the refund or it failed
	// after it was accepted. Its amount is free to be refunded again.
	RefundFailed RefundStatus = "failed"
)

// RefundStatuses lists every refund status.
var RefundStatuses = []RefundStatus{RefundPending, RefundSucceeded, RefundFailed}

// Valid reports whether s is a known refund status.
func (s RefundStatus) Valid() bool {
	return s == RefundPending || s == RefundSucceeded || s == RefundFailed
}

// Terminal reports whether s is a final outcome.
func (s RefundStatus) Terminal() bool { return s == RefundSucceeded || s == RefundFailed }

// DecideRefund is the transition table of a refund, the same rules as
// Decide's for a payment: a pending refund takes any outcome; an outcome
// seen again is a duplicate; a terminal refund reported pending is stale
// (the acceptance came after its outcome); succeeded against failed is a
// conflict a human decides.
func DecideRefund(cur, obs RefundStatus) Decision {
	switch {
	case cur == obs:
		return Duplicate
	case !cur.Terminal():
		return Apply
	case !obs.Terminal():
		return Stale
	}
	return ConflictingTerminal
}

// Refund is one refund of a payment: a part (or all) of its amount given
// back to the customer. A payment may have several.
type Refund struct {
	ID          string // "re_" + ULID, assigned by paystate
	PaymentID   string
	Provider    string // the payment's provider
	Amount      int64  // minor units, > 0, in the payment's currency
	Currency    string
	Reason      string
	Status      RefundStatus
	ProviderRef string // the PSP's id of the refund, once known
	// IdemKey is the scoped idempotency key of the merchant request that
	// created it ("" for a refund made at the PSP and learnt from it): a
	// retry of that request finds its refund by it.
	IdemKey string
	// EventID is the outbox record of the refund's outcome
	// (payment.refund.succeeded or .failed): the ledger posting of a
	// succeeded refund carries it.
	EventID   string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RefundChange is what an observation says about one refund (see
// Observation.Refund): a request for a new one, or the PSP's word on one.
type RefundChange struct {
	// ID is paystate's id of the refund; "" for a new one (a request, or
	// a refund made at the PSP) or when only ProviderRef is known.
	ID string
	// ProviderRef is the PSP's id of the refund, when known.
	ProviderRef string
	// Amount is the refund's amount: required for a new refund, evidence
	// for a known one (0 = not said).
	Amount int64
	// Reason is a new refund's reason.
	Reason string
	// Status is the refund's observed status.
	Status RefundStatus
	// IdemKey is a new refund's scoped idempotency key (a merchant
	// request).
	IdemKey string
	// Request marks the merchant's request for a new refund: it must fit
	// in what is left (else ERefundExceeds) and the payment must be
	// captured. A refund learnt from the PSP that does not fit goes on
	// the review queue instead.
	Request bool
}

// RefundResult is a provider's answer to a refund or to a question about
// one.
type RefundResult struct {
	Status      RefundStatus
	ProviderRef string // the PSP's id of the refund
	Found       bool   // false: the PSP does not know the refund
	Raw         string // the answer as text, kept as evidence
}

// RefundKey is the PSP idempotency key of a refund: "refund-<refund id>",
// derived from business data, so stable across retries.
func RefundKey(refundID string) string { return "refund-" + refundID }

// ValidateRefund checks a refund's stored fields.
func ValidateRefund(r Refund) error {
	switch {
	case r.ID == "":
		return Invalidf("id", "refund id is required")
	case r.PaymentID == "":
		return Invalidf("payment_id", "refund %s: payment id is required", r.ID)
	case !r.Status.Valid():
		return Invalidf("status", "refund %s: status %q is not a refund status", r.ID, r.Status)
	case r.CreatedAt.IsZero() || r.UpdatedAt.IsZero():
		return Invalidf("created_at", "refund %s: created_at and updated_at are required", r.ID)
	}
	if err := ValidateAmount(r.Amount); err != nil {
		return err
	}
	return ValidateText("reason", r.Reason, MaxRefundReason)
}

// Refundable returns what is left to refund of p: its amount less its
// succeeded and pending refunds, and 0 while its dispute is open or was
// lost (RefundBlocked).
func (p Payment) Refundable() int64 {
	if p.RefundBlocked() {
		return 0
	}
	return p.Unrefunded()
}

// Unrefunded returns p's amount less its succeeded and pending refunds,
// whatever its dispute: what a refund the PSP reports must fit in.
func (p Payment) Unrefunded() int64 {
	return p.Amount - p.AmountRefunded - p.AmountRefundPending
}

// RefundBlocked reports whether p's dispute forbids a refund: it is open
// (needs_response, under_review) or lost.
func (p Payment) RefundBlocked() bool { return p.Dispute.BlocksRefund() }

// DecideRefundRequest is the one decision about a merchant's request to
// refund amount of p (0: whatever is left): it returns the amount to
// refund, or ECONFLICT unless p is captured, EChargeDisputed while p's
// dispute is open or lost, ERefundExceeds if nothing is left or the
// amount does not fit. finalize makes it in the transaction that creates
// the refund (and before, on a read, to answer without a write); the
// store checks the dispute and the sum again in that transaction
// (CheckRefundRequest, CheckRefundFits). Amounts in its messages are in
// major units (FormatAmount).
func DecideRefundRequest(p Payment, amount int64) (int64, error) {
	left := p.Unrefunded()
	switch {
	case p.Status != Captured:
		return 0, Errorf(ECONFLICT, "payment %s is %s; only a captured payment can be refunded", p.ID, p.Status)
	case p.RefundBlocked():
		return 0, disputedError(p)
	case left <= 0:
		return 0, Errorf(ERefundExceeds, "payment %s has nothing left to refund: %s of %s refunded, %s pending",
			p.ID, FormatAmount(p.AmountRefunded, p.Currency), FormatAmount(p.Amount, p.Currency), FormatAmount(p.AmountRefundPending, p.Currency))
	case amount == 0:
		return left, nil
	case amount > left:
		return 0, Errorf(ERefundExceeds, "refund of %s exceeds what is left to refund of payment %s: %s (%s refunded, %s pending)",
			FormatAmount(amount, p.Currency), p.ID, FormatAmount(left, p.Currency), FormatAmount(p.AmountRefunded, p.Currency), FormatAmount(p.AmountRefundPending, p.Currency))
	}
	return amount, nil
}

// disputedError is the EChargeDisputed of a refund request of p.
func disputedError(p Payment) error {
	if p.Dispute == DisputeLost {
		return Errorf(EChargeDisputed, "payment %s was charged back (its dispute was lost): the customer has the money back from the bank, so it cannot be refunded", p.ID)
	}
	return Errorf(EChargeDisputed, "payment %s has an open dispute (%s): the bank holds the money, so it cannot be refunded unless the dispute is won", p.ID, p.Dispute)
}

// Ledger accounts of disputes; refunds post to AccountPSPReceivable and
// AccountMerchantRevenue, reversing the capture by the refund's amount.
const (
	// AccountDisputes holds the amount of open disputes: opening one
	// moves the disputed amount there from the merchant's balance at the
	// PSP (AccountPSPReceivable).
	AccountDisputes = "disputes"
	// AccountDisputeLosses is where a lost dispute's amount ends.
	AccountDisputeLosses = "dispute_losses"
)

// Step kinds of refunds and disputes. Each writes the payment (a new
// version): refunds move AmountRefunded and AmountRefundPending, and a
// dispute's version bump orders the money moves of one payment.
const (
	StepRefundSucceeded = "refund_succeeded"
	StepRefundFailed    = "refund_failed"
	StepDisputeOpened   = "dispute_opened"
	StepDisputeUpdated  = "dispute_updated"
	StepDisputeClosed   = "dispute_closed"
)

// Outbox event types of refunds and disputes.
const (
	EventRefundSucceeded = "payment.refund.succeeded"
	EventRefundFailed    = "payment.refund.failed"
	EventDisputeCreated  = "payment.dispute.created"
	EventDisputeClosed   = "payment.dispute.closed"
)

// MoneyStep reports whether a step kind is one of a refund or a dispute.
func MoneyStep(kind string) bool {
	switch kind {
	case StepRefundRequested, StepRefundSucceeded, StepRefundFailed, StepDisputeOpened, StepDisputeUpdated, StepDisputeClosed:
		return true
	}
	return false
}

// RefundFilter selects refunds for the sweeper: pending ones updated
// before a time, oldest first, paged after (UpdatedAt, ID).
type RefundFilter struct {
	UpdatedBefore time.Time
	AfterUpdated  time.Time
	AfterID       string
	Limit         int
}

// RefundHolds reports whether a refund in status s holds part of its
// payment's amount: a pending or succeeded one.
func RefundHolds(s RefundStatus) bool { return s == RefundPending || s == RefundSucceeded }

// CheckRefundRequest is the check a store makes when it inserts refund r
// of p, given p's stored disputes: a refund the merchant requested
// (r.IdemKey set) of a payment with a dispute open or lost is
// EChargeDisputed. The disputes decide, not p.Dispute, so a payment
// written by a binary that did not keep that field is refused too. A
// refund learnt from the PSP happened already and is not refused here.
func CheckRefundRequest(r Refund, p Payment, disputes []Dispute) error {
	if r.IdemKey == "" {
		return nil
	}
	statuses := make([]DisputeStatus, 0, len(disputes))
	for _, d := range disputes {
		statuses = append(statuses, d.Status)
	}
	if p.Dispute = DisputeOfPayment(statuses...); p.RefundBlocked() {
		return disputedError(p)
	}
	return nil
}

// CheckRefundFits is the last: if r holds part of p's amount
// (RefundHolds), othersHeld — what p's other refunds hold — plus r's
// amount must not exceed it, else ERefundExceeds. A store checks it inside
// the transaction that holds p, so the sum cannot change before the
// commit.
func CheckRefundFits(r Refund, p Payment, othersHeld int64) error {
	if !RefundHolds(r.Status) {
		return nil
	}
	if held := othersHeld + r.Amount; othersHeld > p.Amount || held > p.Amount {
		return Errorf(ERefundExceeds, "refund of %s would take the refunded and pending refunds of payment %s to %s, more than its amount %s",
			FormatAmount(r.Amount, p.Currency), p.ID, FormatAmount(held, p.Currency), FormatAmount(p.Amount, p.Currency))
	}
	return nil
}
