package pay

import (
	"math"
	"time"
)

// What every Store backend refuses, the same way (store/doc.go, "Decisions
// callers rely on"): the checks live here so that the backends share them.

// MaxStoredPart is the longest string a backend accepts as an id, provider
// name, reference, event id, order id, idempotency key or other part of a
// key.
const MaxStoredPart = 1024

// CheckStoredPart checks a string that a backend keys records by.
func CheckStoredPart(field, s string, required bool) error {
	switch {
	case required && s == "":
		return Errorf(EINVALID, "%s is required", field)
	case len(s) > MaxStoredPart:
		return Errorf(EINVALID, "%s is longer than %d bytes", field, MaxStoredPart)
	}
	return nil
}

// CheckStoredLimit checks the limit of a scan.
func CheckStoredLimit(limit int) error {
	if limit <= 0 {
		return Errorf(EINVALID, "limit must be positive, got %d", limit)
	}
	return nil
}

// CheckStoredPayment checks what a backend relies on in a payment it
// writes: the parts of its keys, a known status and set times (they drive
// the time indexes).
func CheckStoredPayment(p Payment) error {
	for _, f := range []struct {
		name, v  string
		required bool
	}{{"payment id", p.ID, true}, {"order_id", p.OrderID, false}, {"provider", p.Provider, false}, {"provider_ref", p.ProviderRef, false}, {"flow", p.Flow, false}, {"second_ref", p.SecondRef, false}} {
		if err := CheckStoredPart(f.name, f.v, f.required); err != nil {
			return err
		}
	}
	if !p.Status.Valid() {
		return Errorf(EINVALID, "payment %s: status %q is not a known status", p.ID, p.Status)
	}
	if p.CreatedAt.IsZero() || p.UpdatedAt.IsZero() {
		return Errorf(EINVALID, "payment %s: created_at and updated_at are required", p.ID)
	}
	return nil
}

// CheckPosting checks one ledger posting before a backend writes it: every
// line names its account and currency, and the lines sum to zero per
// currency without overflowing.
func CheckPosting(entries []LedgerEntry) error {
	sums := map[string]int64{}
	for _, e := range entries {
		if err := CheckStoredPart("ledger account", e.Account, true); err != nil {
			return err
		}
		if err := CheckStoredPart("ledger currency", e.Currency, true); err != nil {
			return err
		}
		s, ok := AddInt64(sums[e.Currency], e.Amount)
		if !ok {
			return Errorf(EINVALID, "ledger posting overflows in %s", e.Currency)
		}
		sums[e.Currency] = s
	}
	for cur, s := range sums {
		if s != 0 {
			return Errorf(EINVALID, "ledger posting does not balance in %s: off by %d", cur, s)
		}
	}
	return nil
}

// AddInt64 returns a+b and whether it did not overflow.
func AddInt64(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

// Page sizes of the lists every backend serves.
const (
	DefaultListLimit = 50   // ListPayments with Limit 0
	MaxListLimit     = 500  // ListPayments clamps above this
	MaxDeliveryPage  = 1000 // ListDeliveries refuses above this
)

// PaymentListLimit checks f's status and creation range and returns its limit as
// ListPayments uses it: 0 means DefaultListLimit, other values are clamped
// to 1..MaxListLimit.
func PaymentListLimit(f PaymentFilter) (int, error) {
	if f.Status != "" && !f.Status.Valid() {
		return 0, Invalidf("status", "status %q is not a known status", f.Status)
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedFrom.Before(f.CreatedBefore) {
		return 0, Invalidf("created_before", "created_before (%s) must be after created_from (%s)",
			f.CreatedBefore.UTC().Format(time.RFC3339), f.CreatedFrom.UTC().Format(time.RFC3339))
	}
	switch {
	case f.Limit == 0:
		return DefaultListLimit, nil
	case f.Limit < 1:
		return 1, nil
	case f.Limit > MaxListLimit:
		return MaxListLimit, nil
	}
	return f.Limit, nil
}

// CheckDeliveryFilter checks the state and limit of a ListDeliveries call.
func CheckDeliveryFilter(f DeliveryFilter) error {
	if !ValidDeliveryState(f.State) {
		return Invalidf("state", "state %q is not one of pending, done, dead", f.State)
	}
	if f.Limit < 1 || f.Limit > MaxDeliveryPage {
		return Invalidf("limit", "limit must be from 1 to %d, got %d", MaxDeliveryPage, f.Limit)
	}
	return nil
}

// CheckStoredDelivery checks what a backend needs of a delivery it writes.
func CheckStoredDelivery(d Delivery) error {
	for _, p := range []struct{ field, v string }{
		{"delivery id", d.ID}, {"delivery effect", d.Effect}, {"delivery event id", d.EventID},
		{"delivery payment id", d.PaymentID}, {"delivery target", d.Target()},
	} {
		if err := CheckStoredPart(p.field, p.v, true); err != nil {
			return err
		}
	}
	if !ValidDeliveryState(d.State) {
		return Errorf(EINVALID, "delivery state %q is not one of pending, done, dead", d.State)
	}
	return nil
}

// RefundHolds reports whether a refund in status s holds part of its
// payment's amount: a pending or succeeded one.
func RefundHolds(s RefundStatus) bool { return s == RefundPending || s == RefundSucceeded }

// RefundOfPayment is the first check every store makes when it writes
// refund r of payment p: an empty Currency or Provider of r is p's, a
// different one is EINVALID. It returns r with them filled in.
func RefundOfPayment(r Refund, p Payment) (Refund, error) {
	if r.Currency == "" {
		r.Currency = p.Currency
	}
	if r.Provider == "" {
		r.Provider = p.Provider
	}
	switch {
	case r.Currency != p.Currency:
		return r, Invalidf("currency", "refund %s is in %s, payment %s in %s", r.ID, r.Currency, p.ID, p.Currency)
	case r.Provider != p.Provider:
		return r, Invalidf("provider", "refund %s is of provider %s, payment %s of %s", r.ID, r.Provider, p.ID, p.Provider)
	}
	return r, nil
}

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
