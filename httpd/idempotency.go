package httpd

import (
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
// Idempotency-Key HTTP Header Field"): this file reads the header, scopes
// and fingerprints the request, and encodes the answers; the protocol
// (claim, replay, resume, the answer stored, the key released) is
// finalize.Idempotency's. To the client:
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
//     and the retry runs;
//   - a request that died midway (the process was killed after the payment
//     was stored) is resumed by the retry from the stored payment, and the
//     PSP call repeats the same derived key, so nothing is charged twice.

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
		return pay.Errorf(CodeKeyMissing, "the Idempotency-Key header is required for this request")
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

// idemKeyOf is the request's key as an operation runs under it: its
// stored name, its name before keys were scoped by merchant, the
// request's fingerprint, the status code of a success and the encoding of
// a failure (the answer stored when it is final).
func idemKeyOf(rc *fasthttp.RequestCtx, op, key string, status int) finalize.IdemKey {
	apiKey, _ := bearer(rc)
	return finalize.IdemKey{
		Key: ScopedKey(op, key), Legacy: LegacyScopedKey(op, apiKey, key),
		Fingerprint: Fingerprint(string(rc.Method()), string(rc.Path()), rc.PostBody()),
		Status:      status, Refusal: refusal,
	}
}

// refusal is the answer to a request that failed with err: its status code
// and error body.
func refusal(err error) (int, []byte) {
	b, _ := json.Marshal(errorBody{Error: errorDetailOf(err)})
	return HTTPStatus(pay.ErrorCode(err)), b
}

// refused is the answer of an operation that did not run under its key:
// Retry-After for a key in flight, and the error.
func refused(rc *fasthttp.RequestCtx, err error) error {
	var iu *finalize.InUseError
	if errors.As(err, &iu) {
		rc.Response.Header.Set("Retry-After", retryAfterSeconds(iu.RetryAfter))
	}
	return err
}

// replayed answers a finished request from its key's record: the stored
// body of a failure (or of an answer about nothing view can show), else
// the stored status code with the current view of what the request made.
func replayed(rc *fasthttp.RequestCtx, rec pay.IdemRecord, view func() (any, error)) error {
	rc.Response.Header.Set("Idempotent-Replayed", "true")
	if rec.StatusCode >= 300 || rec.PaymentID == "" || view == nil {
		writeRaw(rc, rec.StatusCode, rec.Body)
		return nil
	}
	v, err := view()
	if err != nil {
		return err
	}
	writeJSON(rc, rec.StatusCode, v)
	return nil
}
