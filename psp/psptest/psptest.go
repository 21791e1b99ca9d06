// Package psptest is the conformance suite every PSP adapter (pay.Provider)
// must pass: create with an idempotency key, query status, refund, and
// verify and parse a webhook of the provider's own wire format. An adapter
// runs it from a test with a Harness that knows how to make its PSP
// capture a payment and how to sign its webhooks:
//
//	func TestConformance(t *testing.T) {
//		psptest.Run(t, psptest.Harness{Provider: p, Sign: ..., ...})
//	}
//
// The suite calls the provider as paystate does (keys "charge-<payment_id>"
// and "refund-<refund_id>", fresh ids from package ids) and checks
// the contract of pay.Provider: answers carry a valid status, a client
// secret only while the status shows secrets, a redirect URL only for
// requires_action, never a secret in Raw, an amount and currency (where the
// answer says them) that are the payment's; the same key never charges or
// refunds twice; bad signatures and stale timestamps are ESIGNATURE,
// malformed signed bodies EINVALID.
package psptest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
)

// Kind is a kind of webhook event, independent of the provider's wire
// names.
type Kind string

// Webhook kinds. Each but KindFailedAttempt and KindUnknown reports the
// status of the same name.
const (
	KindCaptured       Kind = "captured"
	KindFailed         Kind = "failed"
	KindProcessing     Kind = "processing"
	KindRequiresAction Kind = "requires_action"
	KindRefunded       Kind = "refunded"
	// KindFailedAttempt is a failed try that leaves the payment open: no
	// status, timeline step pay.StepFailedAttempt.
	KindFailedAttempt Kind = "failed_attempt"
	// KindUnknown is an event type the provider does not map.
	KindUnknown Kind = "unknown"
)

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{KindCaptured, KindFailed, KindProcessing, KindRequiresAction, KindRefunded, KindFailedAttempt, KindUnknown}

// Event is a webhook the harness signs.
type Event struct {
	Kind        Kind
	ID          string // event id
	PaymentID   string // paystate's payment id, echoed by the PSP
	ProviderRef string
	At          time.Time // event time and signature timestamp
}

// Feature is a part of pay.Provider a PSP may not have. A harness lists
// the features its provider lacks (Harness.Lacks); the suite then checks
// that the provider says so (EUNSUPPORTED, or only the flow "") instead
// of testing the feature, and reports it.
type Feature string

// Features a provider may lack.
const (
	// FeatureCancel: Provider.Cancel (the sweeper expires an open payment
	// at the PSP).
	FeatureCancel Feature = "cancel"
)

// Harness is a provider under test and what the suite needs to drive it.
type Harness struct {
	// Provider is the adapter under test.
	Provider pay.Provider
	// Payment returns a payment as paystate stores it before the PSP call,
	// with amount and currency the PSP accepts; id is a fresh payment id.
	// Nil: 1000 EUR (an amount the mock captures at once).
	Payment func(id string) pay.Payment
	// Capture makes the PSP capture a payment created with Create (the
	// customer paid) and returns the payment as paystate then stores it.
	// Nil: the create answer already captured it.
	Capture func(t *testing.T, p pay.Payment) pay.Payment
	// Sign returns a signed webhook of the provider's wire format, or ok
	// false if the wire format has no such kind of event.
	Sign func(t *testing.T, e Event) (body []byte, h http.Header, ok bool)
	// SignRaw signs an arbitrary body as a webhook with event id id at at.
	SignRaw func(t *testing.T, id string, body []byte, at time.Time) http.Header
	// Now is the time given to ParseWebhook; nil: time.Now.
	Now func() time.Time
	// Tolerance is the provider's webhook timestamp tolerance; the suite
	// signs a webhook older than that. Zero: five minutes.
	Tolerance time.Duration
	// IgnoresUnknown says an unknown event type parses as Ignore (Stripe);
	// otherwise it must be EINVALID (the Standard Webhooks wire format).
	IgnoresUnknown bool
	// Lacks lists the features the provider does not have.
	Lacks []Feature
	// UnknownRef is a provider reference the PSP does not know.
	UnknownRef string
	// Stateless says the PSP API answers fixtures (stripe-mock): every id
	// exists and keys are not enforced, so the checks of replays, unknown
	// references and cancel outcomes are skipped.
	Stateless bool
}

func (h Harness) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// lacks reports whether the provider lacks f, and if so logs it: a
// missing feature shows in the test output, never as a silent skip.
func (h Harness) lacks(t *testing.T, f Feature) bool {
	t.Helper()
	if slices.Contains(h.Lacks, f) {
		t.Logf("the provider has no %s (Harness.Lacks): checked that it says so", f)
		return true
	}
	return false
}

func (h Harness) payment() pay.Payment {
	id := ids.Payment(time.Now())
	if h.Payment != nil {
		return h.Payment(id)
	}
	return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 1000, Currency: "EUR", Status: pay.Created, Version: 1}
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Provider == nil || h.Sign == nil || h.SignRaw == nil {
		t.Fatal("psptest: Harness needs Provider, Sign and SignRaw")
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"Create", testCreate},
		{"CreateSameKey", testCreateSameKey},
		{"CreateErrNoKey", testCreateErrNoKey},
		{"Status", testStatus},
		{"StatusNotFound", testStatusNotFound},
		{"Refund", testRefund},
		{"RefundErrNoKey", testRefundErrNoKey},
		{"Cancel", testCancel},
		{"Webhook", testWebhook},
		{"WebhookErrSignature", testWebhookErrSignature},
		{"WebhookErrTooOld", testWebhookErrTooOld},
		{"WebhookErrMalformed", testWebhookErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// create creates a new payment at the PSP and returns it as paystate
// stores it afterwards, with the answer.
func create(t *testing.T, h Harness) (pay.Payment, pay.PSPResult) {
	t.Helper()
	p := h.payment()
	res, err := h.Provider.Create(context.Background(), p, "charge-"+p.ID)
	if err != nil {
		t.Fatalf("Create(%s): %v", p.ID, err)
	}
	checkResult(t, "Create", res)
	checkAmount(t, "Create", p, res)
	p.ProviderRef, p.Status, p.Version = res.ProviderRef, res.Status, p.Version+1
	p.ClientSecret, p.RedirectURL = res.ClientSecret, res.RedirectURL
	return p, res
}

// checkResult checks what every answer about a known payment must hold.
func checkResult(t *testing.T, op string, res pay.PSPResult) {
	t.Helper()
	if !res.Found {
		t.Fatalf("%s: Found=false for a payment the PSP knows: %+v", op, res)
	}
	if !slices.Contains([]pay.Status{pay.Created, pay.Processing, pay.RequiresAction, pay.Captured, pay.Failed, pay.Refunded}, res.Status) {
		t.Fatalf("%s: Status=%q, want a status a PSP reports", op, res.Status)
	}
	if res.ProviderRef == "" {
		t.Fatalf("%s: empty ProviderRef", op)
	}
	if res.ClientSecret != "" && !res.Status.ShowsSecrets() {
		t.Fatalf("%s: ClientSecret set for status %s", op, res.Status)
	}
	if res.RedirectURL != "" && res.Status != pay.RequiresAction {
		t.Fatalf("%s: RedirectURL set for status %s", op, res.Status)
	}
	if res.Raw == "" {
		t.Fatalf("%s: empty Raw: the answer is kept as evidence", op)
	}
	if res.ClientSecret != "" && strings.Contains(res.Raw, res.ClientSecret) {
		t.Fatalf("%s: Raw %q holds the client secret", op, res.Raw)
	}
}

// checkAmount checks that an answer that says an amount or a currency says
// the payment's: finalize refuses any other as amount_mismatch.
func checkAmount(t *testing.T, op string, p pay.Payment, res pay.PSPResult) {
	t.Helper()
	if res.Amount != 0 && res.Amount != p.Amount {
		t.Fatalf("%s: Amount=%d for a payment of %d", op, res.Amount, p.Amount)
	}
	if res.Currency != "" && res.Currency != p.Currency {
		t.Fatalf("%s: Currency=%q for a payment in %s (upper case, as paystate stores it)", op, res.Currency, p.Currency)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := pay.ErrorCode(err); got != code {
		t.Fatalf("ErrorCode=%q (%v), want %q", got, err, code)
	}
}

func testCreate(t *testing.T, h Harness) {
	p, res := create(t, h)
	if res.Status == pay.Refunded {
		t.Fatalf("Create answered refunded for %s", p.ID)
	}
}

func testCreateSameKey(t *testing.T, h Harness) {
	if h.Stateless {
		t.Skip("the PSP API is stateless: idempotency keys are not enforced")
	}
	p := h.payment()
	first, err := h.Provider.Create(context.Background(), p, "charge-"+p.ID)
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.Provider.Create(context.Background(), p, "charge-"+p.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, "second Create", second)
	if got, want := second.ProviderRef, first.ProviderRef; got != want {
		t.Fatalf("second Create: ProviderRef=%s, want %s (one charge per key)", got, want)
	}
	if got, want := second.Status, first.Status; got != want {
		t.Fatalf("second Create: Status=%s, want %s", got, want)
	}
}

func testCreateErrNoKey(t *testing.T, h Harness) {
	_, err := h.Provider.Create(context.Background(), h.payment(), "")
	wantCode(t, err, pay.EINVALID)
}

func testStatus(t *testing.T, h Harness) {
	p, res := create(t, h)
	st, err := h.Provider.Status(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, "Status", st)
	if got, want := st.ProviderRef, res.ProviderRef; got != want {
		t.Fatalf("Status: ProviderRef=%s, want %s", got, want)
	}
	if !h.Stateless {
		if got, want := st.Status, res.Status; got != want {
			t.Fatalf("Status=%s right after Create answered %s", got, want)
		}
		checkAmount(t, "Status", p, st)
	}
}

func testStatusNotFound(t *testing.T, h Harness) {
	if h.Stateless {
		t.Skip("the PSP API is stateless: every id exists")
	}
	if h.UnknownRef == "" {
		t.Fatal("psptest: Harness.UnknownRef is empty")
	}
	st, err := h.Provider.Status(context.Background(), pay.Payment{ID: ids.Payment(time.Now()), ProviderRef: h.UnknownRef})
	if err != nil {
		t.Fatal(err)
	}
	if st.Found {
		t.Fatalf("Status(%s)=%+v, want not found", h.UnknownRef, st)
	}
	if st.ClientSecret != "" || st.ProviderRef != "" && st.ProviderRef != h.UnknownRef {
		t.Fatalf("Status of an unknown payment carries data: %+v", st)
	}
}

// testRefund makes two partial refunds of a captured payment, each
// asked twice with its own key ("refund-<refund id>"): every answer is a
// refund status with the PSP's reference, the same for the same key
// (unless Stateless), and RefundStatus (where the provider has one) knows
// the refund.
func testRefund(t *testing.T, h Harness) {
	p, _ := create(t, h)
	if h.Capture != nil {
		p = h.Capture(t, p)
	}
	if p.Status != pay.Captured {
		t.Fatalf("payment %s is %s after capture, want captured", p.ID, p.Status)
	}
	refs := map[string]string{}
	for _, amount := range []int64{p.Amount / 4, p.Amount / 2} {
		r := pay.Refund{ID: ids.Refund(time.Now()), PaymentID: p.ID, Amount: amount, Currency: p.Currency, Status: pay.RefundPending}
		for i := range 2 {
			res, err := h.Provider.Refund(context.Background(), p, r, pay.RefundKey(r.ID))
			if err != nil {
				t.Fatalf("Refund %s try %d: %v", r.ID, i+1, err)
			}
			if !res.Status.Valid() || res.ProviderRef == "" || !res.Found {
				t.Fatalf("Refund %s try %d: %+v, want a refund status and the PSP's reference", r.ID, i+1, res)
			}
			if strings.Contains(res.Raw, "secret") {
				t.Fatalf("Refund %s: Raw holds a secret: %q", r.ID, res.Raw)
			}
			if prev, ok := refs[r.ID]; ok && prev != res.ProviderRef && !h.Stateless {
				t.Fatalf("Refund %s try %d: ProviderRef=%s, the first answer said %s", r.ID, i+1, res.ProviderRef, prev)
			}
			refs[r.ID] = res.ProviderRef
		}
		r.ProviderRef = refs[r.ID] // as paystate records it from the answer
		st, err := h.Provider.RefundStatus(context.Background(), p, r)
		if pay.ErrorCode(err) == pay.EUNSUPPORTED {
			continue
		}
		if err != nil || !st.Found || !st.Status.Valid() {
			t.Fatalf("RefundStatus %s: %+v, %v; want the refund found", r.ID, st, err)
		}
	}
	if len(refs) != 2 {
		t.Fatalf("refunds made: %v, want two", refs)
	}
}

func testRefundErrNoKey(t *testing.T, h Harness) {
	p, _ := create(t, h)
	r := pay.Refund{ID: ids.Refund(time.Now()), PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency, Status: pay.RefundPending}
	_, err := h.Provider.Refund(context.Background(), p, r, "")
	wantCode(t, err, pay.EINVALID)
}

func testCancel(t *testing.T, h Harness) {
	p, res := create(t, h)
	r, err := h.Provider.Cancel(context.Background(), p, "cancel-"+p.ID)
	if h.lacks(t, FeatureCancel) {
		wantCode(t, err, pay.EUNSUPPORTED)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, "Cancel", r)
	if got, want := r.ProviderRef, res.ProviderRef; got != want {
		t.Fatalf("Cancel: ProviderRef=%s, want %s", got, want)
	}
	if h.Stateless {
		return
	}
	// An open payment is canceled; a finished one keeps its outcome.
	want := pay.Failed
	if res.Status.Terminal() {
		want = res.Status
	}
	if r.Status != want {
		t.Fatalf("Cancel: Status=%s after Create answered %s, want %s", r.Status, res.Status, want)
	}
}

func testWebhook(t *testing.T, h Harness) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			now := h.now()
			e := Event{
				Kind: kind, ID: "evt_conf_" + strings.ToLower(ids.Event(now)[4:]),
				PaymentID: ids.Payment(now), ProviderRef: "ref_" + strings.ToLower(ids.Event(now)[4:]),
				At: now.Add(-time.Second).Truncate(time.Second),
			}
			body, hdr, ok := h.Sign(t, e)
			if !ok {
				t.Skipf("the wire format has no %s event", kind)
			}
			ev, err := h.Provider.ParseWebhook(body, hdr, now)
			if kind == KindUnknown && !h.IgnoresUnknown {
				wantCode(t, err, pay.EINVALID)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ev.EventID, e.ID; got != want {
				t.Fatalf("EventID=%q, want %q", got, want)
			}
			if ev.Type == "" {
				t.Fatal("empty Type")
			}
			if !ev.OccurredAt.Equal(e.At) {
				t.Fatalf("OccurredAt=%s, want %s", ev.OccurredAt, e.At)
			}
			if kind == KindUnknown {
				if !ev.Ignore || ev.Status != "" {
					t.Fatalf("unknown event: %+v, want Ignore and no status", ev)
				}
				return
			}
			if ev.Ignore {
				t.Fatalf("%s event ignored: %+v", kind, ev)
			}
			if ev.PaymentID != e.PaymentID || ev.ProviderRef != e.ProviderRef {
				t.Fatalf("PaymentID=%q ProviderRef=%q, want %q %q", ev.PaymentID, ev.ProviderRef, e.PaymentID, e.ProviderRef)
			}
			if kind == KindFailedAttempt {
				if ev.Status != "" || ev.StepKind != pay.StepFailedAttempt {
					t.Fatalf("failed attempt: Status=%q StepKind=%q, want no status and %s", ev.Status, ev.StepKind, pay.StepFailedAttempt)
				}
				return
			}
			if got, want := ev.Status, pay.Status(kind); got != want {
				t.Fatalf("Status=%q, want %q", got, want)
			}
		})
	}
}

// signed returns a valid captured webhook for the error tests.
func signed(t *testing.T, h Harness, at time.Time) ([]byte, http.Header) {
	t.Helper()
	e := Event{Kind: KindCaptured, ID: "evt_conf_err_" + strings.ToLower(ids.Event(at)[4:]), PaymentID: ids.Payment(at), ProviderRef: "ref_err", At: at}
	body, hdr, ok := h.Sign(t, e)
	if !ok {
		t.Fatal("psptest: Sign cannot sign a captured event")
	}
	return body, hdr
}

func testWebhookErrSignature(t *testing.T, h Harness) {
	now := h.now()
	body, hdr := signed(t, h, now)
	if _, err := h.Provider.ParseWebhook(body, hdr, now); err != nil {
		t.Fatalf("the untouched webhook: %v", err)
	}

	t.Run("Tampered", func(t *testing.T) {
		b := append([]byte(nil), body...)
		i := strings.Index(string(b), "\"id\"")
		if i < 0 {
			i = len(b) / 2
		}
		b[i+1] ^= 0x01 // "id" → "hd": still JSON, no longer the signed bytes
		_, err := h.Provider.ParseWebhook(b, hdr, now)
		wantCode(t, err, pay.ESIGNATURE)
	})
	t.Run("NoHeaders", func(t *testing.T) {
		_, err := h.Provider.ParseWebhook(body, http.Header{}, now)
		wantCode(t, err, pay.ESIGNATURE)
	})
	t.Run("OtherBodySignature", func(t *testing.T) {
		// A signature of another body under the same id and time.
		other := h.SignRaw(t, "evt_conf_other", []byte(`{"other":true}`), now)
		mixed := hdr.Clone()
		for k, vs := range other {
			if strings.Contains(strings.ToLower(k), "signature") {
				mixed[k] = vs
			}
		}
		_, err := h.Provider.ParseWebhook(body, mixed, now)
		wantCode(t, err, pay.ESIGNATURE)
	})
}

func testWebhookErrTooOld(t *testing.T, h Harness) {
	tol := h.Tolerance
	if tol <= 0 {
		tol = 5 * time.Minute
	}
	now := h.now()
	body, hdr := signed(t, h, now.Add(-tol-time.Minute))
	_, err := h.Provider.ParseWebhook(body, hdr, now)
	wantCode(t, err, pay.ESIGNATURE)
}

func testWebhookErrMalformed(t *testing.T, h Harness) {
	now := h.now()
	for name, body := range map[string]string{
		"Truncated": `{"id":"evt_conf_bad","type":`,
		"Array":     `[1,2,3]`,
		"Empty":     `{}`,
	} {
		t.Run(name, func(t *testing.T) {
			hdr := h.SignRaw(t, "evt_conf_bad", []byte(body), now)
			_, err := h.Provider.ParseWebhook([]byte(body), hdr, now)
			wantCode(t, err, pay.EINVALID)
		})
	}
}
