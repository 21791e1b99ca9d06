package stripefake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Fake is a Stripe API on 127.0.0.1 for the behaviour stripe-mock cannot
// show: PaymentIntents keep their state, their status is scripted by the
// test (SetStatus: the customer paid, the bank answered), and Idempotency-Key
// works as at Stripe (the same key with the same parameters replays the
// first answer; with other parameters it is an idempotency_error). It
// answers the endpoints the stripe provider uses: create, retrieve, cancel
// and search PaymentIntents, create, retrieve and expire Checkout Sessions
// (fake_session.go), and create (in full or in part), retrieve and list
// refunds. Every request is recorded.
type Fake struct {
	srv *httptest.Server

	mu           sync.Mutex
	createStatus func(paymentID string, amount int64) string
	refundStatus string
	intents      map[string]*FakeIntent
	sessions     map[string]*FakeSession
	refunds      map[string]map[string]any // refund id → the refund as answered
	refundOrder  []string
	keys         map[string]stored // idempotency key → first answer
	fail         []int
	drop         int
	reqs         []Request
	n            int
}

// FakeIntent is the Fake's PaymentIntent.
type FakeIntent struct {
	ID           string
	Amount       int64
	Currency     string
	PaymentID    string // metadata.paystate_payment_id
	Status       string
	ClientSecret string
	FailedTry    bool // last_payment_error is set
	Refunds      int  // refunds made
	Cancels      int  // successful cancel calls
	// AmountRefunded is what its refunds took back.
	AmountRefunded int64
}

// stored is the answer kept for an idempotency key.
type stored struct {
	fingerprint string
	code        int
	body        []byte
}

// Start starts a Fake on 127.0.0.1; Close stops it. New PaymentIntents
// are requires_payment_method and refunds succeed until the caller says
// otherwise.
func Start() *Fake {
	f := &Fake{
		refundStatus: "succeeded",
		intents:      map[string]*FakeIntent{},
		sessions:     map[string]*FakeSession{},
		refunds:      map[string]map[string]any{},
		keys:         map[string]stored{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Close stops the Fake's server.
func (f *Fake) Close() { f.srv.Close() }

// URL is the address to use as the API base.
func (f *Fake) URL() string { return f.srv.URL }

// Requests returns the requests so far, in arrival order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// Find returns the requests with the given method and path.
func (f *Fake) Find(method, path string) []Request { return Filter(f.Requests(), method, path) }

// SetCreateStatus chooses the status of each new PaymentIntent.
func (f *Fake) SetCreateStatus(fn func(paymentID string, amount int64) string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.createStatus = fn
}

// SetStatus moves a PaymentIntent to status, as Stripe does when the
// customer pays or the bank answers; an earlier failed attempt is cleared.
func (f *Fake) SetStatus(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pi, ok := f.intents[id]; ok {
		pi.Status, pi.FailedTry = status, false
	}
}

// SetFailedTry marks a failed attempt on a PaymentIntent: last_payment_error
// is set and it is requires_payment_method again.
func (f *Fake) SetFailedTry(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pi, ok := f.intents[id]; ok {
		pi.FailedTry, pi.Status = true, "requires_payment_method"
	}
}

// SetRefundStatus sets the status of the refunds made from now on
// ("succeeded", "pending", "failed", ...).
func (f *Fake) SetRefundStatus(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refundStatus = s
}

// FailNext answers the next len(codes) requests with these HTTP statuses
// and an api_error, before doing anything: the request never began at
// Stripe, so nothing is kept for its idempotency key.
func (f *Fake) FailNext(codes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = append(f.fail, codes...)
}

// DropAnswers makes the next n requests lose their answer: the Fake does
// the work (and keeps the answer for the idempotency key), then closes the
// connection without a word, as when the network fails after Stripe acted.
func (f *Fake) DropAnswers(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop += n
}

// Intent returns a copy of a PaymentIntent.
func (f *Fake) Intent(id string) (FakeIntent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi, ok := f.intents[id]
	if !ok {
		return FakeIntent{}, false
	}
	return *pi, true
}

// IntentCount returns how many PaymentIntents were created.
func (f *Fake) IntentCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.intents)
}

var intentPath = regexp.MustCompile(`^/v1/payment_intents/([A-Za-z0-9_]+)(/cancel)?$`)

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error(), nil)
		return
	}
	req := Record(r, body)

	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if len(f.fail) > 0 {
		code := f.fail[0]
		f.fail = f.fail[1:]
		writeError(w, code, "api_error", "", "scripted failure", nil)
		return
	}
	if !req.Authorized {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided", nil)
		return
	}

	// A key seen before replays its first answer, if the parameters match.
	fp := r.Method + " " + r.URL.Path + "?" + string(body)
	if k := req.IdempotencyKey; k != "" && r.Method == http.MethodPost {
		if s, ok := f.keys[k]; ok {
			if s.fingerprint != fp {
				writeError(w, http.StatusBadRequest, "idempotency_error", "",
					"Keys for idempotent requests can only be used with the same parameters they were first used with.", nil)
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, s.code, s.body)
			return
		}
	}
	code, answer := f.route(r.Method, r.URL.Path, req.Form)
	b, err := json.Marshal(answer)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "api_error", "", err.Error(), nil)
		return
	}
	if k := req.IdempotencyKey; k != "" && r.Method == http.MethodPost {
		f.keys[k] = stored{fingerprint: fp, code: code, body: b}
	}
	if f.drop > 0 {
		f.drop--
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	writeRaw(w, code, b)
}

// route answers one request; f.mu is held.
func (f *Fake) route(method, path string, form url.Values) (int, any) {
	if code, answer, ok := f.routeSession(method, path, form); ok {
		return code, answer
	}
	switch m := intentPath.FindStringSubmatch(path); {
	case method == http.MethodPost && path == "/v1/payment_intents":
		return f.createIntent(form)
	case method == http.MethodGet && path == "/v1/payment_intents/search":
		return f.search(form.Get("query"))
	case method == http.MethodPost && path == "/v1/refunds":
		return f.refund(form)
	case method == http.MethodGet && path == "/v1/refunds":
		return f.listRefunds(form.Get("payment_intent"))
	case method == http.MethodGet && strings.HasPrefix(path, "/v1/refunds/"):
		id := strings.TrimPrefix(path, "/v1/refunds/")
		re, ok := f.refunds[id]
		if !ok {
			return missing("refund", id)
		}
		return http.StatusOK, re
	case m != nil && method == http.MethodGet && m[2] == "":
		pi, ok := f.intents[m[1]]
		if !ok {
			return missing("payment_intent", m[1])
		}
		return http.StatusOK, pi.json()
	case m != nil && method == http.MethodPost && m[2] == "/cancel":
		return f.cancel(m[1])
	}
	return http.StatusNotFound, errorBody("invalid_request_error", "", "Unrecognized request URL ("+method+": "+path+").", nil)
}

func (f *Fake) createIntent(form url.Values) (int, any) {
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	if err != nil || amount <= 0 {
		return http.StatusBadRequest, errorBody("invalid_request_error", "parameter_invalid_integer", "Invalid integer: amount", nil)
	}
	currency := form.Get("currency")
	if len(currency) != 3 || strings.ToLower(currency) != currency {
		return http.StatusBadRequest, errorBody("invalid_request_error", "parameter_invalid", "Invalid currency: "+currency, nil)
	}
	f.n++
	id := fmt.Sprintf("pi_fake%04d%s", f.n, randHex(6))
	pi := &FakeIntent{
		ID: id, Amount: amount, Currency: currency,
		PaymentID:    form.Get("metadata[paystate_payment_id]"),
		Status:       "requires_payment_method",
		ClientSecret: id + "_secret_" + randHex(12),
	}
	if f.createStatus != nil {
		pi.Status = f.createStatus(pi.PaymentID, amount)
	}
	f.intents[id] = pi
	return http.StatusOK, pi.json()
}

var searchQuery = regexp.MustCompile(`^metadata\['paystate_payment_id'\]:'([^']*)'$`)

func (f *Fake) search(q string) (int, any) {
	m := searchQuery.FindStringSubmatch(q)
	if m == nil {
		return http.StatusBadRequest, errorBody("invalid_request_error", "", "Unsupported search query: "+q, nil)
	}
	data := []any{}
	for _, pi := range f.intents {
		if pi.PaymentID == m[1] {
			data = append(data, pi.json())
		}
	}
	return http.StatusOK, map[string]any{
		"object": "search_result", "url": "/v1/payment_intents/search", "has_more": false,
		"next_page": nil, "data": data,
	}
}

func (f *Fake) cancel(id string) (int, any) {
	pi, ok := f.intents[id]
	if !ok {
		return missing("payment_intent", id)
	}
	switch pi.Status {
	case "requires_payment_method", "requires_confirmation", "requires_action", "requires_capture":
		pi.Status = "canceled"
		pi.Cancels++
		return http.StatusOK, pi.json()
	}
	return http.StatusBadRequest, errorBody("invalid_request_error", "payment_intent_unexpected_state",
		"You cannot cancel this PaymentIntent because it has a status of "+pi.Status+".", pi.json())
}

func (f *Fake) refund(form url.Values) (int, any) {
	id := form.Get("payment_intent")
	pi, ok := f.intents[id]
	switch {
	case !ok:
		return missing("payment_intent", id)
	case pi.AmountRefunded >= pi.Amount:
		return http.StatusBadRequest, errorBody("invalid_request_error", "charge_already_refunded",
			"Charge for PaymentIntent "+id+" has already been refunded.", nil)
	case pi.Status != "succeeded":
		return http.StatusBadRequest, errorBody("invalid_request_error", "payment_intent_unexpected_state",
			"This PaymentIntent does not have a successful charge to refund.", nil)
	}
	amount := pi.Amount - pi.AmountRefunded // no amount: the rest
	if v := form.Get("amount"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return http.StatusBadRequest, errorBody("invalid_request_error", "parameter_invalid_integer", "Invalid integer: amount", nil)
		}
		if n > amount {
			return http.StatusBadRequest, errorBody("invalid_request_error", "amount_too_large",
				fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d)", n, amount), nil)
		}
		amount = n
	}
	pi.Refunds++
	if f.refundStatus != "failed" && f.refundStatus != "canceled" {
		pi.AmountRefunded += amount
	}
	meta := map[string]string{}
	for k, vs := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && len(vs) > 0 {
			meta[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}
	re := map[string]any{
		"id": "re_fake" + randHex(8), "object": "refund", "amount": amount, "currency": pi.Currency,
		"payment_intent": id, "status": f.refundStatus, "metadata": meta,
	}
	f.refunds[re["id"].(string)] = re
	f.refundOrder = append(f.refundOrder, re["id"].(string))
	return http.StatusOK, re
}

// listRefunds answers the refunds of a PaymentIntent, newest first, in
// one page.
func (f *Fake) listRefunds(pi string) (int, any) {
	data := []any{}
	for i := len(f.refundOrder) - 1; i >= 0; i-- {
		if re := f.refunds[f.refundOrder[i]]; pi == "" || re["payment_intent"] == pi {
			data = append(data, re)
		}
	}
	return http.StatusOK, map[string]any{"object": "list", "url": "/v1/refunds", "has_more": false, "data": data}
}

// json is the PaymentIntent as Stripe sends it, with the fields the
// provider reads.
func (pi *FakeIntent) json() map[string]any {
	o := map[string]any{
		"id": pi.ID, "object": "payment_intent", "amount": pi.Amount, "currency": pi.Currency,
		"status": pi.Status, "client_secret": pi.ClientSecret, "livemode": false, "created": 1767323045,
		"metadata": map[string]string{}, "next_action": nil, "last_payment_error": nil,
		"capture_method": "automatic_async", "payment_method_types": []string{"card"},
	}
	if pi.PaymentID != "" {
		o["metadata"] = map[string]string{"paystate_payment_id": pi.PaymentID}
	}
	if pi.Status == "requires_action" {
		o["next_action"] = map[string]any{
			"type":            "redirect_to_url",
			"redirect_to_url": map[string]any{"url": "https://hooks.stripe.com/3d_secure_2/hosted?payment_intent=" + pi.ID, "return_url": "https://shop.example.com/return"},
		}
	}
	if pi.FailedTry {
		o["last_payment_error"] = map[string]any{
			"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds",
			"message": "Your card has insufficient funds.",
		}
	}
	return o
}

func missing(object, id string) (int, any) {
	return http.StatusNotFound, errorBody("invalid_request_error", "resource_missing",
		fmt.Sprintf("No such %s: '%s'", object, id), nil)
}

func errorBody(typ, code, msg string, pi map[string]any) map[string]any {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	if pi != nil {
		e["payment_intent"] = pi
	}
	return map[string]any{"error": e}
}

func writeError(w http.ResponseWriter, code int, typ, errCode, msg string, pi map[string]any) {
	b, _ := json.Marshal(errorBody(typ, errCode, msg, pi))
	writeRaw(w, code, b)
}

func writeRaw(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
