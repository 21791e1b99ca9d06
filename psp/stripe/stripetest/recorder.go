package stripetest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/paystate/paystate/psp/stripe/stripefake"
)

// Recorder is a reverse proxy on 127.0.0.1 in front of a Stripe API (a
// stripe-mock, Stripe's own): it forwards every request unchanged and
// records it, so a test sees which Idempotency-Key reached the API.
type Recorder struct {
	srv *httptest.Server

	mu   sync.Mutex
	reqs []stripefake.Request
}

// NewRecorder starts a Recorder in front of target; it is closed at tb's
// cleanup.
func NewRecorder(tb testing.TB, target string) *Recorder {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatalf("recorder target %q: %v", target, err)
	}
	rc := &Recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, stripefake.Record(r, body))
		rc.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(rc.srv.Close)
	return rc
}

// URL is the address to use as the API base.
func (rc *Recorder) URL() string { return rc.srv.URL }

// Requests returns the requests so far, in arrival order.
func (rc *Recorder) Requests() []stripefake.Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]stripefake.Request(nil), rc.reqs...)
}

// Find returns the requests with the given method and path.
func (rc *Recorder) Find(method, path string) []stripefake.Request {
	return stripefake.Filter(rc.Requests(), method, path)
}
