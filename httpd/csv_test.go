package httpd_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// csvColumns is the header row the export promises.
var csvColumns = []string{
	"id", "order_id", "amount", "currency", "status", "terminal", "version",
	"provider", "provider_ref", "customer_id", "customer_email", "created_at", "updated_at",
}

// bearer is the header of the test key.
func bearer() map[string]string { return map[string]string{"Authorization": "Bearer " + dashKey} }

// with returns hdr plus k: v.
func with(hdr map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range hdr {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// create makes a report-mode payment over the API and returns its id.
func (d *dashServer) create(body string) string {
	d.t.Helper()
	a := d.do("POST", "/v1/payments", "application/json", body, with(bearer(), "Idempotency-Key", fmt.Sprintf("k-%d", time.Now().UnixNano())))
	if a.status != http.StatusCreated {
		d.t.Fatalf("create %s: status=%d: %s", body, a.status, a.body)
	}
	var p struct{ ID string }
	if err := json.Unmarshal([]byte(a.body), &p); err != nil {
		d.t.Fatal(err)
	}
	return p.ID
}

// sync reports a status for a payment over the API.
func (d *dashServer) sync(id, body string) {
	d.t.Helper()
	if a := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", body, bearer()); a.status != http.StatusOK {
		d.t.Fatalf("sync %s %s: status=%d: %s", id, body, a.status, a.body)
	}
}

// list returns the ids of the JSON list at path.
func (d *dashServer) list(path string) []string {
	d.t.Helper()
	a := d.do("GET", path, "", "", bearer())
	if a.status != http.StatusOK {
		d.t.Fatalf("GET %s: status=%d: %s", path, a.status, a.body)
	}
	var l struct{ Data []struct{ ID string } }
	if err := json.Unmarshal([]byte(a.body), &l); err != nil {
		d.t.Fatal(err)
	}
	ids := []string{}
	for _, p := range l.Data {
		ids = append(ids, p.ID)
	}
	return ids
}

// csv fetches path with Accept: text/csv and parses the body; it fails the
// test unless the answer is 200 with the CSV media type and the header row.
func (d *dashServer) csv(path string) (answer, [][]string) {
	d.t.Helper()
	a := d.do("GET", path, "", "", with(bearer(), "Accept", "text/csv"))
	if a.status != http.StatusOK {
		d.t.Fatalf("GET %s as CSV: status=%d: %s", path, a.status, a.body)
	}
	if got := a.header.Get("Content-Type"); !strings.HasPrefix(got, "text/csv") {
		d.t.Fatalf("GET %s as CSV: Content-Type=%q, want text/csv", path, got)
	}
	rows, err := csv.NewReader(strings.NewReader(a.body)).ReadAll()
	if err != nil {
		d.t.Fatalf("GET %s: not CSV: %v\n%s", path, err, a.body)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], csvColumns) {
		d.t.Fatalf("GET %s: header row %v, want %v", path, rows, csvColumns)
	}
	return a, rows[1:]
}

func column(rows [][]string, i int) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r[i])
	}
	return out
}

func TestPayments_CSV(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	day := func(n int) string { return d.clock.Now().AddDate(0, 0, n).Format(time.DateOnly) }
	ada := d.create(`{"order_id":"o-ada","amount":1500,"currency":"EUR","customer":{"id":"cus_ada","email":"Ada@Example.com"}}`)
	d.sync(ada, `{"status":"captured","provider_ref":"psp_ada"}`)
	d.clock.Add(24 * time.Hour)
	// Waiting for the customer, with a secret the export must not carry.
	bob := d.create(`{"order_id":"o-bob","amount":2500,"currency":"USD","customer":{"id":"cus_bob"}}`)
	d.sync(bob, `{"status":"requires_action","client_secret":"cs_secret_never_exported","redirect_url":"https://psp.example/3ds/never-exported"}`)
	d.clock.Add(24 * time.Hour)
	// Merchant input a spreadsheet would run as a formula.
	evil := d.create(`{"order_id":"=HYPERLINK(\"https://evil.example\")","amount":700,"currency":"EUR","customer":{"id":"@cus","email":"+1@example.com"}}`)

	t.Run("All", func(t *testing.T) {
		a, rows := d.csv("/v1/payments")
		if got, want := column(rows, 0), []string{evil, bob, ada}; !slices.Equal(got, want) {
			t.Fatalf("ids %v, want %v (newest first)", got, want)
		}
		if got, want := column(rows, 0), d.list("/v1/payments"); !slices.Equal(got, want) {
			t.Fatalf("CSV ids %v, JSON ids %v", got, want)
		}
		created := d.do("GET", "/v1/payments/"+ada, "", "", bearer())
		var p struct {
			CreatedAt string `json:"created_at"`
			UpdatedAt string `json:"updated_at"`
		}
		_ = json.Unmarshal([]byte(created.body), &p)
		want := []string{ada, "o-ada", "1500", "EUR", "captured", "true", "2", "standard", "psp_ada", "cus_ada", "Ada@Example.com", p.CreatedAt, p.UpdatedAt}
		if !slices.Equal(rows[2], want) {
			t.Fatalf("row %v\nwant %v", rows[2], want)
		}
		if got, want := rows[1][4], "requires_action"; got != want {
			t.Fatalf("status %q, want %q", got, want)
		}
		for _, secret := range []string{"cs_secret_never_exported", "never-exported"} {
			if strings.Contains(a.body, secret) {
				t.Fatalf("the export holds a secret (%s): %s", secret, a.body)
			}
		}
		if got := a.header.Get("Content-Disposition"); !strings.HasPrefix(got, `attachment; filename="payments-`) {
			t.Errorf("Content-Disposition=%q", got)
		}
		if got, want := a.header.Get("Vary"), "Accept"; got != want {
			t.Errorf("Vary=%q, want %q", got, want)
		}
	})

	t.Run("FormulaInjection", func(t *testing.T) {
		_, rows := d.csv("/v1/payments?order_id=" + url.QueryEscape(`=HYPERLINK("https://evil.example")`))
		if len(rows) != 1 {
			t.Fatalf("rows %v, want one", rows)
		}
		for i, want := range map[int]string{1: `'=HYPERLINK("https://evil.example")`, 9: "'@cus", 10: "'+1@example.com"} {
			if got := rows[0][i]; got != want {
				t.Errorf("%s=%q, want %q", csvColumns[i], got, want)
			}
		}
	})

	t.Run("Filters", func(t *testing.T) {
		for q, want := range map[string][]string{
			"customer_email=ada@example.COM":                        {ada},
			"customer_id=cus_bob":                                   {bob},
			"customer_id=cus":                                       {},
			"created_from=" + day(-1):                               {evil, bob},
			"created_before=" + day(-1):                             {ada},
			"created_from=" + day(-1) + "&created_before=" + day(0): {bob},
			"status=captured&created_from=" + day(-2):               {ada},
		} {
			_, rows := d.csv("/v1/payments?" + q)
			if got := column(rows, 0); !slices.Equal(got, want) {
				t.Errorf("?%s: ids %v, want %v", q, got, want)
			}
			if got, json := column(rows, 0), d.list("/v1/payments?"+q); !slices.Equal(got, json) {
				t.Errorf("?%s: CSV %v, JSON %v", q, got, json)
			}
		}
	})

	t.Run("Negotiation", func(t *testing.T) {
		for accept, csv := range map[string]bool{
			"text/csv":                              true,
			"text/csv; charset=utf-8":               true,
			"text/csv, */*;q=0.1":                   true,
			"application/json;q=0.5, text/csv":      true,
			"":                                      false,
			"*/*":                                   false,
			"application/json":                      false,
			"application/json, text/csv":            false,
			"application/json, text/csv;q=0.5":      false,
			"text/csv;q=0":                          false,
			"text/*":                                false,
			"text/csv;q=nonsense, application/json": false,
		} {
			a := d.do("GET", "/v1/payments", "", "", with(bearer(), "Accept", accept))
			if got := strings.HasPrefix(a.header.Get("Content-Type"), "text/csv"); got != csv || a.status != http.StatusOK {
				t.Errorf("Accept %q: status %d, Content-Type %q; want CSV %v", accept, a.status, a.header.Get("Content-Type"), csv)
			}
		}
	})

	t.Run("Errors", func(t *testing.T) {
		for q, param := range map[string]string{
			"status=paid":         "status",
			"limit=0":             "limit",
			"limit=x":             "limit",
			"created_from=monday": "created_from",
			"cursor=not-a-cursor": "cursor",
			"customer_id=%00":     "customer_id",
			"created_from=" + day(0) + "&created_before=" + day(-1): "created_before",
		} {
			a := d.do("GET", "/v1/payments?"+q, "", "", with(bearer(), "Accept", "text/csv"))
			if a.status != http.StatusBadRequest || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
				t.Errorf("?%s: status %d, Content-Type %q; want a 400 JSON error: %s", q, a.status, a.header.Get("Content-Type"), a.body)
				continue
			}
			var e struct{ Error struct{ Param string } }
			_ = json.Unmarshal([]byte(a.body), &e)
			if got := e.Error.Param; got != param {
				t.Errorf("?%s: param %q, want %q: %s", q, got, param, a.body)
			}
		}
	})
}

// TestPayments_CSVPages exports more payments than one page holds: every
// one of them, once, in list order; limit caps the rows and cursor starts
// where a JSON page ended.
func TestPayments_CSVPages(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	const n = 3*pay.MaxListLimit + 7
	insertPayments(t, d, n, 0)
	_, rows := d.csv("/v1/payments")
	if got := len(rows); got != n {
		t.Fatalf("%d rows, want %d", got, n)
	}
	ids := column(rows, 0)
	for i := range ids {
		if want := payID(n - 1 - i); ids[i] != want {
			t.Fatalf("row %d: %s, want %s (newest first)", i, ids[i], want)
		}
	}

	_, rows = d.csv("/v1/payments?limit=7")
	if got, want := column(rows, 0), ids[:7]; !slices.Equal(got, want) {
		t.Fatalf("limit=7: %v, want %v", got, want)
	}
	_, rows = d.csv(fmt.Sprintf("/v1/payments?limit=%d", pay.MaxListLimit+3))
	if got, want := column(rows, 0), ids[:pay.MaxListLimit+3]; !slices.Equal(got, want) {
		t.Fatalf("limit=%d: %d rows", pay.MaxListLimit+3, len(got))
	}

	page := d.do("GET", "/v1/payments?limit=5", "", "", bearer())
	var p struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(page.body), &p); err != nil || p.NextCursor == "" {
		t.Fatalf("no next cursor: %v %s", err, page.body)
	}
	_, rows = d.csv("/v1/payments?cursor=" + url.QueryEscape(p.NextCursor))
	if got, want := column(rows, 0), ids[5:]; !slices.Equal(got, want) {
		t.Fatalf("after the first JSON page: %d rows starting %v, want %d starting %v", len(got), got[:1], len(want), want[:1])
	}
}

// TestPayments_CSVBroken: a page that cannot be read once the answer has
// started breaks the transfer; the client never gets a short file that
// looks complete.
func TestPayments_CSVBroken(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	// More than the sockets buffer (a few MB), so the export is still
	// reading pages when the database goes away.
	const n = 24000
	insertPayments(t, d, n, 200)
	req, _ := http.NewRequest("GET", d.base+"/v1/payments", nil)
	req.Header.Set("Authorization", "Bearer "+dashKey)
	req.Header.Set("Accept", "text/csv")
	res, err := d.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status=%d", res.StatusCode)
	}
	head := make([]byte, 1024)
	if _, err := io.ReadFull(res.Body, head); err != nil {
		t.Fatal(err)
	}
	if err := d.db.Close(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(res.Body)
	if err == nil {
		t.Fatalf("the export ended cleanly after %d bytes with %d of %d rows: want a broken transfer",
			len(head)+len(rest), bytes.Count(rest, []byte("\n")), n)
	}
	t.Logf("read %d bytes, then: %v", len(head)+len(rest), err)
}

func payID(i int) string { return fmt.Sprintf("pay_%026d", i) }

// insertPayments stores n captured payments straight into the database,
// one second apart, with order ids pad bytes long.
func insertPayments(t testing.TB, d *dashServer, n, pad int) {
	t.Helper()
	base := d.clock.Now().Add(-time.Duration(n) * time.Second)
	err := d.db.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			at := base.Add(time.Duration(i) * time.Second)
			order := fmt.Sprintf("order-%d-", i) + strings.Repeat("x", pad)
			err := tx.InsertPayment(pay.Payment{
				ID: payID(i), OrderID: order, Amount: 1000, Currency: "EUR", Provider: "standard",
				Customer: pay.Customer{ID: "cus_bulk", Email: "bulk@example.com"},
				Status:   pay.Captured, Version: 1, CreatedAt: at, UpdatedAt: at,
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPayments_CSVExport exports 20,000 payments as CSV over HTTP;
// BenchmarkPayments_CustomerSearch is a customer search that matches
// nothing among them, so it reads every payment (there is no customer
// index). Both report payments per second.
func BenchmarkPayments_CSVExport(b *testing.B) {
	d, n := benchServer(b, 20000)
	for b.Loop() {
		res := d.get(b, "/v1/payments", "text/csv")
		if got := bytes.Count(res, []byte("\n")); got != n+1 {
			b.Fatalf("%d lines, want %d", got, n+1)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "payments/s")
}

func BenchmarkPayments_CustomerSearch(b *testing.B) {
	d, n := benchServer(b, 20000)
	for b.Loop() {
		if res := d.get(b, "/v1/payments?customer_id=cus_nobody", "application/json"); !bytes.Contains(res, []byte(`"data":[]`)) {
			b.Fatalf("found something: %.200s", res)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "payments/s")
}

func benchServer(b *testing.B, n int) (*dashServer, int) {
	d := newDashServer(b, dashKey)
	insertPayments(b, d, n, 20)
	return d, n
}

// get reads path with the test key and an Accept header.
func (d *dashServer) get(tb testing.TB, path, accept string) []byte {
	a := d.do("GET", path, "", "", with(bearer(), "Accept", accept))
	if a.status != http.StatusOK {
		tb.Fatalf("GET %s: status=%d: %.300s", path, a.status, a.body)
	}
	return []byte(a.body)
}

// TestPayments_CSVLogged: the access line of a CSV export, written when the
// stream starts, says streamed=true rather than a byte count it cannot
// know, and the export's own line at info gives the rows and the bytes the
// client received.
func TestPayments_CSVLogged(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	d := newDashServerWith(t, func(s *httpd.Server) { s.Logger = zerolog.New(&logs).Level(zerolog.InfoLevel) }, dashKey)
	d.create(`{"order_id":"o-1","amount":1500,"currency":"EUR"}`)
	d.create(`{"order_id":"o-2","amount":2500,"currency":"EUR"}`)
	a := d.do("GET", "/v1/payments", "", "", with(bearer(), "Accept", "text/csv", "X-Request-Id", "csv-logged"))
	if a.status != http.StatusOK || !strings.Contains(a.body, "o-2") {
		t.Fatalf("GET /v1/payments as CSV: status=%d: %s", a.status, a.body)
	}
	// The client has read to the end, after the export wrote its line.
	var access, sent []map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if l == "" || json.Unmarshal([]byte(l), &m) != nil || m["request_id"] != "csv-logged" {
			continue
		}
		switch m["message"] {
		case "request":
			access = append(access, m)
		case "payments CSV export sent":
			sent = append(sent, m)
		}
	}
	if len(access) != 1 || access[0]["streamed"] != true || access[0]["bytes"] != nil {
		t.Errorf("access lines %v, want one with streamed=true and no bytes\n%s", access, logs.String())
	}
	if len(sent) != 1 || sent[0]["level"] != "info" || sent[0]["rows"] != float64(2) || sent[0]["bytes"] != float64(len(a.body)) {
		t.Errorf("export lines %v, want one at info with rows=2 bytes=%d\n%s", sent, len(a.body), logs.String())
	}
}
