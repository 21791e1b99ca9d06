package pay

import "math"

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
	}{{"payment id", p.ID, true}, {"order_id", p.OrderID, false}, {"provider", p.Provider, false}, {"provider_ref", p.ProviderRef, false}} {
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
