package stripefake

import (
	"net/http"
	"net/url"
	"strings"
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

// Filter returns the requests of reqs with the given method and path.
func Filter(reqs []Request, method, path string) []Request {
	var out []Request
	for _, r := range reqs {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// Record is what a test asks about a request with its body; never the
// API key.
func Record(r *http.Request, body []byte) Request {
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
