package reconcile

import (
	"io"
	"strings"

	"github.com/paystate/paystate/pay"
)

// MollieColumns are the columns of Mollie's settlement export (the CSV of
// one settlement's transactions, downloaded from the dashboard's
// settlement page), as Mollie names them; a file may order them as it
// likes and have others, which are ignored. ID, Currency and Amount are
// required.
var MollieColumns = []string{
	"Date", "Payment method", "Currency", "Amount", "Status", "ID", "Description",
	"Consumer name", "Consumer bank account", "Consumer BIC",
	"Settlement currency", "Settlement amount", "Settlement reference", "Amount refunded",
}

// mollieRequired are the columns a Mollie export must have (readCSV
// compares them in lower case).
var mollieRequired = []string{"id", "currency", "amount"}

// ReadMollie reads Mollie's settlement export whole (ScanMollie), checked
// as ReadGeneric checks its file.
func ReadMollie(r io.Reader) ([]pay.SettlementLine, error) {
	return readLines(r, mollieRequired, mollieLine)
}

// ScanMollie reads Mollie's settlement export one line at a time. Each
// line is one transaction of the settlement, its kind told by its ID: a
// payment (tr_...) is a charge, a refund (re_...) a refund, a chargeback
// (chb_...) a dispute; the ID is both the line's id and the reference
// paystate matches (a payment's provider_ref, a refund's or a dispute's
// PSP id). Amounts are in the transaction's currency, signed as the
// balance moved (a refund or a chargeback takes money: negative, however
// the file writes it). Mollie invoices its costs per settlement, not per
// transaction, so a line's fee is 0. The settlement reference is the
// line's payout, its date the day it was available.
func ScanMollie(r io.Reader, fn func(pay.SettlementLine) error) error {
	return scanLines(r, mollieRequired, mollieLine, fn)
}

// mollieLine reads one line of Mollie's export.
func mollieLine(rw row) (pay.SettlementLine, error) {
	l := pay.SettlementLine{Line: rw.line}
	var err error
	if l.ID, err = checkText(rw, "id"); err != nil {
		return l, err
	}
	switch {
	case strings.HasPrefix(l.ID, "tr_"):
		l.Kind = pay.SettleCharge
	case strings.HasPrefix(l.ID, "re_"):
		l.Kind = pay.SettleRefund
	case strings.HasPrefix(l.ID, "chb_"):
		l.Kind = pay.SettleDispute
	case l.ID == "":
		return l, rw.errorf("ID", "a transaction id is required")
	default:
		return l, rw.errorf("ID", "%q is not a Mollie payment (tr_), refund (re_) or chargeback (chb_) id", l.ID)
	}
	l.Category, l.ProviderRef = string(l.Kind), l.ID
	if l.Currency, err = parseCurrency(rw, "currency"); err != nil {
		return l, err
	}
	if l.Amount, err = parseAmount(rw, "amount", l.Currency, false); err != nil {
		return l, err
	}
	if l.Amount < 0 {
		l.Amount = -l.Amount
	}
	if l.Kind != pay.SettleCharge {
		l.Amount = -l.Amount
	}
	if l.PayoutID, err = checkText(rw, "settlement reference"); err != nil {
		return l, err
	}
	if l.AvailableOn, err = parseTime(rw, "date"); err != nil {
		return l, err
	}
	return l, nil
}
