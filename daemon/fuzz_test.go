package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/api"
	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// The parts of a fuzzed request that are picked from a list rather than
// made up: an index beyond a list wraps around.
var (
	fuzzMethods      = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}
	fuzzContentTypes = []string{"application/json", "application/json; charset=utf-8", "", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1"}
	fuzzAccepts      = []string{"", "application/json", "text/csv", "text/html"}
)

// FuzzAPI sends arbitrary requests to a whole paystate (daemontest.Boot:
// the mock PSP, a bbolt file, every worker running) and checks what the
// answer to any request must be, whatever the request:
//   - never a 5xx other than 501 (a panic of a handler is a 500);
//   - every answer with an X-Request-Id;
//   - an error (4xx, 501) in the error shape, with a code, except for a
//     HEAD (no body) and the dashboard's HTML pages (dashboardPage);
//   - no client secret or redirect URL in any object, at any depth, whose
//     status is not created, processing or requires_action;
//   - the answer matches api/openapi.yaml (strict mode, formats checked)
//     wherever the document has the route and method;
//   - after a successful POST, paystate verify's checks find nothing
//     (verifyStore).
//
// "{id}", "{action}", "{failed}" and "{std}" in a path or body become the
// ids of payments made before fuzzing (bootFuzz), so that mutations of
// the seeds reach the handlers of a payment that exists; a POST to the
// standard or mock webhooks is signed (apiRequest.on). The fuzz
// arguments: the method's index, the path with its query, the body, the
// Content-Type's index, the Accept's index, an Idempotency-Key (none if
// empty) and whether to send the API key (for a webhook: to sign it).
func FuzzAPI(f *testing.F) { fuzzAPI(f, nil) }

// FuzzAPIPostgres is FuzzAPI on PostgreSQL (storage.backend = "postgres",
// a schema of its own on the test server of pgtest), where text reaches
// columns and query parameters that refuse what bbolt stores as bytes.
func FuzzAPIPostgres(f *testing.F) {
	dsn := pgtest.Schema(f)
	fuzzAPI(f, func(c *config.Config) { c.Storage.Backend, c.Storage.DSN = "postgres", dsn })
}

// FuzzAPIBackends sends each request to two paystates, one on bbolt and
// one on PostgreSQL, that have seen the same requests before, and checks
// that they answer alike: the same status and, for an error, the same
// code; for a success, the same facts (factKeys: status, version,
// amounts, ...) in the same order, unless an inbox holds a deferred
// webhook of a known payment (inboxPending); and after a successful POST,
// verifyStore on both. The mock PSP's webhooks reach neither,
// so only the requests change what the two hold. Routes whose answers
// follow the background workers (deliveries, customers' points, the
// review queue, where the inbox puts an event for an unknown payment
// after 20 tries with backoff, metrics, readiness) or the backend's own
// format (the backup) are not compared.
func FuzzAPIBackends(f *testing.F) {
	// The mock's webhooks go to a port where nothing listens.
	noWebhooks := func(c *config.Config) { c.Providers.Mock.WebhookURL = "http://127.0.0.1:9/webhooks/mock" }
	dsn := pgtest.Schema(f)
	bolt, boltIDs := bootFuzz(f, noWebhooks)
	pg, pgIDs := bootFuzz(f, func(c *config.Config) {
		noWebhooks(c)
		c.Storage.Backend, c.Storage.DSN = "postgres", dsn
	})
	addAPISeeds(f)
	f.Fuzz(func(t *testing.T, method uint8, target string, body []byte, ctype, acpt uint8, key string, auth bool) {
		req, ok := newAPIRequest(method, target, body, ctype, acpt, key, auth)
		if !ok {
			return
		}
		switch p := routePath(req.target); {
		case p == "", strings.HasPrefix(p, "/v1/deliveries"), strings.HasPrefix(p, "/v1/customers/"), strings.HasPrefix(p, "/v1/review"),
			p == "/metrics", p == "/readyz", p == "/admin/backup":
			return
		}
		settled := !inboxPending(t, bolt) && !inboxPending(t, pg)
		target, body, hdr := req.on(t, bolt, boltIDs)
		a, err := bolt.Send(req.method, target, body, hdr)
		if err != nil {
			t.Fatalf("bbolt: %v", err)
		}
		target, body, hdr = req.on(t, pg, pgIDs)
		b, err := pg.Send(req.method, target, body, hdr)
		if err != nil {
			t.Fatalf("PostgreSQL: %v", err)
		}
		if a.Status != b.Status || a.ErrCode() != b.ErrCode() {
			t.Errorf("%s %s: bbolt answered %d %s, PostgreSQL %d %s\nbbolt: %.300s\nPostgreSQL: %.300s",
				req.method, req.target, a.Status, a.ErrCode(), b.Status, b.ErrCode(), a.Body, b.Body)
			return
		}
		if req.method == "POST" && a.Status < 300 {
			verifyStore(t, "bbolt: "+req.method+" "+req.target, bolt)
			verifyStore(t, "PostgreSQL: "+req.method+" "+req.target, pg)
		}
		// Facts are compared only while neither inbox holds a webhook it
		// deferred for a known payment (a dispute for a payment not
		// captured yet, a lease held), before the request and after it:
		// each inbox retries such a webhook after a backoff with jitter,
		// so the two apply it at different moments.
		if a.Status < 300 && settled && !inboxPending(t, bolt) && !inboxPending(t, pg) {
			var fa, fb []string
			facts(a.JSON, &fa)
			facts(b.JSON, &fb)
			if !slices.Equal(fa, fb) {
				t.Errorf("%s %s: %d on both, but bbolt says %v and PostgreSQL %v\nbbolt: %.500s\nPostgreSQL: %.500s\nthe placeholders' timelines on bbolt:\n%s\nand on PostgreSQL:\n%s",
					req.method, req.target, a.Status, fa, fb, a.Body, b.Body, timelines(t, bolt, boltIDs), timelines(t, pg, pgIDs))
			}
		}
	})
}

// factKeys are the fields whose values two backends must agree on in a
// successful answer: what a payment, refund, dispute or balance says
// about state and money. Ids, references, times and cursors differ
// between two instances and are not among them.
var factKeys = map[string]bool{
	"status": true, "terminal": true, "version": true, "amount": true, "currency": true,
	"amount_refunded": true, "amount_refundable": true, "conflict": true, "reason": true,
	"account": true, "duplicate": true, "received": true, "captured": true, "refunded": true, "net": true, "points": true,
}

// facts appends to out the factKeys of v, a decoded answer, as key=value
// in the order of the document (an object's keys sorted), all the way
// down.
func facts(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			switch e := x[k].(type) {
			case map[string]any, []any:
				facts(e, out)
			default:
				if factKeys[k] {
					*out = append(*out, fmt.Sprintf("%s=%v", k, e))
				}
			}
		}
	case []any:
		for _, e := range x {
			facts(e, out)
		}
	}
}

// fuzzAPI is FuzzAPI on the paystate that mutate configures.
func fuzzAPI(f *testing.F, mutate func(*config.Config)) {
	in, ids := bootFuzz(f, mutate)
	c := newOpenAPIClient(f, in, api.YAML())
	addAPISeeds(f)
	f.Fuzz(func(t *testing.T, method uint8, target string, body []byte, ctype, acpt uint8, key string, auth bool) {
		req, ok := newAPIRequest(method, target, body, ctype, acpt, key, auth)
		if !ok {
			return
		}
		target, body, hdr := req.on(t, in, ids)
		oc := &openapiClient{t: t, in: in, m: c.m, v: c.v, hc: c.hc}
		x := oc.send(req.method, target, body, hdr)
		st := x.res.Status
		what := req.method + " " + target
		if st >= 500 && st != http.StatusNotImplemented {
			t.Fatalf("%s: status %d: %.500s", what, st, x.res.Body)
		}
		if x.res.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: status %d without X-Request-Id", what, st)
		}
		if st >= 400 && req.method != "HEAD" && x.res.ErrCode() == "" && !dashboardPage(target, x.res.Header) {
			t.Errorf("%s: status %d, not the error shape: %.500s", what, st, x.res.Body)
		}
		if bad := secretWhereFinal(x.res.JSON); bad != "" {
			t.Errorf("%s: %s in an answer about a payment that is not open: %.500s", what, bad, x.res.Body)
		}
		// A path the server routes as another (normalizedAway) is held to
		// no operation: the validator matched the path as sent.
		for _, e := range x.resErrs {
			if e.IsPathMissingError() || e.IsOperationMissingError() || normalizedAway(target) {
				continue // not a route of the document: nothing to hold it to
			}
			t.Errorf("%s: the answer %d does not match api/openapi.yaml:%s\nbody: %.500s", what, st, describe(x.resErrs), x.res.Body)
			break
		}
		if req.method == "POST" && st < 300 {
			verifyStore(t, what, in)
		}
	})
}

// inboxPending reports whether the inbox of in holds a webhook for a
// known payment that it has not applied yet, due or not. Events for
// payments neither instance knows (orphans, which the fuzzer sends often)
// wait too, but change none of the facts compared.
func inboxPending(t *testing.T, in *daemontest.Instance) bool {
	t.Helper()
	var pending []pay.InboxEvent
	err := in.Main.Store.View(context.Background(), func(tx store.Tx) (err error) {
		pending, err = tx.PendingInbox(time.Now().Add(365*24*time.Hour), 10000)
		return err
	})
	if err != nil {
		t.Fatalf("pending inbox: %v", err)
	}
	return slices.ContainsFunc(pending, func(e pay.InboxEvent) bool { return e.PaymentID != "" })
}

// timelines returns the timeline and the webhooks of each placeholder's
// payment in in, one a line, for a failure that two backends disagree on.
func timelines(t *testing.T, in *daemontest.Instance, ids map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(ids)) {
		var (
			steps  []pay.Step
			events []pay.InboxEvent
		)
		err := in.Main.Store.View(context.Background(), func(tx store.Tx) (err error) {
			if steps, err = tx.Steps(ids[name]); err != nil {
				return err
			}
			events, err = tx.InboxForPayment(ids[name])
			return err
		})
		if err != nil {
			t.Fatalf("timeline of %s: %v", name, err)
		}
		fmt.Fprintf(&b, "  %s %s\n", name, ids[name])
		for _, s := range steps {
			fmt.Fprintf(&b, "    %d %s %s %s→%s v%d event=%q note=%q\n", s.Seq, s.Source, s.Kind, s.From, s.To, s.Version, s.EventID, s.Note)
		}
		for _, e := range events {
			fmt.Fprintf(&b, "    webhook %s/%s %s processed=%v attempts=%d next=%s error=%q\n", e.Provider, e.EventID, e.Type, e.Processed, e.Attempts, e.NextAttemptAt.Format(time.RFC3339), e.LastError)
		}
	}
	return b.String()
}

// verifyStore runs paystate verify's checks (internal/verify: every
// payment's timeline against its record, outbox, inbox, refunds,
// disputes, a balanced ledger) on the store of in, after what, and fails
// the input on any mismatch.
func verifyStore(t *testing.T, what string, in *daemontest.Instance) {
	t.Helper()
	rep, err := verify.Run(context.Background(), in.Main.Store)
	if err != nil {
		t.Fatalf("after %s: verify: %v", what, err)
	}
	if !rep.OK() {
		t.Fatalf("after %s: verify found %d problems, the first: %s", what, len(rep.Mismatches), rep.Mismatches[0])
	}
}

// bootFuzz boots the paystate of a fuzz target, configured by mutate, and
// makes the payments its seeds name: "{id}", "{action}" and "{failed}"
// with the mock's outcomes 00, 02 and 01, and "{std}" with the standard
// provider (report mode: created, waiting for its webhooks). It returns
// the instance and the placeholders' ids.
func bootFuzz(f *testing.F, mutate func(*config.Config)) (*daemontest.Instance, map[string]string) {
	in := daemontest.BootMain(f, mutate, func(m *daemon.Main) {
		// *testing.F takes no log lines once fuzzing runs.
		m.Logger = zerolog.Nop()
	})
	ids := map[string]string{}
	for _, p := range []struct{ name, amount, provider string }{{"{id}", "1000", "mock"}, {"{action}", "1002", "mock"}, {"{failed}", "1001", "mock"}, {"{std}", "2000", "standard"}} {
		r := in.Create(`{"order_id":"fz-`+p.amount+`","amount":`+p.amount+`,"currency":"EUR","provider":"`+p.provider+`","customer":{"id":"cus_fz"},"return_url":"https://shop.example/back"}`, "fz-"+p.amount)
		if r.Status != http.StatusCreated {
			f.Fatalf("create %s: %d %s", p.amount, r.Status, r.Body)
		}
		ids[p.name] = r.Str("id")
	}
	return in, ids
}

// addAPISeeds adds the seeds of the API fuzz targets: each route, with
// bodies good and bad.
func addAPISeeds(f *testing.F) {
	for _, s := range []struct {
		method      uint8
		path        string
		body        string
		ctype, acpt uint8
		key         string
	}{
		{1, "/v1/payments", `{"order_id":"o-1","amount":1000,"currency":"EUR"}`, 0, 0, "k-1"},
		{1, "/v1/payments", `{"order_id":"o-2","amount":1003,"currency":"eur","customer":{"id":"c","email":"x"}}`, 1, 0, "k-2"},
		{1, "/v1/payments", `{"order_id":"o-3","amount":-1,"currency":"EUR","provider":"nope"}`, 0, 0, ""},
		{0, "/v1/payments?limit=2&status=captured", "", 0, 0, ""},
		{0, "/v1/payments?limit=0&cursor=zz&order_id=o-1", "", 0, 2, ""},
		{0, "/v1/payments/{id}", "", 0, 0, ""},
		{0, "/v1/payments/{action}", "", 0, 0, ""},
		{1, "/v1/payments/{action}/sync", `{"status":"captured","provider_ref":"r","expected_version":1}`, 0, 0, ""},
		{1, "/v1/payments/{failed}/sync", `{"status":"processing","client_secret":"cs_x"}`, 0, 0, ""},
		{1, "/v1/payments/{id}/refund", `{"amount":100,"reason":"r"}`, 0, 0, "rf-1"},
		{1, "/v1/payments/{id}/refund", `{"amount":100000}`, 0, 0, ""},
		{0, "/v1/payments/{id}/refunds", "", 0, 0, ""},
		{0, "/v1/payments/{id}/events", "", 0, 0, ""},
		{0, "/v1/disputes?status=lost", "", 0, 0, ""},
		{0, "/v1/reconciliation/runs", "", 0, 0, ""},
		{0, "/v1/reconciliation/runs/x", "", 0, 0, ""},
		{0, "/v1/review", "", 0, 0, ""},
		{1, "/v1/review/{id}/resolve", `{"status":"captured","note":"n"}`, 0, 0, ""},
		{0, "/v1/deliveries?state=dead", "", 0, 0, ""},
		{1, "/v1/deliveries/x/retry", "", 0, 0, ""},
		{1, "/v1/deliveries/retry", `{}`, 0, 0, ""},
		{0, "/v1/customers/cus_fz", "", 0, 0, ""},
		{0, "/v1/ledger/balances", "", 0, 0, ""},
		{0, "/v1/ledger/revenue?from=2026-01-01&to=2026-12-31", "", 0, 0, ""},
		{1, "/webhooks/standard", `{"type":"payment.captured","data":{}}`, 0, 0, ""},
		{1, "/webhooks/mock", `{}`, 0, 0, ""},
		// Signed by apiRequest.on: events about the payments of bootFuzz.
		{1, "/webhooks/standard", `{"id":"evt_fz_1","type":"payment.processing","created":1767323045,"data":{"payment_id":"{std}","provider_ref":"std_ref_1"}}`, 0, 0, ""},
		{1, "/webhooks/standard", `{"id":"evt_fz_2","type":"payment.captured","created":1767323046,"data":{"payment_id":"{std}","provider_ref":"std_ref_1","amount":2000,"currency":"EUR"}}`, 0, 0, ""},
		{1, "/webhooks/standard", `{"id":"evt_fz_3","type":"payment.refund.succeeded","created":1767323047,"data":{"payment_id":"{std}","refund":{"id":"re_fz_1","amount":500}}}`, 0, 0, ""},
		{1, "/webhooks/standard", `{"id":"evt_fz_4","type":"payment.dispute.created","created":1767323048,"data":{"payment_id":"{std}","dispute":{"id":"dp_fz_1","amount":1500,"reason":"fraudulent","status":"needs_response","evidence_due_by":1767923048}}}`, 0, 0, ""},
		{1, "/webhooks/mock", `{"id":"evt_fz_5","type":"payment.failed","created":1767323049,"data":{"payment_id":"{action}","amount":1002,"currency":"EUR"}}`, 0, 0, ""},
		{1, "/webhooks/mock", `{"id":"evt_fz_6","type":"payment.captured","created":1767323050,"data":{"payment_id":"{failed}"}}`, 0, 0, ""},
		{0, "/healthz", "", 0, 0, ""},
		{0, "/readyz", "", 0, 0, ""},
		{0, "/openapi.json", "", 0, 0, ""},
		{5, "/v1/payments/{id}", "", 0, 0, ""},
		{3, "/v1/payments/{id}", "", 0, 0, ""},
		{1, "/dashboard/login", "key=x", 4, 3, ""},
	} {
		f.Add(s.method, s.path, []byte(s.body), s.ctype, s.acpt, s.key, true)
	}
	f.Add(uint8(0), "/v1/payments/{id}", []byte(nil), uint8(0), uint8(0), "", false)
}

// apiRequest is a fuzz input as a request, its target still holding the
// placeholders of bootFuzz.
type apiRequest struct {
	method, target string
	body           []byte
	hdr            map[string]string
	auth           bool
}

// newAPIRequest makes the request of a fuzz input; ok is false for an
// input to skip.
func newAPIRequest(method uint8, target string, body []byte, ctype, acpt uint8, key string, auth bool) (r apiRequest, ok bool) {
	if !strings.HasPrefix(target, "/") {
		target = "/" + target
	}
	m := fuzzMethods[int(method)%len(fuzzMethods)]
	// What net/http's client refuses to send is not a request; a
	// fragment is not sent (libopenapi-validator would match it as part
	// of the path); and a space or control character would go raw into
	// the request line, which the server refuses as malformed before any
	// route (TestE2E_BadInput sends such request lines raw).
	if _, err := http.NewRequest(m, "http://127.0.0.1"+target, nil); err != nil || strings.ContainsFunc(target, func(r rune) bool { return r == '#' || r <= ' ' || r == 0x7f }) {
		return r, false
	}
	if !validHeaderValue(key) {
		return r, false
	}
	hdr := map[string]string{
		"Content-Type": fuzzContentTypes[int(ctype)%len(fuzzContentTypes)],
		"Accept":       fuzzAccepts[int(acpt)%len(fuzzAccepts)],
	}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	if !auth {
		hdr["Authorization"] = ""
	}
	return apiRequest{method: m, target: target, body: body, hdr: hdr, auth: auth}, true
}

// on returns the request as sent to in, whose payments bootFuzz made with
// the ids: its target and body with the placeholders replaced, and its
// headers. A POST to /webhooks/standard or /webhooks/mock with the API
// key asked for (auth) is signed instead, now, with that provider's
// secret, its webhook-id the body's "id" (or "evt_fuzz"), so that
// arbitrary events reach the inbox and the finalize.
func (r apiRequest) on(tb testing.TB, in *daemontest.Instance, ids map[string]string) (target string, body []byte, hdr map[string]string) {
	target, body = r.target, r.body
	for name, id := range ids {
		target = strings.ReplaceAll(target, name, id)
		body = bytes.ReplaceAll(body, []byte(name), []byte(id))
	}
	hdr = r.hdr
	if r.method != "POST" || !r.auth {
		return target, body, hdr
	}
	var secret string
	switch routePath(target) {
	case "/webhooks/standard":
		secret = in.Main.Config.Providers.Standard.WebhookSecret
	case "/webhooks/mock":
		secret = in.Main.Config.Providers.Mock.WebhookSecret
	default:
		return target, body, hdr
	}
	var ev struct{ ID string }
	if json.Unmarshal(body, &ev) != nil || ev.ID == "" || !validHeaderValue(ev.ID) {
		ev.ID = "evt_fuzz"
	}
	hdr = maps.Clone(hdr)
	maps.Copy(hdr, testkit.SignStandard(tb, secret, ev.ID, time.Now(), body))
	return target, body, hdr
}

// dashboardPage reports whether an answer is an HTML page of the
// dashboard (GET /, POST /dashboard/login and /dashboard/logout, the
// static files), whose errors are pages for a person, not the error
// shape: the request's path (routePath) is the dashboard's and the
// answer is HTML.
func dashboardPage(target string, h http.Header) bool {
	if !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		return false
	}
	p := routePath(target)
	return p == "/" || strings.HasPrefix(p, "/dashboard/")
}

// routePath is the path of a request's target (path and query) cleaned
// as the server cleans it, which routes it: decoded, without dot
// segments or doubled slashes; "" if the target does not parse.
func routePath(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return ""
	}
	return path.Clean("/" + u.Path)
}

// normalizedAway reports whether the server answers target for another
// path than the one sent: fasthttp removes "." and ".." segments and
// empty ones ("//") before routing, so "/v1/payments/./sync" is answered
// as "/v1/payments/sync" (405 for a POST), while libopenapi-validator
// matches the path as sent ("/v1/payments/{id}/sync", whose operation
// declares no 405).
func normalizedAway(target string) bool {
	u, err := url.Parse(target)
	if err != nil {
		return true
	}
	segs := strings.Split(u.Path, "/")[1:]
	for i, s := range segs {
		if s == "." || s == ".." || s == "" && i < len(segs)-1 {
			return true
		}
	}
	return false
}

// validHeaderValue reports whether net/http sends s as a header value:
// no control character but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// secretWhereFinal finds a "client_secret" or "redirect_url" that is set
// in an object of v (a decoded answer, searched all the way down) whose
// "status" is not created, processing or requires_action, and names it
// and the status; "" if there is none.
func secretWhereFinal(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if st, ok := x["status"].(string); ok && st != "created" && st != "processing" && st != "requires_action" {
			for _, k := range []string{"client_secret", "redirect_url"} {
				if s, _ := x[k].(string); s != "" {
					return k + " with status " + st
				}
			}
		}
		for _, e := range x {
			if bad := secretWhereFinal(e); bad != "" {
				return bad
			}
		}
	case []any:
		for _, e := range x {
			if bad := secretWhereFinal(e); bad != "" {
				return bad
			}
		}
	}
	return ""
}
