package main

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mollie/mollietest"
	"github.com/paystate/paystate/store"
)

// TestProcess_MollieTriggerSIGKILL runs the real binary with the Mollie
// provider against the Mollie fake: a payment is paid at Mollie, its
// webhooks (form POSTs of id=tr_...) are answered 200 while every fetch
// at Mollie fails, and the process is killed (SIGKILL). Restarted on the
// same database with Mollie answering again, paystate fetches the payment
// and captures it once (one transition, one outbox record): an answered
// trigger is stored before its answer, so a crash does not lose it. The
// sweeper's min_age keeps it away from the payment, so only the trigger
// can settle it.
func TestProcess_MollieTriggerSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	fake := mollietest.New(t)
	dir := t.TempDir()
	toml := serveTOML(`
[payment]
provider = "mollie"
[sweeper]
interval = "100ms"
min_age = "1h"
[providers.mollie]
api_key = "` + mollietest.APIKey + `"
api_base = "` + fake.URL + `"
webhook_url = "https://shop.example/webhooks/mollie"
redirect_url = "https://shop.example/thanks"
`)
	p := startProcessIn(t, dir, toml)
	id, ref := createMollie(t, p.url)
	if !strings.HasPrefix(ref, "tr_") {
		t.Fatalf("provider_ref=%q, want Mollie's tr_ id", ref)
	}
	fake.SetStatus(ref, "paid")
	fake.Fail(1 << 30) // every fetch fails until the restart
	for range 3 {
		if st := postMollieTrigger(t, p.url, ref); st != http.StatusOK {
			t.Fatalf("trigger answered %d, want 200; log:\n%s", st, p.logText())
		}
	}
	if st := paymentStatus(t, p.url, id); st != "requires_action" {
		t.Fatalf("status=%s before the kill, want requires_action (no fetch can succeed)", st)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	fake.Fail(0)

	q := startProcessIn(t, dir, toml)
	testkit.WaitFor(t, 60*time.Second, func() error {
		if st := paymentStatus(t, q.url, id); st != "captured" {
			return fmt.Errorf("status=%s, want captured", st)
		}
		return nil
	})
	if fake.Requests("GET /v2/payments/{id}") == 0 {
		t.Fatal("captured with no fetch at Mollie")
	}
	if err := q.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-q.done; err != nil {
		t.Fatalf("stop: %v; log:\n%s", err, q.logText())
	}
	transitions, announced := capturesIn(t, filepath.Join(dir, "paystate.db"), id)
	if transitions != 1 || announced != 1 {
		t.Fatalf("captured by %d transitions with %d outbox records, want 1 and 1", transitions, announced)
	}
	if strings.Contains(p.logText()+q.logText(), mollietest.APIKey) {
		t.Fatal("the Mollie API key reached the log")
	}
}

// createMollie creates a payment at the default provider (Mollie) and
// returns its id and Mollie's id.
func createMollie(t *testing.T, base string) (id, ref string) {
	t.Helper()
	api := &daemontest.Instance{Base: base, HTTP: http.DefaultClient}
	r, err := api.Send("POST", "/v1/payments", []byte(`{"order_id":"o-mollie-kill","amount":2500,"currency":"EUR","description":"Bike bell"}`),
		map[string]string{"Idempotency-Key": "k-mollie-kill"})
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s %v", r.Status, r.Body, err)
	}
	id, _ = r.JSON["id"].(string)
	ref, _ = r.JSON["provider_ref"].(string)
	return id, ref
}

// postMollieTrigger posts Mollie's webhook, a form with the payment's id
// and no signature, and returns the answer's status.
func postMollieTrigger(t *testing.T, base, ref string) int {
	t.Helper()
	res, err := http.PostForm(base+"/webhooks/mollie", url.Values{"id": {ref}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// capturesIn counts, in a stopped process's database, the payment's
// transitions to captured and the outbox records of its capture.
func capturesIn(t *testing.T, path, id string) (transitions, announced int) {
	t.Helper()
	viewDB(t, path, func(tx store.Tx) error {
		steps, err := tx.Steps(id)
		if err != nil {
			return err
		}
		for _, s := range steps {
			if s.Kind == pay.StepTransition && s.To == pay.Captured {
				transitions++
			}
		}
		outbox, err := tx.OutboxForPayment(id)
		if err != nil {
			return err
		}
		for _, o := range outbox {
			if o.Status == pay.Captured {
				announced++
			}
		}
		return nil
	})
	return transitions, announced
}
