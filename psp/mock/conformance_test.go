package mock_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/psptest"
	"github.com/paystate/paystate/psp/stdwebhook"
)

// TestConformance runs the provider conformance suite against the mock PSP
// (no webhook URL: its own webhooks are not the subject here).
func TestConformance(t *testing.T) {
	t.Parallel()
	p, err := mock.New(mock.Config{WebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	types := map[psptest.Kind]string{
		psptest.KindCaptured:       stdwebhook.TypeCaptured,
		psptest.KindFailed:         stdwebhook.TypeFailed,
		psptest.KindProcessing:     stdwebhook.TypeProcessing,
		psptest.KindRequiresAction: stdwebhook.TypeRequiresAction,
		psptest.KindRefunded:       stdwebhook.TypeRefunded,
		psptest.KindUnknown:        "payment.disputed",
	}
	signRaw := func(t *testing.T, id string, body []byte, at time.Time) http.Header {
		t.Helper()
		h, err := stdwebhook.Sign(secret, id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	psptest.Run(t, psptest.Harness{
		Provider: p,
		Payment: func(id string) pay.Payment {
			// Amount ending in 00: the mock captures at once.
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2500, Currency: "EUR", Provider: mock.Name, Status: pay.Created, Version: 1}
		},
		Sign: func(t *testing.T, e psptest.Event) ([]byte, http.Header, bool) {
			typ, ok := types[e.Kind]
			if !ok {
				return nil, nil, false
			}
			// Built by hand, so an unknown type can be written too.
			body := fmt.Appendf(nil, `{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"provider_ref":%q,"amount":2500,"currency":"EUR"}}`,
				e.ID, typ, e.At.Unix(), e.PaymentID, e.ProviderRef)
			return body, signRaw(t, e.ID, body, e.At), true
		},
		SignRaw:    signRaw,
		Tolerance:  stdwebhook.DefaultTolerance,
		UnknownRef: "mock_pi_unknown",
		Lacks:      []psptest.Feature{psptest.FeatureCancel},
	})
}
