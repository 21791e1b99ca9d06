package ripple_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/receipt"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store"
)

// merchantEvent is what a merchant decodes from a webhook.
type merchantEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		PaymentID string `json:"payment_id"`
		OrderID   string `json:"order_id"`
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
		Status    string `json:"status"`
		Version   uint64 `json:"version"`
		Customer  struct {
			ID    string `json:"id"`
			Email string `json:"email"`
		} `json:"customer"`
	} `json:"data"`
}

func secret(t *testing.T) string {
	t.Helper()
	s, err := stdwebhook.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWebhook_EverySecretSigns: an endpoint in the middle of a secret
// rotation has two secrets; a receiver that knows only the old one and a
// receiver that knows only the new one both verify every delivery with
// the svix Standard Webhooks library, and a third secret does not.
func TestWebhook_EverySecretSigns(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret, otherSecret := secret(t), secret(t), secret(t)
	ep := rippletest.NewEndpoint(t)
	// The svix library checks timestamps against the real clock.
	e := newEnv(t, time.Now().UTC().Truncate(time.Second), ripple.Config{Webhooks: []ripple.EndpointConfig{{
		URL: ep.URL, Secrets: []string{oldSecret, newSecret}, Events: []string{"payment.captured", "payment.refunded"},
	}}})
	ada := pay.Customer{ID: "cus_ada", Email: "ada@example.com"}
	p1 := e.payment(1, 1250, "EUR", ada)
	p2 := e.payment(2, 700, "USD", pay.Customer{})
	p3 := e.payment(3, 100, "EUR", ada)
	e.finalize(p1.ID, pay.Captured)
	e.finalize(p2.ID, pay.Captured)
	e.finalize(p3.ID, pay.Failed) // not subscribed
	e.finalize(p1.ID, pay.Refunded)
	e.settle()

	receivers := map[string]*svix.Webhook{}
	for name, s := range map[string]string{"old": oldSecret, "new": newSecret, "other": otherSecret} {
		wh, err := svix.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		receivers[name] = wh
	}
	reqs := ep.Requests()
	if got, want := len(reqs), 3; got != want {
		t.Fatalf("requests=%d, want %d (two captures, one refund; no failure)", got, want)
	}
	var got []string
	for i, r := range reqs {
		for _, name := range []string{"old", "new"} {
			if err := receivers[name].Verify(r.Body, r.Header); err != nil {
				t.Fatalf("request %d: the receiver with the %s secret rejects it: %v", i, name, err)
			}
		}
		if err := receivers["other"].Verify(r.Body, r.Header); err == nil {
			t.Fatalf("request %d: a receiver with an unrelated secret accepts it", i)
		}
		if got, want := len(strings.Fields(r.Header.Get("webhook-signature"))), 2; got != want {
			t.Fatalf("request %d: %d signatures, want %d", i, got, want)
		}
		var ev merchantEvent
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			t.Fatalf("request %d: %v: %s", i, err, r.Body)
		}
		if got, want := r.Header.Get("webhook-id"), ev.ID; got != want || !strings.HasPrefix(got, "evt_") {
			t.Fatalf("request %d: webhook-id=%q, want the event id %q", i, got, want)
		}
		got = append(got, ev.Data.PaymentID+" "+ev.Type)
		if ev.Data.PaymentID == p1.ID && ev.Type == "payment.captured" {
			d := ev.Data
			if d.OrderID != p1.OrderID || d.Amount != 1250 || d.Currency != "EUR" || d.Status != "captured" || d.Version != 2 || d.Customer.ID != "cus_ada" || d.Customer.Email != "ada@example.com" {
				t.Fatalf("data=%+v, want payment 1 as captured", d)
			}
			var recs []pay.OutboxRecord
			if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { recs, err = tx.OutboxForPayment(p1.ID); return err }); err != nil {
				t.Fatal(err)
			}
			if ev.ID != recs[0].ID || ev.Created != recs[0].CreatedAt.Unix() {
				t.Fatalf("id=%s created=%d, want the outbox record's %s %d", ev.ID, ev.Created, recs[0].ID, recs[0].CreatedAt.Unix())
			}
		}
	}
	// Per payment in order; payment 1's refund after its capture.
	var p1Events []string
	for _, g := range got {
		if strings.HasPrefix(g, p1.ID) {
			p1Events = append(p1Events, g)
		}
	}
	if len(p1Events) != 2 || p1Events[0] != p1.ID+" payment.captured" || p1Events[1] != p1.ID+" payment.refunded" {
		t.Fatalf("payment 1 events=%v, want captured then refunded", p1Events)
	}
}

// TestWebhook_GoneDisablesEndpoint: 410 disables the endpoint (stored);
// its next deliveries become dead letters without a request while the
// other effects go on; a retry re-enables it.
func TestWebhook_GoneDisablesEndpoint(t *testing.T) {
	t.Parallel()
	ep := rippletest.NewEndpoint(t)
	e := newEnv(t, t0, ripple.Config{PointsPerUnit: 1, Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}}}})
	target := pay.EffectWebhook + ":" + ripple.EndpointID(ep.URL)
	ep.Answer(http.StatusGone, nil)
	c := pay.Customer{ID: "cus_1"}
	p1 := e.payment(1, 1000, "EUR", c)
	e.finalize(p1.ID, pay.Captured)
	e.settle()

	d1 := e.delivery(p1.ID, target, pay.Captured)
	if d1.State != pay.DeliveryDead || d1.Attempts != 1 || !strings.Contains(d1.LastError, "410") {
		t.Fatalf("delivery after 410=%+v, want dead after one attempt, naming 410", d1)
	}
	var endpoint store.WebhookEndpoint
	readEndpoint := func() {
		t.Helper()
		if err := e.db.View(context.Background(), func(tx store.Tx) (err error) {
			endpoint, err = tx.WebhookEndpoint(ripple.EndpointID(ep.URL))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	readEndpoint()
	if !endpoint.Disabled || !endpoint.DisabledAt.Equal(t0) || endpoint.URL != ep.URL {
		t.Fatalf("endpoint=%+v, want disabled at %s", endpoint, t0)
	}

	p2 := e.payment(2, 2000, "EUR", c)
	e.finalize(p2.ID, pay.Captured)
	e.settle()
	if got, want := len(ep.Requests()), 1; got != want {
		t.Fatalf("requests=%d, want %d: a disabled endpoint gets nothing", got, want)
	}
	d2 := e.delivery(p2.ID, target, pay.Captured)
	if d2.State != pay.DeliveryDead || !strings.Contains(d2.LastError, "disabled") {
		t.Fatalf("delivery to a disabled endpoint=%+v, want dead, saying so", d2)
	}
	if got, want := customer(t, e.db, "cus_1").Points, int64(30); got != want {
		t.Fatalf("points=%d, want %d: loyalty goes on", got, want)
	}

	ep.Answer(http.StatusNoContent, nil)
	r, err := e.svc.Retry(context.Background(), d2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != pay.DeliveryPending || r.Attempts != 0 {
		t.Fatalf("retried delivery=%+v, want pending with no attempts", r)
	}
	readEndpoint()
	if endpoint.Disabled {
		t.Fatalf("endpoint=%+v, want re-enabled by the retry", endpoint)
	}
	e.settle()
	if got := e.delivery(p2.ID, target, pay.Captured); got.State != pay.DeliveryDone {
		t.Fatalf("delivery after the retry=%+v, want done", got)
	}
	// Replay the other dead letter by time.
	n, err := e.svc.RetryDead(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 1; got != want {
		t.Fatalf("RetryDead=%d, want %d", got, want)
	}
	e.settle()
	if got := e.delivery(p1.ID, target, pay.Captured); got.State != pay.DeliveryDone {
		t.Fatalf("delivery after RetryDead=%+v, want done", got)
	}
	if got, want := len(ep.Requests()), 3; got != want {
		t.Fatalf("requests=%d, want %d", got, want)
	}
	if _, err := e.svc.Retry(context.Background(), d2.ID); pay.ErrorCode(err) != pay.ECONFLICT {
		t.Fatalf("Retry of a done delivery: %v, want conflict", err)
	}
	if _, err := e.svc.Retry(context.Background(), "dlv_unknown"); pay.ErrorCode(err) != pay.ENOTFOUND {
		t.Fatalf("Retry of an unknown delivery: %v, want not found", err)
	}
}

// TestWebhook_RetryAfter: on 503 and 429 the next attempt is the time
// Retry-After names (seconds, then an HTTP date).
func TestWebhook_RetryAfter(t *testing.T) {
	t.Parallel()
	ep := rippletest.NewEndpoint(t)
	e := newEnv(t, t0, ripple.Config{Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}}}})
	target := pay.EffectWebhook + ":" + ripple.EndpointID(ep.URL)
	p := e.payment(1, 1000, "EUR", pay.Customer{})
	e.finalize(p.ID, pay.Captured)

	ep.Answer(http.StatusServiceUnavailable, http.Header{"Retry-After": {"120"}})
	e.runOnce()
	d := e.delivery(p.ID, target, pay.Captured)
	if got, want := d.NextAttemptAt, t0.Add(120*time.Second); d.State != pay.DeliveryPending || !got.Equal(want) {
		t.Fatalf("after 503: state=%s next=%s, want pending until %s", d.State, got, want)
	}

	e.clock.Add(119 * time.Second)
	if got := e.runOnce(); got != 0 {
		t.Fatalf("RunOnce before Retry-After attempted %d", got)
	}
	now := e.clock.Add(time.Second)
	at := now.Add(30 * time.Minute)
	ep.Answer(http.StatusTooManyRequests, http.Header{"Retry-After": {at.Format(http.TimeFormat)}})
	e.runOnce()
	d = e.delivery(p.ID, target, pay.Captured)
	if got, want := d.NextAttemptAt, at; !got.Equal(want) {
		t.Fatalf("after 429: next=%s, want %s", got, want)
	}

	e.clock.Add(30 * time.Minute)
	ep.Answer(http.StatusOK, nil)
	e.settle()
	d = e.delivery(p.ID, target, pay.Captured)
	if d.State != pay.DeliveryDone || d.Attempts != 3 {
		t.Fatalf("delivery=%+v, want done after 3 attempts", d)
	}
}

// TestWebhook_DisabledAfterFiveDays: an endpoint that fails every delivery
// for five days is disabled and the delivery becomes a dead letter, even
// with attempts left.
func TestWebhook_DisabledAfterFiveDays(t *testing.T) {
	t.Parallel()
	ep := rippletest.NewEndpoint(t)
	ep.Answer(http.StatusInternalServerError, nil)
	e := newEnv(t, t0, ripple.Config{
		MaxAttempts: 1000, BackoffBase: time.Minute, BackoffCap: time.Hour,
		Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}}},
	})
	target := pay.EffectWebhook + ":" + ripple.EndpointID(ep.URL)
	p := e.payment(1, 1000, "EUR", pay.Customer{})
	e.finalize(p.ID, pay.Captured)
	e.runOnce()
	var d pay.Delivery
	for range 200 {
		e.clock.Add(61 * time.Minute)
		e.runOnce()
		if d = e.delivery(p.ID, target, pay.Captured); d.State != pay.DeliveryPending {
			break
		}
	}
	if d.State != pay.DeliveryDead || !strings.Contains(d.LastError, "disabled") {
		t.Fatalf("delivery=%+v, want dead because the endpoint was disabled", d)
	}
	if d.UpdatedAt.Before(t0.Add(ripple.DisableAfter)) || d.UpdatedAt.After(t0.Add(ripple.DisableAfter+61*time.Minute)) {
		t.Fatalf("dead at %s, want on the first attempt 5 days after the first failure at %s", d.UpdatedAt, t0)
	}
	if got, want := len(ep.Requests()), d.Attempts; got != want {
		t.Fatalf("requests=%d, want one per attempt (%d)", got, want)
	}
	var endpoint store.WebhookEndpoint
	if err := e.db.View(context.Background(), func(tx store.Tx) (err error) {
		endpoint, err = tx.WebhookEndpoint(ripple.EndpointID(ep.URL))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !endpoint.Disabled || !endpoint.FailingSince.Equal(t0) {
		t.Fatalf("endpoint=%+v, want disabled, failing since %s", endpoint, t0)
	}
}

// TestDeliveries_InOrderPerPayment: a payment's refund does not reach an
// endpoint while its capture is still being retried there.
func TestDeliveries_InOrderPerPayment(t *testing.T) {
	t.Parallel()
	ep := rippletest.NewEndpoint(t)
	e := newEnv(t, t0, ripple.Config{PointsPerUnit: 1, Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured", "payment.refunded"}}}})
	target := pay.EffectWebhook + ":" + ripple.EndpointID(ep.URL)
	p := e.payment(1, 1000, "EUR", pay.Customer{ID: "cus_1"})
	ep.Answer(http.StatusBadGateway, nil)
	e.finalize(p.ID, pay.Captured)
	e.runOnce()
	e.finalize(p.ID, pay.Refunded)
	e.settle()
	if got, want := len(ep.Requests()), 1; got != want {
		t.Fatalf("requests=%d, want %d: the refund waits for the capture", got, want)
	}
	refund := e.delivery(p.ID, target, pay.Refunded)
	if refund.State != pay.DeliveryPending || refund.Attempts != 0 || refund.NextAttemptAt.After(e.clock.Now()) {
		t.Fatalf("refund delivery=%+v, want pending, due, never attempted", refund)
	}

	ep.Answer(http.StatusOK, nil)
	e.clock.Add(2 * time.Hour)
	e.settle()
	var types []string
	for _, r := range ep.Requests() {
		var ev merchantEvent
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type+" "+http.StatusText(r.Status))
	}
	want := []string{"payment.captured Bad Gateway", "payment.captured OK", "payment.refunded OK"}
	if strings.Join(types, ", ") != strings.Join(want, ", ") {
		t.Fatalf("requests=%v, want %v", types, want)
	}
	if got := customer(t, e.db, "cus_1").Points; got != 0 {
		t.Fatalf("points=%d, want 0 after the refund", got)
	}
}

func TestNew_Invalid(t *testing.T) {
	t.Parallel()
	good := secret(t)
	for name, cfg := range map[string]ripple.Config{
		"BadSecret":   {Webhooks: []ripple.EndpointConfig{{URL: "https://shop.example/h", Secrets: []string{"whsec_!!"}, Events: []string{"payment.captured"}}}},
		"NoSecret":    {Webhooks: []ripple.EndpointConfig{{URL: "https://shop.example/h", Events: []string{"payment.captured"}}}},
		"BadURL":      {Webhooks: []ripple.EndpointConfig{{URL: "ftp://shop.example/h", Secrets: []string{good}, Events: []string{"payment.captured"}}}},
		"NoEvents":    {Webhooks: []ripple.EndpointConfig{{URL: "https://shop.example/h", Secrets: []string{good}}}},
		"Twice":       {Webhooks: []ripple.EndpointConfig{{URL: "https://shop.example/h", Secrets: []string{good}, Events: []string{"payment.captured"}}, {URL: "https://shop.example/h", Secrets: []string{good}, Events: []string{"payment.failed"}}}},
		"BadSMTP":     {Receipt: receipt.Config{Addr: "localhost", From: "r@example.com"}},
		"BadFrom":     {Receipt: receipt.Config{Addr: "localhost:25", From: "not an address"}},
		"NegativePts": {PointsPerUnit: -1},
	} {
		_, err := ripple.New(nil, cfg)
		if err == nil {
			t.Errorf("%s: New succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), good) || strings.Contains(err.Error(), "whsec_!!") {
			t.Errorf("%s: error %q quotes a secret", name, err)
		}
	}
}
