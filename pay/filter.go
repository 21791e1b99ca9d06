package pay

import (
	"strings"
	"time"
)

// ListOrder is the index a backend walks for a payment list, newest first.
type ListOrder int

// The orders of ListPayments, chosen from the filter by PaymentFilter.Order.
const (
	// ByCreated walks payments by CreatedAt, within CreatedFrom and
	// CreatedBefore when set.
	ByCreated ListOrder = iota
	// ByOrder walks one order id's payments by CreatedAt.
	ByOrder
	// ByStatus walks one status's payments by UpdatedAt.
	ByStatus
)

// Order is the list order for f, the same for every backend: an order id
// lists that order's payments (a handful), newest created first; a status
// alone lists newest updated first (the status index); anything else,
// a customer or a creation range included, lists newest created first,
// the other filters applied to each payment on the way.
func (f PaymentFilter) Order() ListOrder {
	switch {
	case f.OrderID != "":
		return ByOrder
	case f.Status != "" && !f.searches():
		return ByStatus
	}
	return ByCreated
}

// searches reports whether f filters on the customer or the creation time.
func (f PaymentFilter) searches() bool {
	return f.CustomerID != "" || f.CustomerEmail != "" || !f.CreatedFrom.IsZero() || !f.CreatedBefore.IsZero()
}

// Match reports whether p passes every filter f sets (Limit and Cursor
// aside).
func (f PaymentFilter) Match(p Payment) bool {
	switch {
	case f.Status != "" && p.Status != f.Status,
		f.OrderID != "" && p.OrderID != f.OrderID,
		f.CustomerID != "" && p.Customer.ID != f.CustomerID,
		f.CustomerEmail != "" && FoldEmail(p.Customer.Email) != FoldEmail(f.CustomerEmail),
		!f.CreatedFrom.IsZero() && p.CreatedAt.Before(f.CreatedFrom),
		!f.CreatedBefore.IsZero() && !p.CreatedAt.Before(f.CreatedBefore):
		return false
	}
	return true
}

// FoldEmail is an e-mail address as a search compares it: ASCII letters in
// lower case, everything else as it is (what PostgreSQL's lower() does
// under the "C" collation, so both backends find the same payments).
func FoldEmail(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// Page sizes of the lists every backend serves.
const (
	DefaultListLimit = 50   // ListPayments with Limit 0
	MaxListLimit     = 500  // ListPayments clamps above this
	MaxDeliveryPage  = 1000 // ListDeliveries refuses above this
)

// MaxStoredPart is the longest string a backend accepts as an id, provider
// name, reference, event id, order id, idempotency key or other part of a
// key.
const MaxStoredPart = 1024

// PaymentFilter selects payments for a list, newest first. Every field is
// optional; a payment is listed when it matches all that are set (Match).
type PaymentFilter struct {
	Status  Status
	OrderID string
	// CustomerID is matched exactly; CustomerEmail with ASCII letters
	// compared case-insensitively (FoldEmail).
	CustomerID    string
	CustomerEmail string
	// CreatedFrom (inclusive) and CreatedBefore (exclusive) bound
	// CreatedAt; a zero time is no bound.
	CreatedFrom   time.Time
	CreatedBefore time.Time
	Limit         int    // 1..500
	Cursor        string // opaque, from the previous page
}
