package postgres

// The idempotency keys of the merchant API (idempotency_keys), with their
// expiry index (idempotency_keys_by_expiry) through which PurgeIdemKeys
// removes the expired ones.

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// IdemKey returns the record of a scoped idempotency key, or ENOTFOUND.
// It takes no lock: a request claims its key with ClaimIdemKey, whose
// row lock orders the claims of one key.
func (t *tx) IdemKey(key string) (pay.IdemRecord, error) {
	return t.readIdemKey(key, "")
}

// readIdemKey reads the record of key, with lock ("FOR UPDATE" or "")
// appended to the query; ENOTFOUND if there is none.
func (t *tx) readIdemKey(key, lock string) (pay.IdemRecord, error) {
	r, found, err := queryOne(t, "read idempotency key", `SELECT key, fingerprint, state, owner, locked_until, payment_id,
		status_code, body, created_at, expires_at FROM idempotency_keys WHERE key = $1 `+lock, func(row pgx.Row) (pay.IdemRecord, error) {
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
	return orNotFound(r, found, err, "idempotency key not found")
}

// ClaimIdemKey stores r unless its key has a record, in one statement and
// without an advisory lock: the key's unique index decides. A transaction
// that stored the same key and has not ended is waited for. If r is not
// stored, the record there is read with its row locked (FOR UPDATE), so
// that of two requests that find a record to take over (expired, or left
// by a request that died) the second reads the first one's. A zero
// CreatedAt becomes Tx.Now.
func (t *tx) ClaimIdemKey(r pay.IdemRecord) (pay.IdemRecord, bool, error) {
	args, err := t.idemArgs(&r)
	if err != nil {
		return pay.IdemRecord{}, false, err
	}
	_, claimed, err := queryOne(t, "claim idempotency key", `INSERT INTO idempotency_keys (key, fingerprint, state, owner,
			locked_until, payment_id, status_code, body, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (key) DO NOTHING RETURNING true`, scalar[bool], args...)
	if err != nil || claimed {
		return pay.IdemRecord{}, claimed, err
	}
	stored, err := t.readIdemKey(r.Key, "FOR UPDATE")
	return stored, false, err
}

// idemArgs checks r, defaults its CreatedAt to Tx.Now and returns the
// values of its columns in table order.
func (t *tx) idemArgs(r *pay.IdemRecord) ([]any, error) {
	if err := checkPart("idempotency key", r.Key, true); err != nil {
		return nil, err
	}
	store.NowIfZero(t.now, &r.CreatedAt)
	e := enc{what: "idempotency key"}
	args := []any{r.Key, r.Fingerprint, r.State, r.Owner, e.stamp(r.LockedUntil), r.PaymentID, int64(r.StatusCode), orEmpty(r.Body),
		e.stamp(r.CreatedAt), e.stamp(r.ExpiresAt)}
	return args, e.err
}

// PutIdemKey stores r under r.Key, replacing what was there. A zero
// CreatedAt becomes Tx.Now.
func (t *tx) PutIdemKey(r pay.IdemRecord) error {
	args, err := t.idemArgs(&r)
	if err != nil {
		return err
	}
	_, err = t.exec("put idempotency key", `INSERT INTO idempotency_keys (key, fingerprint, state, owner, locked_until, payment_id,
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
