package daemon_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/psp/stripe/stripefake"
	"github.com/paystate/paystate/ripple/rippletest"
)

// TestE2E_PaymentLinkAdoptionRace: two paystate instances on one
// PostgreSQL database, both adopting Payment Links, are handed the same
// signed checkout.session.completed of a link's session at once, each
// twice: the session becomes one payment, captured once (one transition,
// so one ledger posting), with one set of effects (one merchant webhook,
// one loyalty credit). Every delivery is answered 200: the instance whose
// transaction lost the race to make the payment (its session id is
// unique) answers a redelivery, not 409. Several sessions, so the
// deliveries of each race in another interleaving.
func TestE2E_PaymentLinkAdoptionRace(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	ep := rippletest.NewEndpoint(t)
	secret, err := stdwebhook.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	boot := func() *daemontest.Instance {
		in, _ := bootCaptured(t, true, func(c *config.Config) {
			c.Storage.Backend, c.Storage.DSN = "postgres", dsn
			c.Webhooks = []config.Webhook{{URL: ep.URL, Secret: secret, Events: []string{"payment.captured"}}}
		})
		return in
	}
	a, b := boot(), boot()

	const sessions = 6
	var answers []string
	var mu sync.Mutex
	for s := range sessions {
		n := fmt.Sprint(s)
		body := linkSession(t, "evt_race_"+n, "cs_race_"+n, "pi_race_"+n, "plink_race", func(obj map[string]any) {
			obj["client_reference_id"], obj["customer"] = "order-race-"+n, "cus_race_"+n
		})
		sig := stripefake.Sign(stripeSecret, body, time.Now())
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, in := range []*daemontest.Instance{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := in.Send("POST", "/webhooks/stripe", body, map[string]string{"Stripe-Signature": sig, "Authorization": ""})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					answers = append(answers, fmt.Sprintf("session %s: %v", n, err))
				} else if r.Status != http.StatusOK {
					answers = append(answers, fmt.Sprintf("session %s: %d %s", n, r.Status, r.Body))
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if len(answers) > 0 {
		t.Fatalf("deliveries not answered 200:\n%s", strings.Join(answers, "\n"))
	}

	for s := range sessions {
		n := fmt.Sprint(s)
		r := b.Do("GET", "/v1/payments?order_id=order-race-"+n, nil, nil)
		data, _ := r.JSON["data"].([]any)
		if len(data) != 1 {
			t.Fatalf("session %s: %d payments, want 1: %s", n, len(data), r.Body)
		}
		p, _ := data[0].(map[string]any)
		id, _ := p["id"].(string)
		if p["status"] != "captured" || p["provider_ref"] != "cs_race_"+n || p["flow"] != "payment_link" {
			t.Fatalf("session %s: payment %v, want captured from the link's session", n, p)
		}
		if got := transitionsTo(t, a, id, "captured"); got != 1 {
			t.Fatalf("session %s: %d transitions to captured, want 1", n, got)
		}
		// Every effect delivered (by either instance), then counted.
		testkit.WaitFor(t, 60*time.Second, func() error {
			counts, pending := deliveryCounts(t, a, id)
			if pending > 0 || counts["loyalty"] == 0 || counts["webhook"] == 0 {
				return fmt.Errorf("payment %s: deliveries %v, %d pending", id, counts, pending)
			}
			return nil
		})
		counts, _ := deliveryCounts(t, a, id)
		for _, eff := range []string{"webhook", "loyalty", "retention"} {
			if counts[eff] != 1 {
				t.Errorf("session %s: %d %s deliveries, want 1 (%v)", n, counts[eff], eff, counts)
			}
		}
		if cu := b.Do("GET", "/v1/customers/cus_race_"+n, nil, nil); cu.Num("points") != 42 {
			t.Errorf("session %s: customer %s, want 42 points", n, cu.Body)
		}
	}
	captured := 0
	for _, r := range ep.Requests() {
		if strings.Contains(string(r.Body), `"payment.captured"`) {
			captured++
		}
	}
	if captured != sessions {
		t.Errorf("%d payment.captured merchant webhooks, want %d (one per session)", captured, sessions)
	}
}
