package stdwebhook_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
)

// FuzzParseWebhook feeds arbitrary bodies and headers to Verifier.Parse. When
// sign is true the body is signed with the right secret under the fuzzed id
// and timestamp, so the parser behind the signature check is reached too.
// Parse must never panic, must fail only with ESIGNATURE or EINVALID, and an
// accepted event must be complete. Seeds: testdata/fuzz/FuzzParseWebhook.
func FuzzParseWebhook(f *testing.F) {
	v, err := stdwebhook.NewVerifier(secretA, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(validBody, "evt_1", strconv.FormatInt(now.Unix(), 10), "", true)
	f.Add([]byte(`{}`), "evt_1", "0", "v1,AAAA", false)

	f.Fuzz(func(t *testing.T, body []byte, id, ts, sig string, sign bool) {
		h := http.Header{}
		h.Set(stdwebhook.HeaderID, id)
		h.Set(stdwebhook.HeaderTimestamp, ts)
		h.Set(stdwebhook.HeaderSignature, sig)
		if sign {
			if n, err := strconv.ParseInt(ts, 10, 64); err == nil {
				signed := testkit.StandardHeader(t, secretA, id, unix(n), body)
				h.Set(stdwebhook.HeaderSignature, signed.Get(stdwebhook.HeaderSignature)+" "+sig)
			}
		}

		e, err := v.Parse(body, h, now)
		if err != nil {
			if code := pay.ErrorCode(err); code != pay.ESIGNATURE && code != pay.EINVALID {
				t.Fatalf("ErrorCode=%q (%v), want %s or %s", code, err, pay.ESIGNATURE, pay.EINVALID)
			}
			return
		}
		if e.EventID == "" || e.EventID != id {
			t.Fatalf("EventID=%q, header %q", e.EventID, id)
		}
		switch {
		case e.Refund != nil || e.Dispute != nil:
			if e.Status != "" || (e.Refund != nil) == (e.Dispute != nil) {
				t.Fatalf("Status=%q, refund %v, dispute %v for type %q", e.Status, e.Refund, e.Dispute, e.Type)
			}
		case !e.Status.Valid() || stdwebhook.TypeOf(e.Status) != e.Type:
			t.Fatalf("Status=%q for type %q", e.Status, e.Type)
		}
		if e.PaymentID == "" && e.ProviderRef == "" {
			t.Fatal("event without payment id and provider reference")
		}
		if d := now.Sub(unix(mustInt(t, ts))); d > v.Tolerance() || d < -v.Tolerance() {
			t.Fatalf("accepted timestamp %s outside tolerance", ts)
		}
	})
}

func unix(n int64) time.Time { return time.Unix(n, 0) }

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("accepted timestamp %q: %v", s, err)
	}
	return n
}
