package httpd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

const dashKey = "dashboard-test-key-0123456789abcdef"

// chartJSSHA256 is the checksum of Debian's libjs-chart.js 3.9.1+~0.2.1-2
// /usr/share/javascript/chart.js/chart.min.js, vendored as
// httpd/dashboard/chart.min.js.
const chartJSSHA256 = "fbc45926e6b46845a0f905552a0e0b1331049bff1115ecf94dbe0904d895e710"

// dashServer is an httpd.Server on 127.0.0.1:0 over a real bbolt file,
// with the standard (report mode) provider.
type dashServer struct {
	t     testing.TB
	srv   *httpd.Server
	db    *bolt.DB
	base  string
	clock *storetest.Clock
	hc    *http.Client
}

// standardSecret signs the test servers' standard webhooks.
const standardSecret = "whsec_cGF5c3RhdGUtZGFzaGJvYXJkLXRlc3Qtc2VjcmV0"

func newDashServer(t testing.TB, keys ...string) *dashServer {
	t.Helper()
	return newDashServerWith(t, nil, keys...)
}

// newDashServerWith is newDashServer with setup changing the server
// before Open. The server also has a webhook inbox and the backup route.
func newDashServerWith(t testing.TB, setup func(*httpd.Server), keys ...string) *dashServer {
	t.Helper()
	clock := storetest.NewClock(time.Now().UTC())
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	sp, err := standard.New(standard.Config{WebhookSecret: standardSecret})
	if err != nil {
		t.Fatal(err)
	}
	fin := finalize.New(db)
	providers := map[string]pay.Provider{"standard": sp}
	payments := &finalize.Payments{Store: db, Finalizer: fin, Providers: providers, DefaultProvider: "standard"}
	srv := &httpd.Server{
		Addr: "127.0.0.1:0", APIKeys: keys, Now: clock.Now, Backup: db,
		Payments: payments, Events: payments, Ledger: payments,
		Webhooks: &finalize.Inbox{Store: db, Finalizer: fin, Providers: providers, Now: clock.Now},
	}
	if setup != nil {
		setup(srv)
	}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &dashServer{t: t, srv: srv, db: db, base: srv.URL(), clock: clock, hc: &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) errCode() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.body), &e)
	return e.Error.Code
}

// errParam returns the param of an error answer.
func (a answer) errParam() string {
	var e struct {
		Error struct{ Param string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.body), &e)
	return e.Error.Param
}

// cookie returns the Set-Cookie of the session cookie, or nil.
func (a answer) cookie() *http.Cookie {
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == httpd.SessionCookie {
			return c
		}
	}
	return nil
}

// do sends a request; hdr holds headers, "Cookie" a session token and
// "Host" the Host header.
func (d *dashServer) do(method, path, contentType, body string, hdr map[string]string) answer {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		switch k {
		case "Cookie":
			req.AddCookie(&http.Cookie{Name: httpd.SessionCookie, Value: v})
			continue
		case "Host":
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := d.hc.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: string(b)}
}

// sendWebhook posts body to /webhooks/standard as Content-Type
// contentType, signed with standardSecret by the Standard Webhooks library
// at the server's clock, under the event id eventID.
func (d *dashServer) sendWebhook(eventID, contentType, body string) answer {
	d.t.Helper()
	wh, err := svix.NewWebhook(standardSecret)
	if err != nil {
		d.t.Fatal(err)
	}
	sig, err := wh.Sign(eventID, d.clock.Now(), []byte(body))
	if err != nil {
		d.t.Fatal(err)
	}
	return d.do("POST", "/webhooks/standard", contentType, body, map[string]string{
		"webhook-id": eventID, "webhook-timestamp": fmt.Sprint(d.clock.Now().Unix()), "webhook-signature": sig,
	})
}

// signIn posts the sign-in form and returns the session token.
func (d *dashServer) signIn(key string) string {
	d.t.Helper()
	a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {key}}.Encode(), nil)
	if got, want := a.status, http.StatusSeeOther; got != want {
		d.t.Fatalf("sign-in: status=%d, want %d: %s", got, want, a.body)
	}
	c := a.cookie()
	if c == nil || c.Value == "" {
		d.t.Fatalf("sign-in set no session cookie: %v", a.header)
	}
	return c.Value
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)

// csrf opens the dashboard with a session and reads its CSRF token.
func (d *dashServer) csrf(sess string) string {
	d.t.Helper()
	a := d.do("GET", "/", "", "", map[string]string{"Cookie": sess})
	if a.status != http.StatusOK {
		d.t.Fatalf("dashboard with session: status=%d: %s", a.status, a.body)
	}
	m := csrfMeta.FindStringSubmatch(a.body)
	if m == nil || m[1] == "" {
		d.t.Fatalf("no CSRF token in the dashboard page: %s", a.body)
	}
	return m[1]
}

// createPayment creates a report-mode payment with the bearer key.
func (d *dashServer) createPayment(key string) string {
	d.t.Helper()
	hdr := map[string]string{"Idempotency-Key": fmt.Sprintf("k-%d", time.Now().UnixNano())}
	if key != "" {
		hdr["Authorization"] = "Bearer " + key
	}
	a := d.do("POST", "/v1/payments", "application/json", `{"order_id":"o-dash","amount":1500,"currency":"EUR"}`, hdr)
	if a.status != http.StatusCreated {
		d.t.Fatalf("create: status=%d: %s", a.status, a.body)
	}
	var p struct{ ID string }
	if err := json.Unmarshal([]byte(a.body), &p); err != nil {
		d.t.Fatal(err)
	}
	return p.ID
}

// version reads a payment's version and status with the bearer key.
func (d *dashServer) version(id, key string) (uint64, string) {
	d.t.Helper()
	hdr := map[string]string{}
	if key != "" {
		hdr["Authorization"] = "Bearer " + key
	}
	a := d.do("GET", "/v1/payments/"+id, "", "", hdr)
	var p struct {
		Version uint64
		Status  string
	}
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != http.StatusOK {
		d.t.Fatalf("get %s: status=%d: %s", id, a.status, a.body)
	}
	return p.Version, p.Status
}

func assertDashboardHeaders(t *testing.T, a answer) {
	t.Helper()
	if got := a.header.Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'self'") {
		t.Errorf("Content-Security-Policy=%q, want default-src 'self'", got)
	}
	if got, want := a.header.Get("X-Content-Type-Options"), "nosniff"; got != want {
		t.Errorf("X-Content-Type-Options=%q, want %q", got, want)
	}
}

func TestDashboard_SignIn(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, "other-key-abcdefghijklmnop", dashKey)

	t.Run("NoCredentials", func(t *testing.T) {
		a := d.do("GET", "/", "", "", nil)
		if got, want := a.status, http.StatusUnauthorized; got != want {
			t.Fatalf("status=%d, want %d", got, want)
		}
		assertDashboardHeaders(t, a)
		if !strings.Contains(a.body, `action="/dashboard/login"`) || strings.Contains(a.body, "csrf-token") {
			t.Fatalf("want the sign-in form and no dashboard: %s", a.body)
		}
		// What the page says is kept: a session on the server, its id in
		// the cookie, never the key; for auth.session_ttl.
		if !strings.Contains(a.body, "opens a session on this server for 12 hours") || !strings.Contains(a.body, "never the key") ||
			strings.Contains(a.body, "key stays in") {
			t.Fatalf("the sign-in page does not say it keeps a session, not the key: %s", a.body)
		}
		if api := d.do("GET", "/v1/payments", "", "", nil); api.status != http.StatusUnauthorized {
			t.Fatalf("API without credentials: status=%d", api.status)
		}
	})

	t.Run("Bearer", func(t *testing.T) {
		a := d.do("GET", "/", "", "", map[string]string{"Authorization": "Bearer " + dashKey})
		if got, want := a.status, http.StatusOK; got != want {
			t.Fatalf("status=%d, want %d: %s", got, want, a.body)
		}
		assertDashboardHeaders(t, a)
		if !strings.Contains(a.body, `/dashboard/static/app.js`) {
			t.Fatalf("not the dashboard page: %s", a.body)
		}
		if a.cookie() != nil {
			t.Fatalf("a bearer request set a cookie: %v", a.header["Set-Cookie"])
		}
		if bad := d.do("GET", "/", "", "", map[string]string{"Authorization": "Bearer wrong"}); bad.status != http.StatusUnauthorized {
			t.Fatalf("wrong bearer: status=%d, want 401", bad.status)
		}
	})

	t.Run("WrongKey", func(t *testing.T) {
		a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", "api_key=nope", nil)
		if got, want := a.status, http.StatusUnauthorized; got != want {
			t.Fatalf("status=%d, want %d", got, want)
		}
		if a.cookie() != nil {
			t.Fatalf("a failed sign-in set a cookie")
		}
		if !strings.Contains(a.body, "not valid") {
			t.Fatalf("no message: %s", a.body)
		}
	})

	t.Run("OK", func(t *testing.T) {
		a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {dashKey}}.Encode(), nil)
		if got, want := a.status, http.StatusSeeOther; got != want {
			t.Fatalf("status=%d, want %d: %s", got, want, a.body)
		}
		if got, want := a.header.Get("Location"), "/"; got != want {
			t.Fatalf("Location=%q, want %q", got, want)
		}
		c := a.cookie()
		if c == nil {
			t.Fatalf("no session cookie: %v", a.header)
		}
		raw := strings.Join(a.header["Set-Cookie"], "; ")
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
			t.Errorf("Set-Cookie %q: want HttpOnly, SameSite=Strict, Path=/", raw)
		}
		if c.Secure {
			t.Errorf("Secure on a plain HTTP answer: %q", raw)
		}
		if got, want := c.MaxAge, int(httpd.DashboardSessionTTL/time.Second); got != want {
			t.Errorf("Max-Age=%d, want %d", got, want)
		}
		if strings.Contains(c.Value, dashKey) || strings.Contains(raw, dashKey) {
			t.Fatalf("the cookie holds the API key: %q", raw)
		}
		if got := d.csrf(c.Value); got == "" {
			t.Fatal("no CSRF token")
		}
		if api := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": c.Value}); api.status != http.StatusOK {
			t.Fatalf("API with session: status=%d: %s", api.status, api.body)
		}
		// Each sign-in is its own session.
		if other := d.signIn(dashKey); other == c.Value {
			t.Fatal("two sign-ins got the same session token")
		}
	})

	t.Run("SecureBehindTLSProxy", func(t *testing.T) {
		a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {dashKey}}.Encode(),
			map[string]string{"X-Forwarded-Proto": "https"})
		if c := a.cookie(); c == nil || !c.Secure {
			t.Fatalf("Set-Cookie %q lacks Secure behind TLS", a.header["Set-Cookie"])
		}
	})

	t.Run("CrossSite", func(t *testing.T) {
		for _, hdr := range []map[string]string{
			{"Origin": "https://evil.example"},
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site", "Origin": d.base},
			{"Origin": "null"},
		} {
			a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {dashKey}}.Encode(), hdr)
			if got, want := a.status, http.StatusForbidden; got != want {
				t.Errorf("%v: status=%d, want %d", hdr, got, want)
			}
			if a.cookie() != nil {
				t.Errorf("%v: a cross-site sign-in set a cookie", hdr)
			}
		}
		ok := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {dashKey}}.Encode(),
			map[string]string{"Origin": d.base, "Sec-Fetch-Site": "same-origin"})
		if got, want := ok.status, http.StatusSeeOther; got != want {
			t.Fatalf("same-origin sign-in: status=%d, want %d", got, want)
		}
	})
}

func TestDashboard_CSRF(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	sess := d.signIn(dashKey)
	token := d.csrf(sess)
	otherToken := d.csrf(d.signIn(dashKey))
	if token == otherToken {
		t.Fatal("two sessions got the same CSRF token")
	}
	id := d.createPayment(dashKey)
	sync := func(hdr map[string]string) answer {
		return d.do("POST", "/v1/payments/"+id+"/sync", "application/json", `{"status":"processing"}`, hdr)
	}

	for name, hdr := range map[string]map[string]string{
		"NoToken":            {"Cookie": sess},
		"WrongToken":         {"Cookie": sess, httpd.CSRFHeader: strings.Repeat("A", len(token))},
		"OtherSessionsToken": {"Cookie": sess, httpd.CSRFHeader: otherToken},
		"CrossOrigin":        {"Cookie": sess, httpd.CSRFHeader: token, "Origin": "https://evil.example"},
		"CrossSiteFetch":     {"Cookie": sess, httpd.CSRFHeader: token, "Sec-Fetch-Site": "cross-site"},
		"TokenWithoutCookie": {httpd.CSRFHeader: token},
	} {
		a := sync(hdr)
		if got, want := a.status, http.StatusUnauthorized; got != want {
			t.Errorf("%s: status=%d, want %d: %s", name, got, want, a.body)
		}
		if got, want := a.errCode(), pay.EUNAUTHORIZED; got != want {
			t.Errorf("%s: code=%s, want %s", name, got, want)
		}
	}
	if v, st := d.version(id, dashKey); v != 1 || st != "created" {
		t.Fatalf("refused requests changed the payment: version=%d status=%s", v, st)
	}

	ok := sync(map[string]string{"Cookie": sess, httpd.CSRFHeader: token, "Origin": d.base, "Sec-Fetch-Site": "same-origin"})
	if got, want := ok.status, http.StatusOK; got != want {
		t.Fatalf("same-origin with token: status=%d, want %d: %s", got, want, ok.body)
	}
	if _, st := d.version(id, dashKey); st != "processing" {
		t.Fatalf("status=%s, want processing", st)
	}

	// Reading needs no token; a bearer request needs none to write.
	if a := d.do("GET", "/v1/payments/"+id+"/events", "", "", map[string]string{"Cookie": sess}); a.status != http.StatusOK {
		t.Fatalf("GET with session: status=%d", a.status)
	}
	b := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", `{"status":"captured"}`, map[string]string{"Authorization": "Bearer " + dashKey})
	if got, want := b.status, http.StatusOK; got != want {
		t.Fatalf("bearer write: status=%d, want %d: %s", got, want, b.body)
	}
}

func TestDashboard_Session(t *testing.T) {
	t.Parallel()

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		d := newDashServer(t, dashKey)
		sess := d.signIn(dashKey)
		d.clock.Add(httpd.DashboardSessionTTL - time.Minute)
		if a := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": sess}); a.status != http.StatusOK {
			t.Fatalf("before expiry: status=%d", a.status)
		}
		d.clock.Add(2 * time.Minute)
		if got, want := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": sess}).status, http.StatusUnauthorized; got != want {
			t.Fatalf("after expiry: status=%d, want %d", got, want)
		}
		if got, want := d.do("GET", "/", "", "", map[string]string{"Cookie": sess}).status, http.StatusUnauthorized; got != want {
			t.Fatalf("dashboard after expiry: status=%d, want %d", got, want)
		}
	})

	t.Run("Forged", func(t *testing.T) {
		t.Parallel()
		d := newDashServer(t, dashKey)
		sess := d.signIn(dashKey)
		parts := strings.Split(sess, ".")
		if len(parts) != 4 {
			t.Fatalf("session token %q: want 4 parts", sess)
		}
		flip := func(s string) string {
			b := []byte(s)
			if b[0] == 'A' {
				b[0] = 'B'
			} else {
				b[0] = 'A'
			}
			return string(b)
		}
		later := fmt.Sprint(d.clock.Now().Add(1000 * time.Hour).Unix())
		for name, tok := range map[string]string{
			"Mac":        strings.Join([]string{parts[0], parts[1], parts[2], flip(parts[3])}, "."),
			"Nonce":      strings.Join([]string{parts[0], parts[1], flip(parts[2]), parts[3]}, "."),
			"Expiry":     strings.Join([]string{parts[0], later, parts[2], parts[3]}, "."),
			"Version":    strings.Join([]string{"v2", parts[1], parts[2], parts[3]}, "."),
			"Truncated":  strings.Join(parts[:3], "."),
			"RawAPIKey":  dashKey,
			"Long":       strings.Repeat("a", 1024),
			"Empty":      "",
			"ExtraParts": sess + ".x",
		} {
			if got, want := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": tok}).status, http.StatusUnauthorized; got != want {
				t.Errorf("%s: status=%d, want %d", name, got, want)
			}
		}
	})

	t.Run("KeyRemoved", func(t *testing.T) {
		t.Parallel()
		d := newDashServer(t, "old-key-0123456789abcdefghij", dashKey)
		sess := d.signIn("old-key-0123456789abcdefghij")
		if a := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": sess}); a.status != http.StatusOK {
			t.Fatalf("with the key configured: status=%d", a.status)
		}
		// The same sessions on a server that no longer has the key.
		rotated := newDashServer(t, dashKey)
		if got, want := rotated.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": sess}).status, http.StatusUnauthorized; got != want {
			t.Fatalf("after the key was removed: status=%d, want %d", got, want)
		}
		// Sessions live in the process that signed in (a restart signs
		// everyone out): another server refuses one even when it has the
		// key, and the server that made it still takes it.
		kept := d.signIn(dashKey)
		if got, want := rotated.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": kept}).status, http.StatusUnauthorized; got != want {
			t.Fatalf("session of another process: status=%d, want %d", got, want)
		}
		if got, want := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": kept}).status, http.StatusOK; got != want {
			t.Fatalf("session on its own server: status=%d, want %d", got, want)
		}
	})

	t.Run("SignOut", func(t *testing.T) {
		t.Parallel()
		d := newDashServer(t, dashKey)
		sess := d.signIn(dashKey)
		token := d.csrf(sess)
		refused := d.do("POST", "/dashboard/logout", "application/x-www-form-urlencoded", "", map[string]string{"Cookie": sess})
		if got, want := refused.status, http.StatusForbidden; got != want {
			t.Fatalf("sign-out without token: status=%d, want %d", got, want)
		}
		if refused.cookie() != nil {
			t.Fatal("sign-out without token cleared the cookie")
		}
		a := d.do("POST", "/dashboard/logout", "application/x-www-form-urlencoded", url.Values{httpd.CSRFField: {token}}.Encode(), map[string]string{"Cookie": sess})
		if got, want := a.status, http.StatusSeeOther; got != want {
			t.Fatalf("sign-out: status=%d, want %d: %s", got, want, a.body)
		}
		c := a.cookie()
		if c == nil || c.Value != "" || (c.MaxAge >= 0 && !c.Expires.Before(time.Now())) {
			t.Fatalf("sign-out did not clear the cookie: %v", a.header["Set-Cookie"])
		}
	})

	t.Run("SignOutRevokes", func(t *testing.T) {
		t.Parallel()
		d := newDashServer(t, dashKey)
		sess, other := d.signIn(dashKey), d.signIn(dashKey)
		token := d.csrf(sess)
		a := d.do("POST", "/dashboard/logout", "application/x-www-form-urlencoded", url.Values{httpd.CSRFField: {token}}.Encode(), map[string]string{"Cookie": sess})
		if got, want := a.status, http.StatusSeeOther; got != want {
			t.Fatalf("sign-out: status=%d, want %d: %s", got, want, a.body)
		}
		// A copy of the cookie kept from before the sign-out is dead on
		// the server, whatever the browser does with its cookie.
		api := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": sess})
		if got, want := api.status, http.StatusUnauthorized; got != want {
			t.Fatalf("API with a signed-out session: status=%d, want %d", got, want)
		}
		if got, want := api.errCode(), pay.EUNAUTHORIZED; got != want {
			t.Fatalf("code=%s, want %s", got, want)
		}
		if got, want := d.do("GET", "/", "", "", map[string]string{"Cookie": sess}).status, http.StatusUnauthorized; got != want {
			t.Fatalf("dashboard with a signed-out session: status=%d, want %d", got, want)
		}
		write := d.do("POST", "/v1/payments/"+d.createPayment(dashKey)+"/sync", "application/json", `{"status":"processing"}`,
			map[string]string{"Cookie": sess, httpd.CSRFHeader: token})
		if got, want := write.status, http.StatusUnauthorized; got != want {
			t.Fatalf("write with a signed-out session and its CSRF token: status=%d, want %d", got, want)
		}
		// Signing out one session leaves the others.
		if got, want := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": other}).status, http.StatusOK; got != want {
			t.Fatalf("another session after the sign-out: status=%d, want %d", got, want)
		}
	})

	t.Run("TTL", func(t *testing.T) {
		t.Parallel()
		const ttl = 30 * time.Minute
		d := newDashServerWith(t, func(s *httpd.Server) { s.SessionTTL = ttl }, dashKey)
		a := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", url.Values{"api_key": {dashKey}}.Encode(), nil)
		c := a.cookie()
		if c == nil {
			t.Fatalf("no session cookie: status=%d", a.status)
		}
		if got, want := c.MaxAge, int(ttl/time.Second); got != want {
			t.Errorf("Max-Age=%d, want %d", got, want)
		}
		d.clock.Add(ttl - time.Minute)
		if got, want := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": c.Value}).status, http.StatusOK; got != want {
			t.Fatalf("before auth.session_ttl: status=%d, want %d", got, want)
		}
		// The browser would still send the cookie (a client ignoring
		// Max-Age, a copied value): the server refuses it.
		d.clock.Add(2 * time.Minute)
		if got, want := d.do("GET", "/v1/payments", "", "", map[string]string{"Cookie": c.Value}).status, http.StatusUnauthorized; got != want {
			t.Fatalf("after auth.session_ttl: status=%d, want %d", got, want)
		}
	})
}

func TestDashboard_NoAPIKey(t *testing.T) {
	t.Parallel()
	d := newDashServer(t)

	a := d.do("GET", "/", "", "", nil)
	if got, want := a.status, http.StatusOK; got != want {
		t.Fatalf("status=%d, want %d: %s", got, want, a.body)
	}
	assertDashboardHeaders(t, a)
	if strings.Contains(a.body, "/dashboard/logout") {
		t.Fatalf("sign-out offered with nothing to sign out of: %s", a.body)
	}
	if l := d.do("POST", "/dashboard/login", "application/x-www-form-urlencoded", "api_key=x", nil); l.status != http.StatusSeeOther || l.cookie() != nil {
		t.Fatalf("sign-in without keys: status=%d cookie=%v", l.status, l.cookie())
	}

	id := d.createPayment("")
	cross := d.do("POST", "/v1/payments/"+id+"/sync", "", `{"status":"captured"}`, map[string]string{"Origin": "https://evil.example"})
	if got, want := cross.status, http.StatusUnauthorized; got != want {
		t.Fatalf("cross-site write: status=%d, want %d: %s", got, want, cross.body)
	}
	fetchMeta := d.do("POST", "/v1/payments/"+id+"/sync", "", `{"status":"captured"}`, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if got, want := fetchMeta.status, http.StatusUnauthorized; got != want {
		t.Fatalf("cross-site fetch: status=%d, want %d", got, want)
	}
	if _, st := d.version(id, ""); st != "created" {
		t.Fatalf("a cross-site write changed the payment: status=%s", st)
	}
	same := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", `{"status":"captured"}`, map[string]string{"Origin": d.base, "Sec-Fetch-Site": "same-origin"})
	if got, want := same.status, http.StatusOK; got != want {
		t.Fatalf("same-origin write: status=%d, want %d: %s", got, want, same.body)
	}
}

// pspDashboardLinks are the addresses of PSP dashboards app.js links a
// payment's reference to (pspDashboards).
var pspDashboardLinks = []string{"'https://my.mollie.com/dashboard/payments/'"}

func TestDashboard_Static(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)

	for _, tc := range []struct{ path, ctype string }{
		{"/dashboard/static/app.js", "text/javascript"},
		{"/dashboard/static/app.css", "text/css"},
	} {
		a := d.do("GET", tc.path, "", "", nil)
		if got, want := a.status, http.StatusOK; got != want {
			t.Fatalf("%s: status=%d, want %d", tc.path, got, want)
		}
		if got := a.header.Get("Content-Type"); !strings.HasPrefix(got, tc.ctype) {
			t.Errorf("%s: Content-Type=%q, want %s", tc.path, got, tc.ctype)
		}
		assertDashboardHeaders(t, a)
		etag := a.header.Get("ETag")
		if etag == "" {
			t.Fatalf("%s: no ETag", tc.path)
		}
		if got, want := d.do("GET", tc.path, "", "", map[string]string{"If-None-Match": etag}).status, http.StatusNotModified; got != want {
			t.Errorf("%s revalidation: status=%d, want %d", tc.path, got, want)
		}
		// Nothing is loaded from elsewhere (no CDN, no fonts). The PSPs'
		// dashboards are links the user follows (a new tab), not resources.
		body := a.body
		for _, link := range pspDashboardLinks {
			body = strings.ReplaceAll(body, link, "")
		}
		for _, ext := range []string{"http://", "https://", "@import", "url("} {
			if strings.Contains(body, ext) {
				t.Errorf("%s refers to an external resource (%s)", tc.path, ext)
			}
		}
	}
	// Chart.js is Debian's libjs-chart.js 3.9.1 as it is, served like
	// the rest and listed before app.js.
	chart := d.do("GET", "/dashboard/static/chart.min.js", "", "", nil)
	if sum := sha256.Sum256([]byte(chart.body)); chart.status != http.StatusOK || hex.EncodeToString(sum[:]) != chartJSSHA256 {
		t.Errorf("chart.min.js: status=%d, sha256 %x, want %s", chart.status, sum, chartJSSHA256)
	}
	if got := chart.header.Get("Content-Type"); !strings.HasPrefix(got, "text/javascript") {
		t.Errorf("chart.min.js: Content-Type=%q", got)
	}
	js := d.do("GET", "/dashboard/static/app.js", "", "", nil).body
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(js, bad) {
			t.Errorf("app.js uses %s: data must go into the page as text", bad)
		}
	}
	page := d.do("GET", "/", "", "", map[string]string{"Authorization": "Bearer " + dashKey}).body
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "<script>") {
		t.Errorf("the dashboard page loads external or inline script: %s", page)
	}
	if i, j := strings.Index(page, `src="/dashboard/static/chart.min.js"`), strings.Index(page, `src="/dashboard/static/app.js"`); i < 0 || j < i {
		t.Errorf("the page does not load chart.min.js before app.js: %s", page)
	}
	if got, want := d.do("GET", "/dashboard/static/nope.js", "", "", nil).status, http.StatusNotFound; got != want {
		t.Errorf("unknown file: status=%d, want %d", got, want)
	}
	if got, want := d.do("GET", "/dashboard/static/..%2findex.html", "", "", nil).status, http.StatusNotFound; got != want {
		t.Errorf("path traversal: status=%d, want %d", got, want)
	}
}

// TestDashboard_PartialRefund is the request the dashboard's refund form
// sends with a session: a partial amount and a reason, under an
// Idempotency-Key, refused without the session's CSRF token or from
// another site, and answered once under its key.
func TestDashboard_PartialRefund(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	sess := d.signIn(dashKey)
	token := d.csrf(sess)
	id := d.createPayment(dashKey)
	if a := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", `{"status":"captured","provider_ref":"psp_partial"}`,
		map[string]string{"Authorization": "Bearer " + dashKey}); a.status != http.StatusOK {
		t.Fatalf("sync captured: status=%d: %s", a.status, a.body)
	}
	const body = `{"amount":400,"reason":"one item returned"}`
	refund := func(hdr map[string]string) answer {
		hdr["Idempotency-Key"] = "dashboard-refund-0123456789abcdef"
		return d.do("POST", "/v1/payments/"+id+"/refund", "application/json", body, hdr)
	}
	refunds := func() int {
		t.Helper()
		a := d.do("GET", "/v1/payments/"+id+"/refunds", "", "", map[string]string{"Cookie": sess})
		var l struct{ Data []json.RawMessage }
		if err := json.Unmarshal([]byte(a.body), &l); err != nil || a.status != http.StatusOK {
			t.Fatalf("GET refunds with session: status=%d: %s", a.status, a.body)
		}
		return len(l.Data)
	}

	for name, hdr := range map[string]map[string]string{
		"NoToken":        {"Cookie": sess},
		"WrongToken":     {"Cookie": sess, httpd.CSRFHeader: strings.Repeat("A", len(token))},
		"CrossOrigin":    {"Cookie": sess, httpd.CSRFHeader: token, "Origin": "https://evil.example"},
		"CrossSiteFetch": {"Cookie": sess, httpd.CSRFHeader: token, "Sec-Fetch-Site": "cross-site"},
	} {
		if a := refund(hdr); a.status != http.StatusUnauthorized || a.errCode() != pay.EUNAUTHORIZED {
			t.Errorf("%s: status=%d code=%s, want %d %s: %s", name, a.status, a.errCode(), http.StatusUnauthorized, pay.EUNAUTHORIZED, a.body)
		}
	}
	if n := refunds(); n != 0 {
		t.Fatalf("refused requests made %d refunds", n)
	}

	ok := map[string]string{"Cookie": sess, httpd.CSRFHeader: token, "Origin": d.base, "Sec-Fetch-Site": "same-origin"}
	a := refund(ok)
	if got, want := a.status, http.StatusCreated; got != want {
		t.Fatalf("refund with session and token: status=%d, want %d: %s", got, want, a.body)
	}
	var r struct {
		ID     string
		Amount int64
		Reason string
	}
	if err := json.Unmarshal([]byte(a.body), &r); err != nil || r.Amount != 400 || r.Reason != "one item returned" || !strings.HasPrefix(r.ID, "re_") {
		t.Fatalf("refund answer %s (%v), want re_… of 400 for one item returned", a.body, err)
	}
	// The form sends the same request again when the answer was lost.
	again := refund(ok)
	if again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "true" || !strings.Contains(again.body, r.ID) {
		t.Fatalf("resend under the same key: status=%d replayed=%q: %s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	if got, want := refunds(), 1; got != want {
		t.Fatalf("%d refunds, want %d", got, want)
	}
}
