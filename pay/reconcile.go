package pay

import "time"

// Settlement reconciliation: the PSP's settlement report (what it paid
// out, with its fees), matched line by line against what paystate knows.

// ReasonUnreconciled is the review reason of a settlement line for money
// that moved at the PSP for nothing paystate knows (missing_locally).
const ReasonUnreconciled = "unreconciled"

// SourceSettlement is the source of what settlement reconciliation
// writes (the review steps of unreconciled lines).
const SourceSettlement Source = "settlement"

// Ledger accounts of settlement reconciliation: a matched line moves its
// fee and its payout out of the merchant's balance at the PSP
// (AccountPSPReceivable).
const (
	// AccountPSPFees holds the fees the PSP took.
	AccountPSPFees = "psp_fees"
	// AccountPayouts holds what the PSP paid out to the merchant's bank.
	AccountPayouts = "payouts"
)

// SettlementKind is the type of a settlement line. The wire strings are
// those of the generic CSV's type column.
type SettlementKind string

const (
	// SettleCharge is a capture's money arriving in the PSP balance
	// (positive amount), matched with a payment's provider reference.
	SettleCharge SettlementKind = "charge"
	// SettleRefund is money going back to a customer (negative amount),
	// matched with a refund's provider reference.
	SettleRefund SettlementKind = "refund"
	// SettleDispute is a chargeback's money taken (negative) or, won,
	// given back (positive), matched with the dispute's id.
	SettleDispute SettlementKind = "dispute"
	// SettleFee is a fee not tied to one payment (a monthly fee): its fee
	// is posted, nothing is matched.
	SettleFee SettlementKind = "fee"
	// SettlePayout is the payout itself; the lines it pays carry its id and
	// post their own part, so it posts nothing.
	SettlePayout SettlementKind = "payout"
)

// Valid reports whether k is a known settlement kind.
func (k SettlementKind) Valid() bool {
	switch k {
	case SettleCharge, SettleRefund, SettleDispute, SettleFee, SettlePayout:
		return true
	}
	return false
}

// SettlementLine is one line of a settlement report, amounts in minor
// units of Currency.
type SettlementLine struct {
	Line int    // line number in the file (1 is the header); 0 from an API
	ID   string // the PSP's balance-transaction id
	// Kind is what the line is matched as; "" for a category paystate
	// does not reconcile (Category says which): such a line is
	// missing_locally, for a human to look at.
	Kind        SettlementKind
	Category    string // the PSP's own name of the line's type (Stripe's reporting_category)
	ProviderRef string // the charge's, refund's or dispute's reference at the PSP
	// PaymentID is paystate's id of a charge's payment, where the report
	// carries it (PayPal's Custom Field, the custom_id paystate sends): a
	// charge line with it is matched by it rather than by ProviderRef.
	PaymentID   string
	Amount      int64     // gross, signed as the balance moved: a charge > 0, a refund < 0
	Fee         int64     // what the PSP took (> 0), or gave back (< 0)
	Currency    string    // upper case
	PayoutID    string    // the payout that paid the line; "" while not paid out
	AvailableOn time.Time // when the money became available; zero if not said
}

// Net is what the line adds to the balance the PSP pays out.
func (l SettlementLine) Net() int64 { return l.Amount - l.Fee }

// Settlement is a settlement line that was matched and posted, stored
// under (Provider, ID): a line seen again posts nothing (its fee once,
// its payout once, when it has one).
type Settlement struct {
	Provider    string
	ID          string // the PSP's balance-transaction id
	Kind        SettlementKind
	PaymentID   string // "" for a fee line
	ProviderRef string
	Amount      int64
	Fee         int64
	Currency    string
	PayoutID    string // "" while the payout is not posted
	RunID       string // the run that first posted it
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Differs reports whether line l, of s's balance-transaction id, says
// something else than what was posted: another kind, provider
// reference, amount, fee (so net) or currency, or another payout. A line
// without a payout, of a settlement posted with one, is an older view of
// the same balance transaction, not a change.
func (s Settlement) Differs(l SettlementLine) bool {
	return s.Kind != l.Kind || s.ProviderRef != l.ProviderRef || s.Amount != l.Amount || s.Fee != l.Fee ||
		s.Currency != l.Currency || (s.PayoutID != "" && l.PayoutID != "" && s.PayoutID != l.PayoutID)
}

// SettlementFee is what a settlement line of kind with amount and fee
// posts to psp_fees: its fee, or for a fee line of its own (a monthly
// fee) all it takes, -(amount - fee).
func SettlementFee(kind SettlementKind, amount, fee int64) int64 {
	if kind == SettleFee {
		return fee - amount
	}
	return fee
}

// SettlementPayout is what a paid-out settlement line posts to payouts:
// its net; a payout line posts nothing, being the sum of the lines it
// pays.
func SettlementPayout(kind SettlementKind, amount, fee int64) int64 {
	if kind == SettlePayout {
		return 0
	}
	return amount - fee
}

// ValidateSettlement checks a settlement's stored fields.
func ValidateSettlement(s Settlement) error {
	switch {
	case s.Provider == "":
		return Invalidf("provider", "settlement %s: provider is required", s.ID)
	case s.ID == "":
		return Invalidf("id", "settlement id is required")
	case !s.Kind.Valid():
		return Invalidf("kind", "settlement %s: kind %q is not a settlement kind", s.ID, s.Kind)
	case len(s.Currency) != 3:
		return Invalidf("currency", "settlement %s: currency %q is not a three-letter code", s.ID, s.Currency)
	case s.CreatedAt.IsZero() || s.UpdatedAt.IsZero():
		return Invalidf("created_at", "settlement %s: created_at and updated_at are required", s.ID)
	}
	for _, f := range []struct{ name, v string }{{"id", s.ID}, {"provider_ref", s.ProviderRef}, {"payout_id", s.PayoutID}, {"payment_id", s.PaymentID}, {"run_id", s.RunID}} {
		if err := ValidateText(f.name, f.v, MaxStoredPart); err != nil {
			return err
		}
	}
	return nil
}

// Kinds of an unmatched settlement line (ReconItem.Kind).
const (
	// ReconAmountMismatch: the PSP settled another amount or currency
	// than paystate holds (or the refund is not succeeded here).
	ReconAmountMismatch = "amount_mismatch"
	// ReconMissingLocally: money moved at the PSP for nothing paystate
	// knows; the line is on the review queue (ReasonUnreconciled).
	ReconMissingLocally = "missing_locally"
	// ReconMissingAtPSP: a payment captured here longer ago than
	// reconcile.settle_within that no report has settled.
	ReconMissingAtPSP = "missing_at_psp"
	// ReconChangedSincePosted: the line's balance-transaction id was
	// posted before with other figures (amount, fee, net, payout,
	// provider reference, currency, kind): nothing is posted, the line
	// is on the review queue (ReasonChangedSincePosted) with both
	// versions. It counts as mismatched.
	ReconChangedSincePosted = "changed_since_posted"
)

// ReasonChangedSincePosted is the review reason of a settlement line
// whose balance-transaction id was posted before with other figures.
const ReasonChangedSincePosted = ReconChangedSincePosted

// ReconItem is one thing a reconciliation run could not match.
type ReconItem struct {
	Kind        string // ReconAmountMismatch, ReconMissingLocally, ReconMissingAtPSP
	Line        int    // the line in the file; 0 for missing_at_psp and API lines
	LineID      string // the balance-transaction id; "" for missing_at_psp
	ProviderRef string
	PaymentID   string // "" when nothing here matched
	Amount      int64  // what the PSP says (missing_at_psp: what paystate holds)
	Expected    int64  // what paystate holds (amount_mismatch)
	Currency    string
	Note        string
}

// ReconRun is one settlement reconciliation: a report matched against
// paystate, with its figures and the lines that did not match.
type ReconRun struct {
	ID             string // "rr_" + ULID
	Provider       string
	Source         string // "import:stripe:<file>", "import:generic:<file>", "api:stripe"
	Lines          int    // lines read
	Matched        int    // lines matched (a line seen in an earlier run counts again, posting nothing)
	Mismatched     int    // amount_mismatch
	MissingLocally int
	MissingAtPSP   int
	Posted         int // lines that posted something new to the ledger
	Items          []ReconItem
	CreatedAt      time.Time
}

// OK reports whether everything in the run matched.
func (r ReconRun) OK() bool { return r.Mismatched == 0 && r.MissingLocally == 0 && r.MissingAtPSP == 0 }

// MaxReconItems bounds the items a run keeps; its counters stay exact.
const MaxReconItems = 1000

// ValidateReconRun checks a run's stored fields.
func ValidateReconRun(r ReconRun) error {
	switch {
	case r.ID == "":
		return Invalidf("id", "run id is required")
	case r.Provider == "":
		return Invalidf("provider", "run %s: provider is required", r.ID)
	case r.CreatedAt.IsZero():
		return Invalidf("created_at", "run %s: created_at is required", r.ID)
	case len(r.Items) > MaxReconItems:
		return Invalidf("items", "run %s: %d items, at most %d", r.ID, len(r.Items), MaxReconItems)
	case r.Lines < 0 || r.Matched < 0 || r.Mismatched < 0 || r.MissingLocally < 0 || r.MissingAtPSP < 0 || r.Posted < 0:
		return Invalidf("lines", "run %s: negative counter", r.ID)
	}
	return ValidateText("id", r.ID, MaxStoredPart)
}
