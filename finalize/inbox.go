package finalize

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/paystate/paystate/internal/backoff"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/internal/metriccache"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Defaults of the Inbox.
const (
	DefaultInboxBatch       = 64
	DefaultInboxParallel    = 8
	DefaultInboxBackoffBase = 200 * time.Millisecond
	// DefaultInboxBackoffCap bounds a deferral: a lease is held for
	// seconds, so an event waits at most this long behind one.
	DefaultInboxBackoffCap = 5 * time.Second
	// DefaultInboxMaxAttempts is how often an event is tried before it
	// goes on the review queue (webhook_inbox.max_attempts).
	DefaultInboxMaxAttempts = 20
)

// Reasons of paystate_webhooks_ignored_total.
const (
	IgnoredNotOurs      = "not_ours"       // an object paystate did not create at the PSP
	IgnoredUnmappedType = "unhandled_type" // an event type paystate does not act on
)

var inboxDeferrals = metrics.NewCounter(`paystate_inbox_deferrals_total`)

// Inbox takes PSP webhooks in and applies them.
//
// Accept verifies a webhook with its provider, stores it in the inbox (which
// is also the archived webhook history) and returns; the HTTP handler
// answers 2xx only then, once the event is durable. A redelivered event is
// accepted and stores nothing, in a read transaction. A new event is
// applied in the transaction that stores it when it can be: one commit
// per webhook. Applying checks that no one (the sweeper, a human's
// resolution) holds the payment's lease and finalizes the observation,
// recording the processed event id. An event that cannot be applied at
// once (the lease is held, the payment is not known yet, an error) is
// stored alone, and RunOnce applies it: deferred with backoff while the
// lease is held, never dropped.
//
// No event is tried more than MaxAttempts times (webhook_inbox.max_attempts,
// default 20). Every try that does not apply the event counts, whatever
// stopped it: a storage error, a payment whose lease is held, a payment
// not found. Lease-held deferrals count too: a lease lasts seconds (30 s by
// default) and the backoff grows to BackoffCap (5 s, with jitter in its
// upper half), so 20 tries span 40 to 80 seconds, longer than a lease left
// by a crashed holder lives; a lease that keeps the event out that long is
// a problem a human should see, not a reason to loop forever. (A lease.ttl
// raised far above the default wants a larger max_attempts or BackoffCap.)
// After the last try an event whose payment is known goes to the review
// queue (inbox_exhausted, its last error in the note) and one whose
// payment is unknown as an orphan; either way it is marked processed and
// leaves the pending list.
//
// An event for a payment paystate does not know (yet) is retried within
// that window: an event of the standard provider may name the payment only
// by provider_ref, which a later /sync report can record, and the event
// then applies. Stripe events about objects paystate did not create
// (pay.WebhookEvent.Untagged with an unknown provider_ref) are answered
// 2xx, counted in paystate_webhooks_ignored_total{provider,reason} and not
// stored.
//
// Metric labels never carry a provider name from the request: names that
// are not configured count as "unknown" (pay.ProviderLabel).
type Inbox struct {
	Store     store.Store
	Finalizer *Finalizer
	Providers map[string]pay.Provider
	// Pull fetches and finalizes what the PSP answers for a trigger
	// (pay.WebhookEvent.Pull); without it a trigger is refused
	// (EUNSUPPORTED) and stores nothing.
	Pull *Pull
	// Now is the clock a webhook's signature timestamp is checked
	// against; default time.Now.
	Now func() time.Time

	Batch       int // events per RunOnce; default DefaultInboxBatch
	Parallel    int // events applied at once; default DefaultInboxParallel
	BackoffBase time.Duration
	BackoffCap  time.Duration
	Interval    time.Duration // Run's ticker; default 1s
	// MaxAttempts is how often an event is tried before it goes on the
	// review queue; default DefaultInboxMaxAttempts.
	MaxAttempts int
	// ApplyLater makes Accept only store a new event, leaving it to
	// RunOnce (tests of the worker's path). By default Accept applies a
	// new event in the transaction that stores it, when it can.
	ApplyLater bool
	// WriteFirst makes Accept go straight to the transaction that stores
	// and applies a new event, without the read transaction before it
	// that answers a redelivery, or an event about an object paystate did
	// not create, without a write: that transaction finds them too and,
	// having written nothing, commits nothing durable. For PostgreSQL,
	// where a commit without writes costs no WAL flush and the read
	// transaction two statements and a commit per webhook; bbolt keeps
	// the read first (its write transactions queue behind one writer).
	WriteFirst bool

	Logger zerolog.Logger

	loop loop
}

// Heartbeat returns when Run last finished a turn of its loop, on Now's
// clock (zero before the first), and Run's interval, the longest wait
// between two turns: /readyz counts the worker stuck when three intervals
// pass without a turn.
func (in *Inbox) Heartbeat() (last time.Time, interval time.Duration) {
	return in.loop.heartbeat(defaults.Or(in.Interval, time.Second))
}

// Wake asks the worker to look at the inbox now. It never blocks.
func (in *Inbox) Wake() { in.loop.waker.wake() }

// Accept verifies and stores one webhook of the named provider. It returns
// the parsed event and whether it was a redelivery. An event type paystate
// does not act on, and an event about an object paystate did not create
// (Untagged, its provider_ref unknown), come back with Ignore set: nothing
// is stored, the caller answers 2xx, and paystate_webhooks_ignored_total
// counts them. Errors: ENOTFOUND for an
// unknown provider, ESIGNATURE for a bad signature or timestamp, EINVALID
// for a malformed body; nothing is stored then.
//
// Its three steps: verify the webhook (verify), find whether it is new
// (seen), store and apply a new one (keep).
func (in *Inbox) Accept(ctx context.Context, provider string, body []byte, h http.Header) (pay.WebhookEvent, bool, error) {
	ev, err := in.verify(provider, body, h)
	if err != nil || ev.Ignore {
		return ev, false, err
	}
	if ev.Pull {
		return in.acceptTrigger(ctx, provider, ev, body)
	}
	verdict, err := in.seen(ctx, provider, ev)
	if err == nil && verdict == eventNew {
		verdict, err = in.keep(ctx, provider, ev, body)
	}
	if err != nil {
		return ev, false, fmt.Errorf("store webhook: %w", err)
	}
	switch verdict {
	case eventNotOurs:
		in.ignored(provider, IgnoredNotOurs)
		in.Logger.Debug().Str("provider", provider).Str("event_id", ev.EventID).Str("type", ev.Type).
			Str("provider_ref", ev.ProviderRef).Msg("webhook about an object paystate did not create: ignored")
		ev.Ignore = true
		return ev, false, nil
	case eventStored:
		in.webhookOutcome(provider, "accepted")
		return ev, false, nil
	}
	in.webhookOutcome(provider, "duplicate")
	return ev, true, nil
}

// acceptTrigger takes a trigger (pay.WebhookEvent.Pull). For a payment
// paystate knows, it is stored for the worker (Pull.Apply), unless a
// trigger of that payment is pending and no fetch runs: then it is
// coalesced into that one and nothing is written (a read transaction
// decides; the write transaction decides again). A trigger naming a
// reference paystate does not know writes nothing (Pull.Unknown). The
// event comes back with the redelivery flag set when it was coalesced.
func (in *Inbox) acceptTrigger(ctx context.Context, provider string, ev pay.WebhookEvent, body []byte) (pay.WebhookEvent, bool, error) {
	if in.Pull == nil {
		in.webhookOutcome(provider, "rejected")
		return ev, false, pay.Errorf(pay.EUNSUPPORTED, "provider %q sends triggers and no pull worker runs", provider)
	}
	var paymentID string
	var pending bool
	err := ReadTx(ctx, in.Store, func(tx Tx) error {
		var err error
		if paymentID = resolve(tx, provider, ev.PaymentID, ev.ProviderRef, ev.SecondRef); paymentID != "" {
			pending, err = triggerPending(tx, paymentID)
		}
		return err
	})
	if err != nil {
		return ev, false, fmt.Errorf("read trigger: %w", err)
	}
	if paymentID == "" {
		in.Pull.Unknown(provider, ev.ProviderRef)
		in.webhookOutcome(provider, "unknown_ref")
		return ev, false, nil
	}
	stored := false
	if !pending {
		archived := append([]byte(nil), Redact(body)...)
		err = WriteTx(ctx, in.Store, func(tx Tx) error {
			var err error
			stored, err = putTrigger(tx, provider, paymentID, ev.ProviderRef, archived)
			if err == nil && stored {
				tx.OnCommit(in.Wake)
			}
			return err
		})
		if err != nil {
			return ev, false, fmt.Errorf("store trigger: %w", err)
		}
	}
	if stored {
		in.webhookOutcome(provider, "accepted")
		in.Pull.count(provider, "stored")
	} else {
		in.webhookOutcome(provider, "duplicate")
		in.Pull.count(provider, "coalesced")
	}
	ev.PaymentID = paymentID
	return ev, !stored, nil
}

// A verdict is what Accept found for an event.
type verdict int

// The verdicts of Accept.
const (
	eventNew       verdict = iota // not in the inbox: to be stored
	eventStored                   // stored now (and applied, if it could be)
	eventDuplicate                // in the inbox already: a redelivery
	eventNotOurs                  // about an object paystate did not create: not kept
)

// verify finds the provider, which checks the webhook's signature with
// its own library and parses the event. An event type paystate does not
// act on comes back with Ignore set.
func (in *Inbox) verify(provider string, body []byte, h http.Header) (pay.WebhookEvent, error) {
	prov, ok := in.Providers[provider]
	if !ok {
		in.webhookOutcome(provider, "unknown_provider")
		return pay.WebhookEvent{}, pay.Errorf(pay.ENOTFOUND, "provider %q is not configured", provider)
	}
	ev, err := prov.ParseWebhook(body, h, clock(in.Now))
	if err != nil {
		in.webhookOutcome(provider, "rejected")
		return pay.WebhookEvent{}, err
	}
	if ev.Ignore {
		in.ignored(provider, IgnoredUnmappedType)
	}
	return ev, nil
}

// seen answers a redelivery (the event is in the inbox) and an event about
// an object paystate did not create from a read transaction: no write
// commit. With WriteFirst it reads nothing and calls every event new: the
// transaction that stores it finds them too.
func (in *Inbox) seen(ctx context.Context, provider string, ev pay.WebhookEvent) (v verdict, err error) {
	if in.WriteFirst {
		return eventNew, nil
	}
	err = ReadTx(ctx, in.Store, func(tx Tx) (err error) {
		v, err = known(tx, provider, ev, resolve(tx, provider, ev.PaymentID, ev.ProviderRef, ev.SecondRef))
		return err
	})
	return v, err
}

// known is the verdict on ev inside tx, its payment resolved: not ours,
// a duplicate, or new.
func known(tx Tx, provider string, ev pay.WebhookEvent, paymentID string) (verdict, error) {
	if paymentID == "" && ev.Untagged {
		return eventNotOurs, nil
	}
	_, err := tx.InboxEvent(provider, ev.EventID)
	switch code := pay.ErrorCode(err); {
	case err == nil:
		return eventDuplicate, nil
	case code == pay.ENOTFOUND:
		return eventNew, nil
	}
	return 0, err
}

// keep stores a new event in the inbox (the body archived with secrets
// redacted, the copy made before the writer runs) and, in the same
// transaction, applies it: one commit per webhook. An event whose payment
// is not known yet, and every event with ApplyLater, is stored alone and
// RunOnce applies it. If the event cannot be applied now (the payment's
// lease is held, any error), that transaction rolls back and the event
// is stored alone, for RunOnce to apply with backoff.
func (in *Inbox) keep(ctx context.Context, provider string, ev pay.WebhookEvent, body []byte) (verdict, error) {
	archived := append([]byte(nil), Redact(body)...)
	if !in.ApplyLater {
		v, err := in.put(ctx, provider, ev, archived, true)
		if err == nil {
			return v, nil
		}
		in.Logger.Debug().Err(err).Str("provider", provider).Str("event_id", ev.EventID).Msg("webhook stored, applied later")
	}
	return in.put(ctx, provider, ev, archived, false)
}

// put stores ev in a write transaction that decides again whether it is
// new (a payment a provider's event adopts is created there) and, if
// apply and its payment is known, applies it in that transaction.
func (in *Inbox) put(ctx context.Context, provider string, ev pay.WebhookEvent, archived []byte, apply bool) (v verdict, err error) {
	err = WriteTx(ctx, in.Store, func(tx Tx) (err error) {
		paymentID := resolve(tx, provider, ev.PaymentID, ev.ProviderRef, ev.SecondRef)
		if paymentID == "" && ev.Adopt != nil {
			if paymentID, err = adopt(tx, provider, ev); err != nil {
				return err
			}
		}
		if v, err = known(tx, provider, ev, paymentID); err != nil || v != eventNew {
			return err
		}
		e := pay.InboxEvent{
			Provider: provider, EventID: ev.EventID, Type: ev.Type,
			PaymentID: paymentID, ProviderRef: ev.ProviderRef, SecondRef: ev.SecondRef,
			Status: ev.Status, StepKind: ev.StepKind, Amount: ev.Amount, Currency: ev.Currency,
			OccurredAt: ev.OccurredAt.UTC(), ReceivedAt: tx.Now(),
			Body: archived, NextAttemptAt: tx.Now(),
			Refund: ev.Refund, Dispute: ev.Dispute,
		}
		applied := apply && paymentID != ""
		if applied {
			// Applied first, so that PutInbox archives the event as
			// processed rather than pending.
			if err := in.applyIn(tx, e); err != nil {
				return err
			}
		}
		inserted, err := tx.PutInbox(e)
		if !inserted {
			v = eventDuplicate
		} else if !applied {
			tx.OnCommit(in.Wake)
		}
		return err
	})
	if err == nil && v == eventNew {
		v = eventStored
	}
	return v, err
}

// applyIn applies a new event inside tx, as apply does in its own
// transaction: the payment's lease must be free; the observation is
// finalized (or, for an event with no status, recorded on the timeline)
// and the event id marked processed.
func (in *Inbox) applyIn(tx Tx, ev pay.InboxEvent) error {
	if err := LeaseFree(tx, ev.PaymentID); err != nil {
		return err
	}
	if recordOnly(ev) {
		return recordEvent(tx, ev)
	}
	obs := observationOf(ev)
	res, err := Apply(tx, obs)
	if err != nil {
		return err
	}
	tx.OnCommit(func() { in.Finalizer.committed(obs, res) })
	return nil
}

// webhookOutcome counts one webhook in paystate_webhooks_total.
func (in *Inbox) webhookOutcome(provider, outcome string) {
	webhookCounters.Get([2]string{pay.ProviderLabel(provider, in.Providers), outcome}).Inc()
}

// webhookCounters are paystate_webhooks_total of each provider label and
// outcome (configured names, "unknown" and a fixed set of outcomes).
var webhookCounters = metriccache.Cache[[2]string, *metrics.Counter]{New: func(k [2]string) *metrics.Counter {
	return metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_webhooks_total{provider=%q,outcome=%q}`, k[0], k[1]))
}}

// ignored counts a webhook that was answered 2xx and not stored, in
// paystate_webhooks_total (outcome ignored) and
// paystate_webhooks_ignored_total.
func (in *Inbox) ignored(provider, reason string) {
	in.webhookOutcome(provider, "ignored")
	metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_webhooks_ignored_total{provider=%q,reason=%q}`, pay.ProviderLabel(provider, in.Providers), reason)).Inc()
}

// resolve finds the payment an event is about: by paystate's id (echoed by
// the PSP as metadata), else by the PSP's references (its provider_ref,
// then its second reference: a PayPal event that names only the capture);
// "" if unknown.
func resolve(tx Tx, provider, paymentID string, refs ...string) string {
	if paymentID != "" {
		if p, err := tx.Payment(paymentID); err == nil && p.Provider == provider {
			return p.ID
		}
	}
	for _, ref := range refs {
		if ref == "" {
			continue
		}
		if p, err := tx.PaymentByRef(provider, ref); err == nil {
			return p.ID
		}
	}
	return ""
}

// Run applies events until ctx is cancelled, on every Wake and every
// Interval. It returns nil on cancel.
func (in *Inbox) Run(ctx context.Context) error {
	return in.loop.run(ctx, defaults.Or(in.Interval, time.Second), in.Now, in.Logger, "inbox pass", true, in.RunOnce)
}

// RunOnce applies the events that are due and returns how many it applied
// (deferrals do not count).
func (in *Inbox) RunOnce(ctx context.Context) (int, error) {
	var due []pay.InboxEvent
	err := ReadTx(ctx, in.Store, func(tx Tx) error {
		var err error
		due, err = tx.PendingInbox(tx.Now(), defaults.Or(in.Batch, DefaultInboxBatch))
		return err
	})
	if err != nil || len(due) == 0 {
		return 0, err
	}

	// Events of one payment are applied one after the other, in the order
	// they became due, so they never race each other's compare-and-set;
	// distinct payments run in parallel, at most Parallel at once.
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

	var (
		g       errgroup.Group
		applied atomic.Int64
	)
	g.SetLimit(defaults.Or(in.Parallel, DefaultInboxParallel))
	for _, group := range groups {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			var first error
			for _, ev := range group {
				ok, err := in.apply(ctx, ev)
				if ok {
					applied.Add(1)
				}
				if first == nil {
					first = err
				}
			}
			return first
		})
	}
	err = g.Wait()
	return int(applied.Load()), err
}

// apply applies one event, or defers it, or, after its last try, puts it
// on the review queue. It reports whether the event is now processed.
func (in *Inbox) apply(ctx context.Context, ev pay.InboxEvent) (bool, error) {
	log := in.Logger.With().Str("event_id", ev.EventID).Str("provider", ev.Provider).Logger()
	last := ev.Attempts+1 >= defaults.Or(in.MaxAttempts, DefaultInboxMaxAttempts)

	// An event found by the PSP's reference may have arrived before that
	// reference was recorded: resolve it again.
	if ev.PaymentID == "" {
		err := WriteTx(ctx, in.Store, func(tx Tx) error {
			ev.PaymentID = resolve(tx, ev.Provider, "", ev.ProviderRef, ev.SecondRef)
			if ev.PaymentID != "" || !last {
				return nil
			}
			// Charged at the PSP, unknown here: a human must look.
			if _, err := QueueReview(tx, pay.ReviewItem{
				ID: "orphan_" + ev.Provider + "_" + ev.EventID, Reason: pay.ReasonOrphan,
				Provider: ev.Provider, ProviderRef: ev.ProviderRef, EventID: ev.EventID,
				Observed: ev.Status, Note: fmt.Sprintf("webhook %s for a payment paystate does not know (%d tries)", ev.Type, ev.Attempts+1),
			}, pay.SourceWebhook); err != nil {
				return err
			}
			return tx.MarkProcessed(ev.Provider, ev.EventID)
		})
		if err != nil {
			return false, err
		}
		if ev.PaymentID == "" {
			if last {
				log.Warn().Str("provider_ref", ev.ProviderRef).Msg("webhook for an unknown payment: on the review queue as orphan")
				return true, nil
			}
			return false, in.deferEvent(ctx, ev, "payment not found")
		}
	}
	log = log.With().Str("payment_id", ev.PaymentID).Logger()

	var err error
	switch {
	case ev.Type == PullType && in.Pull != nil:
		// A trigger: the PSP is asked under the payment's lease.
		err = in.Pull.Apply(ctx, ev)
	case ev.Type == PullType:
		err = pay.Errorf(pay.EUNSUPPORTED, "a trigger of %s and no pull worker runs", ev.Provider)
	default:
		err = in.applyStored(ctx, ev)
	}
	if err == nil {
		return true, nil
	}
	reason := err.Error()
	switch code := pay.ErrorCode(err); code {
	case pay.ELEASEHELD, pay.ELEASELOST:
		inboxDeferrals.Inc()
		reason = code
		log.Debug().Str("reason", code).Int("attempt", ev.Attempts+1).Msg("webhook deferred")
	default:
		// Keep the event; it is retried with backoff.
		log.Error().Err(err).Int("attempt", ev.Attempts+1).Msg("apply webhook")
	}
	if last {
		return in.exhausted(ctx, ev, reason)
	}
	return false, in.deferEvent(ctx, ev, reason)
}

// applyStored applies one stored event (not a trigger) in one transaction.
func (in *Inbox) applyStored(ctx context.Context, ev pay.InboxEvent) error {
	// Applying a webhook calls no PSP: it is one transaction that checks
	// the payment's lease is free and finalizes, which excludes the sweeper
	// and a human's resolution exactly as taking and releasing the lease
	// around it would, with one commit instead of three. If the lease is
	// held, come back later.
	free := func(tx Tx) error { return LeaseFree(tx, ev.PaymentID) }
	var err error
	if recordOnly(ev) {
		err = WriteTx(ctx, in.Store, func(tx Tx) error {
			if err := free(tx); err != nil {
				return err
			}
			return recordEvent(tx, ev)
		})
	} else {
		_, err = in.Finalizer.FinalizeIf(ctx, observationOf(ev), free)
	}
	return err
}

// exhausted puts an event that failed its last try on the review queue
// (inbox_exhausted, with its last error) and marks it processed, in one
// transaction. It reports whether that committed.
func (in *Inbox) exhausted(ctx context.Context, ev pay.InboxEvent, lastErr string) (bool, error) {
	note := fmt.Sprintf("webhook %s (%s) not applied after %d tries; last error: %s", ev.EventID, ev.Type, ev.Attempts+1, lastErr)
	err := WriteTx(ctx, in.Store, func(tx Tx) error {
		if _, err := QueueReview(tx, pay.ReviewItem{
			PaymentID: ev.PaymentID, Reason: pay.ReasonInboxExhausted, Provider: ev.Provider,
			ProviderRef: ev.ProviderRef, EventID: ev.EventID, Observed: ev.Status, Note: note,
		}, pay.SourceWebhook); err != nil {
			return err
		}
		return tx.MarkProcessed(ev.Provider, ev.EventID)
	})
	if err != nil {
		return false, fmt.Errorf("review exhausted webhook %s: %w", ev.EventID, err)
	}
	in.Logger.Warn().Str("payment_id", ev.PaymentID).Str("provider", ev.Provider).Str("event_id", ev.EventID).
		Int("attempts", ev.Attempts+1).Str("last_error", lastErr).Msg("webhook not applied after its last try: on the review queue")
	return true, nil
}

// recordOnly reports whether ev changes nothing but the timeline: no
// status, no refund, no dispute.
func recordOnly(ev pay.InboxEvent) bool {
	return ev.Status == "" && ev.Refund == nil && ev.Dispute == nil
}

// observationOf is the observation a stored webhook makes: of the
// payment's status, or of one of its refunds or disputes.
func observationOf(ev pay.InboxEvent) pay.Observation {
	return pay.Observation{
		PaymentID: ev.PaymentID, Source: pay.SourceWebhook, Status: ev.Status,
		ProviderRef: ev.ProviderRef, SecondRef: ev.SecondRef, Provider: ev.Provider, EventID: ev.EventID, Note: ev.Type,
		Amount: ev.Amount, Currency: ev.Currency, Refund: ev.Refund, Dispute: ev.Dispute,
	}
}

// adopt stores the payment an event makes from the PSP's evidence (a
// Stripe Payment Link's completed session: pay.WebhookEvent.Adopt), in the
// transaction that stores and applies the event: status created, its
// first step from SourcePaymentLink, the event's references. Its provider
// reference is unique, so a redelivery finds it (resolve) and makes none.
// Evidence that does not make a valid payment (an order id paystate would
// refuse, no amount) makes none: "" is returned and the event stays an
// orphan.
func adopt(tx Tx, provider string, ev pay.WebhookEvent) (string, error) {
	a := ev.Adopt
	now := tx.Now()
	p := pay.Payment{
		ID: ids.Payment(now), OrderID: a.OrderID, Amount: a.Amount, Currency: a.Currency, Customer: a.Customer,
		Provider: provider, ProviderRef: ev.ProviderRef, SecondRef: ev.SecondRef, Flow: a.Flow,
		Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	// Evidence paystate cannot make a payment of leaves the event unknown:
	// an orphan on the review queue, for a human.
	if pay.ValidateOrderID(p.OrderID) != nil || pay.ValidateAmount(p.Amount) != nil || pay.ValidateCurrency(p.Currency) != nil ||
		pay.ValidateText("customer.id", p.Customer.ID, 128) != nil || pay.ValidateEmail("customer.email", p.Customer.Email) != nil {
		return "", nil
	}
	if err := tx.InsertPayment(p); err != nil {
		return "", err
	}
	if err := tx.AppendStep(pay.Step{
		PaymentID: p.ID, At: now, Source: pay.SourcePaymentLink, Kind: pay.StepCreated, To: pay.Created, Version: 1,
		EventID: ev.EventID, Note: "made from " + provider + " " + ev.Type + " " + ev.ProviderRef,
	}); err != nil {
		return "", err
	}
	tx.OnCommit(func() { adoptedTotal.Inc() })
	return p.ID, nil
}

// adoptedTotal counts the payments made from a PSP's evidence.
var adoptedTotal = metrics.NewCounter(`paystate_payments_adopted_total`)

// recordEvent applies an event that carries no status, refund or
// dispute: a step in the payment's timeline, or, for an event that asks
// for a human (StepKind pay.StepReview: a Stripe Checkout Session
// completed with no payment required, neither captured nor failed), the
// review queue (unresolved) with the event as evidence. Either way the
// event is processed in the same transaction.
func recordEvent(tx Tx, ev pay.InboxEvent) error {
	if ev.StepKind != pay.StepReview {
		return Record(tx, ev.PaymentID, pay.SourceWebhook, stepKind(ev), ev.Provider, ev.EventID, ev.Type)
	}
	if done, err := tx.IsProcessed(ev.Provider, ev.EventID); err != nil || done {
		return err
	}
	if _, err := QueueReview(tx, pay.ReviewItem{
		PaymentID: ev.PaymentID, Reason: pay.ReasonUnresolved, Provider: ev.Provider, ProviderRef: ev.ProviderRef,
		EventID: ev.EventID, Note: "webhook " + ev.Type + " says neither captured nor failed (no payment required)",
	}, pay.SourceWebhook); err != nil {
		return err
	}
	return tx.MarkProcessed(ev.Provider, ev.EventID)
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
	delay := backoff.Delay(defaults.Or(in.BackoffBase, DefaultInboxBackoffBase), defaults.Or(in.BackoffCap, DefaultInboxBackoffCap), ev.Attempts+1)
	return WriteTx(ctx, in.Store, func(tx Tx) error {
		return tx.DeferInbox(ev.Provider, ev.EventID, tx.Now().Add(delay), reason)
	})
}

// secretFields are JSON keys whose values are never archived: a PSP event
// may carry the customer's client secret or where to redirect them
// (Stripe's PaymentIntent has client_secret and next_action), and the
// archived history is shown as review evidence and copied into backups.
var secretFields = []string{"client_secret", "redirect_url", "next_action"}

// secretQuoted are secretFields in quotes, as a JSON key appears.
var secretQuoted = func() [][]byte {
	out := make([][]byte, len(secretFields))
	for i, f := range secretFields {
		out[i] = []byte(`"` + f + `"`)
	}
	return out
}()

// Redact returns body with the values of secret fields, at any depth,
// replaced by "[redacted]". A body without such a field, or one that is not
// JSON, is returned unchanged; one with it is re-encoded (key order and
// spacing change, content does not).
func Redact(body []byte) []byte {
	found := false
	for _, f := range secretQuoted {
		found = found || bytes.Contains(body, f)
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
