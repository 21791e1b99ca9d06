package reconcile

import (
	"io"

	"github.com/paystate/paystate/pay"
)

// GenericColumns are the columns of the generic settlement CSV, in the
// order paystate writes them; a file may order them as it likes and add
// others, which are ignored. id, type, amount and currency are required;
// provider_ref too on a charge, refund or dispute line.
var GenericColumns = []string{"id", "provider_ref", "type", "amount", "fee", "currency", "payout_id", "available_on"}

// ReadGeneric reads a generic settlement CSV: a header row, then one
// balance transaction a line, amounts in major units as decimal strings
// signed as the balance moved (a charge's amount > 0, a refund's or a
// dispute's < 0; the fee > 0). A malformed file is refused whole, with
// the line number of the first fault.
func ReadGeneric(r io.Reader) ([]pay.SettlementLine, error) {
	return readLines(r, ScanGeneric)
}

// genericRequired are the columns a generic CSV must have.
var genericRequired = []string{"id", "type", "amount", "currency"}

// ScanGeneric reads a generic settlement CSV one line at a time, calling
// fn with each (Engine.Import, through FileLines).
func ScanGeneric(r io.Reader, fn func(pay.SettlementLine) error) error {
	return scanLines(r, genericRequired, genericLine, fn)
}

// genericLine reads one line of the generic CSV.
func genericLine(rw row) (pay.SettlementLine, error) {
	l := pay.SettlementLine{Line: rw.line}
	var err error
	if l.ID, err = checkText(rw, "id"); err != nil {
		return l, err
	} else if l.ID == "" {
		return l, rw.errorf("id", "the balance-transaction id is required")
	}
	l.Kind = pay.SettlementKind(rw.get("type"))
	l.Category = string(l.Kind)
	if !l.Kind.Valid() {
		return l, rw.errorf("type", "%q is not one of charge, refund, dispute, fee, payout", rw.get("type"))
	}
	if l.ProviderRef, err = checkText(rw, "provider_ref"); err != nil {
		return l, err
	}
	switch l.Kind {
	case pay.SettleCharge, pay.SettleRefund, pay.SettleDispute:
		if l.ProviderRef == "" {
			return l, rw.errorf("provider_ref", "required on a %s line", l.Kind)
		}
	}
	if l.Currency, err = parseCurrency(rw, "currency"); err != nil {
		return l, err
	}
	if l.Amount, err = parseAmount(rw, "amount", l.Currency, false); err != nil {
		return l, err
	}
	if l.Fee, err = parseAmount(rw, "fee", l.Currency, true); err != nil {
		return l, err
	}
	if err := checkNet(rw, l); err != nil {
		return l, err
	}
	if l.PayoutID, err = checkText(rw, "payout_id"); err != nil {
		return l, err
	}
	if l.AvailableOn, err = parseTime(rw, "available_on"); err != nil {
		return l, err
	}
	return l, nil
}

// checkNet refuses a line whose net (amount - fee) does not fit an int64.
func checkNet(rw row, l pay.SettlementLine) error {
	if (l.Fee < 0 && l.Amount > 0 && l.Amount-l.Fee < 0) || (l.Fee > 0 && l.Amount < 0 && l.Amount-l.Fee > 0) {
		return rw.errorf("fee", "amount minus fee overflows")
	}
	return nil
}
