package httpd_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
)

// TestServer_ReconRuns: the runs a reconciliation stored are listed
// newest first with a cursor, and one run is answered with its unmatched
// lines, behind the API key.
func TestServer_ReconRuns(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	ctx := context.Background()
	lines, err := reconcile.ReadGeneric(strings.NewReader("id,provider_ref,type,amount,fee,currency\n" +
		"txn_ghost,pi_ghost,charge,70.00,1.30,EUR\ntxn_fee,,fee,0,2.50,EUR\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Run ids are ULIDs of the engine's clock: a millisecond apart, the
	// second sorts after the first whatever other tests of the process
	// made in between (ULIDs of one millisecond are ordered only while no
	// other millisecond's come between them).
	at := time.Now()
	eng := &reconcile.Engine{Store: in.Main.Store, Now: func() time.Time { at = at.Add(time.Millisecond); return at }}
	var ids []string
	for range 2 {
		run, err := eng.Run(ctx, "mock", "import:generic:test.csv", lines)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}

	var list struct {
		Data []struct {
			ID             string `json:"id"`
			Lines          int    `json:"lines"`
			Matched        int    `json:"matched"`
			MissingLocally int    `json:"missing_locally"`
			OK             bool   `json:"ok"`
			Items          []any  `json:"items"`
		} `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	if st := in.DoJSON("GET", "/v1/reconciliation/runs?limit=1", nil, nil, &list); st != http.StatusOK {
		t.Fatalf("list: status %d", st)
	}
	if len(list.Data) != 1 || list.Data[0].ID != ids[1] || list.NextCursor != ids[1] || list.Data[0].Lines != 2 ||
		list.Data[0].Matched != 1 || list.Data[0].MissingLocally != 1 || list.Data[0].OK || list.Data[0].Items != nil {
		t.Fatalf("first page=%+v, want the newest run without its items and a cursor", list)
	}
	list.Data, list.NextCursor = nil, ""
	if st := in.DoJSON("GET", "/v1/reconciliation/runs?limit=1&cursor="+ids[1], nil, nil, &list); st != http.StatusOK || len(list.Data) != 1 || list.Data[0].ID != ids[0] {
		t.Fatalf("second page: status %d, %+v; want the older run", st, list)
	}

	r := in.Do("GET", "/v1/reconciliation/runs/"+ids[0], nil, nil)
	items, _ := r.JSON["items"].([]any)
	if r.Status != http.StatusOK || len(items) != 1 {
		t.Fatalf("run: status %d, %s; want one item", r.Status, r.Body)
	}
	it, _ := items[0].(map[string]any)
	if it["kind"] != pay.ReconMissingLocally || it["line_id"] != "txn_ghost" || it["line"] != float64(2) || it["amount"] != float64(7000) {
		t.Fatalf("item=%v, want txn_ghost missing_locally on line 2", it)
	}
	if r := in.Do("GET", "/v1/reconciliation/runs/rr_nope", nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("unknown run: status %d, want 404", r.Status)
	}
	if r := in.Do("GET", "/v1/reconciliation/runs", nil, map[string]string{"Authorization": ""}); r.Status != http.StatusUnauthorized {
		t.Fatalf("without the key: status %d, want 401", r.Status)
	}
	if r := in.Do("GET", "/v1/reconciliation/runs?limit=0", nil, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("limit=0: status %d, want 400", r.Status)
	}
}

// TestServer_ImportReport posts settlement reports to POST
// /v1/reconciliation/runs: a report larger than server.max_body is
// streamed and imported (each line posted once, a second upload posting
// nothing), a report with one id on two lines with other figures is 400
// naming both lines, the route needs the API key (or a dashboard session
// with its CSRF token) and a CSV, and the other routes keep their body
// limit.
func TestServer_ImportReport(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	var report strings.Builder
	report.WriteString("id,provider_ref,type,amount,fee,currency\ntxn_ghost,pi_ghost,charge,70.00,1.30,EUR\n")
	const fees = 10000
	for i := range fees {
		fmt.Fprintf(&report, "txn_fee_%06d,,fee,0,0.01,EUR\n", i)
	}
	if report.Len() <= httpd.DefaultMaxBody {
		t.Fatalf("the report is %d bytes, not more than server.max_body", report.Len())
	}
	// post sends a report; without an Authorization in hdr, none.
	post := func(query, contentType, body string, hdr map[string]string) (int, http.Header, map[string]any) {
		t.Helper()
		h := map[string]string{"Content-Type": contentType, "Authorization": ""}
		for k, v := range hdr {
			h[k] = v
		}
		r := in.Do("POST", "/v1/reconciliation/runs"+query, []byte(body), h)
		return r.Status, r.Header, r.JSON
	}
	bearer := map[string]string{"Authorization": "Bearer " + daemontest.APIKey}

	st, hdr, run := post("?format=generic&provider=mock&name=big.csv", "text/csv", report.String(), bearer)
	if st != http.StatusCreated || run["lines"] != float64(fees+1) || run["posted"] != float64(fees) || run["missing_locally"] != float64(1) ||
		run["source"] != "upload:generic:big.csv" || hdr.Get("Location") != "/v1/reconciliation/runs/"+run["id"].(string) {
		t.Fatalf("upload: status %d, %v, Location %q; want 201 with %d lines, %d posted, 1 missing locally", st, run, hdr.Get("Location"), fees+1, fees)
	}
	if items, _ := run["items"].([]any); len(items) != 1 {
		t.Fatalf("upload: items %v, want the missing_locally line", run["items"])
	}
	var bal struct {
		Data []struct {
			Account  string `json:"account"`
			Currency string `json:"currency"`
			Amount   int64  `json:"amount"`
		} `json:"data"`
	}
	if st := in.DoJSON("GET", "/v1/ledger/balances", nil, nil, &bal); st != http.StatusOK {
		t.Fatalf("balances: status %d", st)
	}
	fee := int64(0)
	for _, b := range bal.Data {
		if b.Account == pay.AccountPSPFees && b.Currency == "EUR" {
			fee = b.Amount
		}
	}
	if fee != fees {
		t.Fatalf("psp_fees=%d, want %d (a cent per fee line)", fee, fees)
	}
	if st, _, again := post("?format=generic&provider=mock", "text/csv; charset=utf-8", report.String(), bearer); st != http.StatusCreated || again["posted"] != float64(0) {
		t.Fatalf("the report again: status %d, %v; want 201, nothing posted", st, again)
	}
	// Two uploads of a new report at the same time: each line posted once.
	var other strings.Builder
	other.WriteString("id,provider_ref,type,amount,fee,currency\n")
	for i := range 2000 {
		fmt.Fprintf(&other, "txn_other_%06d,,fee,0,0.01,EUR\n", i)
	}
	var wg sync.WaitGroup
	postedBoth := make([]float64, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := in.Send("POST", "/v1/reconciliation/runs?format=generic&provider=mock", []byte(other.String()), map[string]string{"Content-Type": "text/csv"})
			if err != nil || r.Status != http.StatusCreated {
				t.Errorf("concurrent upload %d: %v, status %d: %s", i, err, r.Status, r.Body)
				return
			}
			postedBoth[i], _ = r.JSON["posted"].(float64)
		}()
	}
	wg.Wait()
	if postedBoth[0]+postedBoth[1] != 2000 {
		t.Fatalf("two uploads at once posted %v lines, want 2000 together", postedBoth)
	}

	dup := "id,provider_ref,type,amount,fee,currency\ntxn_1,,fee,0,0.01,EUR\ntxn_1,,fee,0,0.02,EUR\n"
	for _, c := range []struct {
		name, query, contentType, body string
		hdr                            map[string]string
		status                         int
		code, message                  string
	}{
		{"Duplicate", "?format=generic&provider=mock", "text/csv", dup, bearer, 400, "invalid_request", "line 3: balance transaction \"txn_1\" is also on line 2"},
		{"NoKey", "?format=generic&provider=mock", "text/csv", dup, nil, 401, "unauthorized", ""},
		{"NoFormat", "?provider=mock", "text/csv", dup, bearer, 400, "invalid_request", "format is required"},
		{"JSON", "?format=generic&provider=mock", "application/json", `{}`, bearer, 415, "unsupported_media_type", "text/csv"},
	} {
		st, _, out := post(c.query, c.contentType, c.body, c.hdr)
		e, _ := out["error"].(map[string]any)
		if st != c.status || e["code"] != c.code || !strings.Contains(fmt.Sprint(e["message"]), c.message) {
			t.Errorf("%s: status %d, %v; want %d %s with %q", c.name, st, out, c.status, c.code, c.message)
		}
	}

	// A dashboard session uploads with its CSRF token, not without.
	form := url.Values{"api_key": {daemontest.APIKey}}.Encode()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Post(in.Base+"/dashboard/login", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == httpd.SessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("sign-in: status %d, no session cookie", res.StatusCode)
	}
	page := in.Do("GET", "/", nil, map[string]string{"Authorization": "", "Cookie": cookie.Name + "=" + cookie.Value})
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`).FindSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no CSRF token in the dashboard: %d %s", page.Status, page.Body)
	}
	session := map[string]string{"Cookie": cookie.Name + "=" + cookie.Value, "Sec-Fetch-Site": "same-origin"}
	small := "id,provider_ref,type,amount,fee,currency\ntxn_dash,,fee,0,0.05,EUR\n"
	if st, _, out := post("?format=generic&provider=mock", "text/csv", small, session); st != http.StatusUnauthorized {
		t.Errorf("dashboard upload without its CSRF token: status %d, %v; want 401", st, out)
	}
	session[httpd.CSRFHeader] = string(m[1])
	if st, _, out := post("?format=generic&provider=mock&name=dash.csv", "text/csv", small, session); st != http.StatusCreated || out["posted"] != float64(1) {
		t.Errorf("dashboard upload: status %d, %v; want 201, one line posted", st, out)
	}

	// Another route keeps server.max_body.
	r, err := in.Send("POST", "/v1/payments", []byte(`{"order_id":"`+strings.Repeat("x", httpd.DefaultMaxBody)+`","amount":100,"currency":"EUR"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a create larger than server.max_body: status %d, want 413", r.Status)
	}
}
