package bolt

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// AcquireLease takes the payment's lease for holder until Tx.Now+ttl with
// the token one above the last one given out. A lease in force at Tx.Now
// (pay.Lease.Held) is ELEASEHELD whoever holds it, the same holder
// included: a holder name may be shared by several goroutines, and each
// acquisition must fence the ones before it. EINVALID for an empty id or
// holder or a ttl below 1ns.
func (t *tx) AcquireLease(paymentID, holder string, ttl time.Duration) (pay.Lease, error) {
	if err := store.CheckLeaseRequest(paymentID, holder, ttl); err != nil {
		return pay.Lease{}, err
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
	if _, err := t.getRecord(bucketLeases, keyID(paymentID), &r); err != nil {
		return pay.Lease{}, err
	}
	return pay.Lease{PaymentID: paymentID, Holder: r.Holder, Token: r.Token, ExpiresAt: r.ExpiresAt.UTC()}, nil
}

// putLease stores l under its payment id, in UTC, and keeps
// leases_in_force in step: an entry for l if it is in force (released and
// ended leases have none), none for the record it replaces.
func (t *tx) putLease(l pay.Lease) error {
	var old leaseRecord
	if found, err := t.getRecord(bucketLeases, keyID(l.PaymentID), &old); err != nil {
		return err
	} else if found {
		if err := t.del(bucketLeasesInForce, leaseInForceKey(old.ExpiresAt.Time, l.PaymentID)); err != nil {
			return err
		}
	}
	if l.Held(t.now) {
		if err := t.put(bucketLeasesInForce, leaseInForceKey(l.ExpiresAt, l.PaymentID), nil); err != nil {
			return err
		}
	}
	return t.putRecord(bucketLeases, keyID(l.PaymentID), leaseRecord{Holder: l.Holder, Token: l.Token, ExpiresAt: at(l.ExpiresAt)})
}

// EndLeases ends every lease still in force, keeping holders and tokens,
// and returns how many it ended. bbolt lets one process at a time open the
// file, so when a paystate opens it any lease in force belongs to a
// process that died (a crash, SIGKILL): without this, that process's
// payments would wait up to lease.ttl before anyone could work on them.
// Tokens are kept, so the next acquisition still fences the dead holder.
// It reads leases_in_force from Tx.Now on: the leases that were in force
// when written and expire later, not every payment ever leased, so that
// start-up does not grow with the file. With none in force it writes
// nothing.
func (db *DB) EndLeases(ctx context.Context) (int, error) {
	var held []string
	err := db.view(ctx, nil, func(t *tx) error {
		held = t.leasesInForce()
		return nil
	})
	if err != nil || len(held) == 0 {
		return 0, err
	}
	n := 0
	err = db.update(ctx, nil, func(t *tx) error {
		n = 0
		for _, id := range t.leasesInForce() {
			l, err := t.Lease(id)
			if err != nil {
				return err
			}
			if !l.Held(t.now) {
				continue
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

// leasesInForce returns the payment ids of the leases_in_force entries
// that expire after Tx.Now.
func (t *tx) leasesInForce() []string {
	var ids []string
	c := t.bucket(bucketLeasesInForce).Cursor()
	for k, _ := c.Seek(be64(keyTime(t.now) + 1)); k != nil; k, _ = c.Next() {
		if len(k) <= 8 {
			continue
		}
		if id, ok := parseKeyID(k[8:]); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// checkLeases reports lease records that do not decode and
// leases_in_force entries that do not match their lease. (Whether a lease
// without an entry was in force when written depends on the clock of the
// process that wrote it, which the check cannot know.)
func (c *checker) checkLeases() {
	c.decodeEach(bucketLeases, &leaseRecord{})
	_ = c.bucket(bucketLeasesInForce).ForEach(func(k, _ []byte) error {
		var r leaseRecord
		if len(k) <= 8 {
			c.report(fmt.Errorf("%s entry %x: too short", bucketLeasesInForce, k))
		} else if found, err := c.getRecord(bucketLeases, k[8:], &r); err != nil || !found || !bytes.Equal(k[:8], be64(keyTime(r.ExpiresAt.Time))) {
			c.report(fmt.Errorf("%s entry %x: no such lease", bucketLeasesInForce, k))
		}
		return nil
	})
}
