package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/psp/paypal"
	"github.com/paystate/paystate/psp/paypal/paypaltest"
)

// TestProcess_PayPalCaptureSIGKILL runs the real binary with the PayPal
// provider against the PayPal fake: the buyer approved, the sweeper
// captures the order, and the process is killed (SIGKILL) while the
// capture call waits, before its answer. Restarted on the same database,
// paystate captures the order once: either PayPal performed the capture
// (the order reads COMPLETED, no second call) or the request was lost (a
// second capture call, under the same PayPal-Request-Id). Every capture
// request carries capture-<payment_id>.
func TestProcess_PayPalCaptureSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	for _, performed := range []bool{true, false} {
		name := "RequestLost"
		if performed {
			name = "AnswerLost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := paypaltest.NewFake(t)
			ca := paypaltest.NewCA(t)
			dir := t.TempDir()
			caFile := ca.WriteRoot(t, dir)
			toml := serveTOML(`
[payment]
provider = "paypal"
[sweeper]
interval = "100ms"
min_age = "0s"
[providers.paypal]
client_id = "` + paypaltest.ClientID + `"
secret = "` + paypaltest.Secret + `"
api_base = "` + fake.URL() + `"
webhook_id = "1JE4291016473214C"
cert_hosts = ["127.0.0.1"]
ca_file = "` + caFile + `"
`)
			held := fake.HoldCaptureRequests()
			if performed {
				held = fake.HoldCaptureAnswers()
			}
			p := startProcessIn(t, dir, toml)
			id, order := createPayPal(t, p.url)
			fake.Approve(order)

			select {
			case got := <-held:
				if got != order {
					t.Fatalf("capture of order %s, want %s", got, order)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("no capture call; log:\n%s", p.logText())
			}
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-p.done
			fake.ReleaseCaptures()

			q := startProcessIn(t, dir, toml)
			testkit.WaitFor(t, 60*time.Second, func() error {
				if st := paymentStatus(t, q.url, id); st != "captured" {
					return fmt.Errorf("status=%s, want captured", st)
				}
				return nil
			})
			if got := fake.CaptureCalls(); got != 1 {
				t.Fatalf("captures performed at PayPal: %d, want 1", got)
			}
			calls := fake.Find(http.MethodPost, "/capture")
			if want := 1; !performed {
				want = 2
				if len(calls) < want {
					t.Fatalf("capture requests: %d, want the lost one and its retry", len(calls))
				}
			}
			for _, c := range calls {
				if c.RequestID != paypal.CaptureKey(id) {
					t.Fatalf("capture PayPal-Request-Id=%q, want %q", c.RequestID, paypal.CaptureKey(id))
				}
			}
			if strings.Contains(p.logText()+q.logText(), paypaltest.Secret) {
				t.Fatal("the PayPal secret reached the log")
			}
		})
	}
}

func createPayPal(t *testing.T, base string) (id, order string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/payments", strings.NewReader(`{"order_id":"o-sigkill","amount":3000,"currency":"EUR"}`))
	req.Header.Set("Authorization", "Bearer "+daemontest.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k-sigkill")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(b, &m); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", res.StatusCode, b)
	}
	id, _ = m["id"].(string)
	order, _ = m["provider_ref"].(string)
	return id, order
}

func paymentStatus(t *testing.T, base, id string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/payments/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+daemontest.APIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "unreachable: " + err.Error()
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	st, _ := m["status"].(string)
	return st
}
