// Package inbox takes PSP webhooks in and applies them.
//
// Accept verifies a webhook with its provider, stores it in the inbox (which
// is also the archived webhook history) and returns; the HTTP handler
// answers 2xx only then, once the event is durable. A redelivered event is
// accepted and stores nothing. RunOnce applies stored events: in one
// transaction it checks that no one (the sweeper, a human's resolution)
// holds the payment's lease and finalizes the observation, recording the
// processed event id. If the lease is held the event is deferred with
// backoff, never dropped. An event for a
// payment paystate does not know is retried a few times (its payment may
// not be visible yet) and then put on the review queue as an orphan.
package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/backoff"
	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
)

// Defaults of the worker.
const (
	DefaultBatch       = 64
	DefaultParallel    = 8
	DefaultBackoffBase = 200 * time.Millisecond
	// DefaultBackoffCap bounds a deferral: a lease is held for seconds,
	// so an event waits at most this long behind one.
	DefaultBackoffCap = 5 * time.Second
	// OrphanAttempts is how often an event for an unknown payment is
	// retried before it goes on the review queue.
	OrphanAttempts = 3
)

var deferrals = metrics.NewCounter(`paystate_inbox_deferrals_total`)

// Inbox accepts webhooks and applies them.
type Inbox struct {
	Store     pay.Store
	Finalizer *finalize.Finalizer
	Providers map[string]pay.Provider
	Now       func() time.Time

	Batch       int // events per RunOnce; default DefaultBatch
	Parallel    int // events applied at once; default DefaultParallel
	BackoffBase time.Duration
	BackoffCap  time.Duration
	Interval    time.Duration // Run's ticker; default 1s

	Logger zerolog.Logger

	wakeOnce sync.Once
	wake     chan struct{}
}

func (in *Inbox) now() time.Time {
	if in.Now != nil {
		return in.Now().UTC()
	}
	return time.Now().UTC()
}

func (in *Inbox) wakeCh() chan struct{} {
	in.wakeOnce.Do(func() { in.wake = make(chan struct{}, 1) })
	return in.wake
}

// Wake asks the worker to look at the inbox now. It never blocks.
func (in *Inbox) Wake() {
	select {
	case in.wakeCh() <- struct{}{}:
	default:
	}
}

// Accept verifies and stores one webhook of the named provider. It returns
// the parsed event and whether it was a redelivery. Errors: ENOTFOUND for an
// unknown provider, ESIGNATURE for a bad signature or timestamp, EINVALID
// for a malformed body; nothing is stored then.
func (in *Inbox) Accept(ctx context.Context, provider string, body []byte, h http.Header) (pay.WebhookEvent, bool, error) {
	prov, ok := in.Providers[provider]
	if !ok {
		webhookOutcome(provider, "unknown_provider")
		return pay.WebhookEvent{}, false, pay.Errorf(pay.ENOTFOUND, "provider %q is not configured", provider)
	}
	ev, err := prov.ParseWebhook(body, h, in.now())
	if err != nil {
		webhookOutcome(provider, "rejected")
		return pay.WebhookEvent{}, false, err
	}
	if ev.Ignore {
		webhookOutcome(provider, "ignored")
		return ev, false, nil
	}
	var inserted bool
	err = in.Store.Update(ctx, func(tx pay.Tx) error {
		e := pay.InboxEvent{
			Provider: provider, EventID: ev.EventID, Type: ev.Type,
			PaymentID: resolve(tx, provider, ev.PaymentID, ev.ProviderRef), ProviderRef: ev.ProviderRef,
			Status: ev.Status, StepKind: ev.StepKind, OccurredAt: ev.OccurredAt.UTC(), ReceivedAt: tx.Now(),
			Body: append([]byte(nil), Redact(body)...), NextAttemptAt: tx.Now(),
		}
		var err error
		inserted, err = tx.PutInbox(e)
		if err == nil && inserted {
			tx.OnCommit(in.Wake)
		}
		return err
	})
	if err != nil {
		return ev, false, fmt.Errorf("store webhook: %w", err)
	}
	if inserted {
		webhookOutcome(provider, "accepted")
	} else {
		webhookOutcome(provider, "duplicate")
	}
	return ev, !inserted, nil
}

func webhookOutcome(provider, outcome string) {
	metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_webhooks_total{provider=%q,outcome=%q}`, provider, outcome)).Inc()
}

// resolve finds the payment an event is about: by paystate's id (echoed by
// the PSP as metadata), else by the PSP's reference; "" if unknown.
func resolve(tx pay.Tx, provider, paymentID, ref string) string {
	if paymentID != "" {
		if p, err := tx.Payment(paymentID); err == nil && p.Provider == provider {
			return p.ID
		}
	}
	if ref != "" {
		if p, err := tx.PaymentByRef(provider, ref); err == nil {
			return p.ID
		}
	}
	return ""
}

// Run applies events until ctx is cancelled, on every Wake and every
// Interval. It returns nil on cancel.
func (in *Inbox) Run(ctx context.Context) error {
	interval := in.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := in.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			in.Logger.Error().Err(err).Msg("inbox pass")
		}
		if n > 0 && err == nil {
			continue // there may be more
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-in.wakeCh():
		}
	}
}

// RunOnce applies the events that are due and returns how many it applied
// (deferrals do not count).
func (in *Inbox) RunOnce(ctx context.Context) (int, error) {
	batch := in.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	var due []pay.InboxEvent
	err := in.Store.View(ctx, func(tx pay.Tx) error {
		var err error
		due, err = tx.PendingInbox(tx.Now(), batch)
		return err
	})
	if err != nil || len(due) == 0 {
		return 0, err
	}

	// Events of one payment are applied one after the other, in the order
	// they became due, so they never contend for their own lease; distinct
	// payments run in parallel.
	var groups [][]pay.InboxEvent
	byPayment := map[string]int{}
	for _, ev := range due {
		if i, ok := byPayment[ev.PaymentID]; ok && ev.PaymentID != "" {
			groups[i] = append(groups[i], ev)
			continue
		}
		byPayment[ev.PaymentID] = len(groups)
		groups = append(groups, []pay.InboxEvent{ev})
	}

	par := in.Parallel
	if par <= 0 {
		par = DefaultParallel
	}
	sem := make(chan struct{}, par)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied int
		first   error
	)
	for _, group := range groups {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, ev := range group {
				ok, err := in.apply(ctx, ev)
				mu.Lock()
				if ok {
					applied++
				}
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return applied, first
}

// apply applies one event, or defers it. It reports whether the event is
// now processed.
func (in *Inbox) apply(ctx context.Context, ev pay.InboxEvent) (bool, error) {
	log := in.Logger.With().Str("event_id", ev.EventID).Str("provider", ev.Provider).Logger()

	// An event found by the PSP's reference may have arrived before that
	// reference was recorded: resolve it again.
	if ev.PaymentID == "" {
		err := in.Store.Update(ctx, func(tx pay.Tx) error {
			ev.PaymentID = resolve(tx, ev.Provider, "", ev.ProviderRef)
			if ev.PaymentID != "" || ev.Attempts+1 < OrphanAttempts {
				return nil
			}
			// Charged at the PSP, unknown here: a human must look.
			if err := tx.PutReview(pay.ReviewItem{
				ID: "orphan_" + ev.Provider + "_" + ev.EventID, Reason: pay.ReasonOrphan,
				Provider: ev.Provider, ProviderRef: ev.ProviderRef, EventID: ev.EventID,
				Observed: ev.Status, Note: "webhook " + ev.Type + " for a payment paystate does not know",
				CreatedAt: tx.Now(),
			}); err != nil {
				return err
			}
			return tx.MarkProcessed(ev.Provider, ev.EventID)
		})
		if err != nil {
			return false, err
		}
		if ev.PaymentID == "" {
			if ev.Attempts+1 >= OrphanAttempts {
				log.Warn().Str("provider_ref", ev.ProviderRef).Msg("webhook for an unknown payment: on the review queue as orphan")
				return true, nil
			}
			return false, in.deferEvent(ctx, ev, "payment not found")
		}
	}
	log = log.With().Str("payment_id", ev.PaymentID).Logger()

	// Applying a webhook calls no PSP: it is one transaction that checks
	// the payment's lease is free and finalizes, which excludes the sweeper
	// and a human's resolution exactly as taking and releasing the lease
	// around it would, with one commit instead of three. If the lease is
	// held, come back later.
	free := func(tx pay.Tx) error {
		l, err := tx.Lease(ev.PaymentID)
		if err != nil {
			return err
		}
		if l.Held(tx.Now()) {
			return pay.Errorf(pay.ELEASEHELD, "payment %s is leased by %s", ev.PaymentID, l.Holder)
		}
		return nil
	}
	var err error
	if ev.Status == "" {
		err = in.Store.Update(ctx, func(tx pay.Tx) error {
			if err := free(tx); err != nil {
				return err
			}
			return finalize.Record(tx, ev.PaymentID, pay.SourceWebhook, stepKind(ev), ev.Provider, ev.EventID, ev.Type)
		})
	} else {
		_, err = in.Finalizer.FinalizeIf(ctx, pay.Observation{
			PaymentID: ev.PaymentID, Source: pay.SourceWebhook, Status: ev.Status,
			ProviderRef: ev.ProviderRef, Provider: ev.Provider, EventID: ev.EventID, Note: ev.Type,
		}, free)
	}
	switch pay.ErrorCode(err) {
	case "":
		return true, nil
	case pay.ELEASEHELD, pay.ELEASELOST:
		deferrals.Inc()
		log.Debug().Str("reason", pay.ErrorCode(err)).Msg("webhook deferred")
		return false, in.deferEvent(ctx, ev, pay.ErrorCode(err))
	default:
		// Keep the event; it is retried with backoff.
		log.Error().Err(err).Msg("apply webhook")
		return false, in.deferEvent(ctx, ev, err.Error())
	}
}

// stepKind is the timeline step of an event that carries no status.
func stepKind(ev pay.InboxEvent) string {
	if ev.StepKind != "" {
		return ev.StepKind
	}
	return pay.StepIgnoredEvent
}

// deferEvent schedules ev again with exponential backoff and jitter.
func (in *Inbox) deferEvent(ctx context.Context, ev pay.InboxEvent, reason string) error {
	base, cap := in.BackoffBase, in.BackoffCap
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if cap <= 0 {
		cap = DefaultBackoffCap
	}
	return in.Store.Update(ctx, func(tx pay.Tx) error {
		return tx.DeferInbox(ev.Provider, ev.EventID, tx.Now().Add(backoff.Delay(base, cap, ev.Attempts+1)), reason)
	})
}

// secretFields are JSON keys whose values are never archived: a PSP event
// may carry the customer's client secret or where to redirect them
// (Stripe's PaymentIntent has client_secret and next_action), and the
// archived history is shown as review evidence and copied into backups.
var secretFields = []string{"client_secret", "redirect_url", "next_action"}

// Redact returns body with the values of secret fields, at any depth,
// replaced by "[redacted]". A body without such a field, or one that is not
// JSON, is returned unchanged; one with it is re-encoded (key order and
// spacing change, content does not).
func Redact(body []byte) []byte {
	found := false
	for _, f := range secretFields {
		found = found || bytes.Contains(body, []byte(`"`+f+`"`))
	}
	if !found {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body // the provider accepted it; keep it as it came
	}
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			for k, val := range t {
				if slices.Contains(secretFields, k) {
					if val != nil {
						t[k] = "[redacted]"
					}
					continue
				}
				walk(val)
			}
		case []any:
			for _, val := range t {
				walk(val)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}
