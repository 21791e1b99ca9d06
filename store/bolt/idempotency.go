package bolt

// The idempotency keys of the merchant API (idempotency_keys), with their
// expiry index (idempotency_keys_by_expiry) through which PurgeIdemKeys
// removes the expired ones.

import (
	"bytes"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// IdemKey returns the record of a scoped idempotency key, or ENOTFOUND.
func (t *tx) IdemKey(key string) (pay.IdemRecord, error) {
	var r idemRecord
	if err := t.getFound(bucketIdem, idemKey(key), &r, "idempotency key not found"); err != nil {
		return pay.IdemRecord{}, err
	}
	return r.record(), nil
}

// PutIdemKey stores r under r.Key, replacing what was there. A zero
// CreatedAt becomes Tx.Now.
func (t *tx) PutIdemKey(r pay.IdemRecord) error {
	if err := checkPart("idempotency key", r.Key, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &r.CreatedAt)
	key := idemKey(r.Key)
	if err := t.indexIdem(key, r.ExpiresAt); err != nil {
		return err
	}
	return t.putRecord(bucketIdem, key, fromIdem(r))
}

// ClaimIdemKey stores r unless its key has a record, and reports whether
// it did; if not, it returns the record stored. The single writer orders
// claims of one key.
func (t *tx) ClaimIdemKey(r pay.IdemRecord) (pay.IdemRecord, bool, error) {
	stored, err := t.IdemKey(r.Key)
	if pay.ErrorCode(err) != pay.ENOTFOUND {
		return stored, false, err
	}
	return pay.IdemRecord{}, true, t.PutIdemKey(r)
}

// indexIdem moves the expiry index entry of the idempotency key stored
// under key (idemKey) to expires, from the ExpiresAt of the record there,
// if any. PutIdemKey calls it before it writes the record.
func (t *tx) indexIdem(key []byte, expires time.Time) error {
	var old idemExpiry
	found, err := t.getRecord(bucketIdem, key, &old)
	if err != nil {
		return err
	}
	if found && keyTime(old.ExpiresAt.Time) == keyTime(expires) {
		return nil // the entry is there already: a finish or a take-over
	}
	if found {
		if err := t.del(bucketIdemByExpiry, idemExpiryKey(old.ExpiresAt.Time, key)); err != nil {
			return err
		}
	}
	return t.put(bucketIdemByExpiry, idemExpiryKey(expires, key), nil)
}

// PurgeIdemKeys removes up to limit idempotency keys whose ExpiresAt is at
// or before expiredBy (the merchant API treats such a key as unknown),
// oldest expiry first, and returns how many it removed. It walks
// idempotency_keys_by_expiry from its start, so the cost is O(removed).
// EINVALID for a limit below 1.
func (t *tx) PurgeIdemKeys(expiredBy time.Time, limit int) (int, error) {
	bound := keyTime(expiredBy)
	due, err := t.oldestTimeKeys(bucketIdemByExpiry, limit, func(ns uint64) bool { return ns <= bound })
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range due {
		// The record is removed only if this entry is its current one.
		var r idemRecord
		found, err := t.getRecord(bucketIdem, e.rest, &r)
		if err != nil {
			return n, err
		}
		if found && bytes.Equal(idemExpiryKey(r.ExpiresAt.Time, e.rest), e.ix) {
			if err := t.del(bucketIdem, e.rest); err != nil {
				return n, err
			}
			n++
		}
		if err := t.del(bucketIdemByExpiry, e.ix); err != nil {
			return n, err
		}
	}
	return n, nil
}

// checkIdempotency reports idempotency keys that do not decode or lack
// their expiry index entry, and entries without a key.
func (c *checker) checkIdempotency() {
	var nIdem int
	_ = c.bucket(bucketIdem).ForEach(func(k, v []byte) error {
		nIdem++
		var r idemRecord
		if err := decodeAt("idempotency key", k, v, &r); err != nil {
			c.report(fmt.Errorf("%s %x: %w", bucketIdem, k, err))
			return nil
		}
		c.want(bucketIdemByExpiry, idemExpiryKey(r.ExpiresAt.Time, k), fmt.Sprintf("idempotency key %q", r.Key))
		return nil
	})
	c.wantCount(bucketIdemByExpiry, nIdem, "keys")
}
