package finalize

import (
	"context"
	"time"

	"github.com/paystate/paystate/pay"
)

// Defaults of Idempotency.
const (
	// DefaultIdemTTL is how long a key is kept (idempotency.ttl).
	DefaultIdemTTL = 24 * time.Hour
	// DefaultIdemLock is how long an in-flight key is held before a retry
	// may take it over (a request that died midway).
	DefaultIdemLock = 60 * time.Second
)

// Claim is what Begin found for a key.
type Claim int

// The claims Begin answers with.
const (
	ClaimNew    Claim = iota // first request with this key: run it
	ClaimResume              // a request with this key died midway: resume it
	ClaimReplay              // finished before: answer what was stored
)

// Idempotency keeps the idempotency keys of the merchant API (the IETF
// draft "The Idempotency-Key HTTP Header Field"): the claim of a key by a
// request, the takeover of a key whose request died midway, and the answer
// stored for a replay. The HTTP adapter reads the header, scopes the key
// and fingerprints the request (method, path, body); this is the state
// machine on storage.
//
// Same key, same fingerprint, finished: replay. Same key, other
// fingerprint: EKEYREUSED. Same key while the first request runs:
// EKEYINUSE (an *InUseError with the time until it may be retried). A key
// in flight past its Lock belongs to a request that died: the next request
// takes it over and resumes it (the payment it stored is on the record).
type Idempotency struct {
	Store pay.Store
	// TTL is how long keys are kept; default DefaultIdemTTL.
	TTL time.Duration
	// Lock bounds how long a key stays in flight without an answer;
	// default DefaultIdemLock.
	Lock time.Duration
	// Owner identifies this process on in-flight keys.
	Owner string
	// Exclusive says this process is the only one using the store (bbolt
	// holds a file lock): an in-flight key left by another owner belongs
	// to a request that died with its process, and is taken over at once.
	Exclusive bool
}

// Begin claims key for a request with the given fingerprint, or says why
// not. It returns the key's record and the claim: new (run the request),
// resume (run it from rec.PaymentID) or replay (answer rec). A replay, a
// reused key and a key in flight are answered from a read transaction:
// only a claim writes.
func (k *Idempotency) Begin(ctx context.Context, key, fingerprint string) (rec pay.IdemRecord, claim Claim, err error) {
	ik := IdemKey{Key: key, Fingerprint: fingerprint}
	if rec, claim, err = k.peek(ctx, ik); err != nil || claim == ClaimReplay {
		return rec, claim, err
	}
	err = k.Store.Update(ctx, func(tx pay.Tx) error {
		rec, claim, err = k.claim(tx, ik)
		if err != nil || claim == ClaimReplay {
			return err
		}
		return tx.PutIdemKey(rec)
	})
	return rec, claim, err
}

// peek is the claim of key as a read transaction sees it, written nowhere:
// a replay, a reused key or a key in flight is the answer as it is; a new
// or resumed claim is made again, in the transaction that writes it.
func (k *Idempotency) peek(ctx context.Context, key IdemKey) (rec pay.IdemRecord, claim Claim, err error) {
	err = k.Store.View(ctx, func(tx pay.Tx) error {
		rec, claim, err = k.claim(tx, key)
		return err
	})
	return rec, claim, err
}

// claim decides, inside tx, what a request with key may do, and returns
// the record to store for a new or resumed claim (the caller writes it,
// so a create writes it once, with its payment). It writes nothing. The
// record's Key is the name the key is stored under: key.Key, or
// key.Legacy when a live record is stored under that name only.
func (k *Idempotency) claim(tx pay.Tx, key IdemKey) (pay.IdemRecord, Claim, error) {
	lock := or(k.Lock, DefaultIdemLock)
	now := tx.Now()
	r, err := tx.IdemKey(key.Key)
	if pay.ErrorCode(err) == pay.ENOTFOUND && key.Legacy != "" {
		switch lr, lerr := tx.IdemKey(key.Legacy); {
		case lerr == nil && now.Before(lr.ExpiresAt):
			r, err = lr, nil
		case lerr != nil && pay.ErrorCode(lerr) != pay.ENOTFOUND:
			return pay.IdemRecord{}, 0, lerr
		}
	}
	switch {
	case pay.ErrorCode(err) == pay.ENOTFOUND || (err == nil && !now.Before(r.ExpiresAt)):
		return pay.IdemRecord{Key: key.Key, Fingerprint: key.Fingerprint, State: pay.IdemInFlight, Owner: k.Owner,
			LockedUntil: now.Add(lock), CreatedAt: now, ExpiresAt: now.Add(or(k.TTL, DefaultIdemTTL))}, ClaimNew, nil
	case err != nil:
		return pay.IdemRecord{}, 0, err
	case r.Fingerprint != key.Fingerprint:
		return pay.IdemRecord{}, 0, pay.Errorf(pay.EKEYREUSED, "this Idempotency-Key was used with another request body or path")
	case r.State == pay.IdemDone:
		return r, ClaimReplay, nil
	case now.Before(r.LockedUntil) && (r.Owner == k.Owner || !k.Exclusive):
		return r, 0, &InUseError{RetryAfter: r.LockedUntil.Sub(now)}
	default:
		// The request that held the key died midway: take it over.
		r.Owner, r.LockedUntil = k.Owner, now.Add(lock)
		return r, ClaimResume, nil
	}
}

// resolved is key as the claim rec names it: under the name rec is
// stored under, with no other name to look up. An operation goes on
// under it after its first claim, so that every later claim, its refund
// and its answer name the one record.
func (key IdemKey) resolved(rec pay.IdemRecord) IdemKey {
	if rec.Key != "" {
		key.Key = rec.Key
	}
	key.Legacy = ""
	return key
}

// Finish stores the answer of a finished request on its key: the status
// code, the body and, if not empty, the payment it is about. An answer
// about a payment needs no body: its replay is the payment's current view.
func (k *Idempotency) Finish(ctx context.Context, key, paymentID string, status int, body []byte) error {
	return k.Store.Update(ctx, func(tx pay.Tx) error {
		return finishIdemKey(tx, key, paymentID, status, body)
	})
}

// finishIdemKey is Finish inside a transaction the caller owns.
func finishIdemKey(tx pay.Tx, key, paymentID string, status int, body []byte) error {
	r, err := tx.IdemKey(key)
	if err != nil {
		return err
	}
	// A finished key has no owner: only a key in flight is held.
	r.State, r.StatusCode, r.Body, r.Owner, r.LockedUntil = pay.IdemDone, status, body, "", time.Time{}
	if paymentID != "" {
		r.PaymentID = paymentID
	}
	return tx.PutIdemKey(r)
}

// Release gives a key up after a failure that stored no answer, so a retry
// may run (or resume) at once.
func (k *Idempotency) Release(ctx context.Context, key string) error {
	return k.Store.Update(ctx, func(tx pay.Tx) error {
		r, err := tx.IdemKey(key)
		if err != nil {
			return err
		}
		r.LockedUntil = tx.Now()
		return tx.PutIdemKey(r)
	})
}

// IdemKey is the idempotency key a create runs under (CreateOnce): the
// scoped key, the request's fingerprint and the status code stored as the
// answer of a success.
type IdemKey struct {
	Key string
	// Legacy, if not empty, is the name the same key was stored under
	// before keys were scoped by merchant (by API key): a record stored
	// under it, and not expired, is the key's record.
	Legacy      string
	Fingerprint string
	Status      int
}

// linkIdemKey records paymentID on a claimed key inside the transaction
// that stores the payment, so a retry after a crash finds it.
func linkIdemKey(tx pay.Tx, key, paymentID string) error {
	r, err := tx.IdemKey(key)
	if err != nil {
		return err
	}
	r.PaymentID = paymentID
	return tx.PutIdemKey(r)
}

// InUseError is EKEYINUSE: a request with the key is still in flight.
type InUseError struct {
	// RetryAfter is the time until the key may be taken over.
	RetryAfter time.Duration
}

// Error says that the key is in flight.
func (e *InUseError) Error() string { return e.Unwrap().Error() }

// Unwrap lets pay.ErrorCode see the code.
func (e *InUseError) Unwrap() error {
	return pay.Errorf(pay.EKEYINUSE, "a request with this Idempotency-Key is still in flight; retry later")
}
