package mollie_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mollie/mollietest"
)

// FuzzParseWebhook: whatever the body and signature, ParseWebhook answers
// a trigger with a well-formed id, an event it ignores, or EINVALID /
// ESIGNATURE; it never panics, and a trigger names a tr_ id.
func FuzzParseWebhook(f *testing.F) {
	body := []byte(`{"resource":"event","id":"event_1","type":"payment.paid","entityId":"tr_abc"}`)
	f.Add([]byte("id=tr_d0b0E3EA3v"), "")
	f.Add([]byte("id=tr_"), "")
	f.Add([]byte("id=tr_a&id=tr_b"), "")
	f.Add(body, sign(body).Get("X-Mollie-Signature"))
	f.Add(body, "sha256=00")
	f.Add([]byte(`{"id":`), "sha256=")
	prov := newProvider(f, mollietest.New(f))
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		h := http.Header{}
		if sig != "" {
			h.Set("X-Mollie-Signature", sig)
		}
		ev, err := prov.ParseWebhook(body, h, time.Now())
		if err != nil {
			if c := pay.ErrorCode(err); c != pay.EINVALID && c != pay.ESIGNATURE {
				t.Fatalf("err=%v (%s), want EINVALID or ESIGNATURE", err, c)
			}
			return
		}
		if ev.Ignore {
			return
		}
		if !ev.Pull || len(ev.ProviderRef) < 4 || ev.ProviderRef[:3] != "tr_" || ev.EventID == "" {
			t.Fatalf("ev=%+v, want a trigger for a tr_ id", ev)
		}
	})
}
