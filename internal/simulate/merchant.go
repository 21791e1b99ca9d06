package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"

	svix "github.com/svix/svix-webhooks/go"
)

// Merchant is a merchant's endpoint for paystate's signed webhooks: it
// verifies each delivery with the Standard Webhooks library (not
// paystate's code) and counts what it accepted by webhook-id and by
// payment and event type, so that an effect applied twice shows. The
// simulation and the crash loop run one. It is safe for concurrent use.
type Merchant struct {
	verifier *svix.Webhook

	mu       sync.Mutex
	byID     map[string]int             // webhook-id → deliveries
	byPair   map[string]map[string]bool // "payment_id type" → webhook ids
	rejected []string                   // why deliveries failed verification
}

// NewMerchant returns a merchant whose webhook secret is secret (whsec_...).
func NewMerchant(secret string) (*Merchant, error) {
	v, err := svix.NewWebhook(secret)
	if err != nil {
		return nil, err
	}
	return &Merchant{verifier: v, byID: map[string]int{}, byPair: map[string]map[string]bool{}}, nil
}

// ServeHTTP takes one delivery: 204 if it verifies, else 400.
func (m *Merchant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := m.verifier.Verify(body, r.Header); err != nil {
		m.mu.Lock()
		m.rejected = append(m.rejected, err.Error())
		m.mu.Unlock()
		w.WriteHeader(400)
		return
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			PaymentID string `json:"payment_id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	id := r.Header.Get("webhook-id")
	pair := ev.Data.PaymentID + " " + ev.Type
	m.mu.Lock()
	m.byID[id]++
	if m.byPair[pair] == nil {
		m.byPair[pair] = map[string]bool{}
	}
	m.byPair[pair][id] = true
	m.mu.Unlock()
	w.WriteHeader(204)
}

// Events is the number of distinct webhooks (by webhook-id) accepted for
// a payment and an event type.
func (m *Merchant) Events(paymentID, typ string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byPair[paymentID+" "+typ])
}

// Twice describes each effect applied more than once, sorted: a webhook
// delivered again after it was accepted, or two webhooks for one payment
// and event type.
func (m *Merchant) Twice() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, n := range m.byID {
		if n > 1 {
			out = append(out, fmt.Sprintf("merchant webhook %s delivered %d times", id, n))
		}
	}
	for pair, ids := range m.byPair {
		if len(ids) > 1 {
			out = append(out, fmt.Sprintf("merchant got %d events for %s", len(ids), pair))
		}
	}
	sort.Strings(out)
	return out
}

// Rejected says why each delivery that failed verification failed.
func (m *Merchant) Rejected() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.rejected...)
}
