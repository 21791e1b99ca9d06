package daemon_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
)

// dump returns a consistent copy of the whole database file. bbolt writes
// pages only on commit, so equal copies mean no transaction committed.
func dump(t *testing.T, in *instance) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := in.m.DB.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestE2E_BadInput: every hostile request gets the specified status and
// error code, and none changes stored state.
func TestE2E_BadInput(t *testing.T) {
	t.Parallel()
	in := boot(t, func(c *config.Config) { c.Payment.Provider = "standard" })
	secret := in.m.Config.Providers.Standard.WebhookSecret
	existing := in.create(`{"order_id":"o-1","amount":1000,"currency":"EUR"}`, "seed").str("id")
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
		{"malformed JSON", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":`), key, 400, "invalid"},
		{"not an object", "POST", "/v1/payments", []byte(`[1,2]`), key, 400, "invalid"},
		{"wrong type amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":"10","currency":"EUR"}`), key, 400, "invalid"},
		{"unknown field", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","ammount":5}`), key, 400, "invalid"},
		{"unknown field of wrong type", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","customer":"bob"}`), key, 400, "invalid"},
		{"negative amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":-5,"currency":"EUR"}`), key, 400, "invalid"},
		{"zero amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":0,"currency":"EUR"}`), key, 400, "invalid"},
		{"huge amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":99999999999999999999,"currency":"EUR"}`), key, 400, "invalid"},
		{"fractional amount", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10.5,"currency":"EUR"}`), key, 400, "invalid"},
		{"lower-case currency", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"eur"}`), key, 400, "invalid"},
		{"long currency", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EURO"}`), key, 400, "invalid"},
		{"missing order id", "POST", "/v1/payments", []byte(`{"amount":10,"currency":"EUR"}`), key, 400, "invalid"},
		{"bidi order id", "POST", "/v1/payments", []byte(`{"order_id":"inv\u202egpj.exe","amount":10,"currency":"EUR"}`), key, 400, "invalid"},
		{"duplicated key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"amount":20,"currency":"EUR"}`), key, 400, "invalid"},
		{"trailing data", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"} {}`), key, 400, "invalid"},
		{"unknown provider", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR","provider":"paypal"}`), key, 400, "invalid"},
		{"missing idempotency key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), nil, 400, "idempotency_key_missing"},
		{"oversized body", "POST", "/v1/payments", bytes.Repeat([]byte("a"), 300<<10), key, 413, "payload_too_large"},
		{"oversized body, 100-continue", "POST", "/v1/payments", bytes.Repeat([]byte("a"), 10<<20), merge(key, hdr("Expect", "100-continue")), 413, "payload_too_large"},
		{"oversized webhook", "POST", "/webhooks/standard", bytes.Repeat([]byte("{"), 300<<10), signStandard(t, secret, "evt_big", time.Now(), goodBody), 413, "payload_too_large"},
		{"missing API key", "POST", "/v1/payments", []byte(`{"order_id":"o","amount":10,"currency":"EUR"}`), merge(key, hdr("Authorization", "")), 401, "unauthorized"},
		{"wrong API key", "GET", "/v1/payments", nil, hdr("Authorization", "Bearer nope-nope-nope-nope"), 401, "unauthorized"},
		{"wrong auth scheme", "GET", "/v1/payments", nil, hdr("Authorization", "Basic "+apiKey), 401, "unauthorized"},
		{"sync bad status", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"paid"}`), nil, 400, "invalid"},
		{"sync version zero", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"captured","expected_version":0}`), nil, 400, "invalid"},
		{"sync bad If-Match", "POST", "/v1/payments/" + existing + "/sync", []byte(`{"status":"captured"}`), hdr("If-Match", "W/abc"), 400, "invalid"},
		{"unknown payment", "GET", "/v1/payments/pay_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, nil, 404, "not_found"},
		{"garbage payment id", "GET", "/v1/payments/..%2f..%2fetc", nil, nil, 404, "not_found"},
		{"bad list limit", "GET", "/v1/payments?limit=100000", nil, nil, 400, "invalid"},
		{"bad list status", "GET", "/v1/payments?status=won", nil, nil, 400, "invalid"},
		{"bad cursor", "GET", "/v1/payments?cursor=%%%", nil, nil, 400, "invalid"},
		{"wrong method", "DELETE", "/v1/payments", nil, nil, 405, "method_not_allowed"},
		{"unknown route", "GET", "/v2/nothing", nil, nil, 404, "not_found"},
		{"webhook unknown provider", "POST", "/webhooks/paypal", goodBody, signStandard(t, secret, "evt_bad", time.Now(), goodBody), 404, "not_found"},
		{"webhook no signature", "POST", "/webhooks/standard", goodBody, hdr("Authorization", ""), 400, "invalid_signature"},
		{"webhook other secret", "POST", "/webhooks/standard", goodBody, signStandard(t, otherSecret, "evt_bad", time.Now(), goodBody), 400, "invalid_signature"},
		{"webhook stale timestamp", "POST", "/webhooks/standard", goodBody, signStandard(t, secret, "evt_bad", time.Now().Add(-10*time.Minute), goodBody), 400, "invalid_signature"},
		{"webhook future timestamp", "POST", "/webhooks/standard", goodBody, signStandard(t, secret, "evt_bad", time.Now().Add(10*time.Minute), goodBody), 400, "invalid_signature"},
		{"webhook tampered body", "POST", "/webhooks/standard", bytes.Replace(goodBody, []byte("captured"), []byte("refunded"), 1), signStandard(t, secret, "evt_bad", time.Now(), goodBody), 400, "invalid_signature"},
		{"webhook malformed JSON", "POST", "/webhooks/standard", []byte(`{"id":"evt_m"`), signStandard(t, secret, "evt_m", time.Now(), []byte(`{"id":"evt_m"`)), 400, "invalid"},
		{"webhook unknown type", "POST", "/webhooks/standard", eventBody("evt_u", "payment.won", existing, ""), signStandard(t, secret, "evt_u", time.Now(), eventBody("evt_u", "payment.won", existing, "")), 400, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := in.do(tc.method, tc.path, tc.body, tc.hdr)
			if got, want := r.status, tc.status; got != want {
				t.Errorf("status=%d, want %d: %s", got, want, r.body)
			}
			if got, want := r.errCode(), tc.code; got != want {
				t.Errorf("code=%q, want %q: %s", got, want, r.body)
			}
			if r.status >= 400 && !strings.Contains(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type=%q, want JSON", r.header.Get("Content-Type"))
			}
		})
	}
	if after := dump(t, in); after != before {
		t.Fatalf("rejected requests changed stored state (database copies differ: %d vs %d bytes)", len(before), len(after))
	}
}
