package ripple_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/receipt"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store"
)

// runInBackground starts e.svc.Run, woken by finalize, and returns the
// function that stops it and checks that it returned nil.
func (e *env) runInBackground() (stop func()) {
	e.t.Helper()
	e.svc.Interval = time.Hour // only Notify and finished attempts wake it
	e.f.Notify = e.svc.Notify
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run returned %v, want nil on cancel", err)
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// pendingUnattempted fails the test unless every delivery of the payments
// to target is pending with no attempt recorded.
func (e *env) pendingUnattempted(target string, ps []pay.Payment, statuses ...pay.Status) {
	e.t.Helper()
	for _, p := range ps {
		for _, st := range statuses {
			if d := e.delivery(p.ID, target, st); d.State != pay.DeliveryPending || d.Attempts != 0 {
				e.t.Fatalf("delivery of %s to the silent endpoint=%+v, want pending with no attempt", p.ID, d)
			}
		}
	}
}

// TestRun_SilentEndpointDelaysNothingElse: a merchant endpoint that takes
// connections and never answers, listed first, holds at most its
// MaxInFlight connections; meanwhile every payment reaches the other
// endpoint (captures before refunds), gets its receipt from a real SMTP
// server, its loyalty points (clawed back on refund) and its last visit.
func TestRun_SilentEndpointDelaysNothingElse(t *testing.T) {
	t.Parallel()
	const n, refunds, inFlight = 10, 5, 2
	silent := rippletest.NewSilentEndpoint(t)
	good := rippletest.NewEndpoint(t)
	smtpd := rippletest.NewSMTPServer(t, 0)
	events := []string{"payment.captured", "payment.refunded"}
	e := newEnv(t, t0, ripple.Config{
		PointsPerUnit: 1,
		Receipt:       receipt.Config{Addr: smtpd.Addr, From: "receipts@shop.example", TLS: receipt.TLSNone},
		Webhooks: []ripple.EndpointConfig{
			// The longest timeout, so that no attempt ends while the test runs.
			{URL: silent.URL, Secrets: []string{secret(t)}, Events: events, Timeout: ripple.MaxWebhookTimeout, MaxInFlight: inFlight},
			{URL: good.URL, Secrets: []string{secret(t)}, Events: events},
		},
	})
	stop := e.runInBackground()

	var ps []pay.Payment
	for i := range n {
		p := e.payment(i+1, 1000, "EUR", pay.Customer{ID: fmt.Sprintf("cus_%d", i+1), Email: fmt.Sprintf("c%d@example.com", i+1)})
		e.finalize(p.ID, pay.Captured)
		ps = append(ps, p)
	}
	for _, p := range ps[:refunds] {
		e.finalize(p.ID, pay.Refunded)
	}

	testkit.WaitFor(t, 10*time.Second, func() error {
		if got, want := len(good.Requests()), n+refunds; got != want {
			return fmt.Errorf("the answering endpoint has %d requests, want %d", got, want)
		}
		if got, want := len(smtpd.Messages()), n; got != want {
			return fmt.Errorf("receipts=%d, want %d", got, want)
		}
		for i, p := range ps {
			var c store.CustomerAccount
			if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { c, err = tx.CustomerAccount(p.Customer.ID); return err }); err != nil {
				return fmt.Errorf("customer %s: %w", p.Customer.ID, err)
			}
			want := int64(10)
			if i < refunds {
				want = 0
			}
			if c.Points != want || c.LastVisitAt.IsZero() {
				return fmt.Errorf("customer %s: points=%d last visit=%s, want %d points and a visit", c.ID, c.Points, c.LastVisitAt, want)
			}
			// Loyalty takes the refund's share back on its
			// payment.refund.succeeded; the endpoint gets payment.refunded.
			hook := pay.EffectWebhook + ":" + ripple.EndpointID(good.URL)
			wants := [][2]string{{pay.EffectLoyalty, pay.EventType(pay.Captured)}, {hook, pay.EventType(pay.Captured)}}
			if i < refunds {
				wants = append(wants, [2]string{pay.EffectLoyalty, pay.EventRefundSucceeded}, [2]string{hook, pay.EventType(pay.Refunded)})
			}
			for _, w := range wants {
				if d := e.deliveryOf(p.ID, w[0], w[1]); d.State != pay.DeliveryDone {
					return fmt.Errorf("delivery of %s to %s is %s", w[1], w[0], d.State)
				}
			}
		}
		return nil
	})
	// Per payment in outbox order at the answering endpoint.
	seen := map[string]string{}
	for _, r := range good.Requests() {
		var ev merchantEvent
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			t.Fatal(err)
		}
		seen[ev.Data.PaymentID] += ev.Type + " "
	}
	for i, p := range ps {
		want := "payment.captured "
		if i < refunds {
			want += "payment.refunded "
		}
		if got := seen[p.ID]; got != want {
			t.Fatalf("events of %s at the answering endpoint=%q, want %q", p.ID, got, want)
		}
	}

	// The silent endpoint holds its cap of attempts and connections, and
	// nothing it was sent has been answered or recorded.
	silentTarget := pay.EffectWebhook + ":" + ripple.EndpointID(silent.URL)
	testkit.WaitFor(t, 10*time.Second, func() error {
		if got := silent.Open(); got != inFlight {
			return fmt.Errorf("silent endpoint has %d connections open, want %d", got, inFlight)
		}
		return nil
	})
	if got := ripple.InFlight(e.svc, silentTarget); got != inFlight {
		t.Fatalf("attempts to the silent endpoint=%d, want MaxInFlight=%d", got, inFlight)
	}
	if got := silent.MaxOpen(); got > inFlight {
		t.Fatalf("silent endpoint had %d connections open at once, want at most MaxInFlight=%d", got, inFlight)
	}
	e.pendingUnattempted(silentTarget, ps, pay.Captured)

	// Shutting down ends the hanging attempts without counting them as
	// the endpoint's failures.
	stop()
	e.pendingUnattempted(silentTarget, ps, pay.Captured)
	e.pendingUnattempted(silentTarget, ps[:refunds], pay.Refunded)
}

// TestRun_BacklogDoesNotHideOthers: deliveries to a silent endpoint that
// fell behind fill the head of the due index, far more than one pass's
// Batch; the deliveries behind them, to other targets, are still found
// and made.
func TestRun_BacklogDoesNotHideOthers(t *testing.T) {
	t.Parallel()
	const backlog, n = 12, 6
	silent := rippletest.NewSilentEndpoint(t)
	good := rippletest.NewEndpoint(t)
	e := newEnv(t, t0, ripple.Config{
		PointsPerUnit: 1,
		Webhooks: []ripple.EndpointConfig{
			{URL: silent.URL, Secrets: []string{secret(t)}, Events: []string{"payment.failed", "payment.captured"}, Timeout: ripple.MaxWebhookTimeout, MaxInFlight: 1},
			{URL: good.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}},
		},
	})
	e.svc.Batch = 2
	// The backlog: failures only the silent endpoint wants, due first.
	var failed []pay.Payment
	for i := range backlog {
		p := e.payment(100+i, 1000, "EUR", pay.Customer{})
		e.finalize(p.ID, pay.Failed)
		failed = append(failed, p)
	}
	e.clock.Add(time.Minute)
	stop := e.runInBackground()
	testkit.WaitFor(t, 10*time.Second, func() error {
		if got := silent.Open(); got != 1 {
			return fmt.Errorf("silent endpoint has %d connections open, want 1", got)
		}
		return nil
	})

	var ps []pay.Payment
	for i := range n {
		p := e.payment(i+1, 1000, "EUR", pay.Customer{ID: fmt.Sprintf("cus_%d", i+1)})
		e.finalize(p.ID, pay.Captured)
		ps = append(ps, p)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if got, want := len(good.Requests()), n; got != want {
			return fmt.Errorf("the answering endpoint has %d requests, want %d", got, want)
		}
		for _, p := range ps {
			if d := e.delivery(p.ID, pay.EffectLoyalty, pay.Captured); d.State != pay.DeliveryDone {
				return fmt.Errorf("loyalty delivery of %s is %s", p.ID, d.State)
			}
		}
		return nil
	})
	if got := silent.MaxOpen(); got != 1 {
		t.Fatalf("silent endpoint had %d connections open at once, want MaxInFlight=1", got)
	}
	stop()
	silentTarget := pay.EffectWebhook + ":" + ripple.EndpointID(silent.URL)
	e.pendingUnattempted(silentTarget, failed, pay.Failed)
	e.pendingUnattempted(silentTarget, ps, pay.Captured)
}

// TestWebhook_Timeout: an endpoint that never answers fails the attempt
// after its own timeout, which the error names; the delivery is retried.
func TestWebhook_Timeout(t *testing.T) {
	t.Parallel()
	silent := rippletest.NewSilentEndpoint(t)
	e := newEnv(t, t0, ripple.Config{Webhooks: []ripple.EndpointConfig{{
		URL: silent.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}, Timeout: 200 * time.Millisecond,
	}}})
	p := e.payment(1, 1000, "EUR", pay.Customer{})
	e.finalize(p.ID, pay.Captured)
	if got, want := e.runOnce(), 1; got != want {
		t.Fatalf("RunOnce attempted %d, want %d", got, want)
	}
	d := e.delivery(p.ID, pay.EffectWebhook+":"+ripple.EndpointID(silent.URL), pay.Captured)
	if d.State != pay.DeliveryPending || d.Attempts != 1 || !strings.Contains(d.LastError, "no answer within 200ms") {
		t.Fatalf("delivery=%+v, want pending after one attempt with no answer within 200ms", d)
	}
}

// TestNew_EndpointLimits: a timeout outside 100ms..15s (Standard Webhooks
// counts a 2xx within 15 s) or an in-flight cap outside 1..256 is refused,
// naming the endpoint and the field; zero takes the default.
func TestNew_EndpointLimits(t *testing.T) {
	t.Parallel()
	ep := func(timeout time.Duration, inFlight int) ripple.Config {
		return ripple.Config{Webhooks: []ripple.EndpointConfig{{
			URL: "https://shop.example/h", Secrets: []string{secret(t)}, Events: []string{"payment.captured"},
			Timeout: timeout, MaxInFlight: inFlight,
		}}}
	}
	for name, tc := range map[string]struct {
		cfg  ripple.Config
		want string
	}{
		"TimeoutLong":      {ep(ripple.MaxWebhookTimeout+time.Second, 0), "webhooks[0]: timeout"},
		"TimeoutShort":     {ep(time.Millisecond, 0), "webhooks[0]: timeout"},
		"TimeoutNegative":  {ep(-time.Second, 0), "webhooks[0]: timeout"},
		"InFlightMany":     {ep(0, ripple.MaxInFlightLimit+1), "webhooks[0]: max_in_flight"},
		"InFlightNegative": {ep(0, -1), "webhooks[0]: max_in_flight"},
	} {
		if _, err := ripple.New(nil, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New=%v, want an error naming %q", name, err, tc.want)
		}
	}
	for _, cfg := range []ripple.Config{ep(0, 0), ep(ripple.MaxWebhookTimeout, ripple.MaxInFlightLimit), ep(ripple.MinWebhookTimeout, 1)} {
		svc, err := ripple.New(nil, cfg)
		if err != nil {
			t.Fatalf("New(%+v): %v", cfg.Webhooks[0], err)
		}
		svc.Close()
	}
}
