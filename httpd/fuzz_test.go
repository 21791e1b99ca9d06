package httpd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// FuzzDecodeStrict feeds arbitrary bodies to DecodeStrict into the request
// structs of POST /v1/payments and POST /v1/payments/{id}/sync. It must never
// panic and fail only with EINVALID; a body it accepts must survive
// encoding and decoding again unchanged, and must not hold an object with a
// duplicated key (checked against an oracle that compares each object's key
// count with the keys a map keeps); a valid document it rejects for a
// duplicated key must hold one. Seeds: testdata/fuzz/FuzzDecodeStrict.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"order_id":"o-1","amount":1000,"currency":"EUR","customer":{"id":"c1","email":"a@example.com"},"provider":"mock","return_url":"https://shop.example/r"}`,
		`{"status":"captured","provider_ref":"pi_1","client_secret":"cs_1","redirect_url":"https://psp.example/3ds","expected_version":3}`,
		`{"order_id":"o","amount":10,"amount":20,"currency":"EUR"}`,
		`{"order_id":"o","amount":10,"\u0061mount":20}`,
		`{"customer":{"id":"a","id":"b"}}`,
		`{"status":"captured","expected_version":null}`,
		`{"amount":1e3}`,
		`{"amount":99999999999999999999}`,
		`{"order_id":"\ud800"}`,
		`{"order_id":"o"} {}`,
		`[{"a":1,"a":2}]`,
		`{"status":"captured","expected_version":-1}`,
		`{"customer":{"id":"a"},"id":"b","ID":"c"}`,
		`{"order_id":"amount","amount":10,"currency":"amount"}`,
		`[{"a":"a"},{"a":"a"}]`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, sync bool) {
		newValue := func() any {
			if sync {
				return new(syncRequest)
			}
			return new(createPaymentRequest)
		}
		v := newValue()
		err := DecodeStrict(body, v)
		if err != nil {
			if code := pay.ErrorCode(err); code != pay.EINVALID {
				t.Fatalf("ErrorCode=%q (%v), want %s", code, err, pay.EINVALID)
			}
			// A duplicated key it reports must be there. The oracle takes
			// a valid document of one value (json.Valid).
			if strings.Contains(err.Error(), "duplicated key") && json.Valid(body) && !hasDuplicateKey(t, body) {
				t.Fatalf("DecodeStrict reported a duplicated key that is not there: %v: %q", err, body)
			}
			return
		}
		if hasDuplicateKey(t, body) {
			t.Fatalf("DecodeStrict accepted a duplicated key: %q", body)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back := newValue()
		if err := DecodeStrict(out, back); err != nil {
			t.Fatalf("DecodeStrict(Marshal(v)): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, v) {
			t.Fatalf("round trip: got %+v, want %+v\n%s", back, v, out)
		}
	})
}

// hasDuplicateKey reports whether any object in the JSON value doc has the
// same key twice (after unescaping, ignoring case, as encoding/json
// matches keys to fields).
func hasDuplicateKey(t *testing.T, doc []byte) bool {
	t.Helper()
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 {
		return false
	}
	switch doc[0] {
	case '{':
		dec := json.NewDecoder(bytes.NewReader(doc))
		if _, err := dec.Token(); err != nil { // {
			t.Fatalf("accepted body is not JSON: %v", err)
		}
		seen := map[string]bool{}
		dup := false
		for dec.More() {
			k, err := dec.Token() // the key
			if err != nil {
				t.Fatal(err)
			}
			folded := strings.ToLower(k.(string))
			dup = dup || seen[folded]
			seen[folded] = true
			var member json.RawMessage
			if err := dec.Decode(&member); err != nil {
				t.Fatal(err)
			}
			if hasDuplicateKey(t, member) {
				return true
			}
		}
		return dup
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(doc, &elems); err != nil {
			t.Fatalf("accepted body is not JSON: %v", err)
		}
		for _, e := range elems {
			if hasDuplicateKey(t, e) {
				return true
			}
		}
	}
	return false
}

// FuzzIdempotencyKey checks the Idempotency-Key rule (1–255 printable ASCII
// characters) against an oracle written with the strings package, and then
// sends the key as raw header bytes through fasthttp's request parser to the
// header check the handlers use: whatever bytes arrive (CR, LF, NUL,
// obs-fold, non-ASCII), a key that gets through is one ValidIdempotencyKey
// accepts and carries no line break. Seeds: testdata/fuzz/FuzzIdempotencyKey.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{
		"order-1001", "", " ", "a", strings.Repeat("k", 255), strings.Repeat("k", 256),
		"abc\r\nX-Injected: 1", "abc\nX-Injected: 1", "abc\rdef", "abc\x00def", "\tabc",
		"ключ", "abc\x7f", "abc\r\n def", "~!@#$%^&*()_+{}|:<>?", "a\xffb",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidIdempotencyKey(key)
		want := len(key) >= 1 && len(key) <= 255 &&
			!strings.ContainsFunc(key, func(r rune) bool { return r < ' ' || r > '~' })
		if got := err == nil; got != want {
			t.Fatalf("ValidIdempotencyKey(%q)=%v, want accepted=%v", key, err, want)
		}
		if err != nil {
			wantCode := pay.EINVALID
			if key == "" {
				wantCode = CodeKeyMissing
			}
			if got := pay.ErrorCode(err); got != wantCode {
				t.Fatalf("ErrorCode=%q, want %q", got, wantCode)
			}
		}

		// The same bytes through the HTTP parser.
		raw := "POST /v1/payments HTTP/1.1\r\nHost: paystate.test\r\nIdempotency-Key: " + key + "\r\nContent-Length: 0\r\n\r\n"
		var rc fasthttp.RequestCtx
		if err := rc.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			return // a request fasthttp cannot read never reaches a handler
		}
		k, err := idemKey(&rc)
		if err != nil {
			if c := pay.ErrorCode(err); c != pay.EINVALID && c != CodeKeyMissing {
				t.Fatalf("idemKey: ErrorCode=%q (%v)", c, err)
			}
			return
		}
		if strings.ContainsAny(k, "\r\n\x00") {
			t.Fatalf("idemKey accepted %q (from %q)", k, key)
		}
		if err := ValidIdempotencyKey(k); err != nil {
			t.Fatalf("idemKey accepted %q, which ValidIdempotencyKey rejects: %v", k, err)
		}
		if want && k != strings.Trim(key, " ") {
			t.Fatalf("valid key %q arrived as %q", key, k)
		}
	})
}
