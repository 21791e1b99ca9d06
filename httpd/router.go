package httpd

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/internal/metriccache"
	"github.com/paystate/paystate/pay"
)

// route is one entry of the routes table. Pattern segments in braces are
// parameters, passed to the handler in order.
type route struct {
	method  string
	pattern string // e.g. "/v1/payments/{id}/sync"
	auth    bool   // requires the API key
	// query are the query parameters a GET of the merchant API takes, as
	// api/openapi.yaml declares them: any other, and one given twice, is
	// refused (checksQuery, checkQuery).
	query  []string
	stream bool   // reads its own body, unbounded by server.max_body (boundBody)
	name   string // for metrics and logs: the pattern
	handle func(rc *fasthttp.RequestCtx, params []string) error
	parts  []string
}

// routeTable is the one place every route is registered.
func (s *Server) routeTable() []route {
	rs := []route{
		{method: "POST", pattern: "/v1/payments", auth: true, handle: s.handleCreatePayment},
		{method: "GET", pattern: "/v1/payments", auth: true, query: []string{"status", "order_id", "customer_id", "customer_email", "created_from", "created_before", "limit", "cursor"}, handle: s.handleListPayments},
		{method: "GET", pattern: "/v1/payments/{id}", auth: true, handle: s.handleGetPayment},
		{method: "POST", pattern: "/v1/payments/{id}/sync", auth: true, handle: s.handleSyncPayment},
		{method: "POST", pattern: "/v1/payments/{id}/refund", auth: true, handle: s.handleRefundPayment},
		{method: "GET", pattern: "/v1/payments/{id}/refunds", auth: true, handle: s.handleListRefunds},
		{method: "GET", pattern: "/v1/disputes", auth: true, query: []string{"status", "limit"}, handle: s.handleListDisputes},
		{method: "GET", pattern: "/v1/reconciliation/runs", auth: true, query: []string{"limit", "cursor"}, handle: s.handleListReconRuns},
		{method: "GET", pattern: "/v1/reconciliation/runs/{id}", auth: true, handle: s.handleGetReconRun},
		{method: "POST", pattern: "/v1/reconciliation/runs", auth: true, stream: true, handle: s.handleImportReconRun},
		{method: "GET", pattern: "/v1/payments/{id}/events", auth: true, handle: s.handlePaymentEvents},
		{method: "GET", pattern: "/v1/review", auth: true, handle: s.handleListReview},
		{method: "POST", pattern: "/v1/review/{id}/resolve", auth: true, handle: s.handleResolveReview},
		{method: "GET", pattern: "/v1/deliveries", auth: true, query: []string{"state", "since", "limit", "cursor"}, handle: s.handleListDeliveries},
		{method: "POST", pattern: "/v1/deliveries/{id}/retry", auth: true, handle: s.handleRetryDelivery},
		{method: "POST", pattern: "/v1/deliveries/retry", auth: true, handle: s.handleRetryDeliveries},
		{method: "GET", pattern: "/v1/customers/{id}", auth: true, handle: s.handleGetCustomer},
		{method: "GET", pattern: "/v1/ledger/balances", auth: true, handle: s.handleLedgerBalances},
		{method: "GET", pattern: "/v1/ledger/revenue", auth: true, query: []string{"from", "to"}, handle: s.handleRevenue},
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
	rs = append(rs, s.pprofRoutes()...)   // /debug/pprof, only with Pprof (pprof.go)
	rs = append(rs, s.openapiRoutes()...) // /openapi.yaml and /openapi.json (openapi.go)
	rs = append(rs, s.extraRoutes...)
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

// serve is the fasthttp handler: request id, the guard, routing, auth,
// panic recovery, metrics and the access log (access.go).
//
// Metric labels never come from the client: the route is its pattern
// ("/webhooks/{provider}"), "unmatched" when no route matches, and the
// status is the one the server chose; neither the raw path nor the method
// becomes a label, so a stranger cannot grow the number of series.
func (s *Server) serve(rc *fasthttp.RequestCtx) {
	start := time.Now()
	s.beginRequest(rc)

	name, err := s.dispatch(rc)
	if err != nil {
		s.writeError(rc, err)
	}

	elapsed := time.Since(start)
	requestCounters.Get(routeStatus{name, rc.Response.StatusCode()}).Inc()
	durationHistograms.Get(name).Update(elapsed.Seconds())
	s.accessLog(rc, name, elapsed)
}

// requestCounters and durationHistograms are the request metrics of each
// route name and status (paystate_http_requests_total{route,status},
// paystate_http_request_duration_seconds{route}). Route names come from the
// routes table and "unmatched", statuses from the handlers: both sets are
// small and fixed.
var (
	requestCounters = metriccache.Cache[routeStatus, *metrics.Counter]{New: func(k routeStatus) *metrics.Counter {
		return metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_http_requests_total{route=%q,status="%d"}`, k.route, k.status))
	}}
	durationHistograms = metriccache.Cache[string, *metrics.PrometheusHistogram]{New: func(route string) *metrics.PrometheusHistogram {
		return metrics.GetOrCreatePrometheusHistogramExt(fmt.Sprintf(`paystate_http_request_duration_seconds{route=%q}`, route), httpBuckets)
	}}
)

type routeStatus struct {
	route  string
	status int
}

// httpBuckets are the upper bounds, in seconds, of the request duration
// histogram: from a cached read to the request timeout.
var httpBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// dispatch guards, routes, authenticates and runs one request, and returns
// the route's name for metrics and logs. A panic anywhere below is
// recovered here, once for every handler: the request is answered 500 with
// the error shape and the server goes on serving.
func (s *Server) dispatch(rc *fasthttp.RequestCtx) (name string, err error) {
	name = "unmatched"
	defer func() {
		if v := recover(); v != nil {
			err = s.recovered(rc, v)
		}
	}()
	method, path := string(rc.Method()), string(rc.Path())
	r, params, pathFound := s.match(method, path)
	if r != nil {
		name = r.name
	}
	if r == nil || !r.stream {
		if err := s.boundBody(rc); err != nil {
			return name, err
		}
	} else {
		// A streamed body refused before its handler reads it is not
		// read at all: the connection closes instead.
		defer func() {
			if err != nil {
				rc.SetConnectionClose()
			}
		}()
	}
	// Where the request comes from is checked before anything else, so a
	// refused request learns nothing about routes or credentials.
	if err := s.guard(rc); err != nil {
		return name, err
	}
	switch {
	case r == nil && pathFound:
		return name, pay.Errorf(CodeMethodNotAllowed, "method %s is not allowed on %s", truncate(method, 32), truncate(path, 128))
	case r == nil:
		return name, pay.Errorf(pay.ENOTFOUND, "no route for %s %s", truncate(method, 32), truncate(path, 128))
	}
	if r.auth {
		if err := s.authenticate(rc); err != nil {
			return name, err
		}
	}
	// A path parameter that no id can be (not UTF-8, or a control,
	// format or bidirectional character: paystate's ids are ASCII, and a
	// create refuses such a customer id) names nothing. It is 404 here,
	// on every backend, before a store is asked about text it may refuse
	// (PostgreSQL would answer EINVALID for a NUL or bytes not UTF-8).
	for _, p := range params {
		if pay.ValidateText("id", p, len(p)) != nil {
			return name, pay.Errorf(pay.ENOTFOUND, "%q is not the id of anything: it is not UTF-8 or holds a control, format or bidirectional character", truncate(p, 64))
		}
	}
	if r.checksQuery() {
		if err := checkQuery(rc, r); err != nil {
			return name, err
		}
	}
	return name, r.handle(rc, params)
}

// checksQuery reports whether r is a GET of the merchant API (/v1 and
// /admin), whose query parameters checkQuery checks. pprof's routes take
// the query net/http/pprof reads.
func (r *route) checksQuery() bool {
	return r.auth && r.method == "GET" && (strings.HasPrefix(r.pattern, "/v1/") || strings.HasPrefix(r.pattern, "/admin/"))
}

// checkQuery refuses, with 400 naming it, a query parameter that a GET of
// the API does not take (a typo such as created_after would otherwise be
// ignored, and the unfiltered list answered as if it were filtered) and
// one given twice (limit=1&limit=500: which one counts would be a guess).
func checkQuery(rc *fasthttp.RequestCtx, r *route) error {
	accepted, q := r.query, rc.QueryArgs()
	for k := range q.All() {
		name := string(k)
		switch {
		case !slices.Contains(accepted, name):
			takes := "no query parameters"
			if len(accepted) > 0 {
				takes = "only " + strings.Join(accepted, ", ")
			}
			return pay.Invalidf(truncate(name, 64), "unknown query parameter %q: GET %s takes %s", truncate(name, 64), r.pattern, takes)
		case len(q.PeekMulti(name)) > 1:
			return pay.Invalidf(name, "query parameter %q is given %d times: give it once", name, len(q.PeekMulti(name)))
		}
	}
	return nil
}

// panicError is a handler's panic, with the stack where it happened. It
// counts as an internal error: writeError logs it once, with the stack, and
// the client sees only the request id.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// recovered turns a recovered panic into the error the request is answered
// with. Whatever the handler had put in the response is dropped.
func (s *Server) recovered(rc *fasthttp.RequestCtx, v any) error {
	stack := debug.Stack()
	rc.Response.Reset()
	rc.Response.Header.Set("X-Request-Id", requestID(rc))
	return &panicError{value: v, stack: stack}
}

// guard is the one check of where a request comes from, made for every
// route before routing and authentication (the health, metrics, webhook
// and dashboard routes included: the rule is simplest when it has no
// exception, and a probe on the same machine names the loopback anyway).
//
// Without API keys the server trusts its own machine only, and a browser
// on that machine is not to be used against it:
//   - a request carrying Forwarded or X-Forwarded-For came through a proxy,
//     so the network can reach the server: 403
//     proxied_request_without_api_key (configure auth.api_keys);
//   - a Host other than localhost, 127.0.0.1 or [::1] (any port) is a page
//     of another site whose name was rebound to 127.0.0.1 (DNS rebinding),
//     or a request meant for another server: 421 misdirected_request.
//
// With API keys, a non-empty server.allowed_hosts restricts Host the same
// way, except that an IP literal and localhost are always served: DNS
// rebinding needs a name, while health checks, Kubernetes probes (which
// send the pod's IP) and Prometheus scrapes address the server by IP.
// Proxies are welcome, the key is the gate.
func (s *Server) guard(rc *fasthttp.RequestCtx) error {
	if len(s.keys) == 0 {
		for _, h := range []string{"Forwarded", "X-Forwarded-For"} {
			if len(rc.Request.Header.Peek(h)) > 0 {
				return pay.Errorf(CodeProxied, "request forwarded by a proxy (%s) to a server without auth.api_keys, which trusts only its own machine: configure API keys", h)
			}
		}
		return checkHost(rc, loopbackHosts, false, "without auth.api_keys only localhost, 127.0.0.1 and [::1] are served")
	}
	if len(s.hosts) > 0 {
		return checkHost(rc, s.hosts, true, "it is not in server.allowed_hosts (IP addresses and localhost are always served)")
	}
	return nil
}

// alwaysServed reports whether the host name (as hostName returns it) is
// one that server.allowed_hosts does not restrict: an IP address or
// localhost.
func alwaysServed(name string) bool {
	return name == "localhost" || net.ParseIP(name) != nil
}

// loopbackHosts are the Host names a server without API keys answers to.
var loopbackHosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}

// checkHost refuses a request whose Host (the request line's, for an
// absolute URI, and the header's) is not in allowed; with ipOK, an IP
// literal or localhost is accepted too (alwaysServed).
func checkHost(rc *fasthttp.RequestCtx, allowed map[string]bool, ipOK bool, why string) error {
	for _, h := range [][]byte{rc.Host(), rc.Request.Header.Host()} {
		if name, ok := hostName(string(h)); !ok || !(allowed[name] || ipOK && alwaysServed(name)) {
			return pay.Errorf(CodeMisdirected, "this server does not answer for Host %q: %s", truncate(string(h), 64), why)
		}
	}
	return nil
}

// hostName returns the host of a Host value ("name", "name:port",
// "[v6]" or "[v6]:port") in lower case, without port and brackets, an IPv6
// address in its canonical form. It reports false for an empty or
// malformed value.
func hostName(h string) (string, bool) {
	var name, port string
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", false
		}
		ip := net.ParseIP(h[1:end])
		if ip == nil || ip.To4() != nil {
			return "", false
		}
		name, port = ip.String(), h[end+1:]
	} else {
		name, port = h, ""
		if i := strings.IndexByte(h, ':'); i >= 0 {
			name, port = h[:i], h[i:]
		}
	}
	if port != "" {
		if port[0] != ':' || len(port) > 6 {
			return "", false
		}
		for _, c := range port[1:] {
			if c < '0' || c > '9' {
				return "", false
			}
		}
	}
	if name == "" || len(name) > 253 {
		return "", false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':') {
			return "", false
		}
	}
	return strings.ToLower(name), true
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
