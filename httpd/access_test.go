package httpd_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/testkit"
)

// accessLine is an access line of the log, decoded.
type accessLine struct {
	Level     string
	Message   string
	RequestID string `json:"request_id"`
	Method    string
	Route     string
	Status    int
	Duration  string
	Bytes     int
}

// accessLines returns the access lines of the log with the request id rid.
func accessLines(t *testing.T, logs *testkit.SyncBuffer, rid string) []accessLine {
	t.Helper()
	var out []accessLine
	for _, l := range strings.Split(logs.String(), "\n") {
		if l == "" {
			continue
		}
		var a accessLine
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, l)
		}
		if a.Message == "request" && a.RequestID == rid {
			out = append(out, a)
		}
	}
	return out
}

// TestServer_AccessLog: one access line per request at info, with the
// method, the route pattern, the status, the duration with its unit, the
// bytes of the body and the request id; X-Request-Id is taken from the
// request when it is printable ASCII of at most 128 bytes, else made, and
// echoed in the response.
func TestServer_AccessLog(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	d := newDashServerWith(t, func(s *httpd.Server) {
		// The level the daemon logs at by default: debug lines must not
		// be needed to see requests.
		s.Logger = zerolog.New(&logs).Level(zerolog.InfoLevel)
	}, dashKey)

	for _, tt := range []struct {
		name, rid string
		keep      bool
		path      string
		route     string
		status    int
	}{
		{"Plain", "req-42", true, "/healthz", "/healthz", http.StatusOK},
		{"Printable", `trace 42/"abc" {x}`, true, "/v1/payments/pay_unknown", "/v1/payments/{id}", http.StatusUnauthorized},
		{"Longest", strings.Repeat("r", httpd.MaxRequestIDLen), true, "/healthz", "/healthz", http.StatusOK},
		{"TooLong", strings.Repeat("r", httpd.MaxRequestIDLen+1), false, "/healthz", "/healthz", http.StatusOK},
		{"NotASCII", "résumé", false, "/no/such/route", "unmatched", http.StatusNotFound},
		{"Control", "a\tb", false, "/healthz", "/healthz", http.StatusOK},
		{"Absent", "", false, "/healthz", "/healthz", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.rid != "" {
				hdr["X-Request-Id"] = tt.rid
			}
			a := d.do("GET", tt.path, "", "", hdr)
			if a.status != tt.status {
				t.Fatalf("GET %s: status=%d, want %d: %s", tt.path, a.status, tt.status, a.body)
			}
			rid := a.header.Get("X-Request-Id")
			switch {
			case tt.keep && rid != tt.rid:
				t.Fatalf("X-Request-Id=%q, want the request's %q", rid, tt.rid)
			case !tt.keep && (rid == tt.rid || !strings.HasPrefix(rid, "req_") || len(rid) != len("req_")+24):
				t.Fatalf("X-Request-Id=%q, want a new req_ id instead of %q", rid, tt.rid)
			}
			lines := accessLines(t, &logs, rid)
			if len(lines) != 1 {
				t.Fatalf("%d access lines with request id %q, want 1:\n%s", len(lines), rid, logs.String())
			}
			l := lines[0]
			if l.Level != "info" || l.Method != "GET" || l.Route != tt.route || l.Status != tt.status || l.Bytes != len(a.body) {
				t.Errorf("access line %+v, want level info, GET, route %s, status %d, %d bytes", l, tt.route, tt.status, len(a.body))
			}
			if d, err := time.ParseDuration(l.Duration); err != nil || d <= 0 || strings.Trim(l.Duration, "0123456789.") == "" {
				t.Errorf("duration %q: want a positive duration with its unit (%v)", l.Duration, err)
			}
			// The path of a request never becomes the route.
			if strings.Contains(l.Route, "pay_unknown") {
				t.Errorf("route %q holds the raw path", l.Route)
			}
		})
	}
}

// TestServer_RequestIDOnEveryLine: a handler's own log lines carry the
// request id of the access line (here the dashboard's refused sign-in).
func TestServer_RequestIDOnEveryLine(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	d := newDashServerWith(t, func(s *httpd.Server) { s.Logger = zerolog.New(&logs) }, dashKey)
	a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {"wrong"}}.Encode(),
		map[string]string{"X-Request-Id": "signin-1"})
	if a.header.Get("X-Request-Id") != "signin-1" {
		t.Fatalf("X-Request-Id=%q", a.header.Get("X-Request-Id"))
	}
	var refused, access int
	for _, l := range logLines(&logs, `"request_id":"signin-1"`) {
		switch {
		case strings.Contains(l, "sign-in refused"):
			refused++
		case strings.Contains(l, `"message":"request"`):
			access++
		}
	}
	if refused != 1 || access != 1 {
		t.Fatalf("lines with the request id: %d sign-in refusals and %d access lines, want 1 and 1:\n%s", refused, access, logs.String())
	}
}
