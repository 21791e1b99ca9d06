package reconcile

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/paystate/paystate/pay"
)

// PayPalColumns are the columns of PayPal's Settlement Report (STL, its
// CH row) that paystate reads; the report has more, which are ignored.
// The first seven are required.
var PayPalColumns = []string{
	"transaction id", "transaction event code", "transaction debit or credit", "gross transaction amount",
	"gross transaction currency", "fee debit or credit", "fee amount",
	"paypal reference id", "custom field", "transaction completion date",
}

// payPalKind maps a transaction event code to what its line is matched
// as: T00xx payments received are charges (a capture: its Custom Field is
// paystate's payment id, custom_id), T1107 a refund, T04xx withdrawals to
// the bank payouts, T01xx fees. Every other code (holds, reversals and
// chargebacks, whose transaction ids are not the dispute's id, currency
// conversions) is read with Kind "" and left to a human
// (missing_locally).
func payPalKind(code string) pay.SettlementKind {
	switch {
	case strings.HasPrefix(code, "T00"):
		return pay.SettleCharge
	case code == "T1107":
		return pay.SettleRefund
	case strings.HasPrefix(code, "T04"):
		return pay.SettlePayout
	case strings.HasPrefix(code, "T01"):
		return pay.SettleFee
	}
	return ""
}

// ReadPayPal reads a PayPal Settlement Report (STL, CSV): record-type
// rows RH, FH, SH, CH (the column names), SB (one transaction each), SF,
// SC, RF, RC, FF; amounts in the currency's minor units with a separate
// CR/DR column. A charge is matched by its Custom Field (the payment id
// paystate sent as custom_id) or, without one, by its transaction id (the
// capture: the payment's second reference), a refund by its transaction
// id (the refund's PayPal id). A malformed file is refused whole, with the line
// number of the first fault.
func ReadPayPal(r io.Reader) ([]pay.SettlementLine, error) {
	return readLines(r, ScanPayPal)
}

// ScanPayPal reads a PayPal Settlement Report one line at a time, calling
// fn with each SB row (Engine.Import, through FileLines).
func ScanPayPal(r io.Reader, fn func(pay.SettlementLine) error) error {
	cr := csv.NewReader(&bomSkipper{r: r})
	cr.FieldsPerRecord = -1 // each record type has its own columns
	cr.ReuseRecord = true
	var (
		cols  map[string]int
		width int // fields of the CH row
	)
	err := eachRecord(cr, func(line int, rec []string) error {
		switch strings.TrimSpace(rec[0]) {
		case "CH":
			var err error
			cols, width = nil, len(rec)
			cols, err = payPalColumns(line, rec)
			return err
		case "SB":
			if cols == nil {
				return pay.Invalidf("header", "line %d: an SB row before the CH row", line)
			}
			l, err := payPalLine(row{line: line, cols: cols, record: pad(rec, width)})
			if err != nil {
				return err
			}
			return fn(l)
		}
		return nil
	})
	if err == nil && cols == nil {
		return pay.Invalidf("header", "no CH row: not a PayPal settlement report")
	}
	return err
}

// payPalColumns reads the CH row (its first field is the record type).
func payPalColumns(line int, rec []string) (map[string]int, error) {
	cols := make(map[string]int, len(rec))
	for i, h := range rec[1:] {
		// PayPal's own files have written "Transaction  Debit or
		// Credit" with two spaces: spaces are collapsed.
		h = strings.ToLower(strings.Join(strings.Fields(h), " "))
		if h != "" {
			cols[h] = i + 1
		}
	}
	for _, c := range PayPalColumns[:7] {
		if _, ok := cols[c]; !ok {
			return nil, pay.Invalidf("header", "line %d: column %q is missing", line, c)
		}
	}
	return cols, nil
}

// pad returns rec with at least n fields (a short SB row's missing
// trailing fields read as empty).
func pad(rec []string, n int) []string {
	for len(rec) < n {
		rec = append(rec, "")
	}
	return rec
}

// payPalLine reads one SB row.
func payPalLine(rw row) (pay.SettlementLine, error) {
	l := pay.SettlementLine{Line: rw.line}
	var err error
	if l.ID, err = checkText(rw, "transaction id"); err != nil {
		return l, err
	} else if l.ID == "" {
		return l, rw.errorf("transaction id", "required")
	}
	if l.Category, err = checkText(rw, "transaction event code"); err != nil {
		return l, err
	} else if l.Category == "" {
		return l, rw.errorf("transaction event code", "required")
	}
	l.Kind = payPalKind(l.Category)
	if l.Currency, err = parseCurrency(rw, "gross transaction currency"); err != nil {
		return l, err
	}
	if l.Amount, err = minorUnits(rw, "gross transaction amount", "transaction debit or credit"); err != nil {
		return l, err
	}
	// A fee debited (DR) is what PayPal took: > 0.
	fee, err := minorUnits(rw, "fee amount", "fee debit or credit")
	if err != nil {
		return l, err
	}
	l.Fee = -fee
	if err := checkNet(rw, l); err != nil {
		return l, err
	}
	if l.AvailableOn, err = payPalTime(rw, "transaction completion date"); err != nil {
		return l, err
	}
	switch l.Kind {
	case pay.SettleCharge:
		// Matched by paystate's payment id, which the report carries
		// as the capture's custom_id.
		if l.PaymentID, err = checkText(rw, "custom field"); err != nil {
			return l, err
		}
		l.ProviderRef = l.ID
	case pay.SettleRefund:
		l.ProviderRef = l.ID
	}
	return l, nil
}

// minorUnits reads an amount in minor units ("1000" = 10.00 EUR), signed
// by its CR/DR column (CR adds to the balance, DR takes from it); an empty
// amount is 0.
func minorUnits(rw row, col, sign string) (int64, error) {
	s := rw.get(col)
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, rw.errorf(col, "%q is not an amount in minor units", s)
	}
	switch strings.ToUpper(rw.get(sign)) {
	case "CR":
		return v, nil
	case "DR":
		return -v, nil
	}
	return 0, rw.errorf(sign, "%q: want CR or DR", rw.get(sign))
}

// payPalTime reads a time as the report writes it ("2025/03/01 12:00:00
// -0800"), or as parseTime does; empty is the zero time.
func payPalTime(rw row, col string) (time.Time, error) {
	if t, err := time.Parse("2006/01/02 15:04:05 -0700", rw.get(col)); err == nil {
		return t.UTC(), nil
	}
	return parseTime(rw, col)
}
