package store

import (
	"context"
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
	if _, err := t.getRecord(bucketLeases, []byte(paymentID), &r); err != nil {
		return pay.Lease{}, err
	}
	return pay.Lease{PaymentID: paymentID, Holder: r.Holder, Token: r.Token, ExpiresAt: r.ExpiresAt.UTC()}, nil
}

// putLease stores l under its payment id, in UTC.
func (t *tx) putLease(l pay.Lease) error {
	return t.putRecord(bucketLeases, []byte(l.PaymentID), leaseRecord{Holder: l.Holder, Token: l.Token, ExpiresAt: at(l.ExpiresAt)})
}

// EndLeases ends every lease still in force, keeping holders and tokens,
// and returns how many it ended. bbolt lets one process at a time open the
// file, so when a paystate opens it any lease in force belongs to a
// process that died (a crash, SIGKILL): without this, that process's
// payments would wait up to lease.ttl before anyone could work on them.
// Tokens are kept, so the next acquisition still fences the dead holder.
// It reads every lease record once: O(payments ever leased), at start.
func (db *DB) EndLeases(ctx context.Context) (int, error) {
	n := 0
	err := db.Update(ctx, func(ptx pay.Tx) error {
		t := ptx.(*tx)
		n = 0
		var held []string
		err := t.bucket(bucketLeases).ForEach(func(k, v []byte) error {
			var r leaseRecord
			if err := decode("lease", v, &r); err != nil {
				return corrupt(bucketLeases, "lease of %s: %v", k, err)
			}
			if r.Token != 0 && t.now.Before(r.ExpiresAt.Time) {
				held = append(held, string(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range held {
			l, err := t.Lease(id)
			if err != nil {
				return err
			}
			l.ExpiresAt = t.now
			if err := t.putLease(l); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// checkLeases reports lease records that do not decode.
func (c *checker) checkLeases() { c.decodeEach(bucketLeases, &leaseRecord{}) }
