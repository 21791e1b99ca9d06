package mock_test

import (
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/psptest"
	"github.com/paystate/paystate/psp/stdwebhook"
)

// TestConformance runs the provider conformance suite against the mock PSP
// (no webhook URL: its own webhooks are not the subject here). Its API is
// inside the process (no HTTP to record) and has no cancel.
func TestConformance(t *testing.T) {
	t.Parallel()
	p, err := mock.New(mock.Config{WebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	sign, signRaw, mapping := psptest.StandardWebhooks(secret)
	psptest.Run(t, psptest.Harness{
		Provider: p,
		Payment: func(id string) pay.Payment {
			// Amount ending in 00: the mock captures at once.
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2500, Currency: "EUR", Provider: mock.Name, Status: pay.Created, Version: 1}
		},
		OpenPayment: func(id string) pay.Payment {
			// Amount ending in 02: requires_action, the customer acts later.
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2502, Currency: "EUR", Provider: mock.Name, Status: pay.Created, Version: 1}
		},
		Sign:       sign,
		SignRaw:    signRaw,
		Mapping:    mapping,
		Tolerance:  stdwebhook.DefaultTolerance,
		UnknownRef: "mock_pi_unknown",
		Lacks:      []psptest.Feature{psptest.FeatureHTTP, psptest.FeatureCancel},
	})
}
