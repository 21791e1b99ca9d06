// Package httpd is paystate's HTTP server: the merchant API, the PSP webhook
// endpoints, health, metrics and the dashboard, on fasthttp. It is an
// adapter: a handler decodes the request, calls one method of a service
// (the small interfaces Payments, Events, Ledger, Review,
// Webhooks, Deliveries and Customers, declared next to the routes that use
// them and implemented by finalize and ripple) and encodes the answer. It
// owns the wire format (JSON structs with snake_case tags),
// authentication, the Idempotency-Key header and the table from error
// codes to HTTP statuses; it holds no domain rule and opens no storage
// transaction. Handlers never use the fasthttp request as a context: every
// service call gets a context derived from the server's own, with a
// timeout.
package httpd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/singleflight"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
)

// Defaults of the server.
const (
	DefaultMaxBody        = 256 << 10
	DefaultRequestTimeout = 30 * time.Second
)

// Server serves the HTTP API.
type Server struct {
	Addr    string   // listen address, e.g. "127.0.0.1:8080" or ":0"
	APIKeys []string // bearer keys; empty = loopback only
	MaxBody int      // server.max_body

	// The services the routes call. Payments, Events, Ledger and
	// Webhooks are required by their routes; a nil Review, Deliveries or
	// Customers makes its routes answer 501.
	Payments   Payments
	Events     Events
	Ledger     Ledger
	Webhooks   Webhooks
	Review     Review
	Deliveries Deliveries
	Customers  Customers
	// Reconciliation serves the settlement reconciliation runs; nil
	// answers 501.
	Reconciliation Reconciliation

	// PSPLinks make the address of a payment's page in its PSP's own
	// dashboard, by provider name ("" while there is none, e.g. before a
	// PayPal order is captured); a payment's view carries it as
	// provider_url and the dashboard links the payment there.
	PSPLinks map[string]func(pay.Payment) string

	// Backup takes a consistent copy of the database to a local file and
	// returns it open, with its size; closing it removes the file (GET
	// /admin/backup streams it). nil if the backend cannot.
	Backup interface {
		Snapshot() (io.ReadCloser, int64, error)
	}

	// Ready are the parts GET /readyz checks (storage answers a write,
	// every worker turned within three intervals: readyz.go); none means
	// ready.
	Ready []ReadyCheck

	// Counts counts the payments per status for the paystate_payments
	// gauge of GET /metrics, at each scrape; nil leaves the gauge out.
	Counts PaymentCounter

	// AllowedHosts restricts the Host of every request when API keys are
	// configured (server.allowed_hosts): host names or IP addresses,
	// compared without the port and ignoring case; empty accepts any Host.
	// Without API keys it is not used: the Host must then name the loopback
	// (see guard in router.go).
	AllowedHosts []string
	// SessionTTL is how long a dashboard sign-in lasts (auth.session_ttl);
	// 0 means DashboardSessionTTL.
	SessionTTL time.Duration

	// Pprof serves net/http/pprof's profiles under /debug/pprof, behind the
	// API key (pprof.go); off, those paths answer 404.
	Pprof bool

	// RequestTimeout bounds the work of one request.
	RequestTimeout time.Duration
	// ReadTimeout bounds reading one request (slow clients); default 10s.
	ReadTimeout time.Duration

	// Now is the clock of dashboard sessions and backup names; default
	// time.Now.
	Now    func() time.Time
	Logger zerolog.Logger

	ln     net.Listener
	srv    *fasthttp.Server
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error
	keys   [][32]byte
	hosts  map[string]bool // AllowedHosts, normalized by hostName
	routes []route

	// sessions are the dashboard sign-ins of this process (dashboard.go).
	sessions sessionStore
	// wasReady is the answer of the last GET /readyz, to log changes.
	wasReady atomic.Bool
	// counting is the count of payments of the scrapes in flight.
	counting singleflight.Group
	// extraRoutes are appended to the route table; only tests set them
	// (export_test.go), to reach code paths no real route takes.
	extraRoutes []route
}

// Open validates the configuration, binds the listener (a port in use is an
// error here, not later) and starts serving.
func (s *Server) Open() error {
	s.MaxBody = defaults.Or(s.MaxBody, DefaultMaxBody)
	s.RequestTimeout = defaults.Or(s.RequestTimeout, DefaultRequestTimeout)
	s.ReadTimeout = defaults.Or(s.ReadTimeout, 10*time.Second)
	s.Now = defaults.Clock(s.Now)
	s.SessionTTL = defaults.Or(s.SessionTTL, DashboardSessionTTL)
	s.hosts = nil
	for _, h := range s.AllowedHosts {
		if ip := net.ParseIP(h); ip != nil && ip.To4() == nil {
			h = "[" + h + "]" // an IPv6 address written without brackets
		}
		name, ok := hostName(h)
		if !ok {
			return fmt.Errorf("server.allowed_hosts: %q is not a host name", truncate(h, 64))
		}
		if s.hosts == nil {
			s.hosts = make(map[string]bool)
		}
		s.hosts[name] = true
	}
	for _, k := range s.APIKeys {
		s.keys = append(s.keys, hashKey(k))
	}
	if len(s.keys) == 0 {
		if !loopback(s.Addr) {
			return fmt.Errorf("auth.api_keys is empty: refusing to listen on %q, which is not a loopback address", s.Addr)
		}
		s.Logger.Info().Str("listen", s.Addr).Msg("no API key configured: serving loopback only")
	}
	s.routes = s.routeTable()

	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	s.ln = lingerListener{ln}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = &fasthttp.Server{
		Handler:            s.serve,
		ErrorHandler:       s.parseError,
		ExpectHandler:      s.expect,
		Name:               "paystate",
		MaxRequestBodySize: s.MaxBody,
		// Bodies are streamed so that one route (a settlement report
		// upload) can take more than server.max_body; every other route
		// reads its body through boundBody, which keeps the limit.
		// Multipart forms are not read ahead (fasthttp would spool one
		// of any size to disk before the handler runs).
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		ReadTimeout:                  s.ReadTimeout,
		WriteTimeout:                 s.RequestTimeout + 5*time.Second,
		IdleTimeout:                  60 * time.Second,
		NoDefaultServerHeader:        true,
		NoDefaultDate:                false,
		Logger:                       fasthttpLogger{s.Logger},
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.srv.Serve(s.ln) }()
	s.Logger.Info().Str("listen", ln.Addr().String()).Msg("http server listening")
	return nil
}

// Port returns the port the server listens on (useful with ":0").
func (s *Server) Port() int {
	if s.ln == nil {
		return 0
	}
	return s.ln.Addr().(*net.TCPAddr).Port
}

// BoundAddr is the address the listener is bound to, as the system gives
// it ("[::]:8090", "127.0.0.1:43121"); "" before Open. URL is how to
// reach it, which for a wildcard address is loopback.
func (s *Server) BoundAddr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// URL returns the server's base URL on loopback.
func (s *Server) URL() string {
	host := "127.0.0.1"
	if a, ok := s.ln.Addr().(*net.TCPAddr); ok && a.IP.To4() == nil && !a.IP.IsUnspecified() {
		host = "[" + a.IP.String() + "]"
	}
	return "http://" + host + ":" + strconv.Itoa(s.Port())
}

// Shutdown stops accepting connections, waits for in-flight requests until
// ctx ends, and then cancels what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	err := s.srv.ShutdownWithContext(ctx)
	// fasthttp closes only the listeners Serve has registered: one whose
	// Serve goroutine has not started yet (a Shutdown right after Open)
	// would be served forever. Closing it here makes Serve return.
	_ = s.ln.Close()
	s.cancel()
	if serr := <-s.done; serr != nil && err == nil && !errors.Is(serr, net.ErrClosed) {
		err = serr
	}
	return err
}

// fasthttpLogger sends fasthttp's own messages to zerolog.
type fasthttpLogger struct{ l zerolog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug().Str("component", "fasthttp").Msgf(format, args...)
}

// parseError answers requests fasthttp could not read: too large, too slow,
// malformed.
func (s *Server) parseError(ctx *fasthttp.RequestCtx, err error) {
	var code, msg string
	status := fasthttp.StatusBadRequest
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, code, msg = fasthttp.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body is larger than server.max_body (%d bytes)", s.MaxBody)
	case isTimeout(err):
		status, code, msg = fasthttp.StatusRequestTimeout, "request_timeout", "request was not received in time"
	default:
		code, msg = pay.EINVALID, "malformed HTTP request"
	}
	metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_http_requests_total{route="unparsed",status="%d"}`, status)).Inc()
	rid := s.beginRequest(ctx)
	writeJSON(ctx, status, errorBody{Error: errorDetail{Code: code, Message: msg, RequestID: rid}})
	ctx.SetConnectionClose()
	s.accessLog(ctx, "unparsed", time.Since(ctx.Time()))
}

// boundBody reads the body of a request to a route that does not
// stream it (all but a report upload) into memory, at most
// server.max_body: more is 413, and the connection is closed rather than
// the rest read.
func (s *Server) boundBody(rc *fasthttp.RequestCtx) error {
	if !rc.Request.IsBodyStream() {
		return nil
	}
	if n := rc.Request.Header.ContentLength(); n > s.MaxBody {
		rc.SetConnectionClose()
		return pay.Errorf(CodeTooLarge, "request body is larger than server.max_body (%d bytes)", s.MaxBody)
	}
	body, err := io.ReadAll(io.LimitReader(rc.RequestBodyStream(), int64(s.MaxBody)+1))
	switch {
	case err != nil:
		rc.SetConnectionClose()
		return pay.Errorf(pay.EINVALID, "malformed HTTP request: the body could not be read in full")
	case len(body) > s.MaxBody:
		rc.SetConnectionClose()
		return pay.Errorf(CodeTooLarge, "request body is larger than server.max_body (%d bytes)", s.MaxBody)
	}
	rc.Request.SetBody(body)
	return nil
}

// expect answers "Expect: 100-continue": a body announced larger than
// server.max_body is refused before the client sends it, except on a
// route that streams its body.
func (s *Server) expect(rc *fasthttp.RequestCtx) int {
	if r, _, _ := s.match(string(rc.Method()), string(rc.Path())); r != nil && r.stream {
		return fasthttp.StatusContinue
	}
	if n := rc.Request.Header.ContentLength(); n > s.MaxBody {
		s.parseError(rc, fasthttp.ErrBodyTooLarge)
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// loopback reports whether addr's host is a loopback address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requestContext returns a context for one request's service calls,
// derived from the server's own (never from the fasthttp request).
func (s *Server) requestContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.RequestTimeout)
}
