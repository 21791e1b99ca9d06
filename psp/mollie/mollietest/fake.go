// Package mollietest is a fake of Mollie's Payments API for tests: an
// HTTP server on 127.0.0.1 that answers from the example JSON the client
// library ships (github.com/VictorAvelar/mollie-api-go/v4/testdata),
// adjusted to the payments, refunds and chargebacks it holds. Its state is
// set by tests (SetStatus, AddChargeback, SetRefundStatus), and it counts
// the requests it serves, so a test can tell how many fetches paystate
// made.
package mollietest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictorAvelar/mollie-api-go/v4/testdata"
)

// APIKey is the key the fake accepts (Authorization: Bearer APIKey).
const APIKey = "test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM"

// Payment is a Mollie payment the fake holds.
type Payment struct {
	ID          string
	Status      string
	Value       string // the amount as Mollie writes it ("10.00")
	Currency    string
	Description string
	RedirectURL string
	WebhookURL  string
	Metadata    map[string]any
	IdemKey     string
	Refunds     []*Refund
	Chargebacks []*Chargeback
}

// Refund is a refund the fake holds.
type Refund struct {
	ID       string
	Status   string
	Value    string
	Currency string
	Metadata map[string]any
	IdemKey  string
}

// Chargeback is a chargeback the fake holds.
type Chargeback struct {
	ID       string
	Value    string
	Currency string
	Reversed bool
}

// Fake is the fake Mollie API.
type Fake struct {
	*httptest.Server

	mu       sync.Mutex
	payments map[string]*Payment
	byKey    map[string]string // Idempotency-Key → payment id
	refKeys  map[string]*Refund
	seq      int
	requests map[string]int // "METHOD /path" with ids as {id}
	fail     int            // answer the next fail requests with a 500
	headers  []http.Header  // the headers of every POST
}

// New starts a fake; it is closed at the test's cleanup.
func New(tb interface {
	Cleanup(func())
	Helper()
}) *Fake {
	tb.Helper()
	f := &Fake{payments: map[string]*Payment{}, byKey: map[string]string{}, refKeys: map[string]*Refund{}, requests: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(f.Close)
	return f
}

// Requests returns how many requests the fake served for a route
// ("GET /v2/payments/{id}"), "" for all of them.
func (f *Fake) Requests(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if route == "" {
		n := 0
		for _, c := range f.requests {
			n += c
		}
		return n
	}
	return f.requests[route]
}

// PostHeaders returns the headers of every POST the fake served.
func (f *Fake) PostHeaders() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.headers...)
}

// Fail makes the next n requests fail with Mollie's 500 example.
func (f *Fake) Fail(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = n
}

// Payment returns a copy of a held payment and whether it exists.
func (f *Fake) Payment(id string) (Payment, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.payments[id]
	if !ok {
		return Payment{}, false
	}
	return *p, true
}

// Payments returns how many payments the fake holds.
func (f *Fake) Payments() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.payments)
}

// SetStatus sets a held payment's status ("paid", "failed", ...).
func (f *Fake) SetStatus(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payments[id].Status = status
}

// Put stores a payment as Mollie would hold it (a payment made elsewhere).
func (f *Fake) Put(p Payment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payments[p.ID] = &p
}

// PutAs makes a fetch of id answer p, which may name another id (a
// contradicting answer, for tests of paystate's evidence checks).
func (f *Fake) PutAs(id string, p Payment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payments[id] = &p
}

// AddChargeback adds a chargeback of value to a held payment and returns
// its id.
func (f *Fake) AddChargeback(paymentID, value string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	p := f.payments[paymentID]
	cb := &Chargeback{ID: fmt.Sprintf("chb_fake%d", f.seq), Value: value, Currency: p.Currency}
	p.Chargebacks = append(p.Chargebacks, cb)
	return cb.ID
}

// ReverseChargeback marks a chargeback reversed.
func (f *Fake) ReverseChargeback(paymentID, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cb := range f.payments[paymentID].Chargebacks {
		if cb.ID == id {
			cb.Reversed = true
		}
	}
}

// SetRefundStatus sets the status of every refund of a payment.
func (f *Fake) SetRefundStatus(paymentID, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.payments[paymentID].Refunds {
		r.Status = status
	}
}

// route names a request's path with its ids replaced.
func route(method, path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range parts {
		if i%2 == 0 && i > 0 && s != "" {
			parts[i] = "{id}"
		}
	}
	return method + " /" + strings.Join(parts, "/")
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[route(r.Method, r.URL.Path)]++
	w.Header().Set("Content-Type", "application/hal+json")
	if r.Header.Get("Authorization") != "Bearer "+APIKey {
		writeError(w, http.StatusUnauthorized, testdata.UnauthorizedErrorResponse, "")
		return
	}
	if f.fail > 0 {
		f.fail--
		writeError(w, http.StatusInternalServerError, testdata.InternalServerErrorResponse, "")
		return
	}
	if r.Method == http.MethodPost {
		f.headers = append(f.headers, r.Header.Clone())
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 2 || parts[0] != "v2" || parts[1] != "payments" {
		writeError(w, http.StatusNotFound, testdata.NotFoundErrorResponse, "No such route.")
		return
	}
	switch {
	case len(parts) == 2 && r.Method == http.MethodPost:
		f.create(w, r)
	case len(parts) == 3 && r.Method == http.MethodGet:
		if p := f.find(w, parts[2]); p != nil {
			writeJSON(w, http.StatusOK, paymentJSON(p))
		}
	case len(parts) == 3 && r.Method == http.MethodDelete:
		if p := f.find(w, parts[2]); p != nil {
			if p.Status != "open" {
				writeError(w, http.StatusUnprocessableEntity, testdata.UnprocessableEntityErrorResponse, "The payment cannot be canceled.")
				return
			}
			p.Status = "canceled"
			writeJSON(w, http.StatusOK, paymentJSON(p))
		}
	case len(parts) == 4 && parts[3] == "refunds" && r.Method == http.MethodPost:
		if p := f.find(w, parts[2]); p != nil {
			f.refund(w, r, p)
		}
	case len(parts) == 4 && parts[3] == "refunds" && r.Method == http.MethodGet:
		if p := f.find(w, parts[2]); p != nil {
			writeJSON(w, http.StatusOK, listJSON(testdata.ListPaymentRefundsResponse, "refunds", p, p.Refunds, refundJSON))
		}
	case len(parts) == 5 && parts[3] == "refunds" && r.Method == http.MethodGet:
		if p := f.find(w, parts[2]); p != nil {
			for _, re := range p.Refunds {
				if re.ID == parts[4] {
					writeJSON(w, http.StatusOK, refundJSON(p, re))
					return
				}
			}
			writeError(w, http.StatusNotFound, testdata.NotFoundErrorResponse, "No refund exists with token "+parts[4]+".")
		}
	case len(parts) == 4 && parts[3] == "chargebacks" && r.Method == http.MethodGet:
		if p := f.find(w, parts[2]); p != nil {
			writeJSON(w, http.StatusOK, listJSON(testdata.ListChargebacksResponse, "chargebacks", p, p.Chargebacks, chargebackJSON))
		}
	default:
		writeError(w, http.StatusNotFound, testdata.NotFoundErrorResponse, "No such route.")
	}
}

// find returns a held payment, or answers Mollie's 404.
func (f *Fake) find(w http.ResponseWriter, id string) *Payment {
	p, ok := f.payments[id]
	if !ok {
		writeError(w, http.StatusNotFound, testdata.NotFoundErrorResponse, "No payment exists with token "+id+".")
		return nil
	}
	return p
}

// create makes a payment; a repeated Idempotency-Key answers the first.
func (f *Fake) create(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if id, ok := f.byKey[key]; ok && key != "" {
		writeJSON(w, http.StatusCreated, paymentJSON(f.payments[id]))
		return
	}
	var in struct {
		Amount      struct{ Currency, Value string }
		Description string
		RedirectURL string `json:"redirectUrl"`
		WebhookURL  string `json:"webhookUrl"`
		Metadata    map[string]any
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &in); err != nil || in.Amount.Value == "" || in.Description == "" {
		writeError(w, http.StatusUnprocessableEntity, testdata.UnprocessableEntityErrorResponse, "The amount and description are required.")
		return
	}
	f.seq++
	p := &Payment{
		ID: fmt.Sprintf("tr_fake%d", f.seq), Status: "open", Value: in.Amount.Value, Currency: in.Amount.Currency,
		Description: in.Description, RedirectURL: in.RedirectURL, WebhookURL: in.WebhookURL, Metadata: in.Metadata, IdemKey: key,
	}
	f.payments[p.ID] = p
	if key != "" {
		f.byKey[key] = p.ID
	}
	writeJSON(w, http.StatusCreated, paymentJSON(p))
}

// refund makes a refund; a repeated Idempotency-Key answers the first.
func (f *Fake) refund(w http.ResponseWriter, r *http.Request, p *Payment) {
	key := r.Header.Get("Idempotency-Key")
	if re, ok := f.refKeys[key]; ok && key != "" {
		writeJSON(w, http.StatusCreated, refundJSON(p, re))
		return
	}
	var in struct {
		Amount   struct{ Currency, Value string }
		Metadata map[string]any
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &in); err != nil || in.Amount.Value == "" {
		writeError(w, http.StatusUnprocessableEntity, testdata.UnprocessableEntityErrorResponse, "The amount is required.")
		return
	}
	f.seq++
	re := &Refund{ID: fmt.Sprintf("re_fake%d", f.seq), Status: "pending", Value: in.Amount.Value, Currency: in.Amount.Currency, Metadata: in.Metadata, IdemKey: key}
	p.Refunds = append(p.Refunds, re)
	if key != "" {
		f.refKeys[key] = re
	}
	writeJSON(w, http.StatusCreated, refundJSON(p, re))
}

// fixture decodes one of the library's examples.
func fixture(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(fmt.Sprintf("mollietest: a fixture of the client library does not decode: %v", err))
	}
	return m
}

func link(href string) map[string]any {
	return map[string]any{"href": href, "type": "application/hal+json"}
}

// paymentJSON is the library's GetPaymentResponse, adjusted to p.
func paymentJSON(p *Payment) map[string]any {
	m := fixture(testdata.GetPaymentResponse)
	m["id"], m["status"], m["description"] = p.ID, p.Status, p.Description
	m["amount"] = map[string]any{"value": p.Value, "currency": p.Currency}
	m["redirectUrl"], m["webhookUrl"] = p.RedirectURL, p.WebhookURL
	m["metadata"] = p.Metadata
	m["isCancelable"] = p.Status == "open"
	links := m["_links"].(map[string]any)
	links["self"] = link("https://api.mollie.com/v2/payments/" + p.ID)
	links["dashboard"] = link("https://www.mollie.com/dashboard/org_12345678/payments/" + p.ID)
	if p.Status == "open" {
		links["checkout"] = map[string]any{"href": "https://www.mollie.com/checkout/select-method/" + strings.TrimPrefix(p.ID, "tr_"), "type": "text/html"}
	} else {
		delete(links, "checkout")
	}
	if p.Status == "paid" {
		m["paidAt"] = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(time.RFC3339)
	}
	if len(p.Refunds) > 0 {
		links["refunds"] = link("https://api.mollie.com/v2/payments/" + p.ID + "/refunds")
	}
	if len(p.Chargebacks) > 0 {
		links["chargebacks"] = link("https://api.mollie.com/v2/payments/" + p.ID + "/chargebacks")
	}
	return m
}

// refundJSON is the library's GetPaymentRefundResponse, adjusted to re.
func refundJSON(p *Payment, re *Refund) map[string]any {
	m := fixture(testdata.GetPaymentRefundResponse)
	m["id"], m["status"], m["paymentId"] = re.ID, re.Status, p.ID
	m["amount"] = map[string]any{"value": re.Value, "currency": re.Currency}
	m["metadata"] = re.Metadata
	m["_links"].(map[string]any)["self"] = link("https://api.mollie.com/v2/payments/" + p.ID + "/refunds/" + re.ID)
	return m
}

// chargebackJSON is the library's GetChargebackResponse, adjusted to cb.
func chargebackJSON(p *Payment, cb *Chargeback) map[string]any {
	m := fixture(testdata.GetChargebackResponse)
	m["id"], m["paymentId"] = cb.ID, p.ID
	m["amount"] = map[string]any{"value": cb.Value, "currency": cb.Currency}
	m["settlementAmount"] = map[string]any{"value": "-" + cb.Value, "currency": cb.Currency}
	m["reversedAt"] = nil
	if cb.Reversed {
		m["reversedAt"] = time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC).Format(time.RFC3339)
	}
	return m
}

// listJSON is one of the library's list examples holding a payment's
// items, each rendered by render.
func listJSON[T any](example, key string, p *Payment, items []T, render func(*Payment, T) map[string]any) map[string]any {
	list := make([]any, 0, len(items))
	for _, it := range items {
		list = append(list, render(p, it))
	}
	m := fixture(example)
	m["count"] = len(list)
	m["_embedded"] = map[string]any{key: list}
	links := maps.Clone(m["_links"].(map[string]any))
	links["next"] = nil
	m["_links"] = links
	return m
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	// The library reads an error's body only when Content-Length says it has one.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeError answers one of the library's error examples, with its detail
// replaced when detail is set.
func writeError(w http.ResponseWriter, code int, example, detail string) {
	m := fixture(example)
	if detail != "" {
		m["detail"] = detail
		delete(m, "field")
	}
	writeJSON(w, code, m)
}
