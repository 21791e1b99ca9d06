package httpd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
)

// The Idempotency-Key protocol of the merchant API (IETF draft "The
// Idempotency-Key HTTP Header Field"); this file reads the header, scopes
// and fingerprints the request and encodes the answers, the state machine
// on storage is finalize.Idempotency:
//
//   - the key is 1–255 printable ASCII characters; a request without it is
//     answered 400 (idempotency_key_missing);
//   - keys are scoped by operation and merchant: every API key of a
//     paystate belongs to its one merchant, so a retry sent with another
//     API key (a rotation) replays. A key stored before this scope, under
//     its name scoped by API key (LegacyScopedKey), is still found for the
//     API key it was sent with until it expires (idempotency.ttl). The
//     fingerprint is the SHA-256 of method, path and body;
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

// Idempotency is what the idempotent routes need of the key store
// (finalize.Idempotency) after an operation failed with its key held:
// store the failed request's answer, or give the key up. The claim and
// the answer of a success are written by the operation itself
// (finalize.Payments.CreateOnce, RefundOnce).
type Idempotency interface {
	Finish(ctx context.Context, key, paymentID string, status int, body []byte) error
	Release(ctx context.Context, key string) error
}

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
// operation, the merchant and the key itself, "<op>:merchant:<key>". A
// paystate serves one merchant, whichever API key a request carries.
func ScopedKey(op, key string) string {
	return op + ":merchant:" + key
}

// LegacyScopedKey is the name a key was stored under before keys were
// scoped by merchant: the operation, the first 8 bytes of the SHA-256 of
// the API key in hex, and the key, "<op>:<16 hex digits>:<key>". Such a
// key is still honoured for the API key it was sent with until it
// expires (docs/upgrading.md); no key is stored under this name any more.
func LegacyScopedKey(op, apiKey, key string) string {
	h := hashKey(apiKey)
	return op + ":" + hex.EncodeToString(h[:8]) + ":" + key
}

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

// once answers a create that ran under its Idempotency-Key in the
// operation's own transactions (finalize.Payments.CreateOnce, which
// claims the key and stores its answer with the operation's writes;
// handleRefund does the same for RefundOnce, whose replay is a refund):
// an error that left the key held is settled (failed), any other error
// is the answer as it is (a key refused, a request that cannot run); a
// replay answers from the key's record; a success is the payment's
// client view with status.
func (s *Server) once(ctx context.Context, rc *fasthttp.RequestCtx, status int, c finalize.Created, err error) error {
	switch {
	case err != nil && c.Held:
		return s.failed(ctx, rc, c.Record.Key, err)
	case err != nil:
		return keyRefused(rc, err)
	case c.Claim == finalize.ClaimReplay:
		return s.replay(ctx, rc, c.Record)
	}
	writeJSON(rc, status, viewJSON(c.Payment))
	return nil
}

// idemKeyOf is the request's key as an operation runs under it: its
// stored name, its name before keys were scoped by merchant, the
// request's fingerprint and the status code of a success.
func idemKeyOf(rc *fasthttp.RequestCtx, op, key string, status int) finalize.IdemKey {
	apiKey, _ := bearer(rc)
	return finalize.IdemKey{
		Key: ScopedKey(op, key), Legacy: LegacyScopedKey(op, apiKey, key),
		Fingerprint: Fingerprint(string(rc.Method()), string(rc.Path()), rc.PostBody()),
		Status:      status,
	}
}

// keyRefused passes on why a key could not be claimed, with Retry-After
// for a key in flight.
func keyRefused(rc *fasthttp.RequestCtx, err error) error {
	var iu *finalize.InUseError
	if errors.As(err, &iu) {
		rc.Response.Header.Set("Retry-After", retryAfterSeconds(iu.RetryAfter))
	}
	return err
}

// replay answers a finished request from its key's record: a payment's
// current client view, or the stored body of an answer about no payment.
func (s *Server) replay(ctx context.Context, rc *fasthttp.RequestCtx, rec pay.IdemRecord) error {
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

// failed settles a claimed key after the request failed, and returns err:
// a transient error releases the key so a retry runs (or resumes); a
// definite answer (invalid, not found, unsupported) is stored.
func (s *Server) failed(ctx context.Context, rc *fasthttp.RequestCtx, scoped string, err error) error {
	code := pay.ErrorCode(err)
	if transient(code) {
		// Nothing final was said: let a retry run or resume.
		if rerr := s.Idempotency.Release(context.WithoutCancel(ctx), scoped); rerr != nil {
			s.log(rc).Warn().Err(rerr).Msg("release idempotency key")
		}
		return err
	}
	body := errorBody{Error: errorDetailOf(err)}
	b, _ := json.Marshal(body)
	if ferr := s.Idempotency.Finish(ctx, scoped, "", HTTPStatus(code), b); ferr != nil {
		s.log(rc).Warn().Err(ferr).Msg("store idempotent answer")
	}
	return err
}
