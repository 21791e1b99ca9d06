package httpd_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/httpd"
)

// assertRefused checks an answer of the guard: the status, the code and
// the usual error shape with the request id.
func assertRefused(t *testing.T, what string, a answer, status int, code string) {
	t.Helper()
	if got, want := a.status, status; got != want {
		t.Errorf("%s: status=%d, want %d: %.200s", what, got, want, a.body)
		return
	}
	if got, want := a.errCode(), code; got != want {
		t.Errorf("%s: code=%q, want %q: %.200s", what, got, want, a.body)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type=%q, want JSON", what, ct)
	}
	if rid := a.header.Get("X-Request-Id"); rid == "" || !strings.Contains(a.body, rid) {
		t.Errorf("%s: the error does not carry the request id %q: %s", what, rid, a.body)
	}
}

func TestServer_HostGuard_NoKey(t *testing.T) {
	t.Parallel()
	d := newDashServer(t)
	id := d.createPayment("")

	t.Run("Refused", func(t *testing.T) {
		// A DNS-rebinding page reaches 127.0.0.1 under its own name: every
		// route refuses it, before routing and authentication.
		for _, host := range []string{
			"attacker.test", "attacker.test:8080", "localhost.attacker.test", "127.0.0.1.nip.io",
			"127.0.0.2", "[::2]", "localhost.", "0.0.0.0", "[::ffff:127.0.0.1]",
		} {
			for _, rq := range []struct{ method, path, ctype, body string }{
				{"GET", "/admin/backup", "", ""},
				{"GET", "/v1/payments", "", ""},
				{"GET", "/v1/payments/" + id, "", ""},
				{"POST", "/v1/payments/" + id + "/sync", "application/json", `{"status":"captured"}`},
				{"POST", "/webhooks/standard", "application/json", `{}`},
				{"GET", "/metrics", "", ""},
				{"GET", "/healthz", "", ""},
				{"GET", "/", "", ""},
				{"GET", "/no/such/route", "", ""},
			} {
				a := d.do(rq.method, rq.path, rq.ctype, rq.body, map[string]string{"Host": host})
				assertRefused(t, fmt.Sprintf("%s %s, Host %s", rq.method, rq.path, host), a, http.StatusMisdirectedRequest, httpd.CodeMisdirected)
				if strings.Contains(a.body, "paystate_http") || strings.Contains(a.body, id) {
					t.Fatalf("Host %s: the refusal leaks data: %.200s", host, a.body)
				}
			}
		}
		if _, st := d.version(id, ""); st != "created" {
			t.Fatalf("a refused request changed the payment: status=%s", st)
		}
	})

	t.Run("Loopback", func(t *testing.T) {
		port := d.base[strings.LastIndexByte(d.base, ':')+1:]
		for _, host := range []string{"localhost", "LocalHost:8080", "127.0.0.1", "127.0.0.1:" + port, "[::1]", "[::1]:" + port, "[0:0::1]:1"} {
			a := d.do("GET", "/v1/payments/"+id, "", "", map[string]string{"Host": host})
			if got, want := a.status, http.StatusOK; got != want {
				t.Errorf("Host %s: status=%d, want %d: %s", host, got, want, a.body)
			}
		}
		if a := d.do("GET", "/admin/backup", "", "", nil); a.status != http.StatusOK || len(a.body) == 0 {
			t.Fatalf("backup from the loopback: status=%d", a.status)
		}
	})

	t.Run("RawRequests", func(t *testing.T) {
		// Requests a browser does not send, over plain TCP: the Host of an
		// absolute request line counts too, and a Host is required (an
		// empty or malformed one fasthttp already refuses as malformed).
		for _, tc := range []struct {
			name, raw string
			status    int
		}{
			{"AbsoluteURI", "GET http://attacker.test/admin/backup HTTP/1.1\r\nHost: localhost\r\n\r\n", http.StatusMisdirectedRequest},
			{"NoHost", "GET /admin/backup HTTP/1.0\r\n\r\n", http.StatusMisdirectedRequest},
			{"EmptyHost", "GET /admin/backup HTTP/1.1\r\nHost:\r\n\r\n", http.StatusBadRequest},
			{"PortName", "GET /admin/backup HTTP/1.1\r\nHost: localhost:http\r\n\r\n", http.StatusBadRequest},
		} {
			res := rawRequest(t, d.base, tc.raw)
			if got, want := res.StatusCode, tc.status; got != want {
				t.Errorf("%s: status=%d, want %d", tc.name, got, want)
			}
		}
	})
}

func TestServer_ProxyGuard_NoKey(t *testing.T) {
	t.Parallel()
	d := newDashServer(t)
	for _, hdr := range []map[string]string{
		{"X-Forwarded-For": "203.0.113.7"},
		{"Forwarded": "for=203.0.113.7;proto=https"},
		{"X-Forwarded-For": "127.0.0.1", "Host": "localhost"},
	} {
		for _, path := range []string{"/admin/backup", "/v1/payments", "/healthz", "/"} {
			assertRefused(t, fmt.Sprintf("GET %s %v", path, hdr), d.do("GET", path, "", "", hdr), http.StatusForbidden, httpd.CodeProxied)
		}
	}
	// Other X-Forwarded-* headers say nothing about the network.
	if a := d.do("GET", "/healthz", "", "", map[string]string{"X-Forwarded-Proto": "https"}); a.status != http.StatusOK {
		t.Fatalf("X-Forwarded-Proto alone: status=%d, want 200", a.status)
	}

	// With API keys a proxy in front is fine: the key is the gate.
	k := newDashServer(t, dashKey)
	a := k.do("GET", "/v1/payments", "", "", map[string]string{"Authorization": "Bearer " + dashKey, "X-Forwarded-For": "203.0.113.7", "Host": "pay.example.com"})
	if got, want := a.status, http.StatusOK; got != want {
		t.Fatalf("proxied request with a key: status=%d, want %d: %s", got, want, a.body)
	}
}

func TestServer_AllowedHosts(t *testing.T) {
	t.Parallel()
	d := newDashServerWith(t, func(s *httpd.Server) {
		s.AllowedHosts = []string{"Pay.Example.com", "2001:db8::1"}
	}, dashKey)
	bearer := func(host string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + dashKey, "Host": host}
	}

	for _, host := range []string{"pay.example.com", "PAY.example.com:443", "[2001:db8::1]:8443", "[2001:db8:0::1]"} {
		if a := d.do("GET", "/v1/payments", "", "", bearer(host)); a.status != http.StatusOK {
			t.Errorf("Host %s: status=%d, want 200: %s", host, a.status, a.body)
		}
	}
	for _, host := range []string{"evil.example.com", "pay.example.com.evil.test", "localhost.evil.test", "10.1.2.3.nip.io"} {
		assertRefused(t, "Host "+host, d.do("GET", "/v1/payments", "", "", bearer(host)), http.StatusMisdirectedRequest, httpd.CodeMisdirected)
	}
	assertRefused(t, "healthz", d.do("GET", "/healthz", "", "", map[string]string{"Host": "evil.example.com"}), http.StatusMisdirectedRequest, httpd.CodeMisdirected)

	// IP literals and localhost are always served: a Kubernetes probe sends
	// the pod's IP, a local health check or a Prometheus scrape 127.0.0.1,
	// and DNS rebinding needs a name.
	for _, host := range []string{"127.0.0.1", "127.0.0.1:8080", "10.1.2.3", "10.1.2.3:8090", "[::1]", "[::1]:8080", "[fd00::7]", "localhost", "LOCALHOST:8080"} {
		if a := d.do("GET", "/healthz", "", "", map[string]string{"Host": host}); a.status != http.StatusOK {
			t.Errorf("healthz, Host %s: status=%d, want 200: %s", host, a.status, a.body)
		}
		if a := d.do("GET", "/v1/payments", "", "", bearer(host)); a.status != http.StatusOK {
			t.Errorf("Host %s: status=%d, want 200: %s", host, a.status, a.body)
		}
	}

	// The dashboard's session follows the same rule.
	a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {dashKey}}.Encode(), map[string]string{"Host": "pay.example.com"})
	c := a.cookie()
	if a.status != http.StatusSeeOther || c == nil {
		t.Fatalf("sign-in on an allowed Host: status=%d: %s", a.status, a.body)
	}
	if got, want := d.do("GET", "/", "", "", map[string]string{"Cookie": c.Value, "Host": "pay.example.com"}).status, http.StatusOK; got != want {
		t.Fatalf("dashboard on an allowed Host: status=%d, want %d", got, want)
	}
	assertRefused(t, "session on another Host", d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": c.Value, "Host": "evil.example.com"}), http.StatusMisdirectedRequest, httpd.CodeMisdirected)
	assertRefused(t, "sign-in on another Host", d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {dashKey}}.Encode(), map[string]string{"Host": "evil.example.com"}), http.StatusMisdirectedRequest, httpd.CodeMisdirected)

	// Empty: any Host, as before.
	open := newDashServer(t, dashKey)
	if a := open.do("GET", "/v1/payments", "", "", bearer("whatever.example")); a.status != http.StatusOK {
		t.Fatalf("no allowed_hosts: status=%d, want 200", a.status)
	}

	t.Run("Invalid", func(t *testing.T) {
		for _, h := range []string{"", "https://pay.example.com/", "pay example", "pay.example.com:https"} {
			srv := &httpd.Server{Addr: "127.0.0.1:0", APIKeys: []string{dashKey}, AllowedHosts: []string{h}}
			err := srv.Open()
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = srv.Shutdown(ctx)
				cancel()
				t.Errorf("AllowedHosts %q: Open succeeded", h)
				continue
			}
			if !strings.Contains(err.Error(), "server.allowed_hosts") {
				t.Errorf("AllowedHosts %q: error %q does not name server.allowed_hosts", h, err)
			}
		}
	})
}

// rawRequest writes raw to the server at base and reads one response.
func rawRequest(t *testing.T, base, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	res.Body.Close()
	return res
}
