package psptest

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
)

// Kind is what an event of the wire format means to paystate, independent
// of the provider's names.
type Kind string

// Webhook kinds. Each of KindCaptured to KindRefunded reports the status of
// the same name.
const (
	KindCaptured       Kind = "captured"
	KindFailed         Kind = "failed"
	KindProcessing     Kind = "processing"
	KindRequiresAction Kind = "requires_action"
	KindRefunded       Kind = "refunded"
	// KindFailedAttempt is a failed try that leaves the payment open: no
	// status, timeline step pay.StepFailedAttempt.
	KindFailedAttempt Kind = "failed_attempt"
	// KindReview is an event paystate cannot map to a status and puts on
	// the review queue (Stripe: a session completed with no payment
	// required): no status, step pay.StepReview.
	KindReview Kind = "review"
	// KindRefundSucceeded, KindRefundFailed and KindRefundPending report a
	// refund of the payment (WebhookEvent.Refund) in that status.
	KindRefundSucceeded Kind = "refund_succeeded"
	KindRefundFailed    Kind = "refund_failed"
	KindRefundPending   Kind = "refund_pending"
	// KindDisputeOpened reports a dispute that needs a response or is
	// under review; KindDisputeWon and KindDisputeLost a closed one
	// (WebhookEvent.Dispute).
	KindDisputeOpened Kind = "dispute_opened"
	KindDisputeWon    Kind = "dispute_won"
	KindDisputeLost   Kind = "dispute_lost"
	// KindPull is a trigger, not evidence (WebhookEvent.Pull): no
	// status, refund or dispute; paystate asks the PSP under the
	// payment's lease (PayPal's CHECKOUT.ORDER.APPROVED: capture now).
	KindPull Kind = "pull"
	// KindUnknown is an event type the provider does not map.
	KindUnknown Kind = "unknown"
)

// Mapping is one row of a provider's mapping table: an event type of its
// wire format and what it means.
type Mapping struct {
	Type string // the wire format's event type
	Kind Kind
}

// Event is a webhook the harness builds and signs.
type Event struct {
	Type        string // the Mapping row's event type
	Kind        Kind   // and its kind
	ID          string // event id
	PaymentID   string // paystate's payment id, echoed by the PSP
	ProviderRef string // the payment's provider_ref
	// SecondRef is the PSP object that holds the money under ProviderRef,
	// where the provider has one (a Stripe Checkout Session's
	// PaymentIntent); the harness may ignore it.
	SecondRef string
	Amount    int64
	Currency  string
	// RefundID is paystate's id of the refund a refund event is about;
	// DisputeID the PSP's id of a dispute.
	RefundID  string
	DisputeID string
	At        time.Time // event time and signature timestamp
}

// status is the status a kind reports, "" for none.
func (k Kind) status() pay.Status {
	switch k {
	case KindCaptured, KindFailed, KindProcessing, KindRequiresAction, KindRefunded:
		return pay.Status(k)
	}
	return ""
}

// refundStatus is the refund status a refund kind reports.
func (k Kind) refundStatus() (pay.RefundStatus, bool) {
	switch k {
	case KindRefundSucceeded:
		return pay.RefundSucceeded, true
	case KindRefundFailed:
		return pay.RefundFailed, true
	case KindRefundPending:
		return pay.RefundPending, true
	}
	return "", false
}

// disputeStatuses are the dispute statuses a dispute kind may report.
func (k Kind) disputeStatuses() ([]pay.DisputeStatus, bool) {
	switch k {
	case KindDisputeOpened:
		return []pay.DisputeStatus{pay.DisputeNeedsResponse, pay.DisputeUnderReview}, true
	case KindDisputeWon:
		return []pay.DisputeStatus{pay.DisputeWon}, true
	case KindDisputeLost:
		return []pay.DisputeStatus{pay.DisputeLost}, true
	}
	return nil, false
}

// event returns a fresh event of row m about a payment of amount 2500 EUR
// (or p's, if p.ID is set), at the harness's now less a second.
func (s *suite) event(m Mapping, p pay.Payment) Event {
	now := s.now()
	suffix := strings.ToLower(ids.Event(now)[4:])
	e := Event{
		Type: m.Type, Kind: m.Kind, ID: "evt_conf_" + suffix,
		PaymentID: p.ID, ProviderRef: p.ProviderRef, SecondRef: p.SecondRef,
		Amount: p.Amount, Currency: p.Currency,
		RefundID: ids.Refund(now), DisputeID: "dp_conf_" + suffix,
		At: now.Add(-time.Second).Truncate(time.Second),
	}
	if e.PaymentID == "" {
		e.PaymentID = ids.Payment(now)
	}
	if e.ProviderRef == "" {
		e.ProviderRef = "ref_conf_" + suffix
		if s.Ref != nil {
			e.ProviderRef = s.Ref(suffix)
		}
	}
	if e.SecondRef == "" {
		e.SecondRef = "ref2_conf_" + suffix
	}
	if e.Amount == 0 {
		e.Amount, e.Currency = 2500, "EUR"
	}
	return e
}

// sign signs e with the harness, failing if its wire format has no such
// event: every Mapping row must be signable.
func (s *suite) sign(t *testing.T, e Event) ([]byte, http.Header) {
	t.Helper()
	body, h, ok := s.Sign(t, e)
	if !ok {
		t.Fatalf("psptest: Sign cannot sign the Mapping row %s → %s", e.Type, e.Kind)
	}
	return body, h
}

// rows returns the Mapping rows of kind k.
func (s *suite) rows(k Kind) []Mapping {
	var out []Mapping
	for _, m := range s.Mapping {
		if m.Kind == k {
			out = append(out, m)
		}
	}
	return out
}

// testMapping parses a signed event of every Mapping row and checks that
// it means what the row says: the status, timeline step, refund or
// dispute change, the payment it names, its time and its evidence.
func testMapping(t *testing.T, s *suite) {
	if len(s.rows(s.announces())) == 0 || len(s.rows(KindUnknown)) == 0 {
		t.Fatalf("psptest: Harness.Mapping needs a row of %s and one of KindUnknown", s.announces())
	}
	for _, m := range s.Mapping {
		t.Run(m.Type+"→"+string(m.Kind), func(t *testing.T) {
			e := s.event(m, pay.Payment{})
			body, hdr := s.sign(t, e)
			now := s.now()
			ev, err := s.Provider.ParseWebhook(body, hdr, now)
			if m.Kind == KindUnknown && !s.IgnoresUnknown {
				wantCode(t, err, pay.EINVALID)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkIdentity(t, s, e, body, hdr, now, ev)
			if ev.Type == "" {
				t.Fatal("empty Type")
			}
			if m.Kind == KindUnknown {
				if !ev.Ignore || ev.Status != "" {
					t.Fatalf("unknown event: %+v, want Ignore and no status", ev)
				}
				return
			}
			if ev.Ignore {
				t.Fatalf("%s event ignored: %+v", m.Kind, ev)
			}
			checkNames(t, e, ev)
			checkMeaning(t, e, ev)
		})
	}
}

// announces is the kind of the Mapping rows that announce a capture:
// KindCaptured, or KindPull for a trigger-only wire format.
func (s *suite) announces() Kind {
	if s.Trigger != nil {
		return KindPull
	}
	return KindCaptured
}

// checkIdentity checks the event id and time ParseWebhook gave ev, parsed
// from e's body at now: e's own, or, for a trigger-only wire format
// (Harness.Trigger), the time of receipt (now) and, for an unsigned row,
// an id of the provider's making that is the same for the same body.
func checkIdentity(t *testing.T, s *suite, e Event, body []byte, hdr http.Header, now time.Time, ev pay.WebhookEvent) {
	t.Helper()
	wantAt := e.At
	if s.Trigger != nil {
		wantAt = now
	}
	if !ev.OccurredAt.Equal(wantAt) {
		t.Fatalf("OccurredAt=%s, want %s", ev.OccurredAt, wantAt)
	}
	if !s.unsigned(e.Type) {
		if got, want := ev.EventID, e.ID; got != want {
			t.Fatalf("EventID=%q, want %q", got, want)
		}
		return
	}
	again, err := s.Provider.ParseWebhook(body, hdr, s.now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.EventID == "" || again.EventID != ev.EventID {
		t.Fatalf("EventID=%q, then %q for the same body: want one id, not empty", ev.EventID, again.EventID)
	}
}

// checkNames checks that ev names e's payment: by its id, or (an event
// that carries no id of paystate's, such as a Stripe dispute) by one of
// its references; and names no other reference.
func checkNames(t *testing.T, e Event, ev pay.WebhookEvent) {
	t.Helper()
	ours := func(ref string) bool { return ref == "" || ref == e.ProviderRef || ref == e.SecondRef }
	if !ours(ev.ProviderRef) || !ours(ev.SecondRef) {
		t.Fatalf("ProviderRef=%q SecondRef=%q, want %q or %q", ev.ProviderRef, ev.SecondRef, e.ProviderRef, e.SecondRef)
	}
	switch {
	case ev.PaymentID == e.PaymentID:
	case ev.PaymentID == "" && ev.ProviderRef+ev.SecondRef != "":
	default:
		t.Fatalf("PaymentID=%q ProviderRef=%q, want payment %q or one of its references", ev.PaymentID, ev.ProviderRef, e.PaymentID)
	}
}

// checkMeaning checks that ev means what e's kind says, with e's evidence.
func checkMeaning(t *testing.T, e Event, ev pay.WebhookEvent) {
	t.Helper()
	if st, ok := e.Kind.refundStatus(); ok {
		if ev.Refund == nil || ev.Status != "" {
			t.Fatalf("Refund=%+v Status=%q, want a refund change and no status", ev.Refund, ev.Status)
		}
		if got := ev.Refund.Status; got != st {
			t.Fatalf("Refund.Status=%s, want %s", got, st)
		}
		if ev.Refund.ID != e.RefundID && ev.Refund.ProviderRef == "" {
			t.Fatalf("Refund=%+v names neither refund %s nor the PSP's reference", ev.Refund, e.RefundID)
		}
		return
	}
	if sts, ok := e.Kind.disputeStatuses(); ok {
		if ev.Dispute == nil || ev.Status != "" {
			t.Fatalf("Dispute=%+v Status=%q, want a dispute change and no status", ev.Dispute, ev.Status)
		}
		if !slices.Contains(sts, ev.Dispute.Status) || ev.Dispute.ID == "" {
			t.Fatalf("Dispute=%+v, want one of %v with the PSP's id", ev.Dispute, sts)
		}
		return
	}
	if ev.Refund != nil || ev.Dispute != nil {
		t.Fatalf("a %s event carries Refund=%+v Dispute=%+v", e.Kind, ev.Refund, ev.Dispute)
	}
	if (e.Kind == KindPull) != ev.Pull {
		t.Fatalf("a %s event has Pull=%v", e.Kind, ev.Pull)
	}
	switch e.Kind {
	case KindFailedAttempt, KindReview:
		want := pay.StepFailedAttempt
		if e.Kind == KindReview {
			want = pay.StepReview
		}
		if ev.Status != "" || ev.StepKind != want {
			t.Fatalf("Status=%q StepKind=%q, want no status and step %s", ev.Status, ev.StepKind, want)
		}
	case KindPull:
		if ev.Status != "" || ev.StepKind != "" {
			t.Fatalf("Status=%q StepKind=%q, want a trigger with neither", ev.Status, ev.StepKind)
		}
	default:
		if got, want := ev.Status, e.Kind.status(); got != want || want == "" {
			t.Fatalf("Status=%q, want %q", got, want)
		}
	}
	// The evidence finalize checks: the payment's amount and currency,
	// where the event says them.
	if ev.Amount != 0 && ev.Amount != e.Amount || ev.Currency != "" && ev.Currency != e.Currency {
		t.Fatalf("Amount=%d Currency=%q, want %d %s (or not said)", ev.Amount, ev.Currency, e.Amount, e.Currency)
	}
}

// signedRow returns the first Mapping row that announces the capture and
// carries a signature; ok false if the wire format has none (logged, and
// the unsigned rows are checked to be triggers only: the Mapping test's
// checkMeaning).
func (s *suite) signedRow(t *testing.T) (Mapping, bool) {
	t.Helper()
	for _, m := range s.rows(s.announces()) {
		if !s.unsigned(m.Type) {
			return m, true
		}
	}
	t.Logf("no signed %s row (Harness.Trigger.Unsigned): a forged webhook cannot be told apart; its triggers are only asked about", s.announces())
	return Mapping{}, false
}

// signed returns a valid webhook announcing the capture, for the error
// tests; ok false if the wire format has no signed one.
func signed(t *testing.T, s *suite, at time.Time) ([]byte, http.Header, bool) {
	t.Helper()
	m, ok := s.signedRow(t)
	if !ok {
		return nil, nil, false
	}
	e := s.event(m, pay.Payment{})
	e.At = at
	body, h := s.sign(t, e)
	return body, h, true
}

func testWebhookErrSignature(t *testing.T, s *suite) {
	now := s.now()
	body, hdr, ok := signed(t, s, now)
	if !ok {
		return
	}
	if _, err := s.Provider.ParseWebhook(body, hdr, now); err != nil {
		t.Fatalf("the untouched webhook: %v", err)
	}

	t.Run("Tampered", func(t *testing.T) {
		_, err := s.Provider.ParseWebhook(tamper(body), hdr, now)
		wantCode(t, err, pay.ESIGNATURE)
	})
	t.Run("NoHeaders", func(t *testing.T) {
		_, err := s.Provider.ParseWebhook(body, http.Header{}, now)
		wantCode(t, err, pay.ESIGNATURE)
	})
	t.Run("OtherBodySignature", func(t *testing.T) {
		// A signature of another body under the same id and time.
		other := s.SignRaw(t, "evt_conf_other", []byte(`{"other":true}`), now)
		mixed := hdr.Clone()
		for k, vs := range other {
			if lk := strings.ToLower(k); strings.Contains(lk, "signature") || strings.HasSuffix(lk, "-sig") { // PayPal: Paypal-Transmission-Sig
				mixed[k] = vs
			}
		}
		_, err := s.Provider.ParseWebhook(body, mixed, now)
		wantCode(t, err, pay.ESIGNATURE)
	})
}

// tamper returns body changed by one bit: "id" → "hd", still JSON, no
// longer the signed bytes.
func tamper(body []byte) []byte {
	b := append([]byte(nil), body...)
	i := strings.Index(string(b), "\"id\"")
	if i < 0 {
		i = len(b) / 2
	}
	b[i+1] ^= 0x01
	return b
}

// tolerance is the harness's tolerance, five minutes if unset.
func (h Harness) tolerance() time.Duration {
	if h.Tolerance > 0 {
		return h.Tolerance
	}
	return 5 * time.Minute
}

// testWebhookErrTooOld: a webhook signed longer ago than the tolerance
// is ESIGNATURE. A trigger-only wire format signs no time: there an old
// webhook must still be a trigger only (its state comes from a fetch made
// now), never evidence.
func testWebhookErrTooOld(t *testing.T, s *suite) {
	now := s.now()
	body, hdr, ok := signed(t, s, now.Add(-s.tolerance()-time.Minute))
	if !ok {
		return
	}
	ev, err := s.Provider.ParseWebhook(body, hdr, now)
	if s.Trigger == nil {
		wantCode(t, err, pay.ESIGNATURE)
		return
	}
	t.Log("the wire format signs no time (Harness.Trigger): checked that an old webhook is a trigger only")
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Pull || ev.Status != "" || ev.Amount != 0 || ev.Refund != nil || ev.Dispute != nil {
		t.Fatalf("an old webhook parsed as %+v, want a trigger with no status or money", ev)
	}
}

func testWebhookErrMalformed(t *testing.T, s *suite) {
	now := s.now()
	for name, body := range map[string]string{
		"Truncated": `{"id":"evt_conf_bad","type":`,
		"Array":     `[1,2,3]`,
		"Empty":     `{}`,
	} {
		t.Run(name, func(t *testing.T) {
			hdr := s.SignRaw(t, "evt_conf_bad", []byte(body), now)
			_, err := s.Provider.ParseWebhook([]byte(body), hdr, now)
			wantCode(t, err, pay.EINVALID)
		})
	}
}
