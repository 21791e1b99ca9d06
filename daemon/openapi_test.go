package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	vconfig "github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/paystate/paystate/api"
	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/ripple/rippletest"
)

// openapiClient sends requests to a booted paystate and checks every
// request and every answer against an OpenAPI document (api/openapi.yaml
// unless a test says otherwise), with libopenapi-validator in strict mode:
// a field or header the document does not declare is an error too, and
// formats (date-time) are checked.
type openapiClient struct {
	t  testing.TB
	in *daemontest.Instance
	m  *v3.Document
	v  validator.Validator
	hc *http.Client
}

// ignoredHeaders are answer headers the document does not list one by
// one: the server's name and the dashboard's security headers.
var ignoredHeaders = []string{"Server", "Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy", "Cross-Origin-Opener-Policy", "Permissions-Policy"}

// freeForm are the places of answers whose content the document leaves
// open, so strict mode does not look into them: the archived webhook
// bodies of the review evidence (whatever the PSP sent), and the parts
// of GET /openapi.json (the document, which its own tests check).
var freeForm = []string{
	"$.body.data[*].evidence.webhooks[*].body**",
	"$.body.info**", "$.body.servers**", "$.body.tags**", "$.body.security**",
	"$.body.paths**", "$.body.webhooks**", "$.body.components**",
}

func newOpenAPIClient(t testing.TB, in *daemontest.Instance, doc []byte) *openapiClient {
	t.Helper()
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	v := validator.NewValidatorFromV3Model(&m.Model,
		vconfig.WithStrictMode(), vconfig.WithFormatAssertions(),
		vconfig.WithStrictIgnoredHeadersExtra(ignoredHeaders...), vconfig.WithStrictIgnorePaths(freeForm...))
	return &openapiClient{t: t, in: in, m: &m.Model, v: v, hc: &http.Client{Timeout: 30 * time.Second}}
}

// describe is a validation error with the failures it carries.
func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n\t%s", e.Error())
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n\t\t%s: %s", f.FieldPath, f.Reason)
		}
	}
	return b.String()
}

// exchange is one request and its answer, as sent and received.
type exchange struct {
	method, path string
	body         []byte
	hdr          http.Header
	res          daemontest.Response
	reqErrs      []*verrors.ValidationError
	resErrs      []*verrors.ValidationError
}

// send sends a request, as daemontest.Instance.Send does (the API key
// unless hdr gives Authorization as "", Content-Type JSON with a body),
// and validates the request and the answer.
func (c *openapiClient) send(method, path string, body []byte, hdr map[string]string) exchange {
	c.t.Helper()
	build := func() *http.Request {
		req, err := http.NewRequest(method, c.in.Base+path, bytes.NewReader(body))
		if err != nil {
			c.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+daemontest.APIKey)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range hdr {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		return req
	}
	req := build()
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	x := exchange{method: method, path: path, body: body, hdr: req.Header, res: daemontest.Response{Status: res.StatusCode, Header: res.Header, Body: b}}
	_ = json.Unmarshal(b, &x.res.JSON)
	_, x.reqErrs = c.v.ValidateHttpRequestSync(build())
	res.Body = io.NopCloser(bytes.NewReader(b))
	_, x.resErrs = c.v.ValidateHttpResponse(build(), res)
	return x
}

// do sends a request that the document allows and checks that it does
// and that the answer has the status want and matches the document.
func (c *openapiClient) do(method, path string, body []byte, hdr map[string]string, want int) daemontest.Response {
	c.t.Helper()
	x := c.send(method, path, body, hdr)
	if len(x.reqErrs) > 0 {
		c.t.Errorf("%s %s: the request does not match api/openapi.yaml:%s\nbody: %s", method, path, describe(x.reqErrs), body)
	}
	c.checkAnswer(x, want)
	return x.res
}

// checkAnswer fails the test if the answer's status is not want or it does
// not match the document.
func (c *openapiClient) checkAnswer(x exchange, want int) {
	c.t.Helper()
	if x.res.Status != want {
		c.t.Errorf("%s %s: status=%d, want %d: %.300s", x.method, x.path, x.res.Status, want, x.res.Body)
	}
	if len(x.resErrs) > 0 {
		c.t.Errorf("%s %s: the answer %d does not match api/openapi.yaml:%s\nbody: %.500s", x.method, x.path, x.res.Status, describe(x.resErrs), x.res.Body)
	}
}

// refused sends a request the server refuses with status and code, the
// error naming param ("" for none, "*" for any), and checks that the answer matches
// the document and whether the document refuses the request too
// (docRefuses: a rule a schema can state, such as a pattern; some, such
// as a key reused with another body, only the server can know).
func (c *openapiClient) refused(method, path string, body []byte, hdr map[string]string, status int, code, param string, docRefuses bool) {
	c.t.Helper()
	x := c.send(method, path, body, hdr)
	c.checkAnswer(x, status)
	e, _ := x.res.JSON["error"].(map[string]any)
	gotParam, hasParam := e["param"].(string)
	if got := x.res.ErrCode(); got != code {
		c.t.Errorf("%s %s %s: code=%q, want %q: %s", method, path, body, got, code, x.res.Body)
	}
	if param != "*" && (gotParam != param || (param == "" && hasParam)) {
		c.t.Errorf("%s %s %s: param=%q (present: %v), want %q: %s", method, path, body, gotParam, hasParam, param, x.res.Body)
	}
	if refusedByDoc := len(x.reqErrs) > 0; refusedByDoc != docRefuses {
		c.t.Errorf("%s %s %s: the document refuses the request: %v, want %v%s", method, path, body, refusedByDoc, docRefuses, describe(x.reqErrs))
	}
}

// eventSchema validates a merchant webhook body against its event in the
// document's catalog.
func (c *openapiClient) checkEvent(r rippletest.Request) string {
	c.t.Helper()
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(r.Body, &ev); err != nil {
		c.t.Fatalf("merchant event: %v: %s", err, r.Body)
	}
	item, ok := c.m.Webhooks.Get(ev.Type)
	if !ok {
		c.t.Errorf("merchant event of type %q is not in the document's catalog: %s", ev.Type, r.Body)
		return ev.Type
	}
	for _, p := range item.Post.Parameters {
		if p.In == "header" && r.Header.Get(p.Name) == "" {
			c.t.Errorf("merchant event %s: no %s header", ev.ID, p.Name)
		}
	}
	if got := r.Header.Get("webhook-id"); got != ev.ID {
		c.t.Errorf("merchant event %s: webhook-id %q", ev.ID, got)
	}
	media, _ := item.Post.RequestBody.Content.Get("application/json")
	if ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(media.Schema.Schema(), r.Body); !ok {
		c.t.Errorf("merchant event %s does not match the catalog's %s:%s\nbody: %s", ev.ID, ev.Type, describe(errs), r.Body)
	}
	var v any
	_ = json.Unmarshal(r.Body, &v)
	for _, f := range undeclared(c.m.Components.Schemas.GetOrZero("MerchantEvent").Schema(), v, "$") {
		c.t.Errorf("merchant event %s: %s is not declared in MerchantEvent: %s", ev.ID, f, r.Body)
	}
	return ev.Type
}

// undeclared returns the fields of v, a decoded JSON value, that schema s
// does not declare, by their path: strict mode for the merchant events,
// which libopenapi-validator checks as plain schemas.
func undeclared(s *base.Schema, v any, path string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, fv := range x {
			var p *base.SchemaProxy
			if s.Properties != nil {
				p = s.Properties.GetOrZero(k)
			}
			if p == nil {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, undeclared(p.Schema(), fv, path+"."+k)...)
		}
	case []any:
		if s.Items != nil && s.Items.IsA() {
			for i, e := range x {
				out = append(out, undeclared(s.Items.A.Schema(), e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return out
}

// eventCatalog is the names of the merchant events in api/openapi.yaml.
func eventCatalog(t *testing.T) []string {
	t.Helper()
	d, err := libopenapi.NewDocument(api.YAML())
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Collect(m.Model.Webhooks.KeysFromOldest())
}

// standardEvent is a Standard Webhooks event of the standard provider,
// signed with its secret, as headers and body.
func standardEvent(t *testing.T, in *daemontest.Instance, id, typ, data string) ([]byte, map[string]string) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":%s}`, id, typ, time.Now().Unix(), data))
	return body, testkit.SignStandard(t, in.Main.Config.Providers.Standard.WebhookSecret, id, time.Now(), body)
}

// TestE2E_OpenAPI runs the API's flows over real HTTP against a whole
// paystate and validates every request and answer against
// api/openapi.yaml, and every merchant webhook against its event catalog:
// create (PSP outcomes, replay, a reused key), get (ETag, 304), list
// (pages, filters), sync (report mode, a version conflict), refund,
// timeline, PSP webhooks (redelivery), the review queue and its
// resolution, deliveries and dead letters, customers, the ledger, backup,
// health, metrics, this document and the dashboard.
func TestE2E_OpenAPI(t *testing.T) {
	t.Parallel()
	ok := rippletest.NewEndpoint(t)
	gone := rippletest.NewEndpoint(t)
	gone.Answer(http.StatusGone, nil)
	catalog := eventCatalog(t)
	secret, err := stdwebhook.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Webhooks = []config.Webhook{
			{URL: ok.URL, Secret: secret, Events: catalog},
			{URL: gone.URL, Secret: secret, Events: []string{"payment.failed"}},
		}
	})
	c := newOpenAPIClient(t, in, api.YAML())
	start := time.Now().UTC().Add(-time.Minute)
	create := func(body, key string, want int) daemontest.Response {
		t.Helper()
		return c.do("POST", "/v1/payments", []byte(body), map[string]string{"Idempotency-Key": key}, want)
	}

	// Create: each outcome of the mock PSP.
	captured := create(`{"order_id":"oa-1","amount":1000,"currency":"EUR","customer":{"id":"cus_oa","email":"oa@example.com"}}`, "oa-1", 201)
	if captured.Str("status") != "captured" {
		t.Fatalf("create: %s", captured.Body)
	}
	id := captured.Str("id")
	failed := create(`{"order_id":"oa-2","amount":1001,"currency":"EUR"}`, "oa-2", 201)
	action := create(`{"order_id":"oa-3","amount":1002,"currency":"EUR","return_url":"https://shop.example/back"}`, "oa-3", 201)
	if action.Str("status") != "requires_action" || action.Str("redirect_url") == "" {
		t.Fatalf("create 1002: %s", action.Body)
	}
	create(`{"order_id":"oa-4","amount":1003,"currency":"EUR"}`, "oa-4", 201)
	if lost := create(`{"order_id":"oa-5","amount":1004,"currency":"EUR"}`, "oa-5", 201); lost.Str("status") != "finalize_pending" {
		t.Fatalf("create 1004: %s", lost.Body)
	}
	// A replay, and the key with another body.
	replay := create(`{"order_id":"oa-1","amount":1000,"currency":"EUR","customer":{"id":"cus_oa","email":"oa@example.com"}}`, "oa-1", 201)
	if replay.Header.Get("Idempotent-Replayed") != "true" || replay.Str("id") != id {
		t.Fatalf("replay: %v %s", replay.Header, replay.Body)
	}
	c.refused("POST", "/v1/payments", []byte(`{"order_id":"oa-1","amount":2000,"currency":"EUR"}`), map[string]string{"Idempotency-Key": "oa-1"}, 422, "idempotency_key_reused", "", false)

	// Get, and the ETag.
	g := c.do("GET", "/v1/payments/"+id, nil, nil, 200)
	c.do("GET", "/v1/payments/"+id, nil, map[string]string{"If-None-Match": g.Header.Get("ETag")}, 304)

	// List: pages and filters.
	page := c.do("GET", "/v1/payments?limit=2", nil, nil, 200)
	if page.Str("next_cursor") == "" {
		t.Fatalf("list: no next_cursor: %s", page.Body)
	}
	c.do("GET", "/v1/payments?limit=2&cursor="+url.QueryEscape(page.Str("next_cursor")), nil, nil, 200)
	c.do("GET", "/v1/payments?status=failed", nil, nil, 200)
	c.do("GET", "/v1/payments?order_id=oa-3", nil, nil, 200)

	// Refunds, in part and the rest; one that does not fit; the list; the
	// disputes; and the timeline.
	if r := c.do("POST", "/v1/payments/"+id+"/refund", []byte(`{"amount":300,"reason":"one item"}`), map[string]string{"Idempotency-Key": "oa-r0"}, 201); r.Str("status") != "succeeded" {
		t.Fatalf("partial refund: %s", r.Body)
	}
	c.refused("POST", "/v1/payments/"+id+"/refund", []byte(`{"amount":701}`), map[string]string{"Idempotency-Key": "oa-r3"}, 409, "refund_exceeds_amount", "", false)
	if r := c.do("POST", "/v1/payments/"+id+"/refund", nil, map[string]string{"Idempotency-Key": "oa-r1"}, 201); r.Str("status") != "succeeded" {
		t.Fatalf("refund: %s", r.Body)
	}
	c.do("POST", "/v1/payments/"+id+"/refund", nil, map[string]string{"Idempotency-Key": "oa-r1"}, 201) // a replay
	if p := c.do("GET", "/v1/payments/"+id, nil, nil, 200); p.Str("status") != "refunded" {
		t.Fatalf("after the refunds: %s", p.Body)
	}
	c.do("GET", "/v1/payments/"+id+"/refunds", nil, nil, 200)
	c.do("GET", "/v1/disputes?status=needs_response&limit=10", nil, nil, 200)
	c.refused("GET", "/v1/disputes?status=open", nil, nil, 400, "invalid_request", "status", true)
	c.refused("POST", "/v1/payments/"+failed.Str("id")+"/refund", []byte(`{}`), map[string]string{"Idempotency-Key": "oa-r2"}, 409, "conflict", "", false)
	c.do("GET", "/v1/payments/"+id+"/events", nil, nil, 200)
	// A refund the PSP accepts and fails later (the mock's amounts ending 06).
	refusing := create(`{"order_id":"oa-7","amount":1006,"currency":"EUR"}`, "oa-7", 201).Str("id")
	c.do("POST", "/v1/payments/"+refusing+"/refund", nil, map[string]string{"Idempotency-Key": "oa-r5"}, 201)

	// Report mode: sync, a version conflict, webhooks.
	std := create(`{"order_id":"oa-std","amount":1500,"currency":"EUR","provider":"standard","customer":{"id":"cus_oa","email":"oa@example.com"}}`, "oa-std", 201)
	sid := std.Str("id")
	if s := c.do("POST", "/v1/payments/"+sid+"/sync", []byte(`{"status":"processing","provider_ref":"psp_oa","expected_version":1}`), nil, 200); s.Str("status") != "processing" {
		t.Fatalf("sync: %s", s.Body)
	}
	if s := c.do("POST", "/v1/payments/"+sid+"/sync", []byte(`{"status":"requires_action","redirect_url":"https://psp.example/3ds"}`), map[string]string{"If-Match": `"1"`}, 200); s.JSON["conflict"] != true {
		t.Fatalf("sync with an old version: %s", s.Body)
	}
	body, hdr := standardEvent(t, in, "evt_oa_cap", "payment.captured", fmt.Sprintf(`{"payment_id":%q,"provider_ref":"psp_oa","amount":1500,"currency":"EUR"}`, sid))
	c.do("POST", "/webhooks/standard", body, hdr, 200)
	if dup := c.do("POST", "/webhooks/standard", body, hdr, 200); dup.JSON["duplicate"] != true {
		t.Fatalf("redelivery: %s", dup.Body)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if st := in.Do("GET", "/v1/payments/"+sid, nil, nil).Str("status"); st != "captured" {
			return fmt.Errorf("standard payment is %s", st)
		}
		return nil
	})
	// Another final outcome for a captured payment: review.
	body, hdr = standardEvent(t, in, "evt_oa_fail", "payment.failed", fmt.Sprintf(`{"payment_id":%q}`, sid))
	c.do("POST", "/webhooks/standard", body, hdr, 200)
	testkit.WaitFor(t, 10*time.Second, func() error {
		if n := len(in.Do("GET", "/v1/review", nil, nil).JSON["data"].([]any)); n == 0 {
			return fmt.Errorf("review queue is empty")
		}
		return nil
	})
	q := c.do("GET", "/v1/review", nil, nil, 200)
	if item := q.JSON["data"].([]any)[0].(map[string]any); item["payment_id"] != sid || item["reason"] != "conflicting_terminal" {
		t.Fatalf("review: %s", q.Body)
	}
	if r := c.do("POST", "/v1/review/"+sid+"/resolve", []byte(`{"status":"captured","note":"captured at the PSP"}`), nil, 200); r.Str("status") != "captured" {
		t.Fatalf("resolve: %s", r.Body)
	}
	// A dispute of the captured payment.
	body, hdr = standardEvent(t, in, "evt_oa_dp", "payment.dispute.created", fmt.Sprintf(
		`{"payment_id":%q,"dispute":{"id":"dp_oa","amount":1500,"reason":"fraudulent","status":"needs_response","evidence_due_by":%d}}`,
		sid, time.Now().Add(7*24*time.Hour).Unix()))
	c.do("POST", "/webhooks/standard", body, hdr, 200)
	testkit.WaitFor(t, 10*time.Second, func() error {
		if n := len(in.Do("GET", "/v1/disputes", nil, nil).JSON["data"].([]any)); n == 0 {
			return fmt.Errorf("no dispute yet")
		}
		return nil
	})
	c.do("GET", "/v1/disputes", nil, nil, 200)

	// Deliveries: done ones, and the dead letters of the endpoint that
	// answers 410.
	testkit.WaitFor(t, 20*time.Second, func() error {
		if n := len(in.Do("GET", "/v1/deliveries?state=dead", nil, nil).JSON["data"].([]any)); n == 0 {
			return fmt.Errorf("no dead letter yet")
		}
		return nil
	})
	dead := c.do("GET", "/v1/deliveries?state=dead&limit=10", nil, nil, 200)
	done := c.do("GET", "/v1/deliveries?state=done&since="+url.QueryEscape(start.Format(time.RFC3339)), nil, nil, 200)
	c.do("GET", "/v1/deliveries?state=pending", nil, nil, 200)
	if d := c.do("POST", "/v1/deliveries/"+dead.JSON["data"].([]any)[0].(map[string]any)["id"].(string)+"/retry", nil, nil, 200); d.Str("state") != "pending" {
		t.Fatalf("retry: %s", d.Body)
	}
	c.refused("POST", "/v1/deliveries/"+done.JSON["data"].([]any)[0].(map[string]any)["id"].(string)+"/retry", nil, nil, 409, "conflict", "", false)
	c.do("POST", "/v1/deliveries/retry?state=dead&since="+url.QueryEscape(start.Format(time.RFC3339)), nil, nil, 200)

	// Customers and the ledger.
	testkit.WaitFor(t, 10*time.Second, func() error {
		if in.Do("GET", "/v1/customers/cus_oa", nil, nil).Str("last_visit_at") == "" {
			return fmt.Errorf("no visit recorded yet")
		}
		return nil
	})
	c.do("GET", "/v1/customers/cus_oa", nil, nil, 200)
	c.refused("GET", "/v1/customers/cus_nobody", nil, nil, 404, "not_found", "", false)
	c.do("GET", "/v1/ledger/balances", nil, nil, 200)

	// Operations, this document, the dashboard.
	c.do("GET", "/admin/backup", nil, nil, 200)
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/openapi.json", "/dashboard/static/app.js"} {
		c.do("GET", p, nil, map[string]string{"Authorization": ""}, 200)
	}
	c.do("GET", "/", nil, nil, 200)
	c.do("GET", "/", nil, map[string]string{"Authorization": ""}, 401)

	// Every merchant webhook received matches the catalog.
	seen := map[string]bool{}
	testkit.WaitFor(t, 10*time.Second, func() error {
		for _, r := range ok.Requests() {
			seen[c.checkEvent(r)] = true
		}
		for _, typ := range []string{"payment.captured", "payment.failed", "payment.requires_action", "payment.processing", "payment.finalize_pending",
			"payment.refunded", "payment.refund.succeeded", "payment.refund.failed", "payment.dispute.created"} {
			if !seen[typ] {
				return fmt.Errorf("no %s event received; seen %v", typ, seen)
			}
		}
		return nil
	})
}

// TestE2E_OpenAPIErrors: bad requests are refused with the error shape
// of the document, validation errors as invalid_request naming the field
// in param, and the document refuses the same requests wherever a schema
// can say so.
func TestE2E_OpenAPIErrors(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, func(c *config.Config) { c.WebhookInbox.MaxAttempts = 1 })
	c := newOpenAPIClient(t, in, api.YAML())
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }
	existing := c.do("POST", "/v1/payments", []byte(`{"order_id":"oe-1","amount":1500,"currency":"EUR","provider":"standard"}`), key("oe-1"), 201).Str("id")

	for _, tc := range []struct {
		name       string
		method     string
		path       string
		body       string
		hdr        map[string]string
		status     int
		code       string
		param      string
		docRefuses bool
	}{
		{"lower-case currency", "POST", "/v1/payments", `{"order_id":"o","amount":10,"currency":"eur"}`, key("e1"), 400, "invalid_request", "currency", true},
		{"zero amount", "POST", "/v1/payments", `{"order_id":"o","amount":0,"currency":"EUR"}`, key("e2"), 400, "invalid_request", "amount", true},
		{"amount too large", "POST", "/v1/payments", `{"order_id":"o","amount":1000000000000001,"currency":"EUR"}`, key("e2b"), 400, "invalid_request", "amount", true},
		{"amount as a string", "POST", "/v1/payments", `{"order_id":"o","amount":"10","currency":"EUR"}`, key("e3"), 400, "invalid_request", "amount", true},
		{"no order id", "POST", "/v1/payments", `{"amount":10,"currency":"EUR"}`, key("e4"), 400, "invalid_request", "order_id", true},
		{"bidi order id", "POST", "/v1/payments", `{"order_id":"inv\u202egpj.exe","amount":10,"currency":"EUR"}`, key("e5"), 400, "invalid_request", "order_id", false},
		{"unknown field", "POST", "/v1/payments", `{"order_id":"o","amount":10,"currency":"EUR","ammount":5}`, key("e6"), 400, "invalid_request", "ammount", true},
		{"customer id of wrong type", "POST", "/v1/payments", `{"order_id":"o","amount":10,"currency":"EUR","customer":{"id":7}}`, key("e7"), 400, "invalid_request", "customer.id", true},
		{"bad customer email", "POST", "/v1/payments", `{"order_id":"o","amount":10,"currency":"EUR","customer":{"email":"nobody"}}`, key("e8"), 400, "invalid_request", "customer.email", false},
		{"duplicated key", "POST", "/v1/payments", `{"order_id":"o","amount":10,"amount":20,"currency":"EUR"}`, key("e9"), 400, "invalid_request", "amount", false},
		{"malformed JSON", "POST", "/v1/payments", `{"order_id":"o","amount":`, key("e10"), 400, "invalid_request", "", true},
		{"no idempotency key", "POST", "/v1/payments", `{"order_id":"o","amount":10,"currency":"EUR"}`, nil, 400, "idempotency_key_missing", "", true},
		{"unknown provider", "POST", "/v1/payments", `{"order_id":"o","amount":10,"currency":"EUR","provider":"paypal"}`, key("e11"), 400, "unknown_provider", "", false},
		{"text body", "POST", "/v1/payments", `{"order_id":"o","amount":10,"currency":"EUR"}`, map[string]string{"Idempotency-Key": "e12", "Content-Type": "text/plain"}, 415, "unsupported_media_type", "", true},
		{"no API key", "GET", "/v1/payments", "", map[string]string{"Authorization": ""}, 401, "unauthorized", "", true},
		{"list limit 0", "GET", "/v1/payments?limit=0", "", nil, 400, "invalid_request", "limit", true},
		{"list limit too large", "GET", "/v1/payments?limit=501", "", nil, 400, "invalid_request", "limit", true},
		{"list unknown status", "GET", "/v1/payments?status=won", "", nil, 400, "invalid_request", "status", true},
		{"list bad cursor", "GET", "/v1/payments?cursor=bogus", "", nil, 400, "invalid_request", "cursor", false},
		{"list bidi order id", "GET", "/v1/payments?order_id=" + url.QueryEscape("o\u202ex"), "", nil, 400, "invalid_request", "order_id", false},
		{"malformed payment id", "GET", "/v1/payments/pay_nope", "", nil, 404, "not_found", "", true},
		{"unknown payment", "GET", "/v1/payments/pay_01JN8S7QG0NXTZ33KXC9RCH2ZJ", "", nil, 404, "not_found", "", false},
		{"sync unknown status", "POST", "/v1/payments/" + existing + "/sync", `{"status":"paid"}`, nil, 400, "invalid_request", "status", true},
		{"sync version zero", "POST", "/v1/payments/" + existing + "/sync", `{"status":"captured","expected_version":0}`, nil, 400, "invalid_request", "expected_version", true},
		{"sync negative version", "POST", "/v1/payments/" + existing + "/sync", `{"status":"captured","expected_version":-1}`, nil, 400, "invalid_request", "expected_version", true},
		{"sync long provider ref", "POST", "/v1/payments/" + existing + "/sync", `{"status":"processing","provider_ref":"` + strings.Repeat("r", 256) + `"}`, nil, 400, "invalid_request", "provider_ref", true},
		{"refund with a field", "POST", "/v1/payments/" + existing + "/refund", `{"memo":"x"}`, key("e13"), 400, "invalid_request", "memo", true},
		{"refund not captured", "POST", "/v1/payments/" + existing + "/refund", "", key("e14"), 409, "conflict", "", false},
		{"resolve without a note", "POST", "/v1/review/" + existing + "/resolve", `{"status":"captured","note":""}`, nil, 400, "invalid_request", "note", true},
		{"resolve unknown item", "POST", "/v1/review/" + existing + "/resolve", `{"status":"captured","note":"n"}`, nil, 404, "not_found", "", false},
		{"deliveries without state", "GET", "/v1/deliveries", "", nil, 400, "invalid_request", "state", true},
		{"deliveries bad since", "GET", "/v1/deliveries?state=dead&since=yesterday", "", nil, 400, "invalid_request", "since", true},
		{"deliveries limit too large", "GET", "/v1/deliveries?state=dead&limit=1001", "", nil, 400, "invalid_request", "limit", true},
		{"replay pending letters", "POST", "/v1/deliveries/retry?state=pending&since=2025-03-01T00:00:00Z", "", nil, 400, "invalid_request", "state", true},
		{"replay without since", "POST", "/v1/deliveries/retry?state=dead", "", nil, 400, "invalid_request", "since", true},
		{"retry unknown delivery", "POST", "/v1/deliveries/dlv_01JN8S7SEG27RC72CEDHEKNZFP/retry", "", nil, 404, "not_found", "", false},
		{"webhook of an unknown provider", "POST", "/webhooks/paypal", `{}`, nil, 404, "not_found", "", true},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		t.Run(tc.name, func(t *testing.T) {
			c := *c
			c.t = t
			c.refused(tc.method, tc.path, body, tc.hdr, tc.status, tc.code, tc.param, tc.docRefuses)
		})
	}

	// Webhooks: a bad signature, a body that is no event, and an event
	// about a payment paystate does not know (an orphan, dismissed).
	body, hdr := standardEvent(t, in, "evt_oe_1", "payment.captured", fmt.Sprintf(`{"payment_id":%q}`, existing))
	hdr["webhook-signature"] = "v1,AAAA"
	c.refused("POST", "/webhooks/standard", body, hdr, 400, "invalid_signature", "", false)
	body, hdr = standardEvent(t, in, "evt_oe_2", "payment.won", fmt.Sprintf(`{"payment_id":%q}`, existing))
	c.refused("POST", "/webhooks/standard", body, hdr, 400, "invalid_request", "*", true) // a PSP's body: param may name its field
	body, hdr = standardEvent(t, in, "evt_oe_orphan", "payment.captured", `{"provider_ref":"psp_nobody"}`)
	c.do("POST", "/webhooks/standard", body, hdr, 200)
	orphan := "orphan_standard_evt_oe_orphan"
	testkit.WaitFor(t, 10*time.Second, func() error {
		if q := in.Do("GET", "/v1/review", nil, nil); !bytes.Contains(q.Body, []byte(orphan)) {
			return fmt.Errorf("no orphan on the review queue: %s", q.Body)
		}
		return nil
	})
	c.do("GET", "/v1/review", nil, nil, 200)
	c.refused("POST", "/v1/review/"+orphan+"/resolve", []byte(`{"status":"captured","note":"n"}`), nil, 400, "invalid_request", "status", false)
	if r := c.do("POST", "/v1/review/"+orphan+"/resolve", []byte(`{"status":"dismissed","note":"a test charge"}`), nil, 200); r.Str("status") != "dismissed" {
		t.Fatalf("dismiss: %s", r.Body)
	}
}

// TestE2E_OpenAPIValidationCanFail: the validation of the other tests
// can fail. A document that says a payment's version is a string, or
// that leaves out a field the server sends, or that gives a payment an
// enum without the status it has, refuses the server's real answer.
func TestE2E_OpenAPIValidationCanFail(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	id := in.Create(`{"order_id":"of-1","amount":1000,"currency":"EUR"}`, "of-1").Str("id")
	doc := string(api.YAML())
	for _, tc := range []struct{ name, old, new string }{
		{"version a string", "        version:\n          type: integer\n          format: int64\n          minimum: 1\n          description: Starts at 1",
			"        version:\n          type: string\n          description: Starts at 1"},
		{"provider_ref left out", "        provider_ref:\n          type: string\n          description: The PSP's id for this payment (`pi_...`); empty until known.\n", ""},
		{"captured not a status", "enum: [created, processing, requires_action, finalize_pending, expired, captured, failed, refunded]",
			"enum: [created, processing, requires_action, finalize_pending, expired, failed, refunded]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := strings.Replace(doc, tc.old, tc.new, 1)
			if changed == doc {
				t.Fatalf("api/openapi.yaml has no %q", tc.old)
			}
			c := newOpenAPIClient(t, in, []byte(changed))
			x := c.send("GET", "/v1/payments/"+id, nil, nil)
			if x.res.Status != 200 || len(x.resErrs) == 0 {
				t.Fatalf("the changed document accepts the answer %d %s", x.res.Status, x.res.Body)
			}
		})
	}
}
