package daemon_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// TestRace_SyncAndWebhook: for hundreds of payments the merchant's /sync
// report (with the version read before its PSP call) and the PSP's webhook,
// delivered twice, hit the same payment concurrently and in both orders.
// The final status must be right, versions strictly increasing with no
// gaps, one outbox record per real transition, and no response about a
// terminal payment may carry a client secret or redirect URL.
func TestRace_SyncAndWebhook(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, func(c *config.Config) { c.Payment.Provider = "standard" })
	secret := in.Main.Config.Providers.Standard.WebhookSecret
	n := 300
	if testing.Short() {
		n = 60
	}

	type scenario struct {
		sync     string // status the merchant reports
		webhooks []string
		final    pay.Status
	}
	scenarios := []scenario{
		{"requires_action", []string{"payment.captured"}, pay.Captured},
		{"captured", []string{"payment.captured"}, pay.Captured},
		{"failed", []string{"payment.failed"}, pay.Failed},
		{"processing", []string{"payment.requires_action", "payment.captured"}, pay.Captured},
		{"processing", []string{"payment.failed"}, pay.Failed},
	}

	// Create the payments first (report mode: they stay created, v1).
	ids := make([]string, n)
	for i := range ids {
		r := in.Create(fmt.Sprintf(`{"order_id":"race-%d","amount":%d,"currency":"EUR"}`, i, 1000+i), fmt.Sprintf("race-%d", i))
		if r.Status != 201 || r.Num("version") != 1 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		ids[i] = r.Str("id")
	}

	var mu sync.Mutex
	var responses []daemontest.Response
	record := func(r daemontest.Response) {
		mu.Lock()
		responses = append(responses, r)
		mu.Unlock()
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, id := range ids {
		sc := scenarios[i%len(scenarios)]
		order := i % 3 // 0: sync first, 1: webhooks first, 2: all at once
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			syncCall := func() {
				body := fmt.Sprintf(`{"status":%q,"provider_ref":"psp_%d","client_secret":"cs_%d","redirect_url":"https://psp.invalid/%d","expected_version":1}`, sc.sync, i, i, i)
				r := in.Do("POST", "/v1/payments/"+id+"/sync", []byte(body), nil)
				if r.Status != 200 {
					t.Errorf("sync %s: %d %s", id, r.Status, r.Body)
				}
				record(r)
			}
			hook := func(k int, typ string) {
				evID := fmt.Sprintf("evt_%d_%d", i, k)
				body := eventBody(evID, typ, id, fmt.Sprintf("psp_%d", i))
				h := testkit.SignStandard(t, secret, evID, time.Now(), body)
				for range 2 { // every webhook is delivered twice
					r := in.Do("POST", "/webhooks/standard", body, h)
					if r.Status != 200 {
						t.Errorf("webhook %s: %d %s", evID, r.Status, r.Body)
					}
				}
			}
			hooks := func() {
				for k, typ := range sc.webhooks {
					hook(k, typ)
				}
			}
			switch order {
			case 0:
				syncCall()
				hooks()
			case 1:
				hooks()
				syncCall()
			default:
				var w sync.WaitGroup
				w.Add(2)
				go func() { defer w.Done(); syncCall() }()
				go func() { defer w.Done(); hooks() }()
				w.Wait()
			}
			// A reader polls concurrently with the writers.
			if rand.IntN(2) == 0 {
				record(in.Do("GET", "/v1/payments/"+id, nil, nil))
			}
		}()
	}
	wg.Wait()

	// Wait until the inbox has applied every webhook.
	testkit.WaitFor(t, 60*time.Second, func() error {
		var pending []pay.InboxEvent
		err := in.Main.Store.View(context.Background(), func(tx store.Tx) error {
			var err error
			pending, err = tx.PendingInbox(time.Now().Add(time.Hour), 10)
			return err
		})
		if err != nil {
			return err
		}
		if len(pending) > 0 {
			return fmt.Errorf("%d webhooks still pending", len(pending))
		}
		return nil
	})

	for _, r := range responses {
		assertNoSecretWhenFinal(t, r)
	}
	for i, id := range ids {
		sc := scenarios[i%len(scenarios)]
		g := in.Do("GET", "/v1/payments/"+id, nil, nil)
		assertNoSecretWhenFinal(t, g)
		if got, want := pay.Status(g.Str("status")), sc.final; got != want {
			t.Errorf("%s (scenario %d, order %d): status=%s, want %s", id, i%len(scenarios), i%3, got, want)
		}
		checkHistory(t, in, id)
	}
}

// checkHistory checks a payment's timeline against its record and outbox:
// written versions 1..N without gaps, ending at the stored version, and one
// outbox record per transition.
func checkHistory(t *testing.T, in *daemontest.Instance, id string) {
	t.Helper()
	var p pay.Payment
	var steps []pay.Step
	var outbox []pay.OutboxRecord
	err := in.Main.Store.View(context.Background(), func(tx store.Tx) error {
		var err error
		if p, err = tx.Payment(id); err != nil {
			return err
		}
		if steps, err = tx.Steps(id); err != nil {
			return err
		}
		outbox, err = tx.OutboxForPayment(id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var want uint64 = 1
	transitions := 0
	for _, s := range steps {
		if !s.Wrote() {
			continue
		}
		if s.Version != want {
			t.Errorf("%s: written version %d, want %d (steps %+v)", id, s.Version, want, steps)
		}
		want++
		if s.Kind == pay.StepTransition {
			transitions++
		}
	}
	if got := want - 1; got != p.Version {
		t.Errorf("%s: timeline ends at version %d, record has %d", id, got, p.Version)
	}
	if got := len(outbox); got != transitions {
		t.Errorf("%s: %d outbox records for %d transitions", id, got, transitions)
	}
	for k := 1; k < len(outbox); k++ {
		if outbox[k].Version <= outbox[k-1].Version {
			t.Errorf("%s: outbox versions not increasing", id)
		}
	}
}
