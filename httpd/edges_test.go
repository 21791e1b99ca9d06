package httpd_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paystate/paystate/httpd"
)

// errorParam is the param and message of an error answer; an answer that
// is not one fails the test and gives "".
func errorParam(t *testing.T, a answer) (param, message string) {
	t.Helper()
	var e struct {
		Error struct{ Param, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Errorf("not an error answer: %v: %.100q", err, a.body)
	}
	return e.Error.Param, e.Error.Message
}

// TestServer_QueryParameters: a GET of the API refuses, with 400 naming
// it, a query parameter it does not take (a typo, or created_after for
// created_from, would otherwise answer the unfiltered list) and one given
// twice; the parameters it takes still work.
func TestServer_QueryParameters(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	id := d.createPayment(dashKey)
	for _, path := range []string{
		"/v1/payments?created_after=2026-01-01T00:00:00Z",
		"/v1/payments?stauts=captured",
		"/v1/payments?limit=2&created_after=x",
		"/v1/payments/" + id + "?created_after=x",
		"/v1/payments/" + id + "/refunds?created_after=x",
		"/v1/payments/" + id + "/events?created_after=x",
		"/v1/disputes?created_after=x",
		"/v1/reconciliation/runs?created_after=x",
		"/v1/reconciliation/runs/recon_x?created_after=x",
		"/v1/review?created_after=x",
		"/v1/deliveries?created_after=x",
		"/v1/customers/cus_x?created_after=x",
		"/v1/ledger/balances?created_after=x",
		"/v1/ledger/revenue?created_after=x",
		"/admin/backup?created_after=x",
	} {
		a := d.do("GET", path, "", "", bearer())
		assertRefused(t, "GET "+path, a, http.StatusBadRequest, httpd.CodeInvalidRequest)
		if param, msg := errorParam(t, a); param != "created_after" && param != "stauts" || !strings.Contains(msg, `"`+param+`"`) {
			t.Errorf("GET %s: param=%q message=%q, want both to name the parameter", path, param, msg)
		}
	}
	for _, path := range []string{
		"/v1/payments?limit=1&limit=500",
		"/v1/payments?status=captured&limit=1&status=failed",
		"/v1/deliveries?limit=1&limit=1",
	} {
		a := d.do("GET", path, "", "", bearer())
		assertRefused(t, "GET "+path, a, http.StatusBadRequest, httpd.CodeInvalidRequest)
		want := "limit"
		if strings.Contains(path, "status=failed") {
			want = "status"
		}
		if param, msg := errorParam(t, a); param != want || !strings.Contains(msg, `"`+want+`"`) {
			t.Errorf("GET %s: param=%q message=%q, want both to name %s", path, param, msg, want)
		}
	}
	for _, path := range []string{"/v1/payments?limit=1&status=created&order_id=o-dash", "/v1/payments/" + id, "/v1/ledger/balances"} {
		if a := d.do("GET", path, "", "", bearer()); a.status != http.StatusOK {
			t.Errorf("GET %s: status=%d, want 200: %s", path, a.status, a.body)
		}
	}
}

// TestServer_IfNoneMatch: GET /v1/payments/{id} answers 304 when
// If-None-Match matches its ETag as RFC 9110 compares them: weakly, any
// of a list, or "*".
func TestServer_IfNoneMatch(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	id := d.createPayment(dashKey)
	get := d.do("GET", "/v1/payments/"+id, "", "", bearer())
	if got, want := get.header.Get("ETag"), `"1"`; got != want {
		t.Fatalf("ETag=%q, want %q", got, want)
	}
	for _, inm := range []string{`"1"`, `W/"1"`, `"0", "1"`, `"0",W/"1"`, `*`, ` "1" `} {
		a := d.do("GET", "/v1/payments/"+id, "", "", with(bearer(), "If-None-Match", inm))
		if got, want := a.status, http.StatusNotModified; got != want {
			t.Errorf("If-None-Match %s: status=%d, want %d: %s", inm, got, want, a.body)
		}
		if a.body != "" {
			t.Errorf("If-None-Match %s: a 304 with a body: %s", inm, a.body)
		}
	}
	for _, inm := range []string{`"2"`, `W/"2"`, `"0", "11"`, `1`, `"1`} {
		a := d.do("GET", "/v1/payments/"+id, "", "", with(bearer(), "If-None-Match", inm))
		if got, want := a.status, http.StatusOK; got != want {
			t.Errorf("If-None-Match %s: status=%d, want %d", inm, got, want)
		}
	}
}

// TestServer_SyncVersionNeverHad: a /sync report that expects a version
// above the payment's (a version it never had) is 400 naming
// expected_version, and changes nothing; the payment's own version
// applies.
func TestServer_SyncVersionNeverHad(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	id := d.createPayment(dashKey)
	for _, tt := range []struct {
		name, body string
		hdr        map[string]string
	}{
		{"Body", `{"status":"processing","expected_version":5}`, bearer()},
		{"IfMatch", `{"status":"processing"}`, with(bearer(), "If-Match", `"5"`)},
	} {
		a := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", tt.body, tt.hdr)
		assertRefused(t, tt.name, a, http.StatusBadRequest, httpd.CodeInvalidRequest)
		if param, _ := errorParam(t, a); param != "expected_version" {
			t.Errorf("%s: param=%q, want expected_version", tt.name, param)
		}
	}
	if v, st := d.version(id, dashKey); v != 1 || st != "created" {
		t.Fatalf("after the refused reports: version %d %s, want 1 created", v, st)
	}
	a := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", `{"status":"processing","expected_version":1}`, bearer())
	if a.status != http.StatusOK || strings.Contains(a.body, `"conflict":true`) {
		t.Fatalf("report at the current version: status=%d: %s", a.status, a.body)
	}
}

// TestServer_FieldMessages: a negative expected_version and a create
// without amount are told what the field is, not what JSON type was read
// or what the zero value was.
func TestServer_FieldMessages(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	id := d.createPayment(dashKey)
	a := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", `{"status":"processing","expected_version":-1}`, bearer())
	assertRefused(t, "expected_version -1", a, http.StatusBadRequest, httpd.CodeInvalidRequest)
	if param, msg := errorParam(t, a); param != "expected_version" || !strings.Contains(msg, "positive integer") || strings.Contains(msg, "got number") {
		t.Errorf("expected_version -1: param=%q message=%q, want one saying a version is a positive integer", param, msg)
	}
	a = d.do("POST", "/v1/payments", "application/json", `{"order_id":"o-no-amount","currency":"EUR"}`, with(bearer(), "Idempotency-Key", "no-amount"))
	assertRefused(t, "create without amount", a, http.StatusBadRequest, httpd.CodeInvalidRequest)
	if param, msg := errorParam(t, a); param != "amount" || !strings.Contains(msg, "required") || strings.Contains(msg, "got 0") {
		t.Errorf("create without amount: param=%q message=%q, want one saying amount is required", param, msg)
	}
}
