package ripple

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/backoff"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// effect is one delivery target.
type effect interface {
	// name is the effect: pay.EffectLoyalty, ...
	name() string
	// endpoint is the webhook endpoint's id, "" for other effects.
	endpoint() string
	// wants reports whether the target receives records of this type.
	wants(rec pay.OutboxRecord) bool
	// deliver applies rec. Its error is the attempt's failure; the outcome
	// says when to retry or that retrying cannot help.
	deliver(ctx context.Context, d pay.Delivery, rec pay.OutboxRecord) (outcome, error)
}

// outcome is what an attempt reports besides its error.
type outcome struct {
	note      string    // on success: what it did
	skipped   bool      // on success: nothing to do (applied before, no customer, no e-mail)
	retryAt   time.Time // on failure: the time the target asked to be retried at
	permanent bool      // on failure: retrying cannot help; dead-letter now

	// health, if set, writes what the attempt says about a merchant
	// endpoint, in the transaction that records the delivery, and reports
	// whether it disabled the endpoint (the delivery is then dead).
	health func(tx rippleTx) (disabled bool, err error)
}

// attempt runs one attempt of d and records its outcome. It reports
// whether an attempt was made: none if d moved on since the pass read it
// (an attempt that ended meanwhile recorded it). An error is a storage
// failure (the attempt is not recorded and d stays due) or the end of
// ctx.
func (s *Service) attempt(ctx context.Context, d pay.Delivery) (bool, error) {
	var (
		rec         pay.OutboxRecord
		fresh, gone bool
	)
	read := store.View[rippleTx]
	if s.Config.Shared {
		read = store.Update[rippleTx] // claim it (Config.Shared)
	}
	verr := read(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		fresh, gone = false, false
		var (
			cur pay.Delivery
			err error
		)
		if s.Config.Shared {
			// Claimed only if pending, due and first in line, which an
			// own delivery (claimDue) was not checked for, and not held
			// by another instance.
			ds, err := tx.ClaimDeliveries([]string{d.ID})
			if err != nil || len(ds) == 0 {
				return err
			}
			cur = ds[0]
		} else if cur, err = tx.Delivery(d.ID); pay.ErrorCode(err) == pay.ENOTFOUND {
			return nil // purged meanwhile: done long ago
		} else if err != nil {
			return err
		}
		if fresh = unchanged(cur, d, tx.Now()); !fresh {
			return nil
		}
		d = cur // an own delivery's EventSeq is not known before
		if s.Config.Shared {
			cur.NextAttemptAt = tx.Now().Add(s.Config.ClaimTTL)
			if err := tx.UpdateDelivery(cur); err != nil {
				return err
			}
		}
		rec, err = tx.OutboxRecord(d.EventSeq)
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			gone = true
			return nil
		}
		return err
	})
	switch {
	case verr != nil:
		return false, fmt.Errorf("read delivery %s: %w", d.ID, verr)
	case !fresh:
		return false, nil
	}
	var (
		out outcome
		err error
	)
	e, ok := s.effects[d.Target()]
	switch {
	case gone:
		out.permanent, err = true, recordGone(d)
	case !ok:
		out.permanent, err = true, fmt.Errorf("target %s is no longer configured", d.Target())
	default:
		actx, cancel := context.WithTimeout(ctx, min(AttemptTimeout, s.Config.ClaimTTL*2/3))
		out, err = e.deliver(actx, d, rec)
		cancel()
	}
	if err != nil && ctx.Err() != nil {
		// Shutting down: not the target's fault. d stays due.
		return false, ctx.Err()
	}
	if s.afterEffect != nil {
		if herr := s.afterEffect(d); herr != nil {
			return true, herr
		}
	}
	// A success is recorded even while shutting down.
	return true, s.record(context.WithoutCancel(ctx), d, out, err)
}

// unchanged reports whether cur, the stored delivery, is still d as a
// pass read it, and due at now: no attempt ended in between.
func unchanged(cur, d pay.Delivery, now time.Time) bool {
	return cur.State == pay.DeliveryPending && cur.Attempts == d.Attempts &&
		cur.UpdatedAt.Equal(d.UpdatedAt) && !cur.NextAttemptAt.After(now)
}

// recordGone is the failure of a delivery whose outbox record is gone.
func recordGone(d pay.Delivery) error {
	return fmt.Errorf("outbox record %d (%s) is gone", d.EventSeq, d.EventID)
}

// recording is one attempt's outcome waiting to be written by record.
type recording struct {
	d       pay.Delivery
	out     outcome
	failure error

	// Set before done is closed.
	after  pay.Delivery
	result string // "" if stale: moved on meanwhile
	logErr error  // the failure as recorded
	err    error
	done   chan struct{}
}

// record writes the outcome of an attempt of d, then counts and logs it.
// The attempts that end while a record is written wait and are written
// together, in one transaction, by the first of them (a group commit of
// ripple's own, so that N webhook deliveries cost far fewer than N
// transactions).
func (s *Service) record(ctx context.Context, d pay.Delivery, out outcome, failure error) error {
	r := &recording{d: d, out: out, failure: failure, done: make(chan struct{})}
	s.recMu.Lock()
	s.recQueue = append(s.recQueue, r)
	writer := !s.recBusy // the others wait for it
	s.recBusy = true
	s.recMu.Unlock()
	for writer {
		s.recMu.Lock()
		group := s.recQueue
		s.recQueue, s.recBusy = nil, len(group) > 0
		s.recMu.Unlock()
		if len(group) == 0 {
			break
		}
		s.writeRecords(ctx, group)
	}
	<-r.done
	return r.err
}

// writeRecords writes a group of outcomes in one transaction, or, if that
// fails, each in its own, so that one that cannot be written does not hold
// up the others; then it logs them and closes their done.
func (s *Service) writeRecords(ctx context.Context, group []*recording) {
	err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		if err := s.advanceCursor(tx); err != nil {
			return err
		}
		for _, r := range group {
			if err := s.recordTx(tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && len(group) > 1 {
		for _, r := range group {
			r.err = store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error { return s.recordTx(tx, r) })
		}
	} else {
		for _, r := range group {
			r.err = err
		}
	}
	for _, r := range group {
		if r.err != nil {
			r.err = fmt.Errorf("record delivery %s: %w", r.d.ID, r.err)
		} else {
			s.logRecord(r)
		}
		close(r.done)
	}
}

// recordTx writes r's outcome in tx: the endpoint's health first, if the
// attempt changed it, then the delivery. It sets r.after and r.result
// ("" if the delivery moved on meanwhile).
func (s *Service) recordTx(tx rippleTx, r *recording) error {
	r.after, r.result, r.logErr = pay.Delivery{}, "", nil // the function may run more than once (group commit)
	cur, err := tx.Delivery(r.d.ID)
	if err != nil {
		return err
	}
	if cur.State != pay.DeliveryPending {
		return nil // moved on meanwhile (an operator); leave it
	}
	out, failure := r.out, r.failure
	if out.health != nil {
		disabled, err := out.health(tx)
		switch {
		case err != nil && failure == nil:
			// Delivered; the endpoint's health is only bookkeeping.
			s.Logger.Error().Err(err).Str("endpoint", r.d.Endpoint).Msg("record webhook endpoint success")
		case err != nil:
			failure = errors.Join(failure, fmt.Errorf("record webhook endpoint failure: %w", err))
		}
		if disabled {
			out.permanent = true
			failure = fmt.Errorf("%w; endpoint disabled after failing for %s", failure, DisableAfter)
		}
	}
	r.after, r.result, err = s.updateDelivery(tx, cur, out, failure)
	r.logErr = failure
	return err
}

// updateDelivery writes the outcome of an attempt over cur, the stored
// pending delivery, and returns it as written and the result for the
// metrics (done, skipped, dead, retry).
func (s *Service) updateDelivery(tx rippleTx, cur pay.Delivery, out outcome, failure error) (pay.Delivery, string, error) {
	result := "retry"
	cur.Attempts++
	switch {
	case failure == nil:
		cur.State, cur.Note, cur.NextAttemptAt, result = pay.DeliveryDone, out.note, time.Time{}, "done"
		if out.skipped {
			result = "skipped"
		}
	case out.permanent || cur.Attempts >= s.Config.MaxAttempts:
		cur.State, cur.LastError, cur.NextAttemptAt, result = pay.DeliveryDead, failure.Error(), time.Time{}, "dead"
	case !out.retryAt.IsZero():
		cur.LastError = failure.Error()
		cur.NextAttemptAt = clampTime(out.retryAt, tx.Now().Add(minRetryAfter), tx.Now().Add(s.Config.BackoffCap))
	default:
		cur.LastError = failure.Error()
		cur.NextAttemptAt = tx.Now().Add(backoff.Delay(s.Config.BackoffBase, s.Config.BackoffCap, cur.Attempts))
	}
	return cur, result, tx.UpdateDelivery(cur)
}

// logRecord counts and logs a recorded attempt.
func (s *Service) logRecord(r *recording) {
	d, after, result, failure := r.d, r.after, r.result, r.logErr
	if result == "" {
		return
	}
	metrics.GetOrCreateCounter(fmt.Sprintf(`paystate_ripple_deliveries_total{effect=%q,outcome=%q}`, d.Effect, result)).Inc()
	var ev *zerolog.Event
	switch result {
	case "dead":
		ev = s.Logger.Error()
	case "retry":
		ev = s.Logger.Warn().Time("next_attempt_at", after.NextAttemptAt)
	default:
		ev = s.Logger.Debug().Str("note", after.Note)
	}
	ev = ev.Str("payment_id", d.PaymentID).Str("event_id", d.EventID).Str("effect", d.Effect).
		Str("delivery_id", d.ID).Int("attempt", after.Attempts).Str("outcome", result)
	if d.Endpoint != "" {
		ev = ev.Str("endpoint", d.Endpoint)
	}
	if failure != nil {
		ev = ev.Err(failure)
	}
	ev.Msg("ripple delivery")
}

func clampTime(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}
