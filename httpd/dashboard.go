package httpd

// The dashboard: a single page served from files embedded in the binary,
// which reads the JSON API with the same credentials a script uses.
//
// Sign-in. GET / accepts the bearer API key (so scripts and tests can open
// it). People sign in with a form (POST /dashboard/login) that checks the
// key and sets a session cookie: HttpOnly, SameSite=Strict, Path=/, Secure
// when the request came over TLS. The cookie never holds the key: it is
// "v1.<expiry unix>.<nonce>.<mac>", the mac an HMAC-SHA256 keyed with the
// SHA-256 of the API key that signed in.
//
// Sessions live on the server: the process that signed a person in keeps
// the nonce with its expiry, and a cookie counts only while its nonce is
// there. A session ends at its expiry (Server.SessionTTL, auth.session_ttl;
// checked on the server, not only by the cookie's Max-Age), at sign-out
// (the nonce is removed, so a copy of the cookie replayed later is refused)
// or when its key is removed from auth.api_keys. The record is in memory
// only: a restart signs everyone out, and with several instances behind one
// address a session is valid on the instance that made it (route a person
// to the same instance, or use the bearer key). Sessions follow the Host
// rule of every request (guard in router.go).
//
// Cross-site requests. A cookie-authenticated request that changes state
// (any method but GET, HEAD and OPTIONS) must pass two checks:
//   - same origin: Sec-Fetch-Site, when sent, is "same-origin" or "none";
//     otherwise Origin, when sent, names this server's Host;
//   - a CSRF token bound to the session, HMAC-SHA256 of the session token,
//     sent as the X-CSRF-Token header (the dashboard's JS) or the csrf_token
//     form field (the sign-out form), compared in constant time.
//
// Bearer-authenticated requests need neither: a cross-site page cannot set
// an Authorization header without a CORS preflight, which paystate never
// grants. With no API key configured (loopback only) the dashboard opens
// without sign-in and browser requests that change state pass the same
// origin check.

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// DashboardSessionTTL is how long a dashboard sign-in lasts when
// Server.SessionTTL is not set (auth.session_ttl's default).
const DashboardSessionTTL = 12 * time.Hour

// maxSessions bounds the dashboard sessions kept at once; past it, a new
// sign-in ends the session closest to its expiry. Only a holder of an API
// key can add one, so the bound is against a runaway script, not an attack.
const maxSessions = 10000

// Wire names of the dashboard's session and CSRF token.
const (
	// SessionCookie is the name of the dashboard's session cookie.
	SessionCookie = "paystate_session"
	// CSRFHeader carries the CSRF token on the dashboard's API calls.
	CSRFHeader = "X-CSRF-Token"
	// CSRFField carries the CSRF token in the dashboard's HTML forms.
	CSRFField = "csrf_token"
)

// dashboardCSP is the Content-Security-Policy of every dashboard response:
// only paystate's own files, no inline script, no framing, forms post only
// to paystate.
const dashboardCSP = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"

// Labels of the two MACs, so a session token is never a valid CSRF token.
const (
	sessionLabel = "paystate/dashboard/session\n"
	csrfLabel    = "paystate/dashboard/csrf\n"
	maxCookieLen = 256
)

// The dashboard's files. chart.min.js is Chart.js 3.9.1 (MIT, its notice in
// dashboard/chart.js.LICENSE) as Debian's libjs-chart.js package ships it
// (/usr/share/javascript/chart.js/chart.min.js), so that the charts need
// no CDN; TestDashboard_Static pins its checksum.
//
//go:embed dashboard/index.html dashboard/login.html dashboard/app.js dashboard/app.css dashboard/chart.min.js
var dashboardFiles embed.FS

var (
	dashboardPage = template.Must(template.ParseFS(dashboardFiles, "dashboard/index.html"))
	loginPage     = template.Must(template.ParseFS(dashboardFiles, "dashboard/login.html"))
	staticFiles   = loadStatic(map[string]string{
		"app.js":       "text/javascript; charset=utf-8",
		"app.css":      "text/css; charset=utf-8",
		"chart.min.js": "text/javascript; charset=utf-8",
	})
)

// staticFile is one embedded asset with its validator.
type staticFile struct {
	body        []byte
	contentType string
	etag        string
}

func loadStatic(types map[string]string) map[string]staticFile {
	out := make(map[string]staticFile, len(types))
	for name, ct := range types {
		b, err := dashboardFiles.ReadFile("dashboard/" + name)
		if err != nil {
			panic("dashboard asset " + name + ": " + err.Error())
		}
		sum := sha256.Sum256(b)
		out[name] = staticFile{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}

// session is a verified dashboard session.
type session struct {
	token string
	nonce string
	key   [32]byte // hash of the API key that signed in
}

// sessionStore holds the live sessions of this process: nonce → expiry.
// The zero value is ready to use.
type sessionStore struct {
	mu   sync.Mutex
	live map[string]time.Time
}

// add records a new session, after dropping the expired ones and, at
// maxSessions, the one that expires first.
func (st *sessionStore) add(nonce string, exp, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.live == nil {
		st.live = make(map[string]time.Time)
	}
	for n, e := range st.live {
		if !now.Before(e) {
			delete(st.live, n)
		}
	}
	if len(st.live) >= maxSessions {
		first, at := "", time.Time{}
		for n, e := range st.live {
			if first == "" || e.Before(at) {
				first, at = n, e
			}
		}
		delete(st.live, first)
	}
	st.live[nonce] = exp
}

// valid reports whether the session is live at now; an expired one is
// dropped.
func (st *sessionStore) valid(nonce string, now time.Time) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	exp, ok := st.live[nonce]
	if ok && !now.Before(exp) {
		delete(st.live, nonce)
		return false
	}
	return ok
}

// revoke ends a session (sign-out).
func (st *sessionStore) revoke(nonce string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.live, nonce)
}

// handleDashboard serves the dashboard page, or the sign-in page (401) when
// the request carries no valid credentials.
func (s *Server) handleDashboard(rc *fasthttp.RequestCtx, _ []string) error {
	var data struct {
		CSRF    string
		SignOut bool
	}
	switch {
	case len(s.keys) == 0:
		// Loopback only: nobody to sign in.
	case hasBearer(rc):
		if err := s.authenticate(rc); err != nil {
			return s.writeLogin(rc, fasthttp.StatusUnauthorized, "That API key is not valid.")
		}
	default:
		sess, ok := s.cookieSession(rc)
		if !ok {
			return s.writeLogin(rc, fasthttp.StatusUnauthorized, "")
		}
		data.CSRF, data.SignOut = csrfToken(sess), true
	}
	var buf bytes.Buffer
	if err := dashboardPage.Execute(&buf, data); err != nil {
		return err
	}
	writeHTML(rc, fasthttp.StatusOK, buf.Bytes())
	return nil
}

// handleDashboardLogin checks the API key of the sign-in form and sets the
// session cookie.
func (s *Server) handleDashboardLogin(rc *fasthttp.RequestCtx, _ []string) error {
	if len(s.keys) == 0 {
		redirectHome(rc)
		return nil
	}
	if err := sameOrigin(rc); err != nil {
		s.log(rc).Warn().Str("remote", rc.RemoteIP().String()).Msg("dashboard sign-in refused: cross-site request")
		return s.writeLogin(rc, fasthttp.StatusForbidden, "Sign-in refused: the form was sent from another site.")
	}
	key := rc.PostArgs().Peek("api_key")
	h := sha256.Sum256(bytes.TrimSpace(key))
	match, idx := 0, 0
	for i, k := range s.keys {
		eq := subtle.ConstantTimeCompare(h[:], k[:])
		match |= eq
		idx = subtle.ConstantTimeSelect(eq, i, idx)
	}
	if len(key) == 0 || match != 1 {
		s.log(rc).Warn().Str("remote", rc.RemoteIP().String()).Msg("dashboard sign-in refused: wrong API key")
		return s.writeLogin(rc, fasthttp.StatusUnauthorized, "That API key is not valid.")
	}
	s.setSessionCookie(rc, s.newSession(s.keys[idx]), s.SessionTTL)
	s.log(rc).Info().Str("remote", rc.RemoteIP().String()).Msg("dashboard sign-in")
	redirectHome(rc)
	return nil
}

// handleDashboardLogout ends the session on the server and clears the
// cookie. With a valid session it needs the session's CSRF token, so
// another site cannot sign a person out.
func (s *Server) handleDashboardLogout(rc *fasthttp.RequestCtx, _ []string) error {
	if sess, ok := s.cookieSession(rc); ok {
		if err := checkCSRF(rc, sess); err != nil {
			return s.writeLogin(rc, fasthttp.StatusForbidden, "Sign-out refused: "+pay.ErrorMessage(err)+".")
		}
		s.sessions.revoke(sess.nonce)
		s.log(rc).Info().Str("remote", rc.RemoteIP().String()).Msg("dashboard sign-out")
	}
	s.setSessionCookie(rc, "", -1)
	redirectHome(rc)
	return nil
}

// handleDashboardStatic serves the dashboard's embedded script and style
// sheet. They hold no data, so they need no sign-in.
func (s *Server) handleDashboardStatic(rc *fasthttp.RequestCtx, params []string) error {
	f, ok := staticFiles[params[0]]
	if !ok {
		return pay.Errorf(pay.ENOTFOUND, "no dashboard file %q", truncate(params[0], 64))
	}
	setDashboardHeaders(rc)
	rc.Response.Header.Set("ETag", f.etag)
	rc.Response.Header.Set("Cache-Control", "no-cache")
	if notModified(rc, f.etag) {
		return nil
	}
	rc.Response.Header.SetContentType(f.contentType)
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetBody(f.body)
	return nil
}

// authenticateBrowser authenticates a request of a configured server that
// carries no bearer key: the dashboard's session cookie, and for a request
// that changes state, the same-origin check and the CSRF token.
func (s *Server) authenticateBrowser(rc *fasthttp.RequestCtx) error {
	if len(rc.Request.Header.Cookie(SessionCookie)) == 0 {
		return pay.Errorf(pay.EUNAUTHORIZED, "missing API key: send Authorization: Bearer <key>")
	}
	sess, ok := s.cookieSession(rc)
	if !ok {
		return pay.Errorf(pay.EUNAUTHORIZED, "dashboard session expired or invalid: sign in again")
	}
	if safeMethod(rc) {
		return nil
	}
	if err := sameOrigin(rc); err != nil {
		return err
	}
	return checkCSRF(rc, sess)
}

// authenticateLoopback guards a server with no API key (loopback only): a
// browser request that changes state must come from paystate's own pages.
func authenticateLoopback(rc *fasthttp.RequestCtx) error {
	if safeMethod(rc) || hasBearer(rc) {
		return nil
	}
	return sameOrigin(rc)
}

// newSession starts a session and returns its token, signed with the API
// key hash key.
func (s *Server) newSession(key [32]byte) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.Now()
	exp := time.Unix(now.Add(s.SessionTTL).Unix(), 0)
	s.sessions.add(nonce, exp, now)
	payload := "v1." + strconv.FormatInt(exp.Unix(), 10) + "." + nonce
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(key, sessionLabel, payload))
}

// cookieSession verifies the request's session cookie: its format, its
// expiry, its MAC against every configured key, in constant time, and that
// this process still holds the session (not signed out, not expired).
func (s *Server) cookieSession(rc *fasthttp.RequestCtx) (session, bool) {
	tok := string(rc.Request.Header.Cookie(SessionCookie))
	if tok == "" || len(tok) > maxCookieLen || len(s.keys) == 0 {
		return session{}, false
	}
	dot := strings.LastIndexByte(tok, '.')
	if dot < 0 {
		return session{}, false
	}
	payload, sig := tok[:dot], tok[dot+1:]
	parts := strings.Split(payload, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return session{}, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !s.Now().Before(time.Unix(exp, 0)) {
		return session{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return session{}, false
	}
	match, idx := 0, 0
	for i, k := range s.keys {
		eq := subtle.ConstantTimeCompare(got, mac(k, sessionLabel, payload))
		match |= eq
		idx = subtle.ConstantTimeSelect(eq, i, idx)
	}
	if match != 1 || !s.sessions.valid(parts[2], s.Now()) {
		return session{}, false
	}
	return session{token: tok, nonce: parts[2], key: s.keys[idx]}, true
}

// csrfToken is the CSRF token bound to a session.
func csrfToken(sess session) string {
	return base64.RawURLEncoding.EncodeToString(mac(sess.key, csrfLabel, sess.token))
}

// checkCSRF compares the request's CSRF token (header, else form field)
// with the session's, in constant time.
func checkCSRF(rc *fasthttp.RequestCtx, sess session) error {
	got := rc.Request.Header.Peek(CSRFHeader)
	if len(got) == 0 {
		got = rc.PostArgs().Peek(CSRFField)
	}
	if len(got) == 0 {
		return pay.Errorf(pay.EUNAUTHORIZED, "missing CSRF token: send the %s header of the dashboard session", CSRFHeader)
	}
	if subtle.ConstantTimeCompare(got, []byte(csrfToken(sess))) != 1 {
		return pay.Errorf(pay.EUNAUTHORIZED, "wrong CSRF token for this dashboard session")
	}
	return nil
}

// sameOrigin refuses a browser request sent by a page of another site, from
// the Fetch metadata and, for browsers that send none, the Origin header.
// Requests with neither header do not come from a browser's cross-site page.
func sameOrigin(rc *fasthttp.RequestCtx) error {
	if sfs := string(rc.Request.Header.Peek("Sec-Fetch-Site")); sfs != "" {
		if sfs == "same-origin" || sfs == "none" {
			return nil
		}
		return pay.Errorf(pay.EUNAUTHORIZED, "cross-site request refused (Sec-Fetch-Site: %s)", truncate(sfs, 32))
	}
	origin := string(rc.Request.Header.Peek("Origin"))
	if origin == "" {
		return nil
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, string(rc.Host())) {
		return nil
	}
	return pay.Errorf(pay.EUNAUTHORIZED, "cross-site request refused (Origin does not match Host)")
}

func safeMethod(rc *fasthttp.RequestCtx) bool {
	return rc.IsGet() || rc.IsHead() || rc.IsOptions()
}

func hasBearer(rc *fasthttp.RequestCtx) bool {
	_, ok := bearer(rc)
	return ok
}

// mac is HMAC-SHA256 of label and msg, keyed with an API key hash.
func mac(key [32]byte, label, msg string) []byte {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(label))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// setSessionCookie sets (maxAge > 0) or clears (maxAge < 0) the session
// cookie. Secure is set when the request came over TLS, directly or through
// a proxy that says so (a forged header only makes the cookie stricter).
func (s *Server) setSessionCookie(rc *fasthttp.RequestCtx, value string, maxAge time.Duration) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(SessionCookie)
	c.SetValue(value)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	c.SetSecure(rc.IsTLS() || strings.EqualFold(string(rc.Request.Header.Peek("X-Forwarded-Proto")), "https"))
	if maxAge > 0 {
		c.SetMaxAge(int(maxAge / time.Second))
		c.SetExpire(s.Now().Add(maxAge))
	} else {
		c.SetExpire(fasthttp.CookieExpireDelete)
	}
	rc.Response.Header.SetCookie(c)
}

// writeLogin answers with the sign-in page and a message.
func (s *Server) writeLogin(rc *fasthttp.RequestCtx, status int, msg string) error {
	var buf bytes.Buffer
	if err := loginPage.Execute(&buf, struct{ Error, TTL string }{msg, humanDuration(s.SessionTTL)}); err != nil {
		return err
	}
	writeHTML(rc, status, buf.Bytes())
	return nil
}

// humanDuration writes d for a person: "12 hours", "90 minutes", else
// Go's form.
func humanDuration(d time.Duration) string {
	plural := func(n int64, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	}
	return d.String()
}

func writeHTML(rc *fasthttp.RequestCtx, status int, body []byte) {
	setDashboardHeaders(rc)
	rc.Response.Header.SetContentType("text/html; charset=utf-8")
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetStatusCode(status)
	rc.SetBody(body)
}

// setDashboardHeaders sets the security headers of every dashboard response.
func setDashboardHeaders(rc *fasthttp.RequestCtx) {
	h := &rc.Response.Header
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

func redirectHome(rc *fasthttp.RequestCtx) {
	setDashboardHeaders(rc)
	rc.Response.Header.Set("Location", "/")
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetStatusCode(fasthttp.StatusSeeOther)
}
