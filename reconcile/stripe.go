package reconcile

import (
	"io"

	"github.com/paystate/paystate/pay"
)

// StripeColumns are the columns of Stripe's itemized balance-change and
// payout reconciliation reports (Reports API report types
// balance_change_from_activity.itemized.* and
// payout_reconciliation.itemized.*) that paystate reads; the reports have
// more, which are ignored. The first seven are required.
var StripeColumns = []string{
	"balance_transaction_id", "currency", "gross", "fee", "net", "reporting_category", "source_id",
	"created_utc", "available_on_utc", "payment_intent_id", "charge_id", "automatic_payout_id", "description",
}

// stripeKinds maps Stripe's reporting_category to what a line is matched
// as. A category not in it (transfer, other_adjustment, ...) is read with
// Kind "" and left to a human (missing_locally).
var stripeKinds = map[string]pay.SettlementKind{
	"charge":                     pay.SettleCharge,
	"payment":                    pay.SettleCharge,
	"refund":                     pay.SettleRefund,
	"refund_failure":             pay.SettleRefund,
	"partial_capture_reversal":   pay.SettleCharge,
	"dispute":                    pay.SettleDispute,
	"dispute_reversal":           pay.SettleDispute,
	"fee":                        pay.SettleFee,
	"payout":                     pay.SettlePayout,
	"payout_reversal":            pay.SettlePayout,
	"stripe_fee":                 pay.SettleFee,
	"network_cost":               pay.SettleFee,
	"payment_network_reserve":    "",
	"connect_reserved_funds":     "",
	"other_adjustment":           "",
	"contribution":               "",
	"climate_order_purchase":     "",
	"topup":                      "",
	"transfer":                   "",
	"anticipation_repayment":     "",
	"issuing_authorization_hold": "",
}

// ReadStripe reads a Stripe itemized reconciliation CSV (its documented
// column names; amounts in major units as decimal strings, the currency
// in lower case). A charge is matched by its payment_intent_id (the
// payment's provider reference), else its charge_id or source_id; a
// refund by source_id (the refund's id), a dispute by source_id (the
// dispute's id). A malformed file is refused whole, with the line number
// of the first fault.
func ReadStripe(r io.Reader) ([]pay.SettlementLine, error) {
	return readLines(r, ScanStripe)
}

// ScanStripe reads a Stripe itemized reconciliation CSV one line at a
// time, calling fn with each (Engine.Import, through FileLines).
func ScanStripe(r io.Reader, fn func(pay.SettlementLine) error) error {
	return scanLines(r, StripeColumns[:7], stripeLine, fn)
}

// stripeLine reads one line of a Stripe report.
func stripeLine(rw row) (pay.SettlementLine, error) {
	l := pay.SettlementLine{Line: rw.line}
	var err error
	if l.ID, err = checkText(rw, "balance_transaction_id"); err != nil {
		return l, err
	} else if l.ID == "" {
		return l, rw.errorf("balance_transaction_id", "required")
	}
	if l.Category, err = checkText(rw, "reporting_category"); err != nil {
		return l, err
	} else if l.Category == "" {
		return l, rw.errorf("reporting_category", "required")
	}
	l.Kind = stripeKinds[l.Category]
	if l.Currency, err = parseCurrency(rw, "currency"); err != nil {
		return l, err
	}
	if l.Amount, err = parseAmount(rw, "gross", l.Currency, false); err != nil {
		return l, err
	}
	if l.Fee, err = parseAmount(rw, "fee", l.Currency, false); err != nil {
		return l, err
	}
	if err := checkNet(rw, l); err != nil {
		return l, err
	}
	net, err := parseAmount(rw, "net", l.Currency, false)
	if err != nil {
		return l, err
	}
	if net != l.Net() {
		return l, rw.errorf("net", "%s is not gross %s minus fee %s", rw.get("net"), rw.get("gross"), rw.get("fee"))
	}
	refs := []string{"source_id"}
	if l.Kind == pay.SettleCharge {
		refs = []string{"payment_intent_id", "charge_id", "source_id"}
	}
	for _, c := range refs {
		v, err := checkText(rw, c)
		if err != nil {
			return l, err
		}
		if v != "" {
			l.ProviderRef = v
			break
		}
	}
	switch l.Kind {
	case pay.SettleCharge, pay.SettleRefund, pay.SettleDispute:
		if l.ProviderRef == "" {
			return l, rw.errorf("source_id", "required on a %s line", l.Category)
		}
	}
	if l.PayoutID, err = checkText(rw, "automatic_payout_id"); err != nil {
		return l, err
	}
	if l.AvailableOn, err = parseTime(rw, "available_on_utc"); err != nil {
		return l, err
	}
	if _, err = parseTime(rw, "created_utc"); err != nil {
		return l, err
	}
	return l, nil
}
