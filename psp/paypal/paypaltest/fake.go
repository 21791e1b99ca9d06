// Package paypaltest fakes PayPal for tests: its REST API on 127.0.0.1
// (Orders v2, captures and refunds of Payments v2, OAuth2 tokens and
// verify-webhook-signature), answering in the shapes of PayPal's published
// OpenAPI documents (github.com/paypal/paypal-rest-api-specifications,
// Apache-2.0; the examples copied from them are in testdata/, with the
// licence notice), a test certificate authority that issues the webhook
// signing certificate, an https host that serves it, and signed webhook
// events of PayPal's envelope.
package paypaltest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/paypal"
)

// Credentials the Fake accepts.
const (
	ClientID = "AeTestClientID"
	Secret   = "EGtestSecret"
	Token    = "A21AAtestaccesstoken"
)

// Order is the Fake's order.
type Order struct {
	ID        string
	Status    string // CREATED, APPROVED, COMPLETED, VOIDED, PAYER_ACTION_REQUIRED
	Amount    string // PayPal's decimal string
	Currency  string
	CustomID  string
	InvoiceID string
	ReturnURL string
	Capture   *Capture
}

// Capture is an order's capture.
type Capture struct {
	ID       string
	Status   string
	Refunded int64 // minor units
}

// Request is a request the Fake received.
type Request struct {
	Method, Path string
	RequestID    string // PayPal-Request-Id
	Body         []byte
}

// Fake is PayPal's REST API on 127.0.0.1. Orders keep their state; the
// buyer's approval is the test's (Approve); PayPal-Request-Id works as at
// PayPal (a repeated id replays the first answer: the same order, capture
// or refund, none made again). Every request is recorded. The Fake keeps
// request ids for as long as it runs; PayPal keeps them for a while
// (paypal.RefundKeyRetention for refunds).
type Fake struct {
	srv *httptest.Server

	mu            sync.Mutex
	orders        map[string]*Order
	invoices      map[string]string // invoice_id → order id
	captures      map[string]string // capture id → order id
	refunds       map[string]map[string]any
	replies       map[string]reply // PayPal-Request-Id → first answer
	reqs          []Request
	captureStatus string
	captureCalls  int // captures performed (not replays)
	refundCalls   int // refunds performed (not replays)
	loseRefund    bool
	hold          chan struct{}
	holdBefore    bool // hold a capture before performing it
	held          chan string
	verifier      *Signer
	n             int
}

type reply struct {
	code int
	body []byte
}

// NewFake starts a Fake, closed at the end of the test.
func NewFake(tb testing.TB) *Fake {
	f := StartFake()
	tb.Cleanup(f.Close)
	return f
}

// StartFake starts a Fake; the caller closes it.
func StartFake() *Fake {
	f := &Fake{
		orders: map[string]*Order{}, invoices: map[string]string{}, captures: map[string]string{},
		refunds: map[string]map[string]any{}, replies: map[string]reply{},
		captureStatus: "COMPLETED",
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Close stops the Fake.
func (f *Fake) Close() {
	f.mu.Lock()
	if f.hold != nil {
		close(f.hold)
		f.hold = nil
	}
	f.mu.Unlock()
	f.srv.Close()
}

// URL is the API base (providers.paypal.api_base).
func (f *Fake) URL() string { return f.srv.URL }

// Requests returns the requests received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// Find returns the requests with method whose path ends with suffix.
func (f *Fake) Find(method, suffix string) []Request {
	var out []Request
	for _, r := range f.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// CaptureCalls is how many captures the Fake performed (a replayed
// PayPal-Request-Id or a refused capture is not one).
func (f *Fake) CaptureCalls() int { return f.read(&f.captureCalls) }

// CaptureIDOf is the id the Fake gives the capture of order orderID (an
// order with intent CAPTURE has one), and Event's capture id of an event
// about that order: "3C" and the order id after its "5O".
func CaptureIDOf(orderID string) string { return "3C" + strings.TrimPrefix(orderID, "5O") }

// CaptureID is the id of an order's capture, "" if it has none.
func (f *Fake) CaptureID(orderID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.orders[orderID]; ok && o.Capture != nil {
		return o.Capture.ID
	}
	return ""
}

// RefundCalls is how many refunds the Fake performed (a replayed
// PayPal-Request-Id or a refused refund is not one).
func (f *Fake) RefundCalls() int { return f.read(&f.refundCalls) }

// read reads one of the Fake's counters.
func (f *Fake) read(n *int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *n
}

// LoseRefundAnswer makes the next refund be performed and its answer lost:
// PayPal refunds and keeps the answer under the request id, the
// connection is dropped before the caller reads it.
func (f *Fake) LoseRefundAnswer() {
	f.mu.Lock()
	f.loseRefund = true
	f.mu.Unlock()
}

// Approve makes the buyer approve an order.
func (f *Fake) Approve(orderID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.orders[orderID]; ok && (o.Status == "CREATED" || o.Status == "PAYER_ACTION_REQUIRED") {
		o.Status = "APPROVED"
	}
}

// SetCaptureStatus sets the status of the next captures (COMPLETED by
// default; PENDING, DECLINED, FAILED).
func (f *Fake) SetCaptureStatus(s string) {
	f.mu.Lock()
	f.captureStatus = s
	f.mu.Unlock()
}

// SetVerifier makes verify-webhook-signature check signatures with s's
// key (without it every verification is FAILURE).
func (f *Fake) SetVerifier(s *Signer) {
	f.mu.Lock()
	f.verifier = s
	f.mu.Unlock()
}

// HoldCaptureAnswers makes every capture be performed and then its answer
// held: the order is captured at PayPal, the caller waits. The order id of
// each held capture is sent on the channel returned; Close (or
// ReleaseCaptures) lets the answers go.
func (f *Fake) HoldCaptureAnswers() <-chan string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold, f.held, f.holdBefore = make(chan struct{}), make(chan string, 16), false
	return f.held
}

// HoldCaptureRequests makes every capture request wait and then be lost
// before PayPal performs it (a process killed while it waits, a request
// that never arrived): the order stays APPROVED and the connection is
// dropped. The order id of each held request is sent on the channel
// returned; after ReleaseCaptures, captures are performed again.
func (f *Fake) HoldCaptureRequests() <-chan string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold, f.held, f.holdBefore = make(chan struct{}), make(chan string, 16), true
	return f.held
}

// ReleaseCaptures lets held capture answers go, and holds no more.
func (f *Fake) ReleaseCaptures() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hold != nil {
		close(f.hold)
		f.hold = nil
	}
}

func (f *Fake) newID(prefix string) string {
	f.n++
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return strings.ToUpper(fmt.Sprintf("%s%02d%s", prefix, f.n%100, hex.EncodeToString(b)))[:17]
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rid := r.Header.Get("PayPal-Request-Id")
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, RequestID: rid, Body: body})
	f.mu.Unlock()

	if r.URL.Path == "/v1/oauth2/token" {
		id, secret, ok := r.BasicAuth()
		if !ok || id != ClientID || secret != Secret {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "Client Authentication failed"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"scope": "https://uri.paypal.com/services/payments/payment", "access_token": Token, "token_type": "Bearer", "app_id": "APP-80W284485P519543T", "expires_in": 32400, "nonce": "2026-01-01T00:00:00Z"})
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+Token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"name": "AUTHENTICATION_FAILURE", "message": "Authentication failed due to invalid authentication credentials or a missing Authorization header."})
		return
	}

	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	f.mu.Lock()
	if hold := f.hold; hold != nil && f.holdBefore && r.Method == http.MethodPost && len(parts) == 5 && parts[4] == "capture" {
		f.mu.Unlock()
		f.held <- parts[3]
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		// The request is lost: never performed, its connection dropped.
		panic(http.ErrAbortHandler)
	}
	key := r.Method + " " + r.URL.Path + " " + rid
	if rep, ok := f.replies[key]; ok && rid != "" {
		f.mu.Unlock()
		writeRaw(w, rep.code, rep.body)
		return
	}
	code, v, held := f.route(r.Method, parts, body)
	b, _ := json.Marshal(v)
	if rid != "" && code < 500 {
		f.replies[key] = reply{code, b}
	}
	if f.loseRefund && code == http.StatusCreated && len(parts) == 5 && parts[2] == "captures" && parts[4] == "refund" {
		f.loseRefund = false
		f.mu.Unlock()
		panic(http.ErrAbortHandler) // refunded; the answer never leaves
	}
	hold := f.hold
	if f.holdBefore {
		hold = nil
	}
	f.mu.Unlock()
	if held != "" && hold != nil {
		f.held <- held
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	writeRaw(w, code, b)
}

// route answers a request; held is the order id of a capture performed.
func (f *Fake) route(method string, parts []string, body []byte) (code int, v any, held string) {
	switch {
	case method == http.MethodPost && len(parts) == 3 && parts[0] == "v2" && parts[1] == "checkout" && parts[2] == "orders":
		code, v = f.createOrder(body)
		return code, v, ""
	case method == http.MethodGet && len(parts) == 4 && parts[2] == "orders":
		o, ok := f.orders[parts[3]]
		if !ok {
			return notFound()
		}
		return http.StatusOK, o.json(), ""
	case method == http.MethodPost && len(parts) == 5 && parts[2] == "orders" && parts[4] == "capture":
		return f.capture(parts[3])
	case method == http.MethodPost && len(parts) == 5 && parts[1] == "payments" && parts[2] == "captures" && parts[4] == "refund":
		code, v = f.refund(parts[3], body)
		return code, v, ""
	case method == http.MethodGet && len(parts) == 4 && parts[1] == "payments" && parts[2] == "refunds":
		re, ok := f.refunds[parts[3]]
		if !ok {
			return notFound()
		}
		return http.StatusOK, re, ""
	case method == http.MethodPost && strings.Join(parts, "/") == "v1/notifications/verify-webhook-signature":
		return http.StatusOK, map[string]any{"verification_status": f.verify(body)}, ""
	}
	return notFound()
}

func notFound() (int, any, string) {
	return http.StatusNotFound, map[string]any{
		"name": "RESOURCE_NOT_FOUND", "message": "The specified resource does not exist.", "debug_id": "90957fca61718",
		"details": []map[string]any{{"issue": "INVALID_RESOURCE_ID", "description": "Specified resource ID does not exist. Please check the resource ID and try again."}},
	}, ""
}

func unprocessable(issue, desc string) (int, any) {
	return http.StatusUnprocessableEntity, map[string]any{
		"name": "UNPROCESSABLE_ENTITY", "message": "The requested action could not be performed, semantically incorrect, or failed business validation.",
		"debug_id": "b2f3a0c8e1d4c", "details": []map[string]any{{"issue": issue, "description": desc}},
	}
}

func (f *Fake) createOrder(body []byte) (int, any) {
	var req struct {
		Intent        string `json:"intent"`
		PurchaseUnits []struct {
			Amount struct {
				CurrencyCode string `json:"currency_code"`
				Value        string `json:"value"`
			} `json:"amount"`
			CustomID  string `json:"custom_id"`
			InvoiceID string `json:"invoice_id"`
		} `json:"purchase_units"`
		ApplicationContext struct {
			ReturnURL string `json:"return_url"`
		} `json:"application_context"`
		PaymentSource struct {
			PayPal struct {
				ExperienceContext struct {
					ReturnURL string `json:"return_url"`
				} `json:"experience_context"`
			} `json:"paypal"`
		} `json:"payment_source"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.PurchaseUnits) != 1 || req.Intent != "CAPTURE" {
		return http.StatusBadRequest, map[string]any{"name": "INVALID_REQUEST", "message": "Request is not well-formed, syntactically incorrect, or violates schema.", "debug_id": "ab27c4ddc9e1f"}
	}
	u := req.PurchaseUnits[0]
	if _, err := pay.ParseAmount(u.Amount.Value, u.Amount.CurrencyCode); err != nil || u.Amount.CurrencyCode == "" {
		return unprocessable("INVALID_PARAMETER_VALUE", "The value of a field is invalid.")
	}
	if u.InvoiceID != "" {
		if _, dup := f.invoices[u.InvoiceID]; dup {
			return unprocessable("DUPLICATE_INVOICE_ID", "Duplicate Invoice ID detected. To avoid a potential duplicate transaction your account setting requires that Invoice Id be unique for each transaction.")
		}
	}
	o := &Order{
		ID: f.newID("5O"), Status: "PAYER_ACTION_REQUIRED", Amount: u.Amount.Value, Currency: u.Amount.CurrencyCode,
		CustomID: u.CustomID, InvoiceID: u.InvoiceID, ReturnURL: req.ApplicationContext.ReturnURL,
	}
	if req.PaymentSource.PayPal.ExperienceContext.ReturnURL == "" {
		o.Status = "CREATED" // approve link, not payer-action
	}
	f.orders[o.ID] = o
	if u.InvoiceID != "" {
		f.invoices[u.InvoiceID] = o.ID
	}
	return http.StatusCreated, o.json()
}

func (f *Fake) capture(orderID string) (int, any, string) {
	o, ok := f.orders[orderID]
	if !ok {
		return notFound()
	}
	switch o.Status {
	case "APPROVED":
	case "COMPLETED":
		code, v := unprocessable("ORDER_ALREADY_CAPTURED", "Order already captured.If 'intent=CAPTURE' only one capture per order is allowed.")
		return code, v, ""
	default:
		code, v := unprocessable("ORDER_NOT_APPROVED", "Payer has not yet approved the Order for payment. Please redirect the payer to the 'rel':'approve' url returned as part of the HATEOAS links within the Create Order call or provide a valid payment_source in the request.")
		return code, v, ""
	}
	f.captureCalls++
	o.Status = "COMPLETED"
	o.Capture = &Capture{ID: CaptureIDOf(o.ID), Status: f.captureStatus}
	f.captures[o.Capture.ID] = o.ID
	return http.StatusCreated, o.json(), o.ID
}

func (f *Fake) refund(captureID string, body []byte) (int, any) {
	oid, ok := f.captures[captureID]
	if !ok {
		code, v, _ := notFound()
		return code, v
	}
	o := f.orders[oid]
	var req struct {
		Amount *struct {
			CurrencyCode string `json:"currency_code"`
			Value        string `json:"value"`
		} `json:"amount"`
		CustomID string `json:"custom_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return http.StatusBadRequest, map[string]any{"name": "INVALID_REQUEST", "message": "Request is not well-formed, syntactically incorrect, or violates schema."}
	}
	total, _ := pay.ParseAmount(o.Amount, o.Currency)
	amount := total - o.Capture.Refunded
	value, cur := paypal.Value(amount, o.Currency), o.Currency
	if req.Amount != nil {
		v, err := pay.ParseAmount(req.Amount.Value, req.Amount.CurrencyCode)
		if err != nil || req.Amount.CurrencyCode != o.Currency {
			return unprocessable("INVALID_PARAMETER_VALUE", "The value of a field is invalid.")
		}
		amount, value, cur = v, req.Amount.Value, req.Amount.CurrencyCode
	}
	if amount <= 0 || amount > total-o.Capture.Refunded {
		return unprocessable("REFUND_AMOUNT_EXCEEDED", "The refund amount must be less than or equal to the capture amount that has not yet been refunded.")
	}
	id := f.newID("1J")
	const status = "COMPLETED" // the Fake's refunds complete at once
	f.refundCalls++
	o.Capture.Refunded += amount
	if o.Capture.Refunded == total {
		o.Capture.Status = "REFUNDED"
	} else {
		o.Capture.Status = "PARTIALLY_REFUNDED"
	}
	re := map[string]any{
		"id": id, "status": status, "amount": map[string]any{"currency_code": cur, "value": value},
		"custom_id": req.CustomID, "invoice_id": o.InvoiceID,
		"links": []map[string]any{
			{"href": f.srv.URL + "/v2/payments/refunds/" + id, "rel": "self", "method": "GET"},
			{"href": f.srv.URL + "/v2/payments/captures/" + captureID, "rel": "up", "method": "GET"},
		},
	}
	f.refunds[id] = re
	return http.StatusCreated, re
}

// verify answers verify-webhook-signature: SUCCESS if the transmission
// fields and webhook_event carry a signature of the verifier's key.
func (f *Fake) verify(body []byte) string {
	var req struct {
		TransmissionID   string          `json:"transmission_id"`
		TransmissionTime string          `json:"transmission_time"`
		TransmissionSig  string          `json:"transmission_sig"`
		WebhookID        string          `json:"webhook_id"`
		Event            json.RawMessage `json:"webhook_event"`
	}
	if f.verifier == nil || json.Unmarshal(body, &req) != nil {
		return "FAILURE"
	}
	sig, err := base64.StdEncoding.DecodeString(req.TransmissionSig)
	if err != nil {
		return "FAILURE"
	}
	// The event arrives re-encoded inside the request: PayPal checks its
	// own copy; the Fake checks the compacted body the signer signed.
	sum := sha256.Sum256(paypal.SignedMessage(req.TransmissionID, req.TransmissionTime, req.WebhookID, req.Event))
	if rsa.VerifyPKCS1v15(&f.verifier.Key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return "FAILURE"
	}
	return "SUCCESS"
}

// json is the order as PayPal's Orders v2 answers it.
func (o *Order) json() map[string]any {
	unit := map[string]any{
		"reference_id": "default",
		"amount":       map[string]any{"currency_code": o.Currency, "value": o.Amount},
		"payee":        map[string]any{"email_address": "merchant@example.com", "merchant_id": "C7CYMKZDG8D6E"},
		"custom_id":    o.CustomID,
		"invoice_id":   o.InvoiceID,
	}
	if o.Capture != nil {
		unit["payments"] = map[string]any{"captures": []map[string]any{{
			"id": o.Capture.ID, "status": o.Capture.Status,
			"amount":    map[string]any{"currency_code": o.Currency, "value": o.Amount},
			"custom_id": o.CustomID, "invoice_id": o.InvoiceID, "final_capture": true,
			"seller_protection": map[string]any{"status": "ELIGIBLE", "dispute_categories": []string{"ITEM_NOT_RECEIVED", "UNAUTHORIZED_TRANSACTION"}},
			"create_time":       time.Now().UTC().Format(time.RFC3339),
		}}}
	}
	links := []map[string]any{{"href": "https://api.sandbox.paypal.com/v2/checkout/orders/" + o.ID, "rel": "self", "method": "GET"}}
	switch o.Status {
	case "CREATED":
		links = append(links, map[string]any{"href": "https://www.sandbox.paypal.com/checkoutnow?token=" + o.ID, "rel": "approve", "method": "GET"})
	case "PAYER_ACTION_REQUIRED":
		links = append(links, map[string]any{"href": "https://www.sandbox.paypal.com/checkoutnow?token=" + o.ID, "rel": "payer-action", "method": "GET"})
	}
	if o.Status == "APPROVED" || o.Status == "CREATED" {
		links = append(links, map[string]any{"href": "https://api.sandbox.paypal.com/v2/checkout/orders/" + o.ID + "/capture", "rel": "capture", "method": "POST"})
	}
	return map[string]any{
		"id": o.ID, "intent": "CAPTURE", "status": o.Status,
		"purchase_units": []map[string]any{unit},
		"create_time":    time.Now().UTC().Format(time.RFC3339),
		"links":          links,
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, code, b)
}

func writeRaw(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Paypal-Debug-Id", "f3c8d2a1b7e90")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
