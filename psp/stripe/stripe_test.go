package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	stripego "github.com/stripe/stripe-go/v85"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stripe"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/psp/stripe/stripetest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/stripe")

const (
	secretKey     = "sk_test_paystate0123456789"
	webhookSecret = "whsec_paystate_test_0123456789abcdef"
)

// newProvider returns a provider pointed at apiBase, without network
// retries (a test that wants them says so), logging into a buffer shown
// when the test fails.
func newProvider(t *testing.T, apiBase string, opts ...stripe.Option) *stripe.Provider {
	t.Helper()
	buf := new(testkit.SyncBuffer)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(buf.String())
		}
	})
	opts = append([]stripe.Option{
		stripe.WithLogger(zerolog.New(buf)),
		stripe.WithMaxNetworkRetries(0),
	}, opts...)
	p, err := stripe.New(stripe.Config{SecretKey: secretKey, WebhookSecret: webhookSecret, APIBase: apiBase}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeProvider returns a Fake and a provider pointed at it.
func fakeProvider(t *testing.T) (*stripefake.Fake, *stripe.Provider) {
	fake := stripetest.NewFake(t)
	return fake, newProvider(t, fake.URL())
}

// create creates pm's PaymentIntent under the key charge-<id>, failing
// the test on an error.
func create(t *testing.T, p *stripe.Provider, pm pay.Payment) pay.PSPResult {
	t.Helper()
	res, err := p.Create(context.Background(), pm, "charge-"+pm.ID)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// payment returns a payment as paystate stores it before the PSP call.
func payment() pay.Payment {
	id := ids.Payment(time.Now())
	return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 2500, Currency: "EUR", Provider: stripe.Name, Status: pay.Created, Version: 1}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := pay.ErrorCode(err); got != code {
		t.Fatalf("ErrorCode=%q (%v), want %q", got, err, code)
	}
}

// one returns the only request of a list, failing otherwise.
func one(t *testing.T, reqs []stripefake.Request, what string) stripefake.Request {
	t.Helper()
	if len(reqs) != 1 {
		t.Fatalf("%d %s requests reached the API, want 1: %+v", len(reqs), what, reqs)
	}
	return reqs[0]
}

// TestProvider_Create_StripeMock checks the PaymentIntent request against
// stripe-mock, through a Recorder: stripe-mock validates its shape, the
// Recorder shows the headers that reached the API.
func TestProvider_Create_StripeMock(t *testing.T) {
	t.Parallel()
	rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
	p := newProvider(t, rec.URL())
	pm := payment()

	res := create(t, p, pm)
	req := one(t, rec.Find("POST", "/v1/payment_intents"), "create")
	for _, c := range []struct{ name, got, want string }{
		{"Idempotency-Key", req.IdempotencyKey, "charge-" + pm.ID},
		{"Stripe-Version", req.StripeVersion, stripego.APIVersion},
		{"amount", req.Form.Get("amount"), "2500"},
		{"currency", req.Form.Get("currency"), "eur"},
		{"metadata[paystate_payment_id]", req.Form.Get("metadata[paystate_payment_id]"), pm.ID},
		{"confirm", req.Form.Get("confirm"), ""},
	} {
		if c.got != c.want {
			t.Errorf("%s=%q, want %q", c.name, c.got, c.want)
		}
	}
	if !req.Authorized {
		t.Error("no Bearer key reached the API")
	}
	// stripe-mock answers its fixture: requires_payment_method.
	if got, want := res.Status, pay.Created; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	if !strings.HasPrefix(res.ProviderRef, "pi_") || !strings.Contains(res.ClientSecret, "_secret_") {
		t.Fatalf("result=%+v, want a PaymentIntent id and its client secret", res)
	}
}

// TestProvider_Create_Statuses maps every PaymentIntent status the Fake is
// scripted to answer at creation.
func TestProvider_Create_Statuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		intent     string
		want       pay.Status
		secret     bool
		redirect   bool
		wantErrPSP bool
	}{
		{intent: "requires_payment_method", want: pay.Created, secret: true},
		{intent: "requires_confirmation", want: pay.Created, secret: true},
		{intent: "requires_action", want: pay.RequiresAction, secret: true, redirect: true},
		{intent: "processing", want: pay.Processing, secret: true},
		{intent: "requires_capture", want: pay.Processing, secret: true},
		{intent: "succeeded", want: pay.Captured},
		{intent: "canceled", want: pay.Failed},
		{intent: "requires_source", wantErrPSP: true},
	} {
		t.Run(tc.intent, func(t *testing.T) {
			t.Parallel()
			fake := stripetest.NewFake(t)
			fake.SetCreateStatus(func(string, int64) string { return tc.intent })
			p := newProvider(t, fake.URL())
			pm := payment()
			res, err := p.Create(context.Background(), pm, "charge-"+pm.ID)
			if tc.wantErrPSP {
				wantCode(t, err, pay.EPSP)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pi, ok := fake.Intent(res.ProviderRef)
			if !ok {
				t.Fatalf("ProviderRef %q is not the PaymentIntent", res.ProviderRef)
			}
			if got, want := res.Status, tc.want; got != want {
				t.Fatalf("Status=%s, want %s", got, want)
			}
			if got, want := res.ClientSecret, map[bool]string{true: pi.ClientSecret}[tc.secret]; got != want {
				t.Fatalf("ClientSecret=%q, want %q", got, want)
			}
			if got := res.RedirectURL; (got != "") != tc.redirect || tc.redirect && !strings.HasPrefix(got, "https://hooks.stripe.com/") {
				t.Fatalf("RedirectURL=%q, want one: %v", got, tc.redirect)
			}
			if want := "stripe payment_intent=" + pi.ID + " status=" + tc.intent; res.Raw != want {
				t.Fatalf("Raw=%q, want %q", res.Raw, want)
			}
		})
	}
}

// TestProvider_Create_Idempotent uses the Fake, which enforces keys.
func TestProvider_Create_Idempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SameKey", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		pm := payment()
		first := create(t, p, pm)
		second := create(t, p, pm)
		if first != second {
			t.Fatalf("second answer %+v, want %+v", second, first)
		}
		if got, want := fake.IntentCount(), 1; got != want {
			t.Fatalf("PaymentIntents=%d, want %d", got, want)
		}
		for _, r := range fake.Find("POST", "/v1/payment_intents") {
			if got, want := r.IdempotencyKey, "charge-"+pm.ID; got != want {
				t.Fatalf("Idempotency-Key=%q, want %q", got, want)
			}
		}
	})

	t.Run("ErrKeyReused", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		pm := payment()
		if _, err := p.Create(ctx, pm, "charge-"+pm.ID); err != nil {
			t.Fatal(err)
		}
		pm.Amount = 9900
		_, err := p.Create(ctx, pm, "charge-"+pm.ID)
		wantCode(t, err, pay.EPSP)
		if got, want := fake.IntentCount(), 1; got != want {
			t.Fatalf("PaymentIntents=%d, want %d", got, want)
		}
	})

	t.Run("KnownReference", func(t *testing.T) {
		t.Parallel()
		// A resumed create of a payment whose PaymentIntent is known reads
		// it instead of creating one (the key may have expired at Stripe).
		fake, p := fakeProvider(t)
		pm := payment()
		first := create(t, p, pm)
		fake.SetStatus(first.ProviderRef, "succeeded")
		pm.ProviderRef = first.ProviderRef
		again := create(t, p, pm)
		if again.Status != pay.Captured || again.ProviderRef != first.ProviderRef || again.ClientSecret != "" {
			t.Fatalf("resumed create=%+v, want captured %s without secret", again, first.ProviderRef)
		}
		if got := len(fake.Find("POST", "/v1/payment_intents")); got != 1 {
			t.Fatalf("%d create requests, want 1", got)
		}
		one(t, fake.Find("GET", "/v1/payment_intents/"+first.ProviderRef), "retrieve")
	})

	t.Run("RetrySameKey", func(t *testing.T) {
		t.Parallel()
		// The Fake creates the PaymentIntent but the answer is lost on the
		// network; stripe-go retries with the same key and gets the first
		// PaymentIntent back: one charge.
		fake := stripetest.NewFake(t)
		fake.DropAnswers(1)
		p := newProvider(t, fake.URL(), stripe.WithMaxNetworkRetries(1))
		pm := payment()
		res := create(t, p, pm)
		reqs := fake.Find("POST", "/v1/payment_intents")
		if len(reqs) != 2 {
			t.Fatalf("%d create requests, want 2 (one lost, one retried)", len(reqs))
		}
		for _, r := range reqs {
			if got, want := r.IdempotencyKey, "charge-"+pm.ID; got != want {
				t.Fatalf("Idempotency-Key=%q, want %q", got, want)
			}
		}
		if fake.IntentCount() != 1 || res.Status != pay.Created {
			t.Fatalf("PaymentIntents=%d result=%+v", fake.IntentCount(), res)
		}
	})
}

func TestProvider_Create_Errors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ErrServer", func(t *testing.T) {
		t.Parallel()
		fake := stripetest.NewFake(t)
		fake.FailNext(http.StatusInternalServerError)
		p := newProvider(t, fake.URL())
		pm := payment()
		_, err := p.Create(ctx, pm, "charge-"+pm.ID)
		wantCode(t, err, pay.EPSP)
	})

	t.Run("ErrKeyRefused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_****6789"}}`)
		}))
		t.Cleanup(srv.Close)
		p := newProvider(t, srv.URL)
		pm := payment()
		_, err := p.Create(ctx, pm, "charge-"+pm.ID)
		wantCode(t, err, pay.EPSP)
		if strings.Contains(err.Error(), secretKey) || strings.Contains(pay.ErrorMessage(err), "sk_") {
			t.Fatalf("error %q shows the key", err)
		}
	})

	t.Run("ErrNoAnswer", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // nothing listens there any more
		p := newProvider(t, srv.URL)
		pm := payment()
		_, err := p.Create(ctx, pm, "charge-"+pm.ID)
		wantCode(t, err, pay.EPSP)
	})

	t.Run("ErrCanceled", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		pm := payment()
		_, err := p.Create(cctx, pm, "charge-"+pm.ID)
		wantCode(t, err, pay.EPSP)
		if fake.IntentCount() != 0 {
			t.Fatal("a canceled call created a PaymentIntent")
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		pm := payment()
		_, err := p.Create(ctx, pm, "")
		wantCode(t, err, pay.EINVALID)
		bad := pm
		bad.Currency = "eur"
		_, err = p.Create(ctx, bad, "charge-"+pm.ID)
		wantCode(t, err, pay.EINVALID)
		bad = pm
		bad.Amount = 0
		_, err = p.Create(ctx, bad, "charge-"+pm.ID)
		wantCode(t, err, pay.EINVALID)
		if got := len(fake.Requests()); got != 0 {
			t.Fatalf("%d requests reached the API, want 0", got)
		}
	})
}

// TestProvider_Status uses the Fake for outcomes and stripe-mock for the
// shape of the search request.
func TestProvider_Status(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ByReference", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		pm := payment()
		res := create(t, p, pm)
		pm.ProviderRef = res.ProviderRef
		for _, step := range []struct {
			set    func()
			want   pay.Status
			secret bool
			raw    string
		}{
			{func() {}, pay.Created, true, "status=requires_payment_method"},
			{func() { fake.SetFailedTry(pm.ProviderRef) }, pay.Created, true, "status=requires_payment_method last_payment_error=card_declined"},
			{func() { fake.SetStatus(pm.ProviderRef, "processing") }, pay.Processing, true, "status=processing"},
			{func() { fake.SetStatus(pm.ProviderRef, "succeeded") }, pay.Captured, false, "status=succeeded"},
		} {
			step.set()
			st, err := p.Status(ctx, pm)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != step.want || !st.Found || st.ProviderRef != pm.ProviderRef {
				t.Fatalf("Status=%+v, want %s", st, step.want)
			}
			if st.Amount != pm.Amount || st.Currency != pm.Currency {
				t.Fatalf("Amount=%d Currency=%q, want %d %s as the PaymentIntent says", st.Amount, st.Currency, pm.Amount, pm.Currency)
			}
			if got := st.ClientSecret != ""; got != step.secret {
				t.Fatalf("ClientSecret set=%v, want %v", got, step.secret)
			}
			if !strings.HasSuffix(st.Raw, step.raw) || strings.Contains(st.Raw, "_secret_") {
				t.Fatalf("Raw=%q, want it to end in %q and hold no secret", st.Raw, step.raw)
			}
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		_, p := fakeProvider(t)
		st, err := p.Status(ctx, pay.Payment{ID: "pay_x", ProviderRef: "pi_nobody"})
		if err != nil {
			t.Fatal(err)
		}
		if st.Found || st.Raw == "" {
			t.Fatalf("Status=%+v, want not found with a note", st)
		}
	})

	t.Run("SearchByMetadata", func(t *testing.T) {
		t.Parallel()
		// The create answer was lost: no provider_ref, the PaymentIntent
		// is found by metadata.paystate_payment_id.
		fake, p := fakeProvider(t)
		pm := payment()
		res := create(t, p, pm)
		fake.SetStatus(res.ProviderRef, "succeeded")
		st, err := p.Status(ctx, pm)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != pay.Captured || st.ProviderRef != res.ProviderRef || !st.Found {
			t.Fatalf("Status=%+v, want captured %s", st, res.ProviderRef)
		}
		req := one(t, fake.Find("GET", "/v1/payment_intents/search"), "search")
		if got, want := req.Form.Get("query"), "metadata['paystate_payment_id']:'"+pm.ID+"'"; got != want {
			t.Fatalf("query=%q, want %q", got, want)
		}

		other := payment()
		st, err = p.Status(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		if st.Found {
			t.Fatalf("Status of a payment Stripe never saw=%+v, want not found", st)
		}
	})

	t.Run("SearchStripeMock", func(t *testing.T) {
		t.Parallel()
		// stripe-mock accepts the search request and answers its fixture,
		// whose metadata is not ours: not found.
		rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
		p := newProvider(t, rec.URL())
		pm := payment()
		st, err := p.Status(ctx, pm)
		if err != nil {
			t.Fatal(err)
		}
		if st.Found {
			t.Fatalf("Status=%+v, want not found: the fixture is another payment's", st)
		}
		one(t, rec.Find("GET", "/v1/payment_intents/search"), "search")
	})

	t.Run("ErrUnsearchableID", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		_, err := p.Status(ctx, pay.Payment{ID: "pay_x' OR status:'succeeded"})
		wantCode(t, err, pay.EINVALID)
		if len(fake.Requests()) != 0 {
			t.Fatal("the query reached the API")
		}
	})
}

func TestProvider_Refund(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// captured returns a payment the Fake has captured.
	captured := func(t *testing.T, fake *stripefake.Fake, p *stripe.Provider) pay.Payment {
		t.Helper()
		pm := payment()
		res := create(t, p, pm)
		fake.SetStatus(res.ProviderRef, "succeeded")
		pm.ProviderRef, pm.Status = res.ProviderRef, pay.Captured
		return pm
	}
	refund := func(pm pay.Payment, amount int64) pay.Refund {
		return pay.Refund{ID: ids.Refund(time.Now()), PaymentID: pm.ID, Amount: amount, Currency: pm.Currency, Status: pay.RefundPending}
	}

	for _, tc := range []struct {
		refund string
		want   pay.RefundStatus
	}{{"succeeded", pay.RefundSucceeded}, {"pending", pay.RefundPending}, {"failed", pay.RefundFailed}} {
		t.Run("OK_"+tc.refund, func(t *testing.T) {
			t.Parallel()
			fake := stripetest.NewFake(t)
			fake.SetRefundStatus(tc.refund)
			p := newProvider(t, fake.URL())
			pm := captured(t, fake, p)
			r := refund(pm, 250)
			res, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want || !strings.HasPrefix(res.ProviderRef, "re_") || !res.Found {
				t.Fatalf("Refund=%+v, want %s", res, tc.want)
			}
			req := one(t, fake.Find("POST", "/v1/refunds"), "refund")
			if req.IdempotencyKey != "refund-"+r.ID || req.Form.Get("payment_intent") != pm.ProviderRef || req.Form.Get("amount") != "250" ||
				req.Form.Get("metadata[paystate_refund_id]") != r.ID || req.Form.Get("metadata[paystate_payment_id]") != pm.ID {
				t.Fatalf("refund request %+v, want key refund-%s, payment_intent %s, amount 250, the ids in metadata", req, r.ID, pm.ProviderRef)
			}
			// RefundStatus by the reference, and without it by metadata.
			for _, q := range []pay.Refund{{ID: r.ID, ProviderRef: res.ProviderRef}, {ID: r.ID}} {
				st, err := p.RefundStatus(ctx, pm, q)
				if err != nil || !st.Found || st.Status != tc.want || st.ProviderRef != res.ProviderRef {
					t.Fatalf("RefundStatus(%+v)=%+v, %v; want %s %s", q, st, err, tc.want, res.ProviderRef)
				}
			}
		})
	}

	t.Run("Parts", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		pm := captured(t, fake, p)
		for _, amount := range []int64{300, pm.Amount - 300} {
			r := refund(pm, amount)
			for range 2 { // the same key twice refunds once
				if res, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID)); err != nil || res.Status != pay.RefundSucceeded {
					t.Fatalf("Refund %d=%+v, %v", amount, res, err)
				}
			}
		}
		if pi, _ := fake.Intent(pm.ProviderRef); pi.Refunds != 2 || pi.AmountRefunded != pm.Amount {
			t.Fatalf("Refunds=%d of %d, want 2 of %d", pi.Refunds, pi.AmountRefunded, pm.Amount)
		}
		// Nothing is left: the refund fails.
		if res, err := p.Refund(ctx, pm, refund(pm, 1), pay.RefundKey("re_more")); err != nil || res.Status != pay.RefundFailed {
			t.Fatalf("Refund past the amount=%+v, %v; want failed", res, err)
		}
	})

	t.Run("AlreadyRefundedAtStripe", func(t *testing.T) {
		t.Parallel()
		// Refunded in full from the dashboard first: charge_already_refunded.
		fake, p := fakeProvider(t)
		pm := captured(t, fake, p)
		if _, err := p.Refund(ctx, pm, refund(pm, pm.Amount), "dashboard-refund"); err != nil {
			t.Fatal(err)
		}
		r := refund(pm, 100)
		res, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
		if err != nil || res.Status != pay.RefundFailed {
			t.Fatalf("Refund=%+v, %v; want failed: nothing is left", res, err)
		}
	})

	t.Run("ErrNotCaptured", func(t *testing.T) {
		t.Parallel()
		_, p := fakeProvider(t)
		pm := payment()
		pm.ProviderRef = create(t, p, pm).ProviderRef
		r := refund(pm, 100)
		_, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
		wantCode(t, err, pay.EINVALID)
	})

	t.Run("ErrNoReference", func(t *testing.T) {
		t.Parallel()
		fake, p := fakeProvider(t)
		pm := payment()
		r := refund(pm, 100)
		_, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
		wantCode(t, err, pay.EINVALID)
		_, err = p.Refund(ctx, pay.Payment{ID: pm.ID, ProviderRef: "pi_x"}, r, "")
		wantCode(t, err, pay.EINVALID)
		if len(fake.Requests()) != 0 {
			t.Fatal("a request reached the API")
		}
	})

	t.Run("StripeMock", func(t *testing.T) {
		t.Parallel()
		rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
		p := newProvider(t, rec.URL())
		pm := payment()
		pm.ProviderRef, pm.Status = "pi_3QkB9xJ2eZvKYlo21Kx7Gd4P", pay.Captured
		r := refund(pm, 400)
		res, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Status.Valid() || res.ProviderRef == "" {
			t.Fatalf("Refund=%+v", res)
		}
		req := one(t, rec.Find("POST", "/v1/refunds"), "refund")
		if req.IdempotencyKey != "refund-"+r.ID || req.Form.Get("payment_intent") != pm.ProviderRef || req.Form.Get("amount") != "400" {
			t.Fatalf("refund request %+v", req)
		}
		if st, err := p.RefundStatus(ctx, pm, pay.Refund{ID: r.ID, ProviderRef: res.ProviderRef}); err != nil || !st.Found {
			t.Fatalf("RefundStatus=%+v, %v", st, err)
		}
	})
}

func TestProvider_Cancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	for _, tc := range []struct {
		before string // the PaymentIntent's status when the sweeper cancels
		want   pay.Status
	}{
		{"requires_payment_method", pay.Failed},
		{"requires_action", pay.Failed},
		{"succeeded", pay.Captured},
		{"processing", pay.Processing},
		{"canceled", pay.Failed},
	} {
		t.Run(tc.before, func(t *testing.T) {
			t.Parallel()
			fake, p := fakeProvider(t)
			pm := payment()
			res := create(t, p, pm)
			fake.SetStatus(res.ProviderRef, tc.before)
			pm.ProviderRef = res.ProviderRef
			r, err := p.Cancel(ctx, pm, "cancel-"+pm.ID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.want || r.ProviderRef != pm.ProviderRef || !r.Found {
				t.Fatalf("Cancel=%+v, want %s", r, tc.want)
			}
			req := one(t, fake.Find("POST", "/v1/payment_intents/"+pm.ProviderRef+"/cancel"), "cancel")
			if req.IdempotencyKey != "cancel-"+pm.ID || req.Form.Get("cancellation_reason") != "abandoned" {
				t.Fatalf("cancel request %+v", req)
			}
		})
	}

	t.Run("NoReference", func(t *testing.T) {
		t.Parallel()
		_, p := fakeProvider(t)
		pm := payment()
		res := create(t, p, pm)
		r, err := p.Cancel(ctx, pm, "cancel-"+pm.ID)
		if err != nil || r.Status != pay.Failed || r.ProviderRef != res.ProviderRef {
			t.Fatalf("Cancel=%+v, %v; want failed %s", r, err, res.ProviderRef)
		}
		r, err = p.Cancel(ctx, payment(), "cancel-x")
		if err != nil || r.Found {
			t.Fatalf("Cancel of a payment Stripe never saw=%+v, %v; want not found", r, err)
		}
	})

	t.Run("UnknownReference", func(t *testing.T) {
		t.Parallel()
		_, p := fakeProvider(t)
		r, err := p.Cancel(ctx, pay.Payment{ID: "pay_x", ProviderRef: "pi_nobody"}, "cancel-pay_x")
		if err != nil || r.Found {
			t.Fatalf("Cancel=%+v, %v; want not found", r, err)
		}
	})

	t.Run("StripeMock", func(t *testing.T) {
		t.Parallel()
		rec := stripetest.NewRecorder(t, stripetest.MockURL(t))
		p := newProvider(t, rec.URL())
		pm := payment()
		pm.ProviderRef = "pi_3QkB9xJ2eZvKYlo21Kx7Gd4P"
		if _, err := p.Cancel(ctx, pm, "cancel-"+pm.ID); err != nil {
			t.Fatal(err)
		}
		req := one(t, rec.Find("POST", "/v1/payment_intents/"+pm.ProviderRef+"/cancel"), "cancel")
		if req.IdempotencyKey != "cancel-"+pm.ID {
			t.Fatalf("Idempotency-Key=%q", req.IdempotencyKey)
		}
	})
}

// TestParseWebhook_Testdata signs every payload in testdata/stripe with
// stripe-go's webhook.GenerateTestSignedPayload, parses it and compares the
// event with its golden file (refresh with -update).
func TestParseWebhook_Testdata(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "")
	dir := stripetest.TestdataDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("%d payloads in %s, want at least 6", len(files), dir)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				Object     string `json:"object"`
				APIVersion string `json:"api_version"`
			}
			if err := json.Unmarshal(body, &head); err != nil {
				t.Fatal(err)
			}
			// The payloads follow the API version of the library in go.mod.
			if head.Object != "event" || head.APIVersion != stripego.APIVersion {
				t.Fatalf("object=%q api_version=%q, want an event of %s", head.Object, head.APIVersion, stripego.APIVersion)
			}
			e, err := p.ParseWebhook(body, stripefake.Header(webhookSecret, body, time.Now()), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := e.Type+".json", filepath.Base(file); got != want {
				t.Fatalf("type %s does not match the file name %s", e.Type, want)
			}
			got, err := json.MarshalIndent(e, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("event:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestParseWebhook_Mapping(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "")
	now := time.Now()
	parse := func(t *testing.T, spec stripetest.EventSpec) pay.WebhookEvent {
		t.Helper()
		body := stripetest.Event(t, spec)
		e, err := p.ParseWebhook(body, stripefake.Header(webhookSecret, body, now), now)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	t.Run("NoMetadata", func(t *testing.T) {
		t.Parallel()
		e := parse(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, PaymentIntent: "pi_only_ref", NoPaymentID: true})
		if e.PaymentID != "" || e.ProviderRef != "pi_only_ref" || e.Status != pay.Captured {
			t.Fatalf("event=%+v, want captured found by provider_ref pi_only_ref", e)
		}
		// paystate tags every PaymentIntent it creates: an untagged one is
		// someone else's unless its id is a known provider_ref.
		if !e.Untagged {
			t.Fatalf("event=%+v, want Untagged", e)
		}
		if e := parse(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, PaymentID: "pay_tagged"}); e.Untagged {
			t.Fatalf("event=%+v with metadata marked Untagged", e)
		}
	})

	// The amount and currency go with the event, the currency upper-cased,
	// for finalize to check against the payment.
	t.Run("AmountAndCurrency", func(t *testing.T) {
		t.Parallel()
		for _, typ := range []string{stripe.TypeSucceeded, stripe.TypeChargeRefunded} {
			e := parse(t, stripetest.EventSpec{Type: typ, Object: func(o map[string]any) { o["amount"], o["currency"] = 1, "eur" }})
			if e.Amount != 1 || e.Currency != "EUR" {
				t.Fatalf("%s: Amount=%d Currency=%q, want 1 EUR", typ, e.Amount, e.Currency)
			}
		}
	})

	t.Run("PartialRefund", func(t *testing.T) {
		t.Parallel()
		e := parse(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, Object: func(o map[string]any) {
			o["refunded"], o["amount_refunded"] = false, 1000
		}})
		if e.Status != "" || e.StepKind != pay.StepIgnoredEvent || e.Ignore || e.ProviderRef == "" {
			t.Fatalf("event=%+v, want no status, an %s step, stored", e, pay.StepIgnoredEvent)
		}
	})

	t.Run("ExpandedPaymentIntent", func(t *testing.T) {
		t.Parallel()
		e := parse(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, Object: func(o map[string]any) {
			o["payment_intent"] = map[string]any{"id": "pi_expanded", "object": "payment_intent"}
		}})
		if e.ProviderRef != "pi_expanded" || e.Status != pay.Refunded {
			t.Fatalf("event=%+v, want refunded pi_expanded", e)
		}
	})

	t.Run("ChargeWithoutPaymentIntent", func(t *testing.T) {
		t.Parallel()
		e := parse(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, Object: func(o map[string]any) {
			o["payment_intent"] = nil
		}})
		// No PaymentIntent and no metadata: nothing names a payment, so the
		// inbox acknowledges it as not paystate's.
		if e.Ignore || !e.Untagged || e.ProviderRef != "" || e.EventID == "" {
			t.Fatalf("event=%+v, want untagged without a reference: not paystate's charge", e)
		}
	})

	t.Run("ChargeMetadata", func(t *testing.T) {
		t.Parallel()
		e := parse(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, PaymentID: "pay_from_charge"})
		if e.PaymentID != "pay_from_charge" || e.Status != pay.Refunded {
			t.Fatalf("event=%+v", e)
		}
	})

	t.Run("UnknownType", func(t *testing.T) {
		t.Parallel()
		e := parse(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, Rename: "customer.created", ID: "evt_ignored"})
		if want := (pay.WebhookEvent{EventID: "evt_ignored", Type: "customer.created", OccurredAt: e.OccurredAt, Ignore: true}); e != want {
			t.Fatalf("event=%+v, want %+v", e, want)
		}
	})
}

func TestParseWebhook_Errors(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "")
	now := time.Now()
	valid := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded})
	signed := func(body []byte, at time.Time) http.Header { return stripefake.Header(webhookSecret, body, at) }

	for _, tc := range []struct {
		name   string
		body   []byte
		header http.Header
		code   string
	}{
		{"OK", valid, signed(valid, now), ""},
		{"RecentPast", valid, signed(valid, now.Add(-stripe.DefaultTolerance+30*time.Second)), ""},
		{"ErrNoHeader", valid, http.Header{}, pay.ESIGNATURE},
		{"ErrTwoHeaders", valid, http.Header{"Stripe-Signature": {stripefake.Sign(webhookSecret, valid, now), stripefake.Sign(webhookSecret, valid, now)}}, pay.ESIGNATURE},
		{"ErrGarbageHeader", valid, http.Header{"Stripe-Signature": {"garbage"}}, pay.ESIGNATURE},
		{"ErrOtherSecret", valid, stripefake.Header("whsec_other", valid, now), pay.ESIGNATURE},
		{"ErrTampered", bytes.Replace(valid, []byte(`"succeeded"`), []byte(`"SUCCEEDED"`), 1), signed(valid, now), pay.ESIGNATURE},
		{"ErrTooOld", valid, signed(valid, now.Add(-stripe.DefaultTolerance-time.Second)), pay.ESIGNATURE},
		{"ErrNotJSON", []byte("not json"), signed([]byte("not json"), now), pay.EINVALID},
		{"ErrThinEvent", []byte(`{"id":"evt_1","object":"v2.core.event","type":"v1.payment_intent.succeeded"}`), nil, pay.EINVALID},
		{"ErrWrongObject", stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, Object: func(o map[string]any) { o["object"] = "charge" }}), nil, pay.EINVALID},
		{"ErrNoObjectID", stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, Object: func(o map[string]any) { delete(o, "id") }}), nil, pay.EINVALID},
		{"ErrBidiPaymentID", stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, PaymentID: "pay_\u202eevil"}), nil, pay.EINVALID},
		{"ErrMetadataNotString", stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, Object: func(o map[string]any) { o["metadata"] = map[string]any{"paystate_payment_id": 7} }}), nil, pay.EINVALID},
		{"ErrNoCreated", stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, Created: time.Unix(0, 0)}), nil, pay.EINVALID},
		{"ErrBadPaymentIntent", stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeChargeRefunded, Object: func(o map[string]any) { o["payment_intent"] = 42 }}), nil, pay.EINVALID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := tc.header
			if h == nil {
				h = signed(tc.body, now)
			}
			_, err := p.ParseWebhook(tc.body, h, now)
			wantCode(t, err, tc.code)
			if err != nil && strings.Contains(err.Error(), webhookSecret) {
				t.Fatalf("error %q shows the secret", err)
			}
		})
	}
}

// TestParseWebhook_APIVersion: events of another API version are accepted,
// counted, and the first of each version is logged.
func TestParseWebhook_APIVersion(t *testing.T) {
	t.Parallel()
	buf := new(testkit.SyncBuffer)
	p := newProvider(t, "", stripe.WithLogger(zerolog.New(buf)))
	now := time.Now()
	counter := metrics.GetOrCreateCounter(`paystate_stripe_webhook_version_mismatch_total`)
	before := counter.Get()

	for i, v := range []string{stripego.APIVersion, "2025-08-27.basil", "2025-08-27.basil", "2024-06-20"} {
		body := stripetest.Event(t, stripetest.EventSpec{Type: stripe.TypeSucceeded, ID: fmt.Sprintf("evt_version_%d", i), APIVersion: v, PaymentID: "pay_version"})
		e, err := p.ParseWebhook(body, stripefake.Header(webhookSecret, body, now), now)
		if err != nil {
			t.Fatalf("api_version %s: %v", v, err)
		}
		if e.Status != pay.Captured {
			t.Fatalf("api_version %s: event=%+v", v, e)
		}
	}
	// Other tests may count too: at least this test's three.
	if got := counter.Get() - before; got < 3 {
		t.Fatalf("mismatch counter rose by %d, want at least 3", got)
	}
	out := buf.String()
	lines := strings.Count(out, "another API version")
	if lines != 2 {
		t.Fatalf("%d warnings, want 2 (one per other version):\n%s", lines, out)
	}
	for _, want := range []string{`"api_version":"2025-08-27.basil"`, `"api_version":"2024-06-20"`, `"payment_id":"pay_version"`, `"event_id":"evt_version_1"`, `"component":"psp_stripe"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, webhookSecret) || strings.Contains(out, "_secret_") {
		t.Fatalf("log holds a secret:\n%s", out)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	ok := stripe.Config{SecretKey: secretKey, WebhookSecret: webhookSecret}
	for _, tc := range []struct {
		name string
		edit func(*stripe.Config)
		key  string
	}{
		{"ErrNoKey", func(c *stripe.Config) { c.SecretKey = "" }, "providers.stripe.secret_key"},
		{"ErrPublishableKey", func(c *stripe.Config) { c.SecretKey = "pk_test_abc" }, "providers.stripe.secret_key"},
		{"ErrNoWebhookSecret", func(c *stripe.Config) { c.WebhookSecret = "" }, "providers.stripe.webhook_secret"},
		{"ErrWebhookSecretPrefix", func(c *stripe.Config) { c.WebhookSecret = "secret_abc" }, "providers.stripe.webhook_secret"},
		{"ErrAPIBase", func(c *stripe.Config) { c.APIBase = "127.0.0.1:12111" }, "providers.stripe.api_base"},
		{"ErrAPIBaseCredentials", func(c *stripe.Config) { c.APIBase = "http://user:pw@127.0.0.1:12111" }, "providers.stripe.api_base"},
		{"ErrTolerance", func(c *stripe.Config) { c.Tolerance = -time.Second }, "webhook_inbox.tolerance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := ok
			tc.edit(&cfg)
			_, err := stripe.New(cfg)
			if err == nil {
				t.Fatal("want error")
			}
			if !strings.HasPrefix(err.Error(), tc.key+": ") {
				t.Fatalf("err=%q, want it to name %s", err, tc.key)
			}
			for _, s := range []string{cfg.SecretKey, cfg.WebhookSecret, "pw@"} {
				if s != "" && strings.Contains(err.Error(), s) {
					t.Fatalf("err=%q quotes a secret", err)
				}
			}
		})
	}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		p, err := stripe.New(ok)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != "stripe" || p.Tolerance() != 300*time.Second {
			t.Fatalf("Name=%s Tolerance=%s", p.Name(), p.Tolerance())
		}
	})
}
