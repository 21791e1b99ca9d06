package httpd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
)

// logLines returns the lines of the log b that contain s.
func logLines(b *testkit.SyncBuffer, s string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func TestServer_PanicRecovered(t *testing.T) {
	t.Parallel()
	const boom = "boom-4f1c2a: handler bug"
	var logs testkit.SyncBuffer
	d := newDashServerWith(t, func(s *httpd.Server) {
		s.Logger = zerolog.New(&logs)
		httpd.AddPanicRoute(s, "/test/panic", boom)
	})

	for i := range 2 {
		a := d.do("GET", "/test/panic", "", "", map[string]string{"X-Request-Id": fmt.Sprintf("panic-%d", i)})
		assertRefused(t, "panicking handler", a, http.StatusInternalServerError, pay.EINTERNAL)
		if strings.Contains(a.body, "boom") {
			t.Fatalf("the panic's value reached the client: %s", a.body)
		}
		if got, want := a.header.Get("X-Request-Id"), fmt.Sprintf("panic-%d", i); got != want {
			t.Fatalf("X-Request-Id=%q, want %q", got, want)
		}
		// The server goes on serving, on the same connection and others.
		if got, want := d.do("GET", "/healthz", "", "", nil).status, http.StatusOK; got != want {
			t.Fatalf("after a panic: /healthz status=%d, want %d", got, want)
		}
	}

	// Each panic is logged once, with its request id and its stack.
	for i := range 2 {
		rid := fmt.Sprintf(`"request_id":"panic-%d"`, i)
		var withPanic []string
		for _, l := range logLines(&logs, rid) {
			if strings.Contains(l, "boom-4f1c2a") {
				withPanic = append(withPanic, l)
			}
		}
		if got, want := len(withPanic), 1; got != want {
			t.Fatalf("request %d: %d log lines with the panic, want %d: %q", i, got, want, withPanic)
		}
		var line struct {
			Level string
			Error string
			Stack string
		}
		if err := json.Unmarshal([]byte(withPanic[0]), &line); err != nil {
			t.Fatal(err)
		}
		if line.Level != "error" || !strings.Contains(line.Error, boom) {
			t.Errorf("log line %s: want level error and the panic's value", withPanic[0])
		}
		if !strings.Contains(line.Stack, "goroutine") || !strings.Contains(line.Stack, "httpd") {
			t.Errorf("log line has no stack: %q", line.Stack)
		}
	}
}

// httpSeries returns the registered paystate_http_* series.
func httpSeries() []string {
	var out []string
	for _, n := range metrics.ListMetricNames() {
		if strings.HasPrefix(n, "paystate_http_") {
			out = append(out, n)
		}
	}
	return out
}

// TestServer_MetricLabels: requests to random paths, with random methods,
// for random webhook providers, add no series: labels are route patterns.
// Not parallel: it counts the series of the process-wide registry, which
// the other tests of the package grow while they run.
func TestServer_MetricLabels(t *testing.T) {
	d := newDashServer(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	token := func(n int) string {
		const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		return string(b)
	}
	method := func() string {
		for {
			m := strings.ToUpper(token(3 + rng.IntN(5)))
			if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}, m) {
				return m
			}
		}
	}
	var seen []string
	burst := func(n int) {
		for range n {
			p, m, prov := token(12), method(), token(14)
			seen = append(seen, p, m, prov)
			d.do("GET", "/"+p+"/"+token(8), "", "", nil)                   // no route: 404
			d.do(m, "/v1/payments", "", "", nil)                           // a route under another method: 405
			d.do(m, "/"+p, "", "", nil)                                    // neither: 404
			d.do("POST", "/webhooks/"+prov, "application/json", "{}", nil) // an unknown provider: 404
			d.do("GET", "/v1/payments/"+p, "", "", nil)                    // an unknown payment: 404
		}
	}
	burst(1) // every series these requests use exists now
	before := httpSeries()
	burst(40)
	after := httpSeries()
	if !slices.Equal(before, after) {
		t.Errorf("random requests added series:\nbefore %q\nafter  %q", before, after)
	}
	for _, s := range after {
		for _, tok := range seen {
			if strings.Contains(s, tok) {
				t.Fatalf("series %s holds a value the client sent (%q)", s, tok)
			}
		}
		if strings.Contains(s, "XYZ") {
			t.Fatalf("series %s holds a method", s)
		}
	}
	if !slices.Contains(after, `paystate_http_requests_total{route="/webhooks/{provider}",status="404"}`) ||
		!slices.Contains(after, `paystate_http_requests_total{route="unmatched",status="405"}`) {
		t.Errorf("want series by route pattern, got %q", after)
	}
}

func TestServer_MediaType(t *testing.T) {
	t.Parallel()
	d := newDashServer(t)
	const create = `{"order_id":"o-media","amount":1500,"currency":"EUR"}`
	n := 0
	key := func() map[string]string { n++; return map[string]string{"Idempotency-Key": fmt.Sprintf("media-%d", n)} }

	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded",
		"application/json-seq", "application/jsonx", "text/json", "application/json; charset=latin1", "application/json;;", "json"} {
		assertRefused(t, fmt.Sprintf("create with Content-Type %q", ct), d.do("POST", "/v1/payments", ct, create, key()), http.StatusUnsupportedMediaType, httpd.CodeMediaType)
	}
	for _, ct := range []string{"application/json", "Application/JSON", "application/json; charset=utf-8", "application/json;charset=UTF-8"} {
		if a := d.do("POST", "/v1/payments", ct, create, key()); a.status != http.StatusCreated {
			t.Errorf("create with Content-Type %q: status=%d, want 201: %s", ct, a.status, a.body)
		}
	}
	id := d.createPayment("")
	assertRefused(t, "sync as text", d.do("POST", "/v1/payments/"+id+"/sync", "text/plain", `{"status":"processing"}`, nil), http.StatusUnsupportedMediaType, httpd.CodeMediaType)
	assertRefused(t, "refund with a form body", d.do("POST", "/v1/payments/"+id+"/refund", "application/x-www-form-urlencoded", "{}", key()), http.StatusUnsupportedMediaType, httpd.CodeMediaType)
	// A refund needs no body, so an empty one needs no Content-Type: the
	// payment is not captured, which is the answer.
	assertRefused(t, "refund without a body", d.do("POST", "/v1/payments/"+id+"/refund", "", "", key()), http.StatusConflict, pay.ECONFLICT)
	// An empty create body is the body's fault, not its type's.
	assertRefused(t, "create without a body", d.do("POST", "/v1/payments", "", "", key()), http.StatusBadRequest, httpd.CodeInvalidRequest)
	if _, st := d.version(id, ""); st != "created" {
		t.Fatalf("a refused request changed the payment: status=%s", st)
	}

	// Webhooks are verified by their signature, whatever their type.
	body := fmt.Sprintf(`{"id":"evt_media","type":"payment.processing","created":%d,"data":{"payment_id":%q,"amount":1500,"currency":"EUR"}}`, d.clock.Now().Unix(), id)
	a := d.sendWebhook("evt_media", "text/plain; charset=iso-8859-1", body)
	if got, want := a.status, http.StatusOK; got != want {
		t.Fatalf("signed webhook sent as text: status=%d, want %d: %s", got, want, a.body)
	}

	// The dashboard's forms are form-encoded.
	k := newDashServer(t, dashKey)
	if sess := k.signIn(dashKey); sess == "" {
		t.Fatal("no session")
	}
	if a := k.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {"wrong"}}.Encode(), nil); a.status != http.StatusUnauthorized {
		t.Fatalf("form sign-in with a wrong key: status=%d, want 401", a.status)
	}
}

// TestServer_RefundConflictNotKept: a refund answered 409 (the payment is
// not captured yet) is not the key's answer: once the payment is captured,
// the retry with the same key refunds. A final answer (404) is kept.
func TestServer_RefundConflictNotKept(t *testing.T) {
	t.Parallel()
	psp, err := mock.New(mock.Config{}, mock.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = psp.Close() })
	d := newDashServerWith(t, func(s *httpd.Server) {
		s.Payments.(*finalize.Payments).Providers["mock"] = psp
	})

	// Amount ...03: processing now, captured at the PSP once its webhook
	// is due (it goes nowhere here).
	a := d.do("POST", "/v1/payments", "application/json", `{"order_id":"o-refund","amount":1503,"currency":"EUR","provider":"mock"}`, map[string]string{"Idempotency-Key": "create-1"})
	if a.status != http.StatusCreated {
		t.Fatalf("create: status=%d: %s", a.status, a.body)
	}
	var p struct{ ID, Status string }
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || p.Status != "processing" {
		t.Fatalf("create: %s (%v), want processing", a.body, err)
	}
	refund := func() answer {
		return d.do("POST", "/v1/payments/"+p.ID+"/refund", "", "", map[string]string{"Idempotency-Key": "refund-1"})
	}

	first := refund()
	assertRefused(t, "refund of a processing payment", first, http.StatusConflict, pay.ECONFLICT)

	psp.Wait() // the PSP has captured it
	if s := d.do("POST", "/v1/payments/"+p.ID+"/sync", "application/json", `{"status":"captured"}`, nil); s.status != http.StatusOK {
		t.Fatalf("sync captured: status=%d: %s", s.status, s.body)
	}

	retry := refund()
	if got, want := retry.status, http.StatusCreated; got != want {
		t.Fatalf("retry after the conflict: status=%d, want %d: %s", got, want, retry.body)
	}
	if retry.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the retry was a replay: %v", retry.header)
	}
	if _, st := d.version(p.ID, ""); st != "refunded" {
		t.Fatalf("status=%s, want refunded", st)
	}
	if got, want := psp.Stats().Refunds, 1; got != want {
		t.Fatalf("PSP refunds=%d, want %d", got, want)
	}
	// Now the answer is final: replayed, the PSP not called again.
	again := refund()
	if again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("third call: status=%d replayed=%q, want 201 replayed", again.status, again.header.Get("Idempotent-Replayed"))
	}
	if got, want := psp.Stats().Refunds, 1; got != want {
		t.Fatalf("PSP refunds=%d, want %d", got, want)
	}

	// A deterministic 4xx is final: it is kept and replayed.
	const unknown = "pay_01ARZ3NDEKTSV4RRFFQ69G5FAV"
	for i, want := range []string{"", "true"} {
		a := d.do("POST", "/v1/payments/"+unknown+"/refund", "", "", map[string]string{"Idempotency-Key": "refund-unknown"})
		if a.status != http.StatusNotFound || a.header.Get("Idempotent-Replayed") != want {
			t.Fatalf("refund of an unknown payment, call %d: status=%d replayed=%q, want 404 replayed=%q", i+1, a.status, a.header.Get("Idempotent-Replayed"), want)
		}
	}
}

// TestServer_ShutdownRightAfterOpen: a Shutdown that comes before the
// serving goroutine has started returns (it used to wait forever).
func TestServer_ShutdownRightAfterOpen(t *testing.T) {
	t.Parallel()
	for i := range 50 {
		srv := &httpd.Server{Addr: "127.0.0.1:0"}
		if err := srv.Open(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done <- srv.Shutdown(ctx)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Shutdown: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Shutdown has not returned after 30s", i)
		}
	}
}
