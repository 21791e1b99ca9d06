package finalize_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt/bolttest"
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
			db := bolttest.MustOpen(t, nil)
			svc := &finalize.Payments{Store: db, Finalizer: finalize.New(db),
				Providers: map[string]pay.Provider{"stripe": stripeAnswering(t, tc.status, tc.body)}, DefaultProvider: "stripe"}
			p, err := svc.Create(context.Background(), finalize.CreateRequest{OrderID: "o-1", Amount: 1000, Currency: "EUR"})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.Status, tc.want; got != want {
				t.Fatalf("Status=%s, want %s", got, want)
			}
			var steps []pay.Step
			db.View(context.Background(), func(tx store.Tx) (err error) { steps, err = tx.Steps(p.ID); return err })
			if last := steps[len(steps)-1]; !strings.Contains(last.Note, tc.note) {
				t.Fatalf("last step note=%q, want it to say %q", last.Note, tc.note)
			}
		})
	}
}

// newMock returns a mock PSP that sends no webhook anywhere.
func newMock(t *testing.T) *mock.Provider {
	t.Helper()
	p, err := mock.New(mock.Config{}, mock.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// failingStore is the real store whose Update fails on chosen calls, the
// way a full disk or a refused ledger posting fails a transaction.
type failingStore struct {
	store.Store
	calls  atomic.Int32
	failOn int32 // the 1-based Update call that fails
	// died makes every Update from failOn on fail: the process died.
	died bool
}

func (s *failingStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if n := s.calls.Add(1); n == s.failOn || (s.died && n > s.failOn) {
		return errors.New("write failed: injected")
	}
	return s.Store.Update(ctx, fn)
}

// TestCreate_FinalizeFailsAfterPSP: the PSP charged, then recording its
// answer failed. The payment must not stay created (a retry would replay
// the error, and the sweeper never looks at it): it is finalize_pending,
// for the sweeper to settle with the PSP.
func TestCreate_FinalizeFailsAfterPSP(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	fs := &failingStore{Store: db, failOn: 2} // 1: store the payment; 2: finalize the PSP answer
	psp := newMock(t)
	svc := &finalize.Payments{Store: fs, Finalizer: finalize.New(fs), Providers: map[string]pay.Provider{"mock": psp}, DefaultProvider: "mock"}
	p, err := svc.Create(context.Background(), finalize.CreateRequest{OrderID: "o-fail", Amount: 1000, Currency: "EUR"})
	if err != nil {
		t.Fatalf("Create: %v, want the payment left for the sweeper", err)
	}
	if psp.Charges(finalize.ChargeKey(p.ID)) != 1 {
		t.Fatal("the PSP was not charged")
	}
	stored, err := (&finalize.Payments{Store: db}).Get(context.Background(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stored.Status, pay.FinalizePending; got != want || p.Status != want {
		t.Fatalf("stored Status=%s, returned %s, want %s", got, p.Status, want)
	}
	var steps []pay.Step
	db.View(context.Background(), func(tx store.Tx) (err error) { steps, err = tx.Steps(p.ID); return err })
	if last := steps[len(steps)-1]; last.To != pay.FinalizePending || !strings.Contains(last.Note, "could not be recorded") {
		t.Fatalf("last step=%+v, want the move to finalize_pending saying why", last)
	}
}

// TestReport_CheckedAgainstPSP: a report of a final status is checked
// against the provider's status API before it is applied.
func TestReport_CheckedAgainstPSP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// newSvc returns a service with the mock PSP and a payment the PSP
	// captured whose answer was lost (amount ending 04): finalize_pending.
	newSvc := func(t *testing.T) (*finalize.Payments, pay.Payment) {
		t.Helper()
		db := bolttest.MustOpen(t, nil)
		svc := &finalize.Payments{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"mock": newMock(t)}, DefaultProvider: "mock"}
		p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-sync", Amount: 1504, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != pay.FinalizePending {
			t.Fatalf("Status=%s, want finalize_pending", p.Status)
		}
		return svc, p
	}

	t.Run("Contradicted", func(t *testing.T) {
		t.Parallel()
		svc, p := newSvc(t)
		_, err := svc.Report(ctx, p.ID, finalize.ReportRequest{Status: pay.Failed})
		if got, want := pay.ErrorCode(err), pay.ECONFLICT; got != want {
			t.Fatalf("ErrorCode=%q (%v), want %s", got, err, want)
		}
		if msg := pay.ErrorMessage(err); !strings.Contains(msg, "captured") || !strings.Contains(msg, "review") {
			t.Fatalf("message %q, want it to say what the PSP said and that the payment is on review", msg)
		}
		got, _ := svc.Get(ctx, p.ID)
		if got.Status != pay.FinalizePending || got.Version != p.Version {
			t.Fatalf("payment %s, want it unchanged at %s", got, p)
		}
		var item pay.ReviewItem
		if err := svc.Store.View(ctx, func(tx store.Tx) (err error) { item, err = tx.Review(p.ID); return err }); err != nil {
			t.Fatal(err)
		}
		if item.Reason != pay.ReasonSyncContradicted || item.Observed != pay.Failed || !strings.HasPrefix(item.LastPSP, "captured") {
			t.Fatalf("review item=%+v, want sync_contradicted with the PSP's answer", item)
		}
	})

	t.Run("Confirmed", func(t *testing.T) {
		t.Parallel()
		svc, p := newSvc(t)
		res, err := svc.Report(ctx, p.ID, finalize.ReportRequest{Status: pay.Captured})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Flipped || res.Payment.Status != pay.Captured {
			t.Fatalf("res=%+v, want captured", res)
		}
	})

	t.Run("StatusAPIFails", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		psp := stripeAnswering(t, 500, `{"error":{"type":"api_error","message":"something went wrong"}}`)
		svc := &finalize.Payments{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"stripe": psp}, DefaultProvider: "stripe"}
		p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-502", Amount: 1000, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.Report(ctx, p.ID, finalize.ReportRequest{Status: pay.Captured})
		if got, want := pay.ErrorCode(err), pay.EPSP; got != want {
			t.Fatalf("ErrorCode=%q (%v), want %s", got, err, want)
		}
		if got, _ := svc.Get(ctx, p.ID); got != p {
			t.Fatalf("payment %s, want it unchanged at %s", got, p)
		}
	})

	t.Run("ReportMode", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		sp, err := standard.New(standard.Config{WebhookSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
		if err != nil {
			t.Fatal(err)
		}
		svc := &finalize.Payments{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"standard": sp}, DefaultProvider: "standard"}
		p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-std", Amount: 1000, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.Report(ctx, p.ID, finalize.ReportRequest{Status: pay.Failed, ProviderRef: "psp_std"})
		if err != nil || res.Payment.Status != pay.Failed {
			t.Fatalf("res=%+v err=%v, want the report applied as it is", res, err)
		}
	})
}

// TestCreate_Bounds: the amount is at most pay.MaxAmount (10^15 minor
// units), named in the error; an unknown provider is unknown_provider.
func TestCreate_Bounds(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	svc := &finalize.Payments{Store: db, Finalizer: finalize.New(db), Providers: map[string]pay.Provider{"mock": newMock(t)}, DefaultProvider: "mock"}
	ctx := context.Background()
	if _, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-max", Amount: pay.MaxAmount, Currency: "EUR"}); err != nil {
		t.Fatalf("amount %d: %v, want accepted", pay.MaxAmount, err)
	}
	_, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-huge", Amount: 9_223_372_036_854_775_800, Currency: "EUR"})
	if pay.ErrorCode(err) != pay.EINVALID || !strings.Contains(pay.ErrorMessage(err), "amount") {
		t.Fatalf("err=%v, want invalid naming amount", err)
	}
	_, err = svc.Create(ctx, finalize.CreateRequest{OrderID: "o-prov", Amount: 100, Currency: "EUR", Provider: "nope"})
	if got, want := pay.ErrorCode(err), pay.EUNKNOWNPROVIDER; got != want {
		t.Fatalf("ErrorCode=%q, want %q", got, want)
	}
}
