package stripefake

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
)

// FakeSession is the Fake's Checkout Session.
type FakeSession struct {
	ID            string
	Amount        int64
	Currency      string
	PaymentID     string // metadata.paystate_payment_id
	Status        string // open, complete, expired
	PaymentStatus string // unpaid, paid, no_payment_required
	PaymentIntent string // "" until the customer pays
	Expires       int    // successful expire calls
}

var sessionPath = regexp.MustCompile(`^/v1/checkout/sessions/([A-Za-z0-9_]+)(/expire)?$`)

// SetSession moves a Checkout Session as Stripe does when the customer
// pays (complete, paid, with its PaymentIntent) or a delayed method ends.
// The session's PaymentIntent, if any, is made or moved along: succeeded
// when the session is paid (so it can be refunded), else processing.
func (f *Fake) SetSession(id, status, paymentStatus, intent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs, ok := f.sessions[id]
	if !ok {
		return
	}
	cs.Status, cs.PaymentStatus, cs.PaymentIntent = status, paymentStatus, intent
	if intent == "" {
		return
	}
	pi := f.intents[intent]
	if pi == nil {
		pi = &FakeIntent{ID: intent, Amount: cs.Amount, Currency: cs.Currency, PaymentID: cs.PaymentID, ClientSecret: intent + "_secret_" + randHex(12)}
		f.intents[intent] = pi
	}
	pi.Status = "processing"
	if paymentStatus == "paid" {
		pi.Status = "succeeded"
	}
}

// Session returns a copy of a Checkout Session.
func (f *Fake) Session(id string) (FakeSession, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs, ok := f.sessions[id]
	if !ok {
		return FakeSession{}, false
	}
	return *cs, true
}

// SessionOf returns a copy of the Checkout Session made for paystate's
// payment paymentID (metadata.paystate_payment_id).
func (f *Fake) SessionOf(paymentID string) (FakeSession, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cs := range f.sessions {
		if cs.PaymentID == paymentID {
			return *cs, true
		}
	}
	return FakeSession{}, false
}

// routeSession answers a Checkout Session request; ok is false for
// another path. f.mu is held.
func (f *Fake) routeSession(method, path string, form url.Values) (code int, answer any, ok bool) {
	if method == http.MethodPost && path == "/v1/checkout/sessions" {
		code, answer = f.createSession(form)
		return code, answer, true
	}
	m := sessionPath.FindStringSubmatch(path)
	if m == nil {
		return 0, nil, false
	}
	cs, found := f.sessions[m[1]]
	switch {
	case !found:
		code, answer = missing("checkout.session", m[1])
	case method == http.MethodGet && m[2] == "":
		code, answer = http.StatusOK, cs.json()
	case method == http.MethodPost && m[2] == "/expire" && cs.Status == "open":
		cs.Status = "expired"
		cs.Expires++
		code, answer = http.StatusOK, cs.json()
	case method == http.MethodPost && m[2] == "/expire":
		code, answer = http.StatusBadRequest, errorBody("invalid_request_error", "",
			"Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout Session has a status of \""+cs.Status+"\".", nil)
	default:
		return 0, nil, false
	}
	return code, answer, true
}

func (f *Fake) createSession(form url.Values) (int, any) {
	amount, err := strconv.ParseInt(form.Get("line_items[0][price_data][unit_amount]"), 10, 64)
	if err != nil || amount <= 0 || form.Get("mode") != "payment" {
		return http.StatusBadRequest, errorBody("invalid_request_error", "parameter_invalid_integer", "Invalid line_items[0][price_data][unit_amount] or mode", nil)
	}
	f.n++
	cs := &FakeSession{
		ID: "cs_test_fake" + strconv.Itoa(f.n) + randHex(4), Amount: amount,
		Currency: form.Get("line_items[0][price_data][currency]"), PaymentID: form.Get("metadata[paystate_payment_id]"),
		Status: "open", PaymentStatus: "unpaid",
	}
	f.sessions[cs.ID] = cs
	return http.StatusOK, cs.json()
}

// json is the Checkout Session as Stripe sends it, with the fields the
// provider reads.
func (cs *FakeSession) json() map[string]any {
	o := map[string]any{
		"id": cs.ID, "object": "checkout.session", "mode": "payment", "amount_total": cs.Amount, "currency": cs.Currency,
		"status": cs.Status, "payment_status": cs.PaymentStatus, "payment_intent": nil, "url": nil,
		"client_reference_id": cs.PaymentID, "metadata": map[string]string{"paystate_payment_id": cs.PaymentID},
		"livemode": false, "created": 1767323045, "expires_at": 1767326645, "payment_link": nil,
	}
	if cs.Status == "open" {
		o["url"] = "https://checkout.stripe.com/c/pay/" + cs.ID
	}
	if cs.PaymentIntent != "" {
		o["payment_intent"] = cs.PaymentIntent
	}
	return o
}
