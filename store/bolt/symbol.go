package bolt

import (
	"fmt"
	"unicode/utf8"
)

// symbol is a string of a closed vocabulary in a record: a status, an
// event type, a currency, an effect, a ledger account. A string of
// symbols is stored as its code there, a CBOR unsigned integer (one byte
// for the first 24 codes, two for the rest), instead of its text ("EUR"
// 4 bytes, "payment.captured" 17); any other string is stored as CBOR
// text, as it was in schema 2. Either reads back as the same string, and
// a code reads back without allocating.
type symbol string

// symbols are the strings stored as codes, by code. The codes are part of
// the file format (schema 3): only ever append, never reorder or remove.
// The most frequent come first, where a code takes one byte.
var symbols = []string{
	// 0–23: one byte.
	"EUR", "USD", "GBP",
	"captured", "created", "processing", "requires_action", "failed", "refunded", "expired", "finalize_pending",
	"payment.captured", "payment.failed", "payment.refunded",
	"done", "pending", "dead",
	"webhook", "loyalty", "retention", "receipt",
	"api", "sync", "transition",
	// 24 and on: two bytes.
	"duplicate", "update", "stale", "version_conflict", "conflicting_terminal", "failed_attempt", "review",
	"psp_error", "ignored_event", "refund_requested", "refund_succeeded", "refund_failed",
	"dispute_opened", "dispute_updated", "dispute_closed",
	"report", "sweeper", "settlement",
	"merchant_revenue", "psp_receivable", "psp_fees", "payouts", "disputes", "dispute_losses",
	"in_flight", "mock", "stripe", "standard",
	"payment.processing", "payment.requires_action", "payment.expired",
	"payment.refund.succeeded", "payment.refund.failed", "payment.dispute.created", "payment.dispute.closed",
	"payment_intent.succeeded", "payment_intent.canceled", "payment_intent.payment_failed",
	"payment_intent.processing", "payment_intent.requires_action", "charge.refunded",
	"charge.refund.updated", "refund.updated", "refund.failed",
	"charge.dispute.created", "charge.dispute.updated", "charge.dispute.closed",
	"succeeded", "needs_response", "under_review", "won", "lost",
	"unresolved", "orphan", "amount_mismatch", "provider_ref_conflict", "sync_contradicted",
	"inbox_exhausted", "refund_unresolved", "unreconciled",
	"charge", "fee", "payout",
	"requested_by_customer", "fraudulent",
	"CHF", "SEK", "NOK", "DKK", "PLN", "CZK", "JPY", "CAD", "AUD",
	// Schema 4: the operations of idempotency keys and the effects of
	// dedupe keys, as key parts (keys.go: keyCoded).
	"create", "refund", "loyalty_payment", "payment_receipt",
}

// symbolCodes maps each string of symbols to its code, and symbolItems
// each code to its CBOR item, made once: MarshalCBOR returns these shared
// slices, which the library copies and never changes.
var symbolCodes, symbolItems = func() (map[string]int, [][]byte) {
	m := make(map[string]int, len(symbols))
	items := make([][]byte, len(symbols))
	for code, s := range symbols {
		if _, dup := m[s]; dup {
			panic("store: symbol " + s + " is listed twice")
		}
		m[s] = code
		items[code] = []byte{byte(code)}
		if code >= 24 {
			items[code] = []byte{24, byte(code)}
		}
	}
	if len(symbols) > 0x100 {
		panic("store: more symbols than two-byte codes")
	}
	return m, items
}()

// MarshalCBOR encodes the string: its code if it is a symbol, else text.
func (s symbol) MarshalCBOR() ([]byte, error) {
	if code, ok := symbolCodes[string(s)]; ok {
		return symbolItems[code], nil
	}
	if len(s) <= 0xffff {
		return append(appendHead(make([]byte, 0, 3+len(s)), 3, len(s)), s...), nil
	}
	return cborMode.Marshal(string(s))
}

// UnmarshalCBOR decodes a string written by MarshalCBOR, or the text of a
// schema 2 record. A code the table does not have is an error: the record
// was written by a newer paystate.
func (s *symbol) UnmarshalCBOR(data []byte) error {
	if len(data) > 0 {
		major, head, n := readHead(data)
		switch {
		case major == 0 && n >= 0 && len(data) == head:
			if n >= len(symbols) {
				return fmt.Errorf("symbol code %d is not one this paystate knows (%d codes)", n, len(symbols))
			}
			*s = symbol(symbols[n])
			return nil
		case major == 3 && n >= 0 && len(data) == head+n && utf8.Valid(data[head:]):
			*s = symbol(data[head:])
			return nil
		}
	}
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case string:
		*s = symbol(v)
	case uint64:
		return fmt.Errorf("symbol code %d is not one this paystate knows (%d codes)", v, len(symbols))
	default:
		return fmt.Errorf("symbol is a %T", v)
	}
	return nil
}
