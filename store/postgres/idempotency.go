package postgres

// The idempotency keys of the merchant API (idempotency_keys), with their
// expiry index (idempotency_keys_by_expiry) through which PurgeIdemKeys
// removes the expired ones.

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
)

// IdemKey returns the record of a scoped idempotency key, or ENOTFOUND.
func (t *tx) IdemKey(key string) (pay.IdemRecord, error) {
	if err := t.lock("idem", key); err != nil {
		return pay.IdemRecord{}, err
	}
	r, found, err := queryOne(t, "read idempotency key", `SELECT key, fingerprint, state, owner, locked_until, payment_id,
		status_code, body, created_at, expires_at FROM idempotency_keys WHERE key = $1`, func(row pgx.Row) (pay.IdemRecord, error) {
		var (
			r                        pay.IdemRecord
			locked, created, expires int64
			status                   int64
		)
		err := row.Scan(&r.Key, &r.Fingerprint, &r.State, &r.Owner, &locked, &r.PaymentID, &status, &r.Body, &created, &expires)
		r.LockedUntil, r.CreatedAt, r.ExpiresAt = fromNS(locked), fromNS(created), fromNS(expires)
		r.StatusCode, r.Body = int(status), nilIfEmpty(r.Body)
		return r, err
	}, key)
	if err != nil {
		return pay.IdemRecord{}, err
	} else if !found {
		return pay.IdemRecord{}, pay.Errorf(pay.ENOTFOUND, "idempotency key not found")
	}
	return r, nil
}

// PutIdemKey stores r under r.Key, replacing what was there. A zero
// CreatedAt becomes Tx.Now. Two transactions that claim a key (IdemKey,
// then PutIdemKey) at once take turns on the key's lock: the second finds
// the first one's record.
func (t *tx) PutIdemKey(r pay.IdemRecord) error {
	if err := checkPart("idempotency key", r.Key, true); err != nil {
		return err
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = t.now
	}
	e := enc{what: "idempotency key"}
	args := []any{r.Key, r.Fingerprint, r.State, r.Owner, e.stamp(r.LockedUntil), r.PaymentID, int64(r.StatusCode), orEmpty(r.Body),
		e.stamp(r.CreatedAt), e.stamp(r.ExpiresAt)}
	if e.err != nil {
		return e.err
	}
	if err := t.lock("idem", r.Key); err != nil {
		return err
	}
	_, err := t.exec("put idempotency key", `INSERT INTO idempotency_keys (key, fingerprint, state, owner, locked_until, payment_id,
			status_code, body, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, state = excluded.state, owner = excluded.owner,
			locked_until = excluded.locked_until, payment_id = excluded.payment_id, status_code = excluded.status_code,
			body = excluded.body, created_at = excluded.created_at, expires_at = excluded.expires_at`, args...)
	return err
}

// PurgeIdemKeys removes up to limit idempotency keys whose ExpiresAt is at
// or before expiredBy, oldest expiry first, and returns how many it
// removed. EINVALID for a limit below 1.
func (t *tx) PurgeIdemKeys(expiredBy time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	// The outer condition is checked again on a row that a concurrent
	// transaction changed (READ COMMITTED): a key taken over meanwhile,
	// with a new expiry, is kept.
	n, err := t.exec("purge idempotency keys", `DELETE FROM idempotency_keys WHERE key IN (
		SELECT key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at, key LIMIT $2)
		AND expires_at <= $1`, keyNS(expiredBy), limit)
	return int(n), err
}
