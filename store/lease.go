package store

import (
	"time"

	"github.com/paystate/paystate/pay"
)

// AcquireLease takes the payment's lease for holder until Tx.Now+ttl with
// the token one above the last one given out. A lease in force at Tx.Now
// (pay.Lease.Held) is ELEASEHELD whoever holds it, the same holder
// included: a holder name may be shared by several goroutines, and each
// acquisition must fence the ones before it. EINVALID for an empty id or
// holder or a ttl below 1ns.
func (t *tx) AcquireLease(paymentID, holder string, ttl time.Duration) (pay.Lease, error) {
	if err := checkPart("payment id", paymentID, true); err != nil {
		return pay.Lease{}, err
	}
	if holder == "" {
		return pay.Lease{}, pay.Errorf(pay.EINVALID, "lease holder is required")
	}
	if ttl <= 0 {
		return pay.Lease{}, pay.Errorf(pay.EINVALID, "lease ttl must be positive, got %s", ttl)
	}
	cur, err := t.Lease(paymentID)
	if err != nil {
		return pay.Lease{}, err
	}
	if cur.Held(t.now) {
		return pay.Lease{}, pay.Errorf(pay.ELEASEHELD, "payment %s is leased by %s until %s", paymentID, cur.Holder, cur.ExpiresAt.Format(time.RFC3339Nano))
	}
	l := pay.Lease{PaymentID: paymentID, Holder: holder, Token: cur.Token + 1, ExpiresAt: t.now.Add(ttl)}
	if err := t.putLease(l); err != nil {
		return pay.Lease{}, err
	}
	return l, nil
}

// ReleaseLease ends the lease (ExpiresAt = Tx.Now) if token is current and
// the lease is still in force; otherwise it does nothing. Holder and token
// are kept, so the next acquisition gets token+1.
func (t *tx) ReleaseLease(paymentID string, token uint64) error {
	cur, err := t.Lease(paymentID)
	if err != nil {
		return err
	}
	if token == 0 || cur.Token != token || !cur.Held(t.now) {
		return nil
	}
	cur.ExpiresAt = t.now
	return t.putLease(cur)
}

// Lease returns the payment's lease record; a payment whose lease was never
// taken gets a record with Token 0 and no error.
func (t *tx) Lease(paymentID string) (pay.Lease, error) {
	var r leaseRecord
	if _, err := t.getJSON(bucketLeases, []byte(paymentID), &r); err != nil {
		return pay.Lease{}, err
	}
	return pay.Lease{PaymentID: paymentID, Holder: r.Holder, Token: r.Token, ExpiresAt: r.ExpiresAt.UTC()}, nil
}

func (t *tx) putLease(l pay.Lease) error {
	return t.putJSON(bucketLeases, []byte(l.PaymentID), leaseRecord{Holder: l.Holder, Token: l.Token, ExpiresAt: l.ExpiresAt.UTC()})
}
