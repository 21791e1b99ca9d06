package standard_test

import (
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/psptest"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stdwebhook"
)

// TestConformance runs the provider conformance suite against the
// report-mode provider: it calls no PSP (Create leaves the payment created,
// a refund is pending until the bridge reports it) and has no status or
// cancel API; its webhooks are the whole of its evidence.
func TestConformance(t *testing.T) {
	t.Parallel()
	sign, signRaw, mapping := psptest.StandardWebhooks(secret)
	psptest.Run(t, psptest.Harness{
		Provider: mustNew(t, standard.Config{}),
		Payment: func(id string) pay.Payment {
			return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2500, Currency: "EUR", Provider: standard.Name, Status: pay.Created, Version: 1}
		},
		// The merchant's code reports the capture (POST /v1/payments/{id}/sync).
		Capture: func(t *testing.T, p pay.Payment) pay.Payment {
			p.Status = pay.Captured
			return p
		},
		Sign:      sign,
		SignRaw:   signRaw,
		Mapping:   mapping,
		Tolerance: stdwebhook.DefaultTolerance,
		Lacks: []psptest.Feature{psptest.FeatureAPI, psptest.FeatureHTTP, psptest.FeatureStatus,
			psptest.FeatureRefundStatus, psptest.FeatureCancel},
	})
}
