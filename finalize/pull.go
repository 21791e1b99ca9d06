package finalize

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/paystate/paystate/internal/backoff"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/internal/metriccache"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// PullType is the inbox type of a stored trigger (pay.WebhookEvent.Pull):
// a webhook that says only "this payment changed, ask me".
const PullType = "paystate.pull"

// pullEventPrefix starts the inbox event id of a stored trigger.
const pullEventPrefix = "pull_"

// Defaults of the Pull.
const (
	// DefaultUnknownIDBackoff is how long a reference paystate does not
	// know stays unasked after one fetch (providers.<name>.unknown_id_backoff).
	DefaultUnknownIDBackoff = 10 * time.Minute
	// DefaultMaxUnknown bounds the references remembered as unknown; past
	// it, a trigger for one more unknown reference is dropped and counted.
	DefaultMaxUnknown = 10000
)

// PullLimits are a provider's limits on the pull path.
type PullLimits struct {
	// RatePerSecond is how many fetches per second the pull path makes
	// at this provider; zero or less: no limit.
	RatePerSecond float64
	// UnknownIDBackoff is how long a reference paystate does not know is
	// left unasked after a fetch; default DefaultUnknownIDBackoff.
	UnknownIDBackoff time.Duration
}

// Pull finalizes what a PSP answers when its webhook is a trigger, not
// evidence (pay.WebhookEvent.Pull: Mollie's webhook carries only the
// payment's id).
//
// Inbox.Accept stores a trigger for a payment paystate knows as an inbox
// record of type PullType, before the webhook is answered, so a crash
// loses no acknowledged trigger. Triggers for one payment are coalesced:
// while one is pending and no fetch runs (the payment's lease is free), a
// new one stores nothing. The inbox worker hands a stored trigger to
// Apply, which takes the payment's lease (Leases), asks the provider
// (Provider.Status) within the provider's rate limit, and finalizes the
// answer with the lease's fencing token; the triggers that were pending
// when the fetch began are processed in the same transaction. A fetch
// that fails is an error for the inbox, which retries the trigger with
// backoff: it never fails the payment.
//
// A trigger naming a reference paystate does not know writes nothing: the
// reference is remembered in memory (at most MaxUnknown of them) and
// fetched at most once per its provider's UnknownIDBackoff, by RunOnce.
// If the PSP's answer names a payment of paystate's (its metadata), a
// trigger is stored for it; otherwise the reference is counted in
// paystate_pull_unknown_total and forgotten when its backoff ends. A flood
// of forged ids therefore costs one fetch each per backoff, and no write.
type Pull struct {
	Store     store.Store
	Finalizer *Finalizer
	// Leases takes the payment's lease around the fetch (holder
	// "pull/<process>").
	Leases    *Leases
	Providers map[string]pay.Provider
	// Limits are each provider's; a provider without an entry has no
	// rate limit and DefaultUnknownIDBackoff.
	Limits map[string]PullLimits
	// MaxUnknown bounds the unknown references remembered; default
	// DefaultMaxUnknown.
	MaxUnknown int
	// Now is the clock of the unknown references' backoff and of the
	// rate limit; default time.Now.
	Now func() time.Time
	// Until blocks until Now reads t or later, or ctx ends: how a fetch
	// over the rate limit waits for its turn. Default: a timer for the
	// time from Now to t. A test on a manual clock moves its clock
	// instead.
	Until func(ctx context.Context, t time.Time) error
	// Interval is Run's ticker; default 1s.
	Interval time.Duration
	// Wake, if set, is called after a trigger is stored for a payment
	// found by an unknown reference (the inbox worker's Wake).
	Wake   func()
	Logger zerolog.Logger

	mu       sync.Mutex
	unknown  map[unknownKey]time.Time // reference → when it may be fetched again
	queue    []unknownKey             // references to fetch, in arrival order
	limiters RateLimiters

	loop loop
}

type unknownKey struct{ provider, ref string }

// pullCounters are paystate_pull_triggers_total{provider,outcome}:
// stored, coalesced, unknown (remembered and queued for one fetch),
// throttled (an unknown reference within its backoff) and dropped (more
// unknown references than MaxUnknown).
var pullCounters = metriccache.Cache[[2]string, *metrics.Counter]{New: func(k [2]string) *metrics.Counter {
	return metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_pull_triggers_total{provider=%q,outcome=%q}`, k[0], k[1]))
}}

// pullFetches are paystate_pull_fetches_total{provider,outcome}: ok,
// error, and, for an unknown reference, ours (it named a payment of
// paystate's) or unknown.
var pullFetches = metriccache.Cache[[2]string, *metrics.Counter]{New: func(k [2]string) *metrics.Counter {
	return metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_pull_fetches_total{provider=%q,outcome=%q}`, k[0], k[1]))
}}

// unknownRefs is paystate_pull_unknown_total: fetched references that
// named no payment of paystate's.
var unknownRefs = metrics.NewCounter(`paystate_pull_unknown_total`)

func (pl *Pull) count(provider, outcome string) {
	pullCounters.Get([2]string{pay.ProviderLabel(provider, pl.Providers), outcome}).Inc()
}

func (pl *Pull) fetched(provider, outcome string) {
	pullFetches.Get([2]string{pay.ProviderLabel(provider, pl.Providers), outcome}).Inc()
}

// Heartbeat returns when Run last finished a turn, and its interval.
func (pl *Pull) Heartbeat() (last time.Time, interval time.Duration) {
	return pl.loop.heartbeat(defaults.Or(pl.Interval, time.Second))
}

// limiter returns the rate limiter of a provider's fetches.
func (pl *Pull) limiter(provider string) *rate.Limiter {
	pl.mu.Lock()
	if pl.limiters.Rate == nil {
		pl.limiters.Rate = func(p string) float64 { return pl.Limits[p].RatePerSecond }
	}
	pl.mu.Unlock()
	return pl.limiters.Get(provider)
}

// wait blocks until the provider's rate limit lets one more fetch
// through, on the Pull's clock: the limiter reserves the fetch's turn at
// Now (rate.Limiter.ReserveN), and Until waits for it. A wait that ends
// early (ctx) gives its turn back.
func (pl *Pull) wait(ctx context.Context, provider string) error {
	lim := pl.limiter(provider)
	now := clock(pl.Now)
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return fmt.Errorf("rate limit of %s: no fetch can ever pass", provider)
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	var err error
	if pl.Until != nil {
		err = pl.Until(ctx, now.Add(d))
	} else {
		err = backoff.Sleep(ctx, d)
	}
	if err != nil {
		r.CancelAt(clock(pl.Now))
	}
	return err
}

// Unknown takes a trigger naming a reference paystate does not know: it
// is queued for one fetch unless it was fetched within its backoff. It
// writes nothing and never blocks.
func (pl *Pull) Unknown(provider, ref string) {
	now := clock(pl.Now)
	k := unknownKey{provider, ref}
	pl.mu.Lock()
	if pl.unknown == nil {
		pl.unknown = map[unknownKey]time.Time{}
	}
	if next, ok := pl.unknown[k]; ok && now.Before(next) {
		pl.mu.Unlock()
		pl.count(provider, "throttled")
		return
	}
	if max := defaults.Or(pl.MaxUnknown, DefaultMaxUnknown); len(pl.unknown) >= max {
		for k2, next := range pl.unknown {
			if !now.Before(next) {
				delete(pl.unknown, k2)
			}
		}
		if len(pl.unknown) >= max {
			pl.mu.Unlock()
			pl.count(provider, "dropped")
			return
		}
	}
	pl.unknown[k] = now.Add(defaults.Or(pl.Limits[provider].UnknownIDBackoff, DefaultUnknownIDBackoff))
	pl.queue = append(pl.queue, k)
	pl.mu.Unlock()
	pl.count(provider, "unknown")
	pl.loop.waker.wake()
}

// Run fetches queued unknown references until ctx is cancelled, on every
// Unknown and every Interval. It returns nil on cancel.
func (pl *Pull) Run(ctx context.Context) error {
	return pl.loop.run(ctx, defaults.Or(pl.Interval, time.Second), pl.Now, pl.Logger, "pull pass", false, pl.RunOnce)
}

// RunOnce fetches every queued unknown reference once, each within its
// provider's rate limit, and returns how many it fetched. A reference
// whose answer names a payment of paystate's gets a stored trigger; any
// other is counted and stays remembered until its backoff ends.
func (pl *Pull) RunOnce(ctx context.Context) (int, error) {
	pl.mu.Lock()
	queue := pl.queue
	pl.queue = nil
	pl.mu.Unlock()

	n := 0
	for i, k := range queue {
		if err := pl.wait(ctx, k.provider); err != nil {
			pl.requeue(queue[i:])
			return n, err
		}
		n++
		if err := pl.fetchUnknown(ctx, k); err != nil {
			pl.Logger.Warn().Err(err).Str("provider", k.provider).Str("provider_ref", k.ref).Msg("fetch of an unknown reference")
		}
	}
	return n, nil
}

// requeue puts back references a cancelled pass did not fetch.
func (pl *Pull) requeue(ks []unknownKey) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.queue = append(ks, pl.queue...)
}

// fetchUnknown asks the provider about one unknown reference; if the
// answer names a payment of paystate's at that provider whose reference
// is not another one, it stores a trigger for that payment.
func (pl *Pull) fetchUnknown(ctx context.Context, k unknownKey) error {
	prov, ok := pl.Providers[k.provider]
	if !ok {
		return nil
	}
	res, err := prov.Status(ctx, pay.Payment{Provider: k.provider, ProviderRef: k.ref})
	if err != nil {
		pl.fetched(k.provider, "error")
		return err
	}
	if !res.Found || res.PaymentID == "" {
		pl.fetched(k.provider, "unknown")
		unknownRefs.Inc()
		return nil
	}
	stored := false
	err = WriteTx(ctx, pl.Store, func(tx Tx) error {
		stored = false
		p, err := tx.Payment(res.PaymentID)
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			return nil
		} else if err != nil {
			return err
		}
		if p.Provider != k.provider || (p.ProviderRef != "" && p.ProviderRef != k.ref) {
			return nil // metadata that is not this payment's: not evidence
		}
		stored, err = putTrigger(tx, k.provider, p.ID, k.ref, nil)
		return err
	})
	if err != nil {
		return err
	}
	if !stored {
		pl.fetched(k.provider, "unknown")
		unknownRefs.Inc()
		return nil
	}
	pl.fetched(k.provider, "ours")
	pl.mu.Lock()
	delete(pl.unknown, k) // known from now on
	pl.mu.Unlock()
	if pl.Wake != nil {
		pl.Wake()
	}
	return nil
}

// putTrigger stores a pending trigger for a payment, unless one is
// pending and no fetch runs (the lease is free): that one's fetch will
// begin after now and see what this trigger announces. It reports
// whether it stored one.
func putTrigger(tx Tx, provider, paymentID, ref string, body []byte) (bool, error) {
	if pending, err := triggerPending(tx, paymentID); err != nil || pending {
		return false, err
	}
	now := tx.Now()
	return tx.PutInbox(pay.InboxEvent{
		Provider: provider, EventID: ids.New(pullEventPrefix, now), Type: PullType,
		PaymentID: paymentID, ProviderRef: ref, OccurredAt: now, ReceivedAt: now,
		Body: body, NextAttemptAt: now,
	})
}

// triggerPending reports whether a trigger of the payment is pending
// while its lease is free (no fetch runs).
func triggerPending(tx Tx, paymentID string) (bool, error) {
	l, err := tx.Lease(paymentID)
	if err != nil || l.Held(tx.Now()) {
		return false, err
	}
	ids, err := pendingTriggers(tx, paymentID)
	return len(ids) > 0, err
}

// pendingTriggers returns the event ids of a payment's pending triggers.
func pendingTriggers(tx Tx, paymentID string) ([]string, error) {
	evs, err := tx.InboxForPayment(paymentID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range evs {
		if e.Type == PullType && !e.Processed {
			out = append(out, e.EventID)
		}
	}
	return out, nil
}

// Apply handles one stored trigger: under the payment's lease it asks the
// provider and finalizes the answer with the lease's token, processing
// every trigger of the payment that was pending when the fetch began.
// ELEASEHELD: another holder has the lease (the inbox defers the
// trigger); any other error leaves the trigger pending for a retry.
func (pl *Pull) Apply(ctx context.Context, ev pay.InboxEvent) error {
	prov, ok := pl.Providers[ev.Provider]
	if !ok {
		return pay.Errorf(pay.ENOTFOUND, "provider %q is not configured", ev.Provider)
	}
	return pl.Leases.Do(ctx, ev.PaymentID, func(ctx context.Context, token uint64) error {
		var (
			cur      pay.Payment
			triggers []string
			done     bool
			refunds  []pay.Refund
			disputes []pay.Dispute
		)
		err := ReadTx(ctx, pl.Store, func(tx Tx) error {
			var err error
			if done, err = tx.IsProcessed(ev.Provider, ev.EventID); err != nil || done {
				return err // processed by an earlier fetch: coalesced
			}
			if cur, err = tx.Payment(ev.PaymentID); err != nil {
				return err
			}
			if triggers, err = pendingTriggers(tx, ev.PaymentID); err != nil {
				return err
			}
			if refunds, err = tx.RefundsForPayment(ev.PaymentID); err != nil {
				return err
			}
			disputes, err = tx.DisputesForPayment(ev.PaymentID)
			return err
		})
		if err != nil || done {
			return err
		}

		if err := pl.wait(ctx, ev.Provider); err != nil {
			return err
		}
		// A payment whose reference was never recorded (its create's
		// answer was lost) is asked about by the trigger's, and the answer
		// counts only if it names this payment (metadata).
		ask, byTrigger := cur, cur.ProviderRef == "" && ev.ProviderRef != ""
		if byTrigger {
			ask.ProviderRef = ev.ProviderRef
		}
		res, err := prov.Status(ctx, ask)
		if err == nil && byTrigger && res.Found && res.PaymentID != cur.ID {
			res = pay.PSPResult{Found: false, Raw: fmt.Sprintf("%s %s names another payment (%q)", ev.Provider, ev.ProviderRef, res.PaymentID)}
		}
		if err != nil {
			pl.fetched(ev.Provider, "error")
			return fmt.Errorf("fetch from %s: %w", ev.Provider, err)
		}
		pl.fetched(ev.Provider, "ok")

		// The others pending when the fetch began are answered by it.
		others := func(tx Tx, _ pay.Result) error {
			for _, id := range triggers {
				if id == ev.EventID {
					continue
				}
				if done, err := tx.IsProcessed(ev.Provider, id); err != nil {
					return err
				} else if !done {
					if err := tx.MarkProcessed(ev.Provider, id); err != nil {
						return err
					}
				}
			}
			return nil
		}
		note := fmt.Sprintf("fetched from %s after a webhook: %s", ev.Provider, res.Raw)
		if !res.Found || res.Status == "" {
			// Nothing to finalize: the fetch is recorded in the timeline.
			if !res.Found {
				note = fmt.Sprintf("fetched from %s after a webhook: not this payment's: %s", ev.Provider, res.Raw)
			}
			err = WriteTx(ctx, pl.Store, func(tx Tx) error {
				if err := Record(tx, cur.ID, pay.SourceWebhook, pay.StepIgnoredEvent, ev.Provider, ev.EventID, note); err != nil {
					return err
				}
				return others(tx, pay.Result{})
			})
		} else {
			_, err = pl.Finalizer.FinalizeThen(ctx, pay.Observation{
				PaymentID: cur.ID, Source: pay.SourceWebhook, Status: res.Status,
				ProviderRef: res.ProviderRef, SecondRef: res.SecondRef, ClientSecret: res.ClientSecret, RedirectURL: res.RedirectURL,
				Provider: ev.Provider, EventID: ev.EventID, Amount: res.Amount, Currency: res.Currency,
				ExpectedVersion: cur.Version, LeaseToken: token, Note: note,
			}, others)
		}
		if err != nil {
			return fmt.Errorf("finalize fetched status: %w", err)
		}
		return pl.changes(ctx, ev.Provider, cur.ID, token, res, refunds, disputes)
	})
}

// changes finalizes the refunds and disputes of a fetched answer that
// differ from what paystate holds; one the same as stored writes nothing.
func (pl *Pull) changes(ctx context.Context, provider, paymentID string, token uint64, res pay.PSPResult, refunds []pay.Refund, disputes []pay.Dispute) error {
	if res.Money == nil {
		return nil
	}
	for _, rc := range res.Money.Refunds {
		same := false
		for _, r := range refunds {
			if (rc.ID != "" && r.ID == rc.ID) || (rc.ProviderRef != "" && r.ProviderRef == rc.ProviderRef) {
				same = r.Status == rc.Status && (rc.ProviderRef == "" || r.ProviderRef == rc.ProviderRef)
				break
			}
		}
		if same {
			continue
		}
		rc := rc
		if _, err := pl.Finalizer.Finalize(ctx, pay.Observation{
			PaymentID: paymentID, Source: pay.SourceWebhook, Refund: &rc, LeaseToken: token,
			Note: fmt.Sprintf("refund %s fetched from %s", rc.ProviderRef, provider),
		}); err != nil {
			return fmt.Errorf("finalize fetched refund %s: %w", rc.ProviderRef, err)
		}
	}
	for _, dc := range res.Money.Disputes {
		same := false
		for _, d := range disputes {
			if d.Provider == provider && d.ID == dc.ID {
				same = d.Status == dc.Status
				break
			}
		}
		if same {
			continue
		}
		dc := dc
		if _, err := pl.Finalizer.Finalize(ctx, pay.Observation{
			PaymentID: paymentID, Source: pay.SourceWebhook, Provider: provider, Dispute: &dc, LeaseToken: token,
			Note: fmt.Sprintf("chargeback %s fetched from %s", dc.ID, provider),
		}); err != nil {
			return fmt.Errorf("finalize fetched dispute %s: %w", dc.ID, err)
		}
	}
	return nil
}
