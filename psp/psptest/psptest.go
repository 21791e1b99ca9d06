// Package psptest is the provider conformance suite: every PSP adapter
// (pay.Provider) passes it against its real client library and a fake of
// the PSP's HTTP API built from the PSP's own published examples, before
// it is merged. It checks, as subtests of Run:
//
//   - the calls paystate makes (Provider/...): create with an idempotency
//     key, the same key never charging twice, status, two partial refunds
//     each asked twice, refund status, cancel; answers carry a valid
//     status, a client secret only while the status shows secrets, a
//     redirect URL only for requires_action, never a secret in Raw, an
//     amount and currency (where the answer says them) that are the
//     payment's;
//   - the webhook: the mapping table (Harness.Mapping: every event type of
//     the wire format and the status, timeline step, refund or dispute
//     change SPEC §3 maps it to, checked on the parsed event), bad
//     signatures and stale timestamps ESIGNATURE, malformed signed bodies
//     EINVALID;
//   - the webhook through paystate's real finalize.Inbox on a bbolt file in
//     t.TempDir() (Apply/...), for a payment created through
//     finalize.Payments: every event that announces the capture, in both
//     orders and each delivered twice, is one transition and one outbox
//     record; an event whose amount, currency or reference contradicts the
//     payment puts it on the review queue, never captures it; a forged or
//     stale webhook is refused and stores nothing;
//   - the keys (Keys): every request that reached the PSP's HTTP API with
//     a method that changes something (Harness.Calls) carries an
//     idempotency key the suite derived from business data
//     ("charge-<payment_id>", "checkout-<payment_id>",
//     "refund-<refund_id>", "cancel-<payment_id>").
//
// # Adding a provider
//
// A provider's package runs the suite from a test, with a Harness over its
// real adapter pointed at a fake of its PSP's HTTP API on 127.0.0.1:
//
//	func TestConformance(t *testing.T) {
//		fake := newFakeAPI(t) // an httptest.Server answering the PSP's documented examples
//		p, _ := mollie.New(mollie.Config{APIBase: fake.URL, ...})
//		psptest.Run(t, psptest.Harness{
//			Provider: p,
//			Payment:  func(id string) pay.Payment { ... }, // what the PSP accepts
//			Capture:  func(t *testing.T, p pay.Payment) pay.Payment { ... }, // the fake's customer pays
//			Sign:     func(t *testing.T, e psptest.Event) ([]byte, http.Header, bool) { ... },
//			SignRaw:  ...,
//			Mapping: []psptest.Mapping{
//				{Type: "paid", Kind: psptest.KindCaptured},
//				{Type: "failed", Kind: psptest.KindFailed},
//				// every event type of the wire format, and one unknown
//			},
//			Calls:      func() []psptest.Call { return fake.calls() }, // Method, Path, and the key header
//			UnknownRef: "tr_unknown",
//			Lacks:      []psptest.Feature{psptest.FeatureCancel}, // what the PSP has not
//		})
//	}
//
// Sign builds a webhook body of the provider's wire format for one
// Mapping row (Event.Type, Event.Kind) about the event's payment and
// references, with the event's amount and currency, and signs it the way
// the PSP does (with the PSP's library where it publishes one, else with
// the standard library). A wire format whose webhook carries no state
// (Mollie's: only an id) declares it (Harness.Trigger): Sign signs the
// trigger, Trigger.Set makes the fake answer the state a fetch must find,
// and the Apply tests run the inbox's pull worker. Calls returns what an http.RoundTripper or
// reverse proxy in front of the fake recorded, the key taken from the
// header the PSP names (Idempotency-Key, PayPal-Request-Id).
//
// A provider without a feature lists it in Harness.Lacks; the suite then
// checks that the provider says so (EUNSUPPORTED, no HTTP calls) instead
// of testing the feature, and logs it: nothing is skipped silently. The
// mock, standard, stripe (PaymentIntents and Checkout Sessions, against
// stripe-mock and against stripefake), mollie and paypal providers run it
// in their conformance_test.go or paypal_test.go; StandardWebhooks gives the Sign and Mapping of the
// mock's and standard's wire format.
package psptest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
)

// Feature is a part of pay.Provider a PSP may not have. A harness lists
// the features its provider lacks (Harness.Lacks); the suite then checks
// that the provider says so instead of testing the feature, and logs it.
type Feature string

// Features a provider may lack.
const (
	// FeatureAPI: Create and Refund reach a PSP. Without it (report mode:
	// standard) Create answers the payment's own status with no
	// reference, Refund answers pending, and Status, RefundStatus and
	// Cancel are EUNSUPPORTED.
	FeatureAPI Feature = "psp_api"
	// FeatureHTTP: the PSP's API is reached over HTTP that the harness
	// records (Harness.Calls). The mock's API is inside the process.
	FeatureHTTP Feature = "http_api"
	// FeatureStatus: Provider.Status (the sweeper's reconciliation).
	FeatureStatus Feature = "status"
	// FeatureRefundStatus: Provider.RefundStatus.
	FeatureRefundStatus Feature = "refund_status"
	// FeatureCancel: Provider.Cancel (the sweeper expires an open payment
	// at the PSP).
	FeatureCancel Feature = "cancel"
)

// Call is one request the provider sent to its PSP's HTTP API.
type Call struct {
	Method string
	Path   string
	// Key is the request's idempotency key (Idempotency-Key,
	// PayPal-Request-Id: the header the PSP names), "" if it had none.
	Key string
}

// Harness is a provider under test and what the suite needs to drive it.
type Harness struct {
	// Provider is the adapter under test.
	Provider pay.Provider
	// Payment returns a payment as paystate stores it before the PSP call,
	// with amount and currency the PSP accepts (and Flow, Customer,
	// ReturnURL as the flow under test needs); id is a fresh payment id.
	// Nil: 1000 EUR.
	Payment func(id string) pay.Payment
	// OpenPayment, if set, returns a payment like Payment whose create the
	// PSP leaves open (not captured), for the tests that apply webhooks;
	// nil: Payment.
	OpenPayment func(id string) pay.Payment
	// Capture makes the PSP capture a payment created with Create (the
	// customer paid) and returns the payment as paystate then stores it.
	// Nil: the create answer already captured it.
	Capture func(t *testing.T, p pay.Payment) pay.Payment
	// Sign returns a signed webhook of the provider's wire format for the
	// Mapping row e.Type, e.Kind, about e's payment; ok false if the wire
	// format has no such event.
	Sign func(t *testing.T, e Event) (body []byte, h http.Header, ok bool)
	// SignRaw signs an arbitrary body as a webhook with event id id at at.
	SignRaw func(t *testing.T, id string, body []byte, at time.Time) http.Header
	// Mapping lists every event type of the provider's wire format with
	// what SPEC §3 maps it to (a type that maps to several kinds, such as
	// Stripe's checkout.session.completed, has a row for each), and one
	// type the provider does not map (KindUnknown). Required.
	Mapping []Mapping
	// Calls returns the requests that reached the PSP's HTTP API so far;
	// nil if the provider lacks FeatureHTTP.
	Calls func() []Call
	// Now is the time given to ParseWebhook and the inbox; nil: time.Now.
	Now func() time.Time
	// Tolerance is the provider's webhook timestamp tolerance; the suite
	// signs a webhook older than that. Zero: five minutes.
	Tolerance time.Duration
	// IgnoresUnknown says an unknown event type parses as Ignore (Stripe);
	// otherwise it must be EINVALID (the Standard Webhooks wire format).
	IgnoresUnknown bool
	// UnknownRef is a provider reference the PSP does not know.
	UnknownRef string
	// Stateless says the PSP API answers fixtures (stripe-mock): every id
	// exists and keys are not enforced, so the checks of replays, unknown
	// references and cancel outcomes are not made (and say so).
	Stateless bool
	// Lacks lists the features the provider does not have.
	Lacks []Feature
	// KeyPrefixes are prefixes of keys the provider derives itself from a
	// payment id, for a call the suite does not make directly (PayPal's
	// "capture-<payment_id>", sent by Status once the buyer approved): a
	// key "<prefix><payment_id>" counts as derived when the suite created
	// that payment.
	KeyPrefixes []string
	// Ref, if set, writes a provider reference of the PSP's shape from a
	// fresh alphanumeric suffix, for events about a payment the suite did
	// not create (Mollie's tr_...); nil: "ref_conf_<suffix>".
	Ref func(suffix string) string
	// Trigger, if set, declares that the wire format's webhooks are
	// triggers, never evidence (Mollie): see Trigger.
	Trigger *Trigger
}

// Trigger declares a wire format whose every webhook is a trigger
// (pay.WebhookEvent.Pull): it carries no status, amount or time of the
// PSP's own, and paystate learns the state by a fetch under the payment's
// lease (finalize.Pull). With it the suite checks instead:
//
//   - the Mapping has a KindPull row and needs no KindCaptured one (a
//     capture is announced by a fetch after a trigger);
//   - every event's OccurredAt is the time of receipt (the now given to
//     ParseWebhook); a row in Unsigned has an EventID of the provider's
//     making, the same for the same body, a signed row the PSP's own;
//   - the forged checks use the signed rows (none: logged, and the
//     unsigned rows are checked to be triggers only); with no time
//     signed, an old webhook is checked to be a trigger only, never
//     evidence, instead of refused;
//   - the Apply tests deliver triggers through the inbox and run its
//     worker with a finalize.Pull: Set makes the PSP hold the state the
//     trigger stands for, and the fetch finalizes it.
type Trigger struct {
	// Unsigned lists the Mapping types whose webhook carries no signature
	// and no event id of the PSP's own (Mollie's classic form POST
	// id=tr_...).
	Unsigned []string
	// Set makes the PSP's API answer a fetch of ref (the payment's
	// provider reference) with a payment e.ProviderRef in the state
	// e.Kind stands for (KindProcessing, KindCaptured), of e.Amount in
	// e.Currency. Required.
	Set func(t *testing.T, ref string, e Event)
}

// unsigned reports whether typ is a Mapping type without a signature.
func (h Harness) unsigned(typ string) bool {
	return h.Trigger != nil && slices.Contains(h.Trigger.Unsigned, typ)
}

// suite is one run: the harness and the idempotency keys the suite (and
// the finalize service it drives) handed the provider.
type suite struct {
	Harness

	mu   sync.Mutex
	keys map[string]bool
}

// key records k as a key handed to the provider and returns it.
func (s *suite) key(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[k] = true
	return k
}

func (s *suite) handed(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[k]
}

// derived reports whether k is one of Harness.KeyPrefixes followed by the
// id of a payment the suite created.
func (s *suite) derived(k string) bool {
	for _, prefix := range s.KeyPrefixes {
		if id, ok := strings.CutPrefix(k, prefix); ok && id != "" && (s.handed(finalize.ChargeKey(id)) || s.handed(finalize.CheckoutKey(id))) {
			return true
		}
	}
	return false
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

// has reports whether the provider has f, without a log line.
func (h Harness) has(f Feature) bool { return !slices.Contains(h.Lacks, f) }

// stateless logs, and reports, that a check is not made because the PSP
// API is stateless.
func (h Harness) stateless(t *testing.T, what string) bool {
	t.Helper()
	if h.Stateless {
		t.Logf("the PSP API is stateless (Harness.Stateless): %s not checked", what)
	}
	return h.Stateless
}

func (h Harness) payment() pay.Payment {
	id := ids.Payment(time.Now())
	if h.Payment != nil {
		return h.Payment(id)
	}
	return pay.Payment{ID: id, OrderID: "order-" + id, Amount: 1000, Currency: "EUR", Status: pay.Created, Version: 1}
}

func (h Harness) openPayment() pay.Payment {
	if h.OpenPayment != nil {
		return h.OpenPayment(ids.Payment(time.Now()))
	}
	return h.payment()
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	switch {
	case h.Provider == nil || h.Sign == nil || h.SignRaw == nil:
		t.Fatal("psptest: Harness needs Provider, Sign and SignRaw")
	case len(h.Mapping) == 0:
		t.Fatal("psptest: Harness.Mapping is empty: list every event type of the wire format")
	case h.has(FeatureHTTP) && h.Calls == nil:
		t.Fatal("psptest: Harness.Calls is nil: record the PSP calls, or list FeatureHTTP in Lacks")
	case h.Trigger != nil && h.Trigger.Set == nil:
		t.Fatal("psptest: Harness.Trigger.Set is nil: the Apply tests make the PSP hold the state a trigger stands for")
	}
	s := &suite{Harness: h, keys: map[string]bool{}}
	t.Run("Provider", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			fn   func(*testing.T, *suite)
		}{
			{"Create", testCreate},
			{"CreateSameKey", testCreateSameKey},
			{"CreateErrNoKey", testCreateErrNoKey},
			{"Status", testStatus},
			{"StatusNotFound", testStatusNotFound},
			{"Refund", testRefund},
			{"RefundErrNoKey", testRefundErrNoKey},
			{"Cancel", testCancel},
			{"Mapping", testMapping},
			{"WebhookErrSignature", testWebhookErrSignature},
			{"WebhookErrTooOld", testWebhookErrTooOld},
			{"WebhookErrMalformed", testWebhookErrMalformed},
			{"ApplyOnce", testApplyOnce},
			{"ApplyEvidence", testApplyEvidence},
			{"ApplyRefused", testApplyRefused},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, s)
			})
		}
	})
	// After every call above has been made.
	t.Run("Keys", func(t *testing.T) { testKeys(t, s) })
}

// create creates a new payment at the PSP and returns it as paystate
// stores it afterwards, with the answer.
func create(t *testing.T, s *suite) (pay.Payment, pay.PSPResult) {
	t.Helper()
	p := s.payment()
	res, err := s.Provider.Create(context.Background(), p, s.key(finalize.CreateKey(p)))
	if err != nil {
		t.Fatalf("Create(%s): %v", p.ID, err)
	}
	checkResult(t, s, "Create", res)
	checkAmount(t, "Create", p, res)
	p.ProviderRef, p.Status, p.Version = res.ProviderRef, res.Status, p.Version+1
	p.ClientSecret, p.RedirectURL = res.ClientSecret, res.RedirectURL
	return p, res
}

// checkResult checks what every answer about a known payment must hold.
// Without FeatureAPI (report mode) the answer names no PSP reference.
func checkResult(t *testing.T, s *suite, op string, res pay.PSPResult) {
	t.Helper()
	if !res.Found {
		t.Fatalf("%s: Found=false for a payment the PSP knows: %+v", op, res)
	}
	if !slices.Contains([]pay.Status{pay.Created, pay.Processing, pay.RequiresAction, pay.Captured, pay.Failed, pay.Refunded}, res.Status) {
		t.Fatalf("%s: Status=%q, want a status a PSP reports", op, res.Status)
	}
	if res.ProviderRef == "" && s.has(FeatureAPI) {
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

func testCreate(t *testing.T, s *suite) {
	p, res := create(t, s)
	if res.Status == pay.Refunded {
		t.Fatalf("Create answered refunded for %s", p.ID)
	}
	if s.lacks(t, FeatureAPI) {
		if res.Status != pay.Created || res.ProviderRef != "" {
			t.Fatalf("report mode: Create answered %+v, want created and no reference", res)
		}
	}
}

func testCreateSameKey(t *testing.T, s *suite) {
	if s.stateless(t, "one charge per idempotency key") {
		return
	}
	p := s.payment()
	key := s.key(finalize.CreateKey(p))
	first, err := s.Provider.Create(context.Background(), p, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Provider.Create(context.Background(), p, key)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, s, "second Create", second)
	if got, want := second.ProviderRef, first.ProviderRef; got != want {
		t.Fatalf("second Create: ProviderRef=%s, want %s (one charge per key)", got, want)
	}
	if got, want := second.Status, first.Status; got != want {
		t.Fatalf("second Create: Status=%s, want %s", got, want)
	}
}

func testCreateErrNoKey(t *testing.T, s *suite) {
	if s.lacks(t, FeatureAPI) {
		return // report mode calls no PSP: no key to need
	}
	_, err := s.Provider.Create(context.Background(), s.payment(), "")
	wantCode(t, err, pay.EINVALID)
}

func testStatus(t *testing.T, s *suite) {
	p, res := create(t, s)
	st, err := s.Provider.Status(context.Background(), p)
	if s.lacks(t, FeatureStatus) {
		wantCode(t, err, pay.EUNSUPPORTED)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, s, "Status", st)
	if got, want := st.ProviderRef, res.ProviderRef; got != want {
		t.Fatalf("Status: ProviderRef=%s, want %s", got, want)
	}
	if !s.stateless(t, "the status after create") {
		if got, want := st.Status, res.Status; got != want {
			t.Fatalf("Status=%s right after Create answered %s", got, want)
		}
		checkAmount(t, "Status", p, st)
	}
}

func testStatusNotFound(t *testing.T, s *suite) {
	p := pay.Payment{ID: ids.Payment(time.Now()), ProviderRef: s.UnknownRef}
	st, err := s.Provider.Status(context.Background(), p)
	if s.lacks(t, FeatureStatus) {
		wantCode(t, err, pay.EUNSUPPORTED)
		return
	}
	if s.stateless(t, "an unknown reference") {
		return
	}
	if s.UnknownRef == "" {
		t.Fatal("psptest: Harness.UnknownRef is empty")
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Found {
		t.Fatalf("Status(%s)=%+v, want not found", s.UnknownRef, st)
	}
	if st.ClientSecret != "" || st.ProviderRef != "" && st.ProviderRef != s.UnknownRef {
		t.Fatalf("Status of an unknown payment carries data: %+v", st)
	}
}

// testRefund makes two partial refunds of a captured payment, each
// asked twice with its own key ("refund-<refund id>"): every answer is a
// refund status with the PSP's reference, the same for the same key
// (unless Stateless), and RefundStatus (where the provider has one) knows
// the refund.
func testRefund(t *testing.T, s *suite) {
	p, _ := create(t, s)
	if s.Capture != nil {
		p = s.Capture(t, p)
	}
	if p.Status != pay.Captured {
		t.Fatalf("payment %s is %s after capture, want captured", p.ID, p.Status)
	}
	api := s.has(FeatureAPI)
	refs := map[string]string{}
	for _, amount := range []int64{p.Amount / 4, p.Amount / 2} {
		r := pay.Refund{ID: ids.Refund(time.Now()), PaymentID: p.ID, Amount: amount, Currency: p.Currency, Status: pay.RefundPending}
		for i := range 2 {
			res, err := s.Provider.Refund(context.Background(), p, r, s.key(pay.RefundKey(r.ID)))
			if err != nil {
				t.Fatalf("Refund %s try %d: %v", r.ID, i+1, err)
			}
			if !res.Status.Valid() || !res.Found || api && res.ProviderRef == "" {
				t.Fatalf("Refund %s try %d: %+v, want a refund status and the PSP's reference", r.ID, i+1, res)
			}
			if !api && res.Status != pay.RefundPending {
				t.Fatalf("report mode: Refund %s answered %s, want pending until the bridge reports", r.ID, res.Status)
			}
			if strings.Contains(res.Raw, "secret") {
				t.Fatalf("Refund %s: Raw holds a secret: %q", r.ID, res.Raw)
			}
			if prev, ok := refs[r.ID]; ok && prev != res.ProviderRef && !s.Stateless {
				t.Fatalf("Refund %s try %d: ProviderRef=%s, the first answer said %s", r.ID, i+1, res.ProviderRef, prev)
			}
			refs[r.ID] = res.ProviderRef
		}
		r.ProviderRef = refs[r.ID] // as paystate records it from the answer
		st, err := s.Provider.RefundStatus(context.Background(), p, r)
		if s.lacks(t, FeatureRefundStatus) {
			wantCode(t, err, pay.EUNSUPPORTED)
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

func testRefundErrNoKey(t *testing.T, s *suite) {
	if s.lacks(t, FeatureAPI) {
		return // report mode calls no PSP: no key to need
	}
	p, _ := create(t, s)
	r := pay.Refund{ID: ids.Refund(time.Now()), PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency, Status: pay.RefundPending}
	_, err := s.Provider.Refund(context.Background(), p, r, "")
	wantCode(t, err, pay.EINVALID)
}

func testCancel(t *testing.T, s *suite) {
	p, res := create(t, s)
	r, err := s.Provider.Cancel(context.Background(), p, s.key("cancel-"+p.ID))
	if s.lacks(t, FeatureCancel) {
		wantCode(t, err, pay.EUNSUPPORTED)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, s, "Cancel", r)
	if s.stateless(t, "the cancel outcome") {
		return
	}
	if got, want := r.ProviderRef, res.ProviderRef; got != want {
		t.Fatalf("Cancel: ProviderRef=%s, want %s", got, want)
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

// testKeys checks every request that reached the PSP's HTTP API during
// the run: one that may change something (any method but GET and HEAD)
// carries an idempotency key the suite derived from business data.
func testKeys(t *testing.T, s *suite) {
	if s.lacks(t, FeatureHTTP) {
		if s.Calls != nil {
			t.Fatal("psptest: Harness.Calls is set for a provider that lacks FeatureHTTP")
		}
		return
	}
	calls := s.Calls()
	writes := 0
	for _, c := range calls {
		if c.Method == http.MethodGet || c.Method == http.MethodHead {
			continue
		}
		writes++
		if !s.handed(c.Key) && !s.derived(c.Key) {
			t.Errorf("%s %s: idempotency key %q is not one derived from a payment or refund id by the suite", c.Method, c.Path, c.Key)
		}
	}
	if writes == 0 {
		t.Fatalf("no request that changes something among the %d recorded: is Harness.Calls recording?", len(calls))
	}
	if !t.Failed() {
		t.Logf("%d requests, %d that change something, each with its derived key", len(calls), writes)
	}
}
