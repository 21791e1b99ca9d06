package stripetest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Request is one API request as it reached the Stripe API.
type Request struct {
	Method         string
	Path           string
	IdempotencyKey string
	StripeVersion  string
	Authorized     bool       // a Bearer key was sent (the key itself is not kept)
	Form           url.Values // the form body, or the query of a GET
}

// Recorder is a reverse proxy on 127.0.0.1 in front of a Stripe API (a
// stripe-mock, Stripe's own): it forwards every request unchanged and
// records it, so a test sees which Idempotency-Key reached the API.
type Recorder struct {
	srv *httptest.Server

	mu   sync.Mutex
	reqs []Request
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
		rc.reqs = append(rc.reqs, record(r, body))
		rc.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(rc.srv.Close)
	return rc
}

// URL is the address to use as the API base.
func (rc *Recorder) URL() string { return rc.srv.URL }

// Requests returns the requests so far, in arrival order.
func (rc *Recorder) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.reqs...)
}

// Find returns the requests with the given method and path.
func (rc *Recorder) Find(method, path string) []Request {
	return filter(rc.Requests(), method, path)
}

func filter(reqs []Request, method, path string) []Request {
	var out []Request
	for _, r := range reqs {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// record keeps what a test asks about a request; never the API key.
func record(r *http.Request, body []byte) Request {
	form := r.URL.Query()
	if r.Method != http.MethodGet {
		if f, err := url.ParseQuery(string(body)); err == nil {
			form = f
		}
	}
	return Request{
		Method:         r.Method,
		Path:           r.URL.Path,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		StripeVersion:  r.Header.Get("Stripe-Version"),
		Authorized:     strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sk_") || strings.HasPrefix(r.Header.Get("Authorization"), "Bearer rk_"),
		Form:           form,
	}
}
