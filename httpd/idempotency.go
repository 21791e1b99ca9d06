package httpd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// The Idempotency-Key protocol of the merchant API (IETF draft "The
// Idempotency-Key HTTP Header Field"):
//
//   - the key is 1–255 printable ASCII characters; a request without it is
//     answered 400 (idempotency_key_missing);
//   - keys are scoped by operation and API key; the fingerprint is the
//     SHA-256 of method, path and body;
//   - same key, same fingerprint, finished: the stored status code is
//     replayed with Idempotent-Replayed: true. The body of a replay is the
//     payment's current client view, not a copy of the first one: a replay
//     must never hand out a client secret or redirect URL for a payment
//     that has finished since (the secret rule wins over byte equality);
//   - same key, other fingerprint: 422 idempotency_key_reused;
//   - same key while the first request runs: 409 idempotency_key_in_use
//     with Retry-After;
//   - only final answers are stored: a success or a 4xx that the same
//     request would get again. A 409 conflict or a 5xx releases the key,
//     and the retry runs (see transient);
//   - a request that died midway (the process was killed after the payment
//     was stored) is resumed by the retry from the stored payment, and the
//     PSP call repeats the same derived key, so nothing is charged twice.

// idemState is what begin found.
type idemState int

const (
	idemNew    idemState = iota // first request with this key: run it
	idemResume                  // a request with this key died midway: resume it
	idemReplay                  // finished before: replay
)

// idemKey reads and checks the Idempotency-Key header.
func idemKey(rc *fasthttp.RequestCtx) (string, error) {
	k := string(rc.Request.Header.Peek("Idempotency-Key"))
	if err := ValidIdempotencyKey(k); err != nil {
		return "", err
	}
	return k, nil
}

// ValidIdempotencyKey checks the value of an Idempotency-Key header: 1–255
// printable ASCII characters. An empty key is EKEYMISSING, any other wrong
// key EINVALID.
func ValidIdempotencyKey(k string) error {
	if len(k) == 0 {
		return pay.Errorf(pay.EKEYMISSING, "the Idempotency-Key header is required for this request")
	}
	if len(k) > 255 {
		return pay.Errorf(pay.EINVALID, "Idempotency-Key is longer than 255 characters")
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e {
			return pay.Errorf(pay.EINVALID, "Idempotency-Key must be printable ASCII")
		}
	}
	return nil
}

// Fingerprint is the request fingerprint of an idempotency key: the hex
// SHA-256 of method, path and body.
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// ScopedKey is the stored name of a client's idempotency key: the
// operation, a hash of the API key and the key itself.
func ScopedKey(op, apiKey, key string) string {
	h := hashKey(apiKey)
	return op + ":" + hex.EncodeToString(h[:8]) + ":" + key
}

// idemBegin claims the key for this request, or says why not.
func (s *Server) idemBegin(ctx context.Context, scoped, fp string) (pay.IdemRecord, idemState, error) {
	var rec pay.IdemRecord
	var state idemState
	err := s.Store.Update(ctx, func(tx pay.Tx) error {
		now := tx.Now()
		r, err := tx.IdemKey(scoped)
		switch {
		case pay.ErrorCode(err) == pay.ENOTFOUND || (err == nil && !now.Before(r.ExpiresAt)):
			rec = pay.IdemRecord{Key: scoped, Fingerprint: fp, State: pay.IdemInFlight, Owner: s.Owner,
				LockedUntil: now.Add(s.IdemLock), CreatedAt: now, ExpiresAt: now.Add(s.IdemTTL)}
			state = idemNew
			return tx.PutIdemKey(rec)
		case err != nil:
			return err
		case r.Fingerprint != fp:
			return pay.Errorf(pay.EKEYREUSED, "this Idempotency-Key was used with another request body or path")
		case r.State == pay.IdemDone:
			rec, state = r, idemReplay
			return nil
		case now.Before(r.LockedUntil) && (r.Owner == s.Owner || !s.Exclusive):
			rec = r
			return errInUse(r.LockedUntil.Sub(now))
		default:
			// The request that held the key died midway: take it over.
			r.Owner, r.LockedUntil = s.Owner, now.Add(s.IdemLock)
			rec, state = r, idemResume
			return tx.PutIdemKey(r)
		}
	})
	return rec, state, err
}

// inUseError is EKEYINUSE with the time until the key may be retried.
type inUseError struct {
	err        *pay.Error
	retryAfter time.Duration
}

func errInUse(d time.Duration) error {
	return inUseError{pay.Errorf(pay.EKEYINUSE, "a request with this Idempotency-Key is still in flight; retry later"), d}
}

func (e inUseError) Error() string { return e.err.Error() }

// Unwrap lets pay.ErrorCode see the code.
func (e inUseError) Unwrap() error { return e.err }

// retryAfterSeconds is the Retry-After of an in-flight key.
func retryAfterSeconds(d time.Duration) string {
	sec := int(d.Seconds() + 0.999)
	if sec < 1 {
		sec = 1
	}
	if sec > 60 {
		sec = 60
	}
	return strconv.Itoa(sec)
}

// idemLink returns the function that records the payment on the key, in
// the transaction that stores the payment.
func idemLink(scoped string) func(tx pay.Tx, p pay.Payment) error {
	return func(tx pay.Tx, p pay.Payment) error {
		r, err := tx.IdemKey(scoped)
		if err != nil {
			return err
		}
		r.PaymentID = p.ID
		return tx.PutIdemKey(r)
	}
}

// idemFinish stores the answer of a finished request.
func (s *Server) idemFinish(ctx context.Context, scoped string, paymentID string, status int, body []byte) error {
	return s.Store.Update(ctx, func(tx pay.Tx) error {
		r, err := tx.IdemKey(scoped)
		if err != nil {
			return err
		}
		r.State, r.StatusCode, r.Body, r.LockedUntil = pay.IdemDone, status, body, time.Time{}
		if paymentID != "" {
			r.PaymentID = paymentID
		}
		return tx.PutIdemKey(r)
	})
}

// idemRelease gives the key up after a failure that stored no answer, so a
// retry may run (or resume) at once.
func (s *Server) idemRelease(ctx context.Context, scoped string) {
	err := s.Store.Update(ctx, func(tx pay.Tx) error {
		r, err := tx.IdemKey(scoped)
		if err != nil {
			return err
		}
		r.LockedUntil = tx.Now()
		return tx.PutIdemKey(r)
	})
	if err != nil {
		s.Logger.Warn().Err(err).Msg("release idempotency key")
	}
}

// transient reports whether an error answer says something about this
// moment rather than about the request: a conflict (409: the payment is not
// in a state for this now, its lease is held, a compare-and-set lost) or a
// failure of the server, the storage or the PSP (5xx, 503 when the disk is
// full). Such an answer is not kept as the key's answer: the key is
// released, and a retry with it runs (or resumes) once the cause is gone.
// Every other 4xx says the request itself is wrong (invalid, not found,
// unsupported by the provider); the same request would get it again, so it
// is stored and replayed like a success.
func transient(code string) bool {
	st := HTTPStatus(code)
	return st == fasthttp.StatusConflict || st >= 500
}

// idempotent runs op under the request's Idempotency-Key. op gets the state
// (new or resume), the stored record and the link for the payment's
// creation, and returns the payment it produced. A replay answers from the
// stored record.
func (s *Server) idempotent(rc *fasthttp.RequestCtx, op string, status int,
	run func(ctx context.Context, state idemState, rec pay.IdemRecord, link func(pay.Tx, pay.Payment) error) (pay.Payment, bool, error)) error {
	key, err := idemKey(rc)
	if err != nil {
		return err
	}
	apiKey, _ := bearer(rc)
	scoped := ScopedKey(op, apiKey, key)
	ctx, cancel := s.requestContext()
	defer cancel()

	rec, state, err := s.idemBegin(ctx, scoped, Fingerprint(string(rc.Method()), string(rc.Path()), rc.PostBody()))
	if err != nil {
		var iu inUseError
		if errors.As(err, &iu) {
			rc.Response.Header.Set("Retry-After", retryAfterSeconds(iu.retryAfter))
		}
		return err
	}
	if state == idemReplay {
		rc.Response.Header.Set("Idempotent-Replayed", "true")
		if rec.PaymentID == "" {
			writeRaw(rc, rec.StatusCode, rec.Body)
			return nil
		}
		p, err := s.Payments.Get(ctx, rec.PaymentID)
		if err != nil {
			return err
		}
		writeJSON(rc, rec.StatusCode, viewJSON(p))
		return nil
	}

	p, conflict, err := run(ctx, state, rec, idemLink(scoped))
	if err != nil {
		code := pay.ErrorCode(err)
		if transient(code) {
			// Nothing final was said: let a retry run or resume.
			s.idemRelease(context.WithoutCancel(ctx), scoped)
			return err
		}
		// A definite answer (invalid, not found, unsupported) is stored.
		body := errorBody{Error: errorDetail{Code: code, Message: pay.ErrorMessage(err)}}
		b, _ := jsonMarshal(body)
		if ferr := s.idemFinish(ctx, scoped, "", HTTPStatus(code), b); ferr != nil {
			s.Logger.Warn().Err(ferr).Msg("store idempotent answer")
		}
		return err
	}
	out := viewJSON(p)
	out.Conflict = conflict
	// The stored body never carries secrets; replays render the view anew.
	stored := out
	stored.ClientSecret, stored.RedirectURL = nil, nil
	b, _ := jsonMarshal(stored)
	if err := s.idemFinish(ctx, scoped, p.ID, status, b); err != nil {
		return err
	}
	writeJSON(rc, status, out)
	return nil
}
