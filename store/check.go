package store

import (
	"time"

	"github.com/paystate/paystate/pay"
)

// What every backend refuses, the same way (store/bolt/doc.go, "Decisions
// callers rely on"): the checks live here so that the backends share them.

// CheckStoredPart checks a string that a backend keys records by.
func CheckStoredPart(field, s string, required bool) error {
	switch {
	case required && s == "":
		return pay.Errorf(pay.EINVALID, "%s is required", field)
	case len(s) > pay.MaxStoredPart:
		return pay.Errorf(pay.EINVALID, "%s is longer than %d bytes", field, pay.MaxStoredPart)
	}
	return nil
}

// CheckStoredKeys checks required key parts, given as name, value pairs.
func CheckStoredKeys(nameValue ...string) error {
	for i := 0; i+1 < len(nameValue); i += 2 {
		if err := CheckStoredPart(nameValue[i], nameValue[i+1], true); err != nil {
			return err
		}
	}
	return nil
}

// CheckStoredRefund checks the fields and key parts of a refund a
// backend writes.
func CheckStoredRefund(r pay.Refund) error {
	if err := CheckStoredKeys("refund id", r.ID, "payment id", r.PaymentID); err != nil {
		return err
	}
	if err := CheckStoredPart("provider_ref", r.ProviderRef, false); err != nil {
		return err
	}
	return pay.ValidateRefund(r)
}

// UpdatedRefund is what UpdateRefund writes for r: the stored refund (get
// reads it by id) with r's status, provider reference and event id and
// UpdatedAt now, checked as CheckStoredRefund does. It returns the stored
// refund too.
func UpdatedRefund(r pay.Refund, now time.Time, get func(id string) (pay.Refund, error)) (stored, updated pay.Refund, err error) {
	if err := CheckStoredPart("refund id", r.ID, true); err != nil {
		return stored, updated, err
	}
	if stored, err = get(r.ID); err != nil {
		return stored, updated, err
	}
	updated = stored
	updated.Status, updated.ProviderRef, updated.EventID, updated.UpdatedAt = r.Status, r.ProviderRef, r.EventID, now
	return stored, updated, CheckStoredRefund(updated)
}

// NowIfZero sets each of ts that is the zero time to now: a backend's
// writes store a zero time of a record as the transaction's time.
func NowIfZero(now time.Time, ts ...*time.Time) {
	for _, t := range ts {
		if t.IsZero() {
			*t = now
		}
	}
}

// NewInboxEvent checks the key parts of webhook event e that PutInbox
// stores and fills in its times: a zero ReceivedAt becomes now and a zero
// NextAttemptAt becomes ReceivedAt, so that a new event is due at once.
func NewInboxEvent(e pay.InboxEvent, now time.Time) (pay.InboxEvent, error) {
	if err := CheckStoredKeys("provider", e.Provider, "event id", e.EventID); err != nil {
		return e, err
	}
	if err := CheckStoredPart("payment id", e.PaymentID, false); err != nil {
		return e, err
	}
	NowIfZero(now, &e.ReceivedAt)
	if e.NextAttemptAt.IsZero() {
		e.NextAttemptAt = e.ReceivedAt
	}
	return e, nil
}

// CheckLeaseRequest checks the arguments of AcquireLease: a payment id, a
// holder and a ttl of at least 1ns.
func CheckLeaseRequest(paymentID, holder string, ttl time.Duration) error {
	if err := CheckStoredPart("payment id", paymentID, true); err != nil {
		return err
	}
	if holder == "" {
		return pay.Errorf(pay.EINVALID, "lease holder is required")
	}
	if ttl <= 0 {
		return pay.Errorf(pay.EINVALID, "lease ttl must be positive, got %s", ttl)
	}
	return nil
}

// CheckStoredLimit checks the limit of a scan.
func CheckStoredLimit(limit int) error {
	if limit <= 0 {
		return pay.Errorf(pay.EINVALID, "limit must be positive, got %d", limit)
	}
	return nil
}

// CheckStoredPayment checks what a backend relies on in a payment it
// writes: the parts of its keys, a known status and set times (they drive
// the time indexes).
func CheckStoredPayment(p pay.Payment) error {
	for _, f := range []struct {
		name, v  string
		required bool
	}{{"payment id", p.ID, true}, {"order_id", p.OrderID, false}, {"provider", p.Provider, false}, {"provider_ref", p.ProviderRef, false}, {"flow", p.Flow, false}, {"second_ref", p.SecondRef, false}} {
		if err := CheckStoredPart(f.name, f.v, f.required); err != nil {
			return err
		}
	}
	if !p.Status.Valid() {
		return pay.Errorf(pay.EINVALID, "payment %s: status %q is not a known status", p.ID, p.Status)
	}
	if p.CreatedAt.IsZero() || p.UpdatedAt.IsZero() {
		return pay.Errorf(pay.EINVALID, "payment %s: created_at and updated_at are required", p.ID)
	}
	return nil
}

// CheckPosting checks one ledger posting before a backend writes it: every
// line names its account and currency, and the lines sum to zero per
// currency without overflowing.
func CheckPosting(entries []pay.LedgerEntry) error {
	sums := map[string]int64{}
	for _, e := range entries {
		if err := CheckStoredPart("ledger account", e.Account, true); err != nil {
			return err
		}
		if err := CheckStoredPart("ledger currency", e.Currency, true); err != nil {
			return err
		}
		s, ok := pay.AddInt64(sums[e.Currency], e.Amount)
		if !ok {
			return pay.Errorf(pay.EINVALID, "ledger posting overflows in %s", e.Currency)
		}
		sums[e.Currency] = s
	}
	for cur, s := range sums {
		if s != 0 {
			return pay.Errorf(pay.EINVALID, "ledger posting does not balance in %s: off by %d", cur, s)
		}
	}
	return nil
}

// PaymentListLimit checks f's status and creation range and returns its limit as
// ListPayments uses it: 0 means pay.DefaultListLimit, other values are clamped
// to 1..MaxListLimit.
func PaymentListLimit(f pay.PaymentFilter) (int, error) {
	if f.Status != "" && !f.Status.Valid() {
		return 0, pay.Invalidf("status", "status %q is not a known status", f.Status)
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedFrom.Before(f.CreatedBefore) {
		return 0, pay.Invalidf("created_before", "created_before (%s) must be after created_from (%s)",
			f.CreatedBefore.UTC().Format(time.RFC3339), f.CreatedFrom.UTC().Format(time.RFC3339))
	}
	switch {
	case f.Limit == 0:
		return pay.DefaultListLimit, nil
	case f.Limit < 1:
		return 1, nil
	case f.Limit > pay.MaxListLimit:
		return pay.MaxListLimit, nil
	}
	return f.Limit, nil
}

// CheckDeliveryFilter checks the state and limit of a ListDeliveries call.
func CheckDeliveryFilter(f pay.DeliveryFilter) error {
	if !pay.ValidDeliveryState(f.State) {
		return pay.Invalidf("state", "state %q is not one of pending, done, dead", f.State)
	}
	if f.Limit < 1 || f.Limit > pay.MaxDeliveryPage {
		return pay.Invalidf("limit", "limit must be from 1 to %d, got %d", pay.MaxDeliveryPage, f.Limit)
	}
	return nil
}

// CheckStoredDelivery checks what a backend needs of a delivery it writes.
func CheckStoredDelivery(d pay.Delivery) error {
	for _, p := range []struct{ field, v string }{
		{"delivery id", d.ID}, {"delivery effect", d.Effect}, {"delivery event id", d.EventID},
		{"delivery payment id", d.PaymentID}, {"delivery target", d.Target()},
	} {
		if err := CheckStoredPart(p.field, p.v, true); err != nil {
			return err
		}
	}
	if !pay.ValidDeliveryState(d.State) {
		return pay.Errorf(pay.EINVALID, "delivery state %q is not one of pending, done, dead", d.State)
	}
	return nil
}

// RefundOfPayment is the first check every store makes when it writes
// refund r of payment p: an empty Currency or Provider of r is p's, a
// different one is pay.EINVALID. A new refund the merchant requested
// (inserted, with an idempotency key) is refused here too if a dispute of
// the payment is open or lost (pay.CheckRefundRequest; disputes reads the
// payment's disputes). It returns r with Currency and Provider filled in.
func RefundOfPayment(r pay.Refund, p pay.Payment, inserted bool, disputes func(paymentID string) ([]pay.Dispute, error)) (pay.Refund, error) {
	if r.Currency == "" {
		r.Currency = p.Currency
	}
	if r.Provider == "" {
		r.Provider = p.Provider
	}
	switch {
	case r.Currency != p.Currency:
		return r, pay.Invalidf("currency", "refund %s is in %s, payment %s in %s", r.ID, r.Currency, p.ID, p.Currency)
	case r.Provider != p.Provider:
		return r, pay.Invalidf("provider", "refund %s is of provider %s, payment %s of %s", r.ID, r.Provider, p.ID, p.Provider)
	}
	if !inserted || r.IdemKey == "" {
		return r, nil
	}
	ds, err := disputes(p.ID)
	if err != nil {
		return r, err
	}
	return r, pay.CheckRefundRequest(r, p, ds)
}

// CheckSettlement checks settlement s before a backend stores it: its
// key, its figures (pay.ValidateSettlement) and, if it names a payment,
// that the payment is stored (paymentStored reports it), else ENOTFOUND.
func CheckSettlement(s pay.Settlement, paymentStored func(id string) (bool, error)) error {
	if err := CheckStoredPart("provider", s.Provider, true); err != nil {
		return err
	}
	if err := CheckStoredPart("settlement id", s.ID, true); err != nil {
		return err
	}
	if err := pay.ValidateSettlement(s); err != nil {
		return err
	}
	if s.PaymentID == "" {
		return nil
	}
	if ok, err := paymentStored(s.PaymentID); err != nil {
		return err
	} else if !ok {
		return pay.Errorf(pay.ENOTFOUND, "settlement %s: payment %s not found", s.ID, s.PaymentID)
	}
	return nil
}
