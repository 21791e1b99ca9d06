package pay

import "time"

// DisputeStatus is the state of a dispute (chargeback). The wire strings
// are part of the contract.
type DisputeStatus string

const (
	// DisputeNeedsResponse is set when the PSP reports a new dispute: the
	// merchant must answer with evidence before EvidenceDueBy.
	DisputeNeedsResponse DisputeStatus = "needs_response"
	// DisputeUnderReview is set when the PSP says the evidence is with
	// the bank.
	DisputeUnderReview DisputeStatus = "under_review"
	// DisputeWon is terminal: the bank decided for the merchant and the
	// disputed amount comes back.
	DisputeWon DisputeStatus = "won"
	// DisputeLost is terminal: the disputed amount is lost.
	DisputeLost DisputeStatus = "lost"
)

// DisputeStatuses lists every dispute status.
var DisputeStatuses = []DisputeStatus{DisputeNeedsResponse, DisputeUnderReview, DisputeWon, DisputeLost}

// Valid reports whether s is a known dispute status.
func (s DisputeStatus) Valid() bool {
	switch s {
	case DisputeNeedsResponse, DisputeUnderReview, DisputeWon, DisputeLost:
		return true
	}
	return false
}

// Closed reports whether s is a final outcome: a closed dispute never
// reopens.
func (s DisputeStatus) Closed() bool { return s == DisputeWon || s == DisputeLost }

// Open reports whether s is a dispute still being decided
// (needs_response, under_review).
func (s DisputeStatus) Open() bool { return s == DisputeNeedsResponse || s == DisputeUnderReview }

// BlocksRefund reports whether a payment with a dispute in status s may
// not be refunded: the dispute is open or lost (SPEC §1 "Refunds").
func (s DisputeStatus) BlocksRefund() bool { return s.Open() || s == DisputeLost }

// DisputeOfPayment is the status a payment carries for its disputes
// (Payment.Dispute): an open one if any is open, else lost if any was
// lost, else won if any was won, "" if it has none. Stripe allows one
// dispute per charge; the order keeps the strictest should a PSP report
// more.
func DisputeOfPayment(statuses ...DisputeStatus) DisputeStatus {
	rank := func(s DisputeStatus) int {
		switch s {
		case DisputeNeedsResponse:
			return 4
		case DisputeUnderReview:
			return 3
		case DisputeLost:
			return 2
		case DisputeWon:
			return 1
		}
		return 0
	}
	var out DisputeStatus
	for _, s := range statuses {
		if rank(s) > rank(out) {
			out = s
		}
	}
	return out
}

// ParseDisputeStatus returns the dispute status named s or an invalid
// error.
func ParseDisputeStatus(s string) (DisputeStatus, error) {
	st := DisputeStatus(s)
	if !st.Valid() {
		return "", Invalidf("status", "dispute status %q is not one of needs_response, under_review, won, lost", s)
	}
	return st, nil
}

// DecideDispute is the transition table of a dispute, the same rules as
// Decide's for a payment: an open dispute takes any outcome and moves
// from needs_response to under_review, not back (stale); a closed one
// never reopens (stale), and won against lost is a conflict a human
// decides.
func DecideDispute(cur, obs DisputeStatus) Decision {
	switch {
	case cur == obs:
		return Duplicate
	case cur.Closed() && obs.Closed():
		return ConflictingTerminal
	case cur.Closed():
		return Stale
	case obs.Closed():
		return Apply
	case cur == DisputeUnderReview && obs == DisputeNeedsResponse:
		return Stale
	}
	return Apply
}

// Dispute is a chargeback of a payment, as its PSP reports it. It does not
// change the payment's status; it moves money in the ledger.
type Dispute struct {
	Provider      string
	ID            string // the PSP's id of the dispute
	PaymentID     string
	Amount        int64
	Currency      string
	Reason        string
	Status        DisputeStatus
	EvidenceDueBy time.Time // zero when the PSP did not say
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// DisputeChange is what an observation says about one dispute (see
// Observation.Dispute).
type DisputeChange struct {
	ID            string // the PSP's id of the dispute, required
	Amount        int64  // required for a dispute seen the first time
	Currency      string // "" = the payment's
	Reason        string
	Status        DisputeStatus
	EvidenceDueBy time.Time
}

// DisputeFilter selects disputes for a list: in one status ("" = any),
// soonest evidence deadline first (none last).
type DisputeFilter struct {
	Status DisputeStatus
	Limit  int
}

// ValidateDispute checks a dispute's stored fields.
func ValidateDispute(d Dispute) error {
	switch {
	case d.ID == "":
		return Invalidf("id", "dispute id is required")
	case d.Provider == "":
		return Invalidf("provider", "dispute %s: provider is required", d.ID)
	case d.PaymentID == "":
		return Invalidf("payment_id", "dispute %s: payment id is required", d.ID)
	case !d.Status.Valid():
		return Invalidf("status", "dispute %s: status %q is not a dispute status", d.ID, d.Status)
	case d.CreatedAt.IsZero() || d.UpdatedAt.IsZero():
		return Invalidf("created_at", "dispute %s: created_at and updated_at are required", d.ID)
	}
	if err := ValidateAmount(d.Amount); err != nil {
		return err
	}
	if err := ValidateText("id", d.ID, MaxStoredPart); err != nil {
		return err
	}
	return ValidateText("reason", d.Reason, MaxRefundReason)
}
