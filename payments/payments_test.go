package payments_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/payments"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/store/storetest"
)

// stripeAnswering returns a Stripe provider whose API answers every request
// with the given HTTP status and body, as Stripe's API does for errors.
func stripeAnswering(t *testing.T, status int, body string) pay.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	p, err := stripe.New(stripe.Config{SecretKey: "sk_test_x", WebhookSecret: "whsec_test", APIBase: srv.URL}, stripe.WithMaxNetworkRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCreate_PSPAnswers: a PSP that refuses the charge request (HTTP 400)
// is evidence that nothing was charged, and the payment fails; a PSP error
// without such evidence (HTTP 500) leaves it finalize_pending for the
// sweeper.
func TestCreate_PSPAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   pay.Status
		note   string
	}{
		{"Refused", 400, `{"error":{"type":"invalid_request_error","message":"Invalid currency: xts","param":"currency"}}`, pay.Failed, "refused"},
		{"ServerError", 500, `{"error":{"type":"api_error","message":"something went wrong"}}`, pay.FinalizePending, "lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := storetest.MustOpen(t, nil)
			svc := &payments.Service{Store: db, Finalizer: finalize.New(db),
				Providers: map[string]pay.Provider{"stripe": stripeAnswering(t, tc.status, tc.body)}, DefaultProvider: "stripe"}
			p, err := svc.Create(context.Background(), payments.CreateRequest{OrderID: "o-1", Amount: 1000, Currency: "EUR"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.Status, tc.want; got != want {
				t.Fatalf("Status=%s, want %s", got, want)
			}
			var steps []pay.Step
			db.View(context.Background(), func(tx pay.Tx) (err error) { steps, err = tx.Steps(p.ID); return err })
			if last := steps[len(steps)-1]; !strings.Contains(last.Note, tc.note) {
				t.Fatalf("last step note=%q, want it to say %q", last.Note, tc.note)
			}
		})
	}
}
