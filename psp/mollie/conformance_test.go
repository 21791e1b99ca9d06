package mollie_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mollie"
	"github.com/paystate/paystate/psp/mollie/mollietest"
	"github.com/paystate/paystate/psp/psptest"
)

// recorder records every request the provider sends to the fake, with
// its Idempotency-Key, below the provider's own transport.
type recorder struct {
	mu    sync.Mutex
	calls []psptest.Call
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.calls = append(r.calls, psptest.Call{Method: req.Method, Path: req.URL.Path, Key: req.Header.Get("Idempotency-Key")})
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) Calls() []psptest.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]psptest.Call(nil), r.calls...)
}

// typeForm is the Mapping type of Mollie's classic webhook, a form POST
// id=tr_... that names no type of its own.
const typeForm = "form:id"

// mapping is Mollie's wire format: the classic form POST and the signed
// next-generation events. Every webhook about a payment is a trigger;
// an event about anything else (a payment link) is ignored.
var mapping = []psptest.Mapping{
	{Type: typeForm, Kind: psptest.KindPull},
	{Type: "payment.paid", Kind: psptest.KindPull},
	{Type: "payment.failed", Kind: psptest.KindPull},
	{Type: "payment-link.paid", Kind: psptest.KindUnknown},
}

// mollieStatus is the Mollie status a kind stands for.
var mollieStatus = map[psptest.Kind]string{psptest.KindProcessing: "pending", psptest.KindCaptured: "paid", psptest.KindFailed: "failed"}

func TestConformance(t *testing.T) {
	fake := mollietest.New(t)
	rec := &recorder{}
	prov, err := mollie.New(mollie.Config{
		APIKey: mollietest.APIKey, APIBase: fake.URL, WebhookURL: "https://shop.example/webhooks/mollie",
		RedirectURL: "https://shop.example/thanks", WebhookSecret: webhookSecret,
	}, &http.Client{Transport: rec, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	psptest.Run(t, psptest.Harness{
		Provider: prov,
		Payment: func(id string) pay.Payment {
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 1000, Currency: "EUR", Provider: mollie.Name, Status: pay.Created, Version: 1}
		},
		Capture: func(t *testing.T, p pay.Payment) pay.Payment {
			fake.SetStatus(p.ProviderRef, "paid")
			p.Status, p.RedirectURL = pay.Captured, ""
			return p
		},
		Sign: func(t *testing.T, e psptest.Event) ([]byte, http.Header, bool) {
			if e.Type == typeForm {
				return []byte(url.Values{"id": {e.ProviderRef}}.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, true
			}
			entity := e.ProviderRef
			if strings.HasPrefix(e.Type, "payment-link.") {
				entity = "pl_" + strings.TrimPrefix(e.ProviderRef, "tr_")
			}
			body := []byte(`{"resource":"event","id":"` + e.ID + `","type":"` + e.Type + `","entityId":"` + entity +
				`","createdAt":"` + e.At.UTC().Format(time.RFC3339) + `"}`)
			return body, sign(body), true
		},
		SignRaw: func(t *testing.T, _ string, body []byte, _ time.Time) http.Header { return sign(body) },
		Mapping: mapping,
		Calls:   rec.Calls,
		// Every id the fake has not made is unknown to it.
		UnknownRef:     "tr_unknown0000",
		IgnoresUnknown: true,
		Ref:            func(suffix string) string { return "tr_conf" + suffix },
		Trigger: &psptest.Trigger{
			Unsigned: []string{typeForm},
			Set: func(t *testing.T, ref string, e psptest.Event) {
				p, ok := fake.Payment(ref)
				if !ok {
					t.Fatalf("the fake holds no payment %s", ref)
				}
				st, ok := mollieStatus[e.Kind]
				if !ok {
					t.Fatalf("no Mollie status for %s", e.Kind)
				}
				p.ID, p.Status, p.Currency = e.ProviderRef, st, e.Currency
				p.Value = strings.TrimSuffix(pay.FormatAmount(e.Amount, e.Currency), " "+e.Currency)
				fake.PutAs(ref, p)
			},
		},
	})
}
