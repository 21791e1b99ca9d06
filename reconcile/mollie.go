package reconcile

import (
	"io"
	"strings"

	"github.com/paystate/paystate/pay"
)

// MollieColumns are the columns of Mollie's settlement export (the CSV
// of one settlement, downloaded from the dashboard: Reports →
// Settlements, the settlement's reference, Download as CSV), as Mollie
// names them. Mollie's documentation describes what a settlement holds
// (https://docs.mollie.com/docs/settlement-report: payments, captures,
// refunds, chargebacks, their reversals and returns, other balance
// movements, and the costs withheld, aggregated per settlement) but
// publishes no column list; these names and their meaning are those of
// github.com/fjbender/settlement2csv (src/Commands/ConvertCommand.php,
// commit 1046f41), which rebuilds the dashboard's export from the
// Settlements API: one line per transaction, its amount in the
// transaction's currency signed as the balance moved (a refund or a
// chargeback negative), and one line per invoice for the costs withheld,
// with no ID and the description "Withheld transaction fees
// <invoice reference>". No export from a live account was read. A file
// may order the columns as it likes and have others, which are ignored;
// ID, Currency and Amount are required.
var MollieColumns = []string{
	"Date", "Payment method", "Currency", "Amount", "Status", "ID", "Description",
	"Consumer name", "Consumer bank account", "Consumer BIC",
	"Settlement currency", "Settlement amount", "Settlement reference", "Amount refunded",
}

// mollieRequired are the columns a Mollie export must have (readCSV
// compares them in lower case).
var mollieRequired = []string{"id", "currency", "amount"}

// mollieWithheld starts the description of a line of costs withheld.
const mollieWithheld = "withheld transaction fees"

// ReadMollie reads Mollie's settlement export whole (ScanMollie), checked
// as ReadGeneric checks its file.
func ReadMollie(r io.Reader) ([]pay.SettlementLine, error) {
	return readLines(r, ScanMollie)
}

// ScanMollie reads Mollie's settlement export one line at a time. A
// line's kind is told by its ID: a payment (tr_...) is a charge, a
// refund (re_...) a refund, a chargeback (chb_...) a dispute, matched by
// that id (a payment's provider_ref, a refund's or a dispute's PSP id).
// The amount is read as the file signs it, in the transaction's
// currency (Amount, Currency; Settlement amount, in the settlement's
// currency, must carry the same sign): a refund line that adds money is
// a returned refund, and a chargeback line that adds money a reversal,
// each with its own line id (the transaction's id with "/returned" or
// "/reversal"), so that it posts beside the line it undoes. A line
// without an ID whose description begins "Withheld transaction fees" is
// a fee line of the costs withheld (amount 0, fee the amount withheld);
// any other line (a capture, cpt_..., a balance correction without an
// ID, ...) is read with Kind "" and left to a human (missing_locally).
// A line without an ID is named by its settlement reference and
// description. The settlement reference is the line's payout, its date
// the day it was available.
func ScanMollie(r io.Reader, fn func(pay.SettlementLine) error) error {
	return scanLines(r, mollieRequired, mollieLine, fn)
}

// mollieLine reads one line of Mollie's export.
func mollieLine(rw row) (pay.SettlementLine, error) {
	l := pay.SettlementLine{Line: rw.line}
	id, err := checkText(rw, "id")
	if err != nil {
		return l, err
	}
	if l.Currency, err = parseCurrency(rw, "currency"); err != nil {
		return l, err
	}
	if l.Amount, err = parseAmount(rw, "amount", l.Currency, false); err != nil {
		return l, err
	}
	if err := mollieSameSign(rw, l.Amount); err != nil {
		return l, err
	}
	if l.PayoutID, err = checkText(rw, "settlement reference"); err != nil {
		return l, err
	}
	if l.AvailableOn, err = parseTime(rw, "date"); err != nil {
		return l, err
	}
	l.ID, l.ProviderRef = id, id
	switch {
	case strings.HasPrefix(id, "tr_"):
		l.Kind, l.Category = pay.SettleCharge, "payment"
	case strings.HasPrefix(id, "re_") && l.Amount > 0:
		// Returned: the engine wants a failed refund.
		l.Kind, l.Category, l.ID = pay.SettleRefund, "refund_failure", id+"/returned"
	case strings.HasPrefix(id, "re_"):
		l.Kind, l.Category = pay.SettleRefund, "refund"
	case strings.HasPrefix(id, "chb_") && l.Amount > 0:
		l.Kind, l.Category, l.ID = pay.SettleDispute, "chargeback_reversal", id+"/reversal"
	case strings.HasPrefix(id, "chb_"):
		l.Kind, l.Category = pay.SettleDispute, "chargeback"
	case strings.HasPrefix(id, "cpt_"):
		l.Category = "capture"
	case id != "":
		l.Category = "other"
	default:
		return mollieNoID(rw, l)
	}
	return l, nil
}

// mollieNoID reads a line without a transaction id: the costs withheld,
// or another balance movement. Its id is its settlement reference and
// description, which must be there.
func mollieNoID(rw row, l pay.SettlementLine) (pay.SettlementLine, error) {
	desc, err := checkText(rw, "description")
	if err != nil {
		return l, err
	}
	if desc == "" {
		return l, rw.errorf("ID", "a transaction id, or on a line without one a description, is required")
	}
	l.ID, l.ProviderRef, l.Category = l.PayoutID+"/"+desc, "", "other"
	if strings.HasPrefix(strings.ToLower(desc), mollieWithheld) {
		// What was withheld (< 0) is a fee paid (> 0).
		l.Kind, l.Category, l.Amount, l.Fee = pay.SettleFee, "withheld_fees", 0, -l.Amount
	}
	return l, nil
}

// mollieSameSign refuses a line whose Settlement amount is signed
// unlike its Amount: one of them is not what the balance did.
func mollieSameSign(rw row, amount int64) error {
	if rw.get("settlement amount") == "" || rw.get("settlement currency") == "" {
		return nil
	}
	cur, err := parseCurrency(rw, "settlement currency")
	if err != nil {
		return err
	}
	settled, err := parseAmount(rw, "settlement amount", cur, false)
	if err != nil {
		return err
	}
	if (settled < 0 && amount > 0) || (settled > 0 && amount < 0) {
		return rw.errorf("settlement amount", "%s is signed unlike Amount %s: the file does not say which way the balance moved",
			rw.get("settlement amount"), rw.get("amount"))
	}
	return nil
}
