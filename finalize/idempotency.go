package finalize

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Defaults of Idempotency.
const (
	// DefaultIdemTTL is how long a key is kept (idempotency.ttl).
	DefaultIdemTTL = 24 * time.Hour
	// DefaultIdemLock is how long an in-flight key is held before a retry
	// may take it over (a request that died midway).
	DefaultIdemLock = 60 * time.Second
)

// Claim is what a request found for its key.
type Claim int

// The claims Do answers with.
const (
	ClaimNew    Claim = iota // first request with this key: run it
	ClaimResume              // a request with this key died midway: resume it
	ClaimReplay              // finished before: answer what was stored
)

// Idempotency keeps the idempotency keys of the merchant API (the IETF
// draft "The Idempotency-Key HTTP Header Field") and runs the operations
// under them (Do): the claim of a key by a request, the replay of a
// finished one, the take-over and resumption of a key whose request died
// midway, the answer stored when the operation ends, and the release of
// the key after a failure that says nothing final. The HTTP adapter reads
// the header, scopes the key, fingerprints the request (method, path,
// body) and encodes the answers; every rule is here.
//
// Same key, same fingerprint, finished: replay. Same key, other
// fingerprint: EKEYREUSED. Same key while the first request runs:
// EKEYINUSE (an *InUseError with the time until it may be retried). A key
// in flight past its Lock belongs to a request that died: the next request
// takes it over and resumes it (the payment it stored is on the record).
type Idempotency struct {
	Store store.Store
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
	// Logger logs a key that could not be settled after a failure.
	Logger zerolog.Logger
}

// IdemKey is the idempotency key an operation runs under: the scoped key,
// the request's fingerprint, and how the adapter answers (the status code
// of a success, the encoding of a failure).
type IdemKey struct {
	Key string
	// Legacy, if not empty, is the name the same key was stored under
	// before keys were scoped by merchant (by API key): a record stored
	// under it, and not expired, is the key's record.
	Legacy      string
	Fingerprint string
	// Status is the status code stored as the answer of a success.
	Status int
	// Refusal is the adapter's answer to a failed request, stored and
	// replayed when final; nil: no failure is stored.
	Refusal func(err error) (status int, body []byte)
}

// Op is an operation run under an idempotency key (Do): a create or a
// refund, in two steps around its call to the PSP.
type Op struct {
	// Check, if not nil, runs in the read transaction that finds the key
	// free (resumed: "") or held by a request that died (resumed: the
	// payment on the key). Its error is the answer, and nothing is
	// written: a request that cannot run consumes no key.
	Check func(tx Tx, resumed string) error
	// Start stores the operation's first step in the transaction that
	// claims the key and returns the payment it is about, which the key's
	// record names; stored is the name the key is stored under. For a
	// request that died midway, resumed is the payment on the key and
	// Start finds what the first try stored.
	Start func(tx Tx, stored, resumed string) (paymentID string, err error)
	// Run takes the stored step to its outcome, outside any transaction
	// (the PSP call). It runs finish in the transaction that records the
	// outcome, when there is one: that commit stores the key's answer.
	Run func(ctx context.Context, paymentID string, finish func(Tx) error) error
}

// Done is what Do did under a key: the claim and the key's record (for a
// replay, the answer to give again).
type Done struct {
	Claim  Claim
	Record pay.IdemRecord
}

// Do runs op under key. A replay, a reused key, a key in flight and a
// refusal of op.Check are answered from a read transaction. Otherwise the
// key is claimed in the transaction of op.Start, and its answer
// (key.Status, the payment) stored in the one that records op.Run's
// outcome, or on its own: two commits. A failure is stored as the key's
// answer (key.Refusal) when it is final, a 4xx but 409 that the same
// request would get again; one about this moment (a conflict, a failure of
// the server, the storage or the PSP) releases the key for a retry.
func (k *Idempotency) Do(ctx context.Context, key IdemKey, op Op) (Done, error) {
	r := &doRun{k: k, key: key, op: op} // one allocation for the state the transactions share
	// What a read transaction can answer, it answers.
	err := ReadTx(ctx, k.Store, r.read)
	if err != nil || r.done.Claim == ClaimReplay {
		return r.done, err
	}
	r.key = r.key.resolved(r.done.Record)

	// Claim the key with the operation's first step, before anything
	// leaves the process (again after a compare-and-set lost, as Finalize).
	for range maxRetries {
		if err = WriteTx(ctx, k.Store, r.claim); pay.ErrorCode(err) != pay.ECONFLICT {
			break
		}
	}
	if err != nil {
		return r.done, k.refuse(ctx, r.key, false, err)
	}
	r.done.Record = r.claimed

	// Take the operation to its outcome; the key's answer goes into the
	// transaction that records it.
	if err := op.Run(ctx, r.paymentID, r.finish); err != nil {
		return r.done, k.refuse(ctx, r.key, true, err)
	}
	if !r.finished {
		err = WriteTx(ctx, k.Store, r.finish)
	}
	return r.done, err
}

// doRun is the state of one Do, shared by its transactions.
type doRun struct {
	k         *Idempotency
	key       IdemKey
	op        Op
	done      Done
	paymentID string
	claimed   pay.IdemRecord
	finished  bool
}

// read is Do's read transaction: the key's claim, and op.Check.
func (r *doRun) read(tx Tx) (err error) {
	if r.done.Record, r.done.Claim, err = r.k.claim(tx, r.key); err != nil || r.done.Claim == ClaimReplay || r.op.Check == nil {
		return err
	}
	return r.op.Check(tx, r.done.resumed())
}

// claim stores the operation's first step and claims the key with it.
func (r *doRun) claim(tx Tx) (err error) {
	if r.paymentID, err = r.op.Start(tx, r.key.Key, r.done.resumed()); err != nil {
		return err
	}
	r.claimed, err = r.k.take(tx, r.key, r.done, r.paymentID)
	return err
}

// finish stores the key's answer in the transaction that records the
// operation's outcome.
func (r *doRun) finish(tx Tx) error {
	tx.OnCommit(r.committed)
	err := finishIdemKey(tx, r.key.Key, r.paymentID, r.key.Status, nil)
	if pay.ErrorCode(err) == pay.ENOTFOUND {
		return nil // the key is gone (purged): the outcome is what must be recorded
	}
	return err
}

func (r *doRun) committed() { r.finished = true }

// resumed is the payment of the request that died midway, if any.
func (d Done) resumed() string {
	if d.Claim == ClaimResume {
		return d.Record.PaymentID
	}
	return ""
}

// take claims key inside tx for paymentID, as the read transaction's claim
// d decided, and returns the record stored. A new claim stores the record
// by the key's unique key (ClaimIdemKey), over an expired record only; a
// take-over needs the record d found, still left by the request that
// died. Anything else is a request that claimed the key meanwhile:
// EKEYINUSE.
func (k *Idempotency) take(tx Tx, key IdemKey, d Done, paymentID string) (pay.IdemRecord, error) {
	now, rec := tx.Now(), k.record(tx, key, paymentID)
	stored, claimed, err := tx.ClaimIdemKey(rec)
	switch {
	case err != nil || claimed:
		return rec, err
	case d.Claim == ClaimNew && !now.Before(stored.ExpiresAt):
		// Expired, not purged yet: a new claim.
	case d.Claim == ClaimResume && stored.Owner == d.Record.Owner && stored.LockedUntil.Equal(d.Record.LockedUntil):
		// The request that held the key died: take it over.
		stored.Owner, stored.LockedUntil, stored.PaymentID = rec.Owner, rec.LockedUntil, paymentID
		rec = stored
	default:
		return rec, &InUseError{RetryAfter: max(stored.LockedUntil.Sub(now), 0)}
	}
	return rec, tx.PutIdemKey(rec)
}

// refuse settles the key of a request that failed with err, and returns
// err. A final answer (key.Refusal, not 409 nor 5xx) is stored on the key:
// on the key this request holds, or, if the failure rolled the claim
// back, on the key claimed for it now. Any other failure releases a key
// this request holds, so that a retry runs (or resumes) at once.
func (k *Idempotency) refuse(ctx context.Context, key IdemKey, held bool, err error) error {
	ctx = context.WithoutCancel(ctx) // the answer is kept even if the client left
	var status int
	var body []byte
	if key.Refusal != nil {
		status, body = key.Refusal(err)
	}
	transient := status == 0 || status == http.StatusConflict || status >= 500
	if transient && !held {
		return err
	}
	serr := WriteTx(ctx, k.Store, func(tx Tx) error {
		if transient {
			// Nothing final was said: let a retry run or resume.
			r, err := tx.IdemKey(key.Key)
			if err != nil {
				return err
			}
			r.LockedUntil = tx.Now()
			return tx.PutIdemKey(r)
		}
		if !held {
			if _, claimed, err := tx.ClaimIdemKey(k.record(tx, key, "")); err != nil || !claimed {
				return err // claimed by another request meanwhile: its answer stands
			}
		}
		return finishIdemKey(tx, key.Key, "", status, body)
	})
	if serr != nil {
		k.Logger.Warn().Err(serr).Bool("released", transient).Msg("settle idempotency key")
	}
	return err
}

// record is a new claim of key, in flight for this process, naming
// paymentID.
func (k *Idempotency) record(tx Tx, key IdemKey, paymentID string) pay.IdemRecord {
	now := tx.Now()
	return pay.IdemRecord{Key: key.Key, Fingerprint: key.Fingerprint, State: pay.IdemInFlight, Owner: k.Owner,
		LockedUntil: now.Add(defaults.Or(k.Lock, DefaultIdemLock)), PaymentID: paymentID, CreatedAt: now,
		ExpiresAt: now.Add(defaults.Or(k.TTL, DefaultIdemTTL))}
}

// claim decides, inside tx, what a request with key may do: ClaimNew (no
// record, or an expired one), ClaimResume (rec is the record of the
// request that died holding it) or ClaimReplay (rec holds the answer);
// EKEYREUSED for another fingerprint, EKEYINUSE for a key in flight. It
// writes nothing. rec.Key is the name the key is stored under: key.Key,
// or key.Legacy when a live record is stored under that name only.
func (k *Idempotency) claim(tx Tx, key IdemKey) (rec pay.IdemRecord, _ Claim, _ error) {
	now := tx.Now()
	r, err := tx.IdemKey(key.Key)
	if pay.ErrorCode(err) == pay.ENOTFOUND && key.Legacy != "" {
		switch lr, lerr := tx.IdemKey(key.Legacy); {
		case lerr == nil && now.Before(lr.ExpiresAt):
			r, err = lr, nil
		case lerr != nil && pay.ErrorCode(lerr) != pay.ENOTFOUND:
			return rec, 0, lerr
		}
	}
	switch {
	case pay.ErrorCode(err) == pay.ENOTFOUND || (err == nil && !now.Before(r.ExpiresAt)):
		return pay.IdemRecord{Key: key.Key}, ClaimNew, nil
	case err != nil:
		return rec, 0, err
	case r.Fingerprint != key.Fingerprint:
		return rec, 0, pay.Errorf(pay.EKEYREUSED, "this Idempotency-Key was used with another request body or path")
	case r.State == pay.IdemDone:
		return r, ClaimReplay, nil
	case now.Before(r.LockedUntil) && (r.Owner == k.Owner || !k.Exclusive):
		return r, 0, &InUseError{RetryAfter: r.LockedUntil.Sub(now)}
	}
	return r, ClaimResume, nil // the request that held the key died midway
}

// resolved is key as the claim rec names it: under the name rec is
// stored under, with no other name to look up. An operation goes on
// under it after its first claim, so that every later claim and its
// answer name the one record.
func (key IdemKey) resolved(rec pay.IdemRecord) IdemKey {
	if rec.Key != "" {
		key.Key = rec.Key
	}
	key.Legacy = ""
	return key
}

// finishIdemKey stores the answer of a finished request on its key: the
// status code, the body and, if not empty, the payment it is about. An
// answer about a payment needs no body: its replay is the payment's
// current view.
func finishIdemKey(tx Tx, key, paymentID string, status int, body []byte) error {
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
