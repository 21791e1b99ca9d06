package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

// dump returns every bucket, key and value of the database, in order,
// read from a consistent copy. Equal dumps mean nothing was stored. It
// compares content rather than file bytes: the sweeper's housekeeping
// commits transactions that store nothing, and each commit rewrites bbolt's
// meta page.
func dump(t *testing.T, in *daemontest.Instance) string {
	t.Helper()
	var b bytes.Buffer
	snap, _, err := in.Main.Backend.Backup.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(&b, snap)
	if cerr := snap.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out strings.Builder
	var walk func(prefix string, bk *bbolt.Bucket) error
	walk = func(prefix string, bk *bbolt.Bucket) error {
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(fmt.Sprintf("%s%x/", prefix, k), bk.Bucket(k))
			}
			fmt.Fprintf(&out, "%s%x=%x\n", prefix, k, v)
			return nil
		})
	}
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error { return walk(string(name)+"/", bk) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestE2E_BadInput: every hostile request gets the specified status and
// error code, and none changes stored state.
func TestE2E_BadInput(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, func(c *config.Config) { c.Payment.Provider = "standard" })
	secret := in.Main.Config.Providers.Standard.WebhookSecret
	existing := in.Create(`{"order_id":"o-1","amount":1000,"currency":"EUR"}`, "seed").Str("id")
	settle(t, in)
	before := dump(t, in)

	otherSecret := "whsec_" + "b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldC0wMDAwMA=="
	goodBody := eventBody("evt_bad", "payment.captured", existing, "psp_x")
	key := map[string]string{"Idempotency-Key": "bad-1"}
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	merge := func(a, b map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range a {
			m[k] = v
		}
		for k, v := range b {
			m[k] = v
		}
		return m
	}

	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   []byte
		hdr    map[string]string
		status int
		code   string
	}{
		{"malformed JSON", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":`), key, 400, "invalid_request"},
		{"not an object", "POST", "/v1/payments", []byte(`[1,2]`), key, 400, "invalid_request"},
		{"wrong type amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":"10","currency":"EUR"}`), key, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","ammount":5}`), key, 400, "invalid_request"},
		{"unknown field of wrong type", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","customer":"bob"}`), key, 400, "invalid_request"},
		{"negative amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":-5,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"zero amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":0,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"huge amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":99999999999999999999,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"fractional amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10.5,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"lower-case currency", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"eur"}`), key, 400, "invalid_request"},
		{"long currency", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EURO"}`), key, 400, "invalid_request"},
		{"missing order id", "POST", "/v1/payments", []byte(`{"amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"bidi order id", "POST", "/v1/payments", []byte(`{"order_id":"inv\u202egpj.exe","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"duplicated key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"amount":20,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"trailing data", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"} {}`), key, 400, "invalid_request"},
		{"unknown provider", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","provider":"paypal"}`), key, 400, "unknown_provider"},
		{"missing idempotency key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), nil, 400, "idempotency_key_missing"},
		{"oversized body", "POST", "/v1/payments", bytes.Repeat([]byte("a"), 300<<10), key, 413, "payload_too_large"},
		{"oversized body, 100-continue", "POST", "/v1/payments", bytes.Repeat([]byte("a"), 10<<20), merge(key, hdr("Expect", "100-continue")), 413, "payload_too_large"},
		{"oversized webhook", "POST", "/webhooks/standard", bytes.Repeat([]byte("{"), 300<<10), testkit.SignStandard(t, secret, "evt_big", time.Now(), goodBody), 413, "payload_too_large"},
		{"missing API key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), merge(key, hdr("Authorization", "")), 401, "unauthorized"},
		{"wrong API key", "GET", "/v1/payments", nil, hdr("Authorization", "Bearer nope-nope-nope-nope"), 401, "unauthorized"},
		{"wrong auth scheme", "GET", "/v1/payments", nil, hdr("Authorization", "Basic "+daemontest.APIKey), 401, "unauthorized"},
		{"sync bad status", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"paid"}`), nil, 400, "invalid_request"},
		{"sync version zero", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"captured","expected_version":0}`), nil, 400, "invalid_request"},
		{"sync bad If-Match", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"captured"}`), hdr("If-Match", "W/abc"), 400, "invalid_request"},
		// What a report carries is text, as a create's fields are (bbolt
		// stored a NUL in a client secret, PostgreSQL refused it:
		// FuzzAPIBackends's seed sync_client_secret_nul).
		{"NUL in sync client secret", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"processing","client_secret":"cs\u0000"}`), nil, 400, "invalid_request"},
		{"bidi in sync redirect URL", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"requires_action","redirect_url":"https://x.example/\u202e"}`), nil, 400, "invalid_request"},
		{"sync client secret of 2049", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"processing","client_secret":"` + strings.Repeat("s", 2049) + `"}`), nil, 400, "invalid_request"},
		{"unknown payment", "GET", "/v1/payments/pay_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, nil, 404, "not_found"},
		{"garbage payment id", "GET", "/v1/payments/..%2f..%2fetc", nil, nil, 404, "not_found"},
		{"bad list limit", "GET", "/v1/payments?limit=100000", nil, nil, 400, "invalid_request"},
		{"bad list status", "GET", "/v1/payments?status=won", nil, nil, 400, "invalid_request"},
		{"bad cursor", "GET", "/v1/payments?cursor=%%%", nil, nil, 400, "invalid_request"},
		{"wrong method", "DELETE", "/v1/payments", nil, nil, 405, "method_not_allowed"},
		{"unknown route", "GET", "/v2/nothing", nil, nil, 404, "not_found"},
		{"webhook unknown provider", "POST", "/webhooks/paypal", goodBody, testkit.SignStandard(t, secret, "evt_bad", time.Now(), goodBody), 404, "not_found"},
		{"webhook no signature", "POST", "/webhooks/standard", goodBody, hdr("Authorization", ""), 400, "invalid_signature"},
		{"webhook other secret", "POST", "/webhooks/standard", goodBody, testkit.SignStandard(t, otherSecret, "evt_bad", time.Now(), goodBody), 400, "invalid_signature"},
		{"webhook stale timestamp", "POST", "/webhooks/standard", goodBody, testkit.SignStandard(t, secret, "evt_bad", time.Now().Add(-10*time.Minute), goodBody), 400, "invalid_signature"},
		{"webhook future timestamp", "POST", "/webhooks/standard", goodBody, testkit.SignStandard(t, secret, "evt_bad", time.Now().Add(10*time.Minute), goodBody), 400, "invalid_signature"},
		{"webhook tampered body", "POST", "/webhooks/standard", bytes.Replace(goodBody, []byte("captured"), []byte("refunded"), 1), testkit.SignStandard(t, secret, "evt_bad", time.Now(), goodBody), 400, "invalid_signature"},
		{"webhook malformed JSON", "POST", "/webhooks/standard", []byte(`{"id":"evt_m"`), testkit.SignStandard(t, secret, "evt_m", time.Now(), []byte(`{"id":"evt_m"`)), 400, "invalid_request"},
		{"webhook unknown type", "POST", "/webhooks/standard", eventBody("evt_u", "payment.won", existing, ""), testkit.SignStandard(t, secret, "evt_u", time.Now(), eventBody("evt_u", "payment.won", existing, "")), 400, "invalid_request"},

		// Truncated and malformed bodies, wrong types, huge numbers.
		{"truncated in a string", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EU`), key, 400, "invalid_request"},
		{"empty body", "POST", "/v1/payments", []byte{}, key, 400, "invalid_request"},
		{"null body", "POST", "/v1/payments", []byte(`null`), key, 400, "invalid_request"},
		{"not JSON content type", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), merge(key, hdr("Content-Type", "text/plain")), 415, "unsupported_media_type"},
		{"exponent amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":1e3,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"min int64 amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":-9223372036854775808,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"amount as bool", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":true,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"order id as number", "POST", "/v1/payments", []byte(`{"order_id":42,"amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"duplicated nested key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","customer":{"id":"a","id":"b"}}`), key, 400, "invalid_request"},
		{"duplicated escaped key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"\u0061mount":20,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"deeply nested", "POST", "/v1/payments", []byte(`{"customer":` + strings.Repeat(`{"id":`, 5000) + `1` + strings.Repeat(`}`, 5001)), key, 400, "invalid_request"},
		{"huge expected version", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"captured","expected_version":18446744073709551616}`), nil, 400, "invalid_request"},
		{"negative expected version", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"captured","expected_version":-1}`), nil, 400, "invalid_request"},
		{"sync duplicated status", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"failed","status":"captured"}`), nil, 400, "invalid_request"},
		{"sync If-Match disagrees", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"captured","expected_version":1}`), hdr("If-Match", `"2"`), 400, "invalid_request"},
		{"oversized body, 10 MB", "POST", "/v1/payments", bytes.Repeat([]byte(" "), 10<<20), key, 413, "payload_too_large"},

		// Unicode tricks in order ids: homoglyphs are text, but control,
		// format (bidi, zero-width) and invalid characters are refused.
		{"NUL in order id", "POST", "/v1/payments", []byte(`{"order_id":"o\u0000x","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"zero-width space in order id", "POST", "/v1/payments", []byte("{\"order_id\":\"o\u200bx\",\"amount\":10,\"currency\":\"EUR\"}"), key, 400, "invalid_request"},
		{"zero-width joiner in order id", "POST", "/v1/payments", []byte(`{"order_id":"o\u200dx","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"BOM in order id", "POST", "/v1/payments", []byte(`{"order_id":"\ufeffo","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"bidi isolate in order id", "POST", "/v1/payments", []byte(`{"order_id":"o\u2066x\u2069","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"C1 control in order id", "POST", "/v1/payments", []byte(`{"order_id":"o\u0085x","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"line separator in order id", "POST", "/v1/payments", []byte(`{"order_id":"o\u2028x","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"invalid UTF-8 in order id", "POST", "/v1/payments", []byte("{\"order_id\":\"o\xff\xfex\",\"amount\":10,\"currency\":\"EUR\"}"), key, 400, "invalid_request"},
		{"lone surrogate in order id", "POST", "/v1/payments", []byte(`{"order_id":"o\ud800x","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"order id of 129 bytes", "POST", "/v1/payments", []byte(`{"order_id":"` + strings.Repeat("é", 64) + `x","amount":10,"currency":"EUR"}`), key, 400, "invalid_request"},
		{"bidi in customer id", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","customer":{"id":"c\u202e1"}}`), key, 400, "invalid_request"},
		{"homoglyph order id in a list", "GET", "/v1/payments?order_id=" + url.QueryEscape("оrder-1"), nil, nil, 200, ""},
		{"zero-width order id in a list", "GET", "/v1/payments?order_id=" + url.QueryEscape("order\u200b1"), nil, nil, 400, "invalid_request"},

		// Unicode tricks in path ids: only pay_ + a ULID names a payment.
		{"homoglyph in payment id", "GET", "/v1/payments/" + url.PathEscape(strings.Replace(existing, "0", "О", 1)), nil, nil, 404, "not_found"},
		{"zero-width in payment id", "GET", "/v1/payments/" + url.PathEscape(existing+"\u200b"), nil, nil, 404, "not_found"},
		{"NUL in payment id", "GET", "/v1/payments/" + existing + "%00", nil, nil, 404, "not_found"},
		{"bidi in payment id", "POST", "/v1/payments/" + url.PathEscape("\u202e"+existing[1:]) + "/sync", []byte(`{"status":"captured"}`), nil, 404, "not_found"},
		{"fullwidth payment id", "GET", "/v1/payments/" + url.PathEscape("ｐａｙ_"+existing[4:]), nil, nil, 404, "not_found"},
		{"lower-case payment id", "POST", "/v1/payments/" + strings.ToLower(existing) + "/sync", []byte(`{"status":"captured"}`), nil, 404, "not_found"},
		{"overflowing ULID", "GET", "/v1/payments/pay_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", nil, nil, 404, "not_found"},
		// A customer id a create refuses names no customer, on every
		// backend: the router answers 404 for a path id that is not UTF-8
		// or holds a control character (FuzzAPIPostgres's seeds
		// *_not_utf8: PostgreSQL answered 400 for those).
		{"customer path id not UTF-8", "GET", "/v1/customers/c%86", nil, nil, 404, "not_found"},
		{"NUL in a customer path id", "GET", "/v1/customers/c%00", nil, nil, 404, "not_found"},
		{"bidi in a customer path id", "GET", "/v1/customers/" + url.PathEscape("c\u202ex"), nil, nil, 404, "not_found"},
		{"customer path id of 129", "GET", "/v1/customers/" + strings.Repeat("c", 129), nil, nil, 404, "not_found"},

		// Idempotency keys the client library lets through.
		{"non-ASCII idempotency key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), hdr("Idempotency-Key", "ключ-1"), 400, "invalid_request"},
		{"tab in idempotency key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), hdr("Idempotency-Key", "a\tb"), 400, "invalid_request"},
		{"idempotency key of 256", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), hdr("Idempotency-Key", strings.Repeat("k", 256)), 400, "invalid_request"},

		// Signatures: replayed, for another event, another scheme, garbage.
		{"webhook replayed 6 minutes later", "POST", "/webhooks/standard", goodBody, testkit.SignStandard(t, secret, "evt_bad", time.Now().Add(-6*time.Minute), goodBody), 400, "invalid_signature"},
		{"webhook signature for another id", "POST", "/webhooks/standard", goodBody, merge(testkit.SignStandard(t, secret, "evt_other", time.Now(), goodBody), hdr("webhook-id", "evt_bad")), 400, "invalid_signature"},
		{"webhook body id differs from header", "POST", "/webhooks/standard", eventBody("evt_body", "payment.captured", existing, ""), testkit.SignStandard(t, secret, "evt_head", time.Now(), eventBody("evt_body", "payment.captured", existing, "")), 400, "invalid_request"},
		{"webhook other scheme", "POST", "/webhooks/standard", goodBody, merge(testkit.SignStandard(t, secret, "evt_bad", time.Now(), goodBody), hdr("webhook-signature", "v1a,"+strings.Repeat("A", 44))), 400, "invalid_signature"},
		{"webhook several wrong signatures", "POST", "/webhooks/standard", goodBody, merge(testkit.SignStandard(t, secret, "evt_bad", time.Now(), goodBody), hdr("webhook-signature", "v1,AAAA v1,"+strings.Repeat("B", 44)+" v2,CCCC")), 400, "invalid_signature"},
		{"webhook text timestamp", "POST", "/webhooks/standard", goodBody, merge(testkit.SignStandard(t, secret, "evt_bad", time.Now(), goodBody), hdr("webhook-timestamp", "yesterday")), 400, "invalid_signature"},
		{"webhook huge timestamp", "POST", "/webhooks/standard", goodBody, merge(testkit.SignStandard(t, secret, "evt_bad", time.Now(), goodBody), hdr("webhook-timestamp", "99999999999999999999")), 400, "invalid_signature"},
		{"webhook bidi payment id", "POST", "/webhooks/standard", eventBody("evt_bidi", "payment.captured", "pay_\u202e1", ""), testkit.SignStandard(t, secret, "evt_bidi", time.Now(), eventBody("evt_bidi", "payment.captured", "pay_\u202e1", "")), 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := in.Do(tc.method, tc.path, tc.body, tc.hdr)
			if got, want := r.Status, tc.status; got != want {
				t.Errorf("status=%d, want %d: %s", got, want, r.Body)
			}
			if got, want := r.ErrCode(), tc.code; got != want {
				t.Errorf("code=%q, want %q: %s", got, want, r.Body)
			}
			if r.Status >= 400 && !strings.Contains(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type=%q, want JSON", r.Header.Get("Content-Type"))
			}
		})
	}

	// Requests the client library refuses to send go over raw TCP. An
	// echoed X-Request-Id is printable ASCII (SPEC §2): never a CR, an LF
	// or another byte that could end a header line.
	plain := regexp.MustCompile(`^[\x20-\x7e]{1,128}$`)
	const createBody = `{"order_id":"o","amount":10,"currency":"EUR"}`
	rawPost := func(path string, headers ...string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey +
			"\r\nContent-Type: application/json\r\n" + strings.Join(headers, "") +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(createBody)) + createBody
	}
	for _, tc := range []struct {
		name   string
		raw    string
		status int
		code   string
	}{
		{"CR LF in idempotency key", rawPost("/v1/payments", "Idempotency-Key: k\r\n\r\n"), 400, "invalid_request"},
		{"bare CR in idempotency key", rawPost("/v1/payments", "Idempotency-Key: k\rSet-Cookie: a=b\r\n"), 400, "invalid_request"},
		// A bare LF ends the header line (RFC 9112 §2.2 lets a server
		// accept it, as net/http does): what follows is a header of its
		// own and never part of the key, which here is empty.
		{"bare LF in idempotency key", rawPost("/v1/payments", "Idempotency-Key: \nX-Injected: k\r\n"), 400, "idempotency_key_missing"},
		{"NUL in idempotency key", rawPost("/v1/payments", "Idempotency-Key: k\x00j\r\n"), 400, "invalid_request"},
		{"DEL in idempotency key", rawPost("/v1/payments", "Idempotency-Key: k\x7f\r\n"), 400, "invalid_request"},
		// A folded line is joined to the key (or refused): either way the
		// whole value is checked, here 301 characters.
		{"folded idempotency key", rawPost("/v1/payments", "Idempotency-Key: "+strings.Repeat("k", 200)+"\r\n "+strings.Repeat("j", 100)+"\r\n"), 400, "invalid_request"},
		{"space in header name", rawPost("/v1/payments", "Idempotency Key: k\r\n"), 400, "idempotency_key_missing"},
		{"space before colon", rawPost("/v1/payments", "Idempotency-Key : k\r\n"), 400, "invalid_request"},
		{"two content lengths", "POST /v1/payments HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey +
			"\r\nIdempotency-Key: cl-1\r\nContent-Length: 3\r\nContent-Length: 45\r\n\r\n" + createBody, 400, "invalid_request"},
		{"CR in request id", "GET /v1/payments/pay_01ARZ3NDEKTSV4RRFFQ69G5FAV HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey +
			"\r\nX-Request-Id: abc\rSet-Cookie: session=evil\r\n\r\n", 400, "invalid_request"},
		{"encoded CRLF in request id", "GET /v1/payments/pay_01ARZ3NDEKTSV4RRFFQ69G5FAV HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey +
			"\r\nX-Request-Id: abc%0d%0aSet-Cookie:%20session=evil\r\n\r\n", 404, "not_found"},
		// A space, a tab or a control character in the request line (what
		// FuzzAPI skips, since net/http would send it raw): refused as
		// malformed before any route.
		{"space in query", "GET /v1/payments?status= captured HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey + "\r\n\r\n", 400, "invalid_request"},
		{"tab in path", "GET /v1/payments/\tx HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey + "\r\n\r\n", 400, "invalid_request"},
		{"NUL in path", "GET /v1/payments/\x00 HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey + "\r\n\r\n", 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body, err := rawExchange(in, tc.raw)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if got, want := res.StatusCode, tc.status; got != want {
				t.Errorf("status=%d, want %d: %s", got, want, body)
			}
			r := daemontest.Response{Status: res.StatusCode, Header: res.Header, Body: body}
			_ = json.Unmarshal(body, &r.JSON)
			if got, want := r.ErrCode(), tc.code; got != want {
				t.Errorf("code=%q, want %q: %s", got, want, body)
			}
			// Nothing the client sent comes back as a header.
			if got := res.Header.Values("Set-Cookie"); len(got) > 0 {
				t.Errorf("Set-Cookie in the answer: %q", got)
			}
			if rid := res.Header.Get("X-Request-Id"); rid != "" && !plain.MatchString(rid) {
				t.Errorf("X-Request-Id=%q reflects client input", rid)
			}
		})
	}

	if after := dump(t, in); after != before {
		t.Fatalf("rejected requests changed stored state (database copies differ: %d vs %d bytes)", len(before), len(after))
	}
}

// settle runs the background workers' passes until one finds nothing to
// do, so that what they write (deliveries of the outbox, housekeeping)
// happens before a dump rather than between two.
func settle(t *testing.T, in *daemontest.Instance) {
	t.Helper()
	ctx := context.Background()
	testkit.WaitFor(t, 10*time.Second, func() error {
		n, err := in.Main.Ripple.RunOnce(ctx)
		if err != nil {
			return err
		}
		m, err := in.Main.Sweeper.RunOnce(ctx)
		if err != nil {
			return err
		}
		if n+m > 0 {
			return fmt.Errorf("the workers still had %d deliveries and %d corrections to make", n, m)
		}
		return nil
	})
}

// rawExchange writes raw bytes on a new connection to the instance and
// reads one answer.
func rawExchange(in *daemontest.Instance, raw string) (*http.Response, []byte, error) {
	c, err := net.Dial("tcp", strings.TrimPrefix(in.Base, "http://"))
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, nil, err
	}
	if _, err := io.WriteString(c, raw); err != nil {
		return nil, nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

// TestE2E_ReplayedWebhook: a webhook that was accepted is replayed byte for
// byte, headers included, ten minutes later (the daemon's injected clock
// moves; the signature stays valid). The timestamp is out of tolerance:
// 400 invalid_signature, and nothing is stored.
func TestE2E_ReplayedWebhook(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	in := daemontest.BootMain(t, func(c *config.Config) { c.Payment.Provider = "standard" }, func(m *daemon.Main) {
		m.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	secret := in.Main.Config.Providers.Standard.WebhookSecret
	id := in.Create(`{"order_id":"o-replay","amount":1000,"currency":"EUR"}`, "replay").Str("id")
	body := eventBody("evt_replay", "payment.captured", id, "psp_r")
	h := testkit.SignStandard(t, secret, "evt_replay", time.Now(), body)
	if r := in.Do("POST", "/webhooks/standard", body, h); r.Status != 200 {
		t.Fatalf("first delivery: %d %s", r.Status, r.Body)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if g := in.Do("GET", "/v1/payments/"+id, nil, nil); g.Str("status") != "captured" {
			return fmt.Errorf("status=%s", g.Str("status"))
		}
		return nil
	})
	settle(t, in)
	before := dump(t, in)

	offset.Store(int64(10 * time.Minute))
	r := in.Do("POST", "/webhooks/standard", body, h)
	if got, want := r.Status, 400; got != want {
		t.Errorf("replay: status=%d, want %d: %s", got, want, r.Body)
	}
	if got, want := r.ErrCode(), "invalid_signature"; got != want {
		t.Errorf("replay: code=%q, want %q", got, want)
	}
	if after := dump(t, in); after != before {
		t.Fatal("the replay changed stored state")
	}
}

// TestE2E_SlowClients: clients that send their headers or body slower than
// the server's read timeout (slowloris) are cut off, with 408
// request_timeout or a closed connection, store nothing, and do not keep
// the server from answering others meanwhile.
func TestE2E_SlowClients(t *testing.T) {
	t.Parallel()
	in := daemontest.BootMain(t, nil, func(m *daemon.Main) { m.HTTPReadTimeout = 500 * time.Millisecond })
	settle(t, in)
	before := dump(t, in)
	addr := strings.TrimPrefix(in.Base, "http://")
	body := `{"order_id":"o-slow","amount":1000,"currency":"EUR"}`
	head := "POST /v1/payments HTTP/1.1\r\nHost: paystate.test\r\nAuthorization: Bearer " + daemontest.APIKey +
		"\r\nContent-Type: application/json\r\nIdempotency-Key: slow-1\r\n"

	for _, tc := range []struct {
		name   string
		fast   string // sent at once
		slow   string // then one byte every 100 ms
		silent bool   // send nothing at all
	}{
		{"headers", "", head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body, false},
		{"body", head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)), body, false},
		{"nothing", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.fast); err != nil {
				t.Fatal(err)
			}
			// Trickle the rest until the server answers or closes.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for i := 0; i < len(tc.slow); i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := c.Write([]byte{tc.slow[i]}); err != nil {
						return
					}
				}
			}()

			// Meanwhile the server answers a well-behaved client.
			if r := in.Do("GET", "/healthz", nil, nil); r.Status != 200 {
				t.Errorf("healthz during a slow client: %d", r.Status)
			}

			if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			close(stop)
			wg.Wait()
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				t.Fatal("the server kept a slow connection open for 20 s")
			case err != nil:
				// Closed without an answer: acceptable for a slow client.
				t.Logf("connection closed without an answer: %v", err)
			default:
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if got, want := res.StatusCode, http.StatusRequestTimeout; got != want {
					t.Fatalf("status=%d, want %d: %s", got, want, b)
				}
				r := daemontest.Response{Status: res.StatusCode, Body: b}
				_ = json.Unmarshal(b, &r.JSON)
				if got, want := r.ErrCode(), "request_timeout"; got != want {
					t.Fatalf("code=%q, want %q", got, want)
				}
				t.Logf("answered %d %s", res.StatusCode, b)
				// And then the server closes the connection.
				if _, err := c.Read(make([]byte, 1)); err == nil {
					t.Fatal("connection still open after the 408")
				}
			}
		})
	}
	t.Cleanup(func() {
		if after := dump(t, in); after != before {
			t.Error("slow clients changed stored state")
		}
	})
}
