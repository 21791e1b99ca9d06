package httpd_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paystate/paystate/httpd"
)

func TestServer_Pprof(t *testing.T) {
	t.Parallel()
	const key = "pprof-test-key"
	auth := map[string]string{"Authorization": "Bearer " + key}

	t.Run("Off", func(t *testing.T) {
		t.Parallel()
		d := newDashServer(t, key)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
			if got, want := d.do("GET", path, "", "", auth).status, http.StatusNotFound; got != want {
				t.Fatalf("GET %s with Pprof off: status=%d, want %d", path, got, want)
			}
		}
	})

	t.Run("On", func(t *testing.T) {
		t.Parallel()
		d := newDashServerWith(t, func(s *httpd.Server) { s.Pprof = true }, key)
		a := d.do("GET", "/debug/pprof/", "", "", auth)
		if got, want := a.status, http.StatusOK; got != want {
			t.Fatalf("GET /debug/pprof/: status=%d, want %d: %s", got, want, a.body)
		}
		if !strings.Contains(a.body, "goroutine") {
			t.Fatalf("the index does not list the goroutine profile: %.200s", a.body)
		}
		a = d.do("GET", "/debug/pprof/goroutine?debug=1", "", "", auth)
		if got, want := a.status, http.StatusOK; got != want {
			t.Fatalf("GET /debug/pprof/goroutine: status=%d, want %d: %s", got, want, a.body)
		}
		if !strings.Contains(a.body, "goroutine profile:") {
			t.Fatalf("goroutine profile: %.200s", a.body)
		}
		a = d.do("GET", "/debug/pprof/cmdline", "", "", auth)
		if got, want := a.status, http.StatusOK; got != want || a.body == "" {
			t.Fatalf("GET /debug/pprof/cmdline: status=%d, want %d, body %q", got, want, a.body)
		}
		a = d.do("GET", "/debug/pprof/heap", "", "", auth)
		if got, want := a.status, http.StatusOK; got != want || len(a.body) == 0 {
			t.Fatalf("GET /debug/pprof/heap: status=%d, want %d, %d bytes", got, want, len(a.body))
		}
		// Without the key, or with a wrong one: 401, nothing of the process.
		for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong"}} {
			a := d.do("GET", "/debug/pprof/heap", "", "", hdr)
			if got, want := a.status, http.StatusUnauthorized; got != want {
				t.Fatalf("GET /debug/pprof/heap with %v: status=%d, want %d", hdr, got, want)
			}
		}
	})
}
