package httpd

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// route is one entry of the routes table. Pattern segments in braces are
// parameters, passed to the handler in order.
type route struct {
	method  string
	pattern string // e.g. "/v1/payments/{id}/sync"
	auth    bool   // requires the API key
	name    string // for metrics and logs: the pattern
	handle  func(rc *fasthttp.RequestCtx, params []string) error
	parts   []string
}

// routeTable is the one place every route is registered.
func (s *Server) routeTable() []route {
	rs := []route{
		{method: "POST", pattern: "/v1/payments", auth: true, handle: s.handleCreatePayment},
		{method: "GET", pattern: "/v1/payments", auth: true, handle: s.handleListPayments},
		{method: "GET", pattern: "/v1/payments/{id}", auth: true, handle: s.handleGetPayment},
		{method: "POST", pattern: "/v1/payments/{id}/sync", auth: true, handle: s.handleSyncPayment},
		{method: "POST", pattern: "/v1/payments/{id}/refund", auth: true, handle: s.handleRefundPayment},
		{method: "GET", pattern: "/v1/payments/{id}/events", auth: true, handle: s.handlePaymentEvents},
		{method: "GET", pattern: "/v1/review", auth: true, handle: s.handleListReview},
		{method: "POST", pattern: "/v1/review/{id}/resolve", auth: true, handle: s.handleResolveReview},
		{method: "GET", pattern: "/v1/deliveries", auth: true, handle: s.handleListDeliveries},
		{method: "POST", pattern: "/v1/deliveries/{id}/retry", auth: true, handle: s.handleRetryDelivery},
		{method: "POST", pattern: "/v1/deliveries/retry", auth: true, handle: s.handleRetryDeliveries},
		{method: "GET", pattern: "/v1/customers/{id}", auth: true, handle: s.handleGetCustomer},
		{method: "GET", pattern: "/v1/ledger/balances", auth: true, handle: s.handleLedgerBalances},
		{method: "GET", pattern: "/admin/backup", auth: true, handle: s.handleBackup},
		{method: "POST", pattern: "/webhooks/{provider}", handle: s.handleWebhook},
		{method: "GET", pattern: "/metrics", handle: s.handleMetrics},
		{method: "GET", pattern: "/healthz", handle: s.handleHealthz},
		{method: "GET", pattern: "/readyz", handle: s.handleReadyz},
		{method: "GET", pattern: "/", handle: s.handleDashboard},
		{method: "POST", pattern: "/dashboard/login", handle: s.handleDashboardLogin},
		{method: "POST", pattern: "/dashboard/logout", handle: s.handleDashboardLogout},
		{method: "GET", pattern: "/dashboard/static/{file}", handle: s.handleDashboardStatic},
	}
	for i := range rs {
		rs[i].name = rs[i].pattern
		rs[i].parts = strings.Split(strings.Trim(rs[i].pattern, "/"), "/")
	}
	return rs
}

// match finds the route for a method and path. It returns the route, its
// parameters, and whether the path exists under another method.
func (s *Server) match(method, path string) (*route, []string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	pathFound := false
	for i := range s.routes {
		r := &s.routes[i]
		params, ok := matchParts(r.parts, segs)
		if !ok {
			continue
		}
		if r.method != method && !(method == "HEAD" && r.method == "GET") {
			pathFound = true
			continue
		}
		return r, params, true
	}
	return nil, nil, pathFound
}

func matchParts(parts, segs []string) ([]string, bool) {
	if len(parts) != len(segs) {
		return nil, false
	}
	var params []string
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			if segs[i] == "" {
				return nil, false
			}
			params = append(params, segs[i])
		} else if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// serve is the fasthttp handler: request id, routing, auth, metrics and the
// access log.
func (s *Server) serve(rc *fasthttp.RequestCtx) {
	start := time.Now()
	rid := acceptRequestID(rc.Request.Header.Peek("X-Request-Id"))
	rc.SetUserValue(ridKey, rid)
	rc.Response.Header.Set("X-Request-Id", rid)

	method, path := string(rc.Method()), string(rc.Path())
	r, params, pathFound := s.match(method, path)
	name := "unmatched"
	var err error
	switch {
	case r == nil && pathFound:
		err = pay.Errorf(pay.ENOTALLOWED, "method %s is not allowed on %s", method, path)
	case r == nil:
		err = pay.Errorf(pay.ENOTFOUND, "no route for %s %s", method, path)
	default:
		name = r.name
		if r.auth {
			err = s.authenticate(rc)
		}
		if err == nil {
			err = r.handle(rc, params)
		}
	}
	if err != nil {
		s.writeError(rc, err)
	}

	status := rc.Response.StatusCode()
	elapsed := time.Since(start)
	metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_http_requests_total{route=%q,status="%d"}`, name, status)).Inc()
	metrics.GetOrCreateHistogram(fmt.Sprintf(`paystate_http_request_duration_seconds{route=%q}`, name)).Update(elapsed.Seconds())
	ev := s.Logger.Debug()
	if status >= 500 {
		ev = s.Logger.Warn()
	}
	ev.Str("request_id", rid).Str("method", method).Str("route", name).Int("status", status).Dur("duration", elapsed).Msg("request")
}

type ctxKey int

const ridKey ctxKey = 0

func requestID(rc *fasthttp.RequestCtx) string {
	if v, ok := rc.UserValue(ridKey).(string); ok {
		return v
	}
	return ""
}

// acceptRequestID keeps a client's X-Request-Id if it is short and plain
// (it ends up in logs), else makes a new one.
func acceptRequestID(v []byte) string {
	if n := len(v); n > 0 && n <= 128 {
		ok := true
		for _, c := range v {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
				ok = false
				break
			}
		}
		if ok {
			return string(v)
		}
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// hashKey hashes an API key, so keys of any length compare in constant time.
func hashKey(k string) [32]byte { return sha256.Sum256([]byte(k)) }

// authenticate checks the bearer API key in constant time against every
// configured key; without one, the dashboard's session cookie, with a CSRF
// check on requests that change state (httpd/dashboard.go). With no key
// configured (loopback only) it lets all in but cross-site browser writes.
func (s *Server) authenticate(rc *fasthttp.RequestCtx) error {
	if len(s.keys) == 0 {
		return authenticateLoopback(rc)
	}
	key, ok := bearer(rc)
	if !ok {
		return s.authenticateBrowser(rc)
	}
	h := hashKey(key)
	match := 0
	for _, k := range s.keys {
		match |= subtle.ConstantTimeCompare(h[:], k[:])
	}
	if match != 1 {
		return pay.Errorf(pay.EUNAUTHORIZED, "invalid API key")
	}
	return nil
}

// bearer returns the bearer token of the request.
func bearer(rc *fasthttp.RequestCtx) (string, bool) {
	auth := string(rc.Request.Header.Peek("Authorization"))
	const prefix = "bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(auth[len(prefix):]), true
}
