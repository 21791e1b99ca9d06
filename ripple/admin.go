package ripple

import (
	"context"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Retry puts a delivery back on the schedule, due now: a dead letter
// starts over with no attempts, a pending delivery keeps its attempts. A
// retry of a webhook delivery re-enables its endpoint if it was disabled.
// ECONFLICT for a delivery that is done, ENOTFOUND for an unknown id.
func (s *Service) Retry(ctx context.Context, id string) (pay.Delivery, error) {
	var d pay.Delivery
	err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		var err error
		if d, err = tx.Delivery(id); err != nil {
			return err
		}
		if d.State == pay.DeliveryDone {
			return pay.Errorf(pay.ECONFLICT, "delivery %s is done: there is nothing to retry", id)
		}
		d, err = s.reopen(tx, d)
		return err
	})
	if err != nil {
		return pay.Delivery{}, err
	}
	s.Notify()
	s.logGauges(ctx)
	return d, nil
}

// RetryDead puts back every dead letter that died at or after since (and
// before the call), like Retry, and returns how many.
func (s *Service) RetryDead(ctx context.Context, since time.Time) (int, error) {
	const page = 500
	start := s.now()
	total, cursor := 0, ""
	for {
		var (
			n    int
			next string
			past bool
		)
		err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			n, past = 0, false
			ds, nc, err := tx.ListDeliveries(pay.DeliveryFilter{State: pay.DeliveryDead, Since: since, Limit: page, Cursor: cursor})
			if err != nil {
				return err
			}
			next = nc
			for _, d := range ds {
				if d.UpdatedAt.After(start) {
					past = true // died during this call: not asked for
					break
				}
				if _, err := s.reopen(tx, d); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if past || next == "" {
			break
		}
		cursor = next
	}
	if total > 0 {
		s.Notify()
		s.Logger.Info().Int("deliveries", total).Time("since", since).Msg("dead letters retried")
	}
	s.logGauges(ctx)
	return total, nil
}

// logGauges refreshes the gauges after an operator's retry, which has
// succeeded whatever happens here: a failure is only logged.
func (s *Service) logGauges(ctx context.Context) {
	if err := s.refreshGauges(ctx); err != nil {
		s.Logger.Warn().Err(err).Msg("ripple gauges")
	}
}

// reopen makes d pending and due now, and re-enables its webhook endpoint.
func (s *Service) reopen(tx rippleTx, d pay.Delivery) (pay.Delivery, error) {
	if d.State == pay.DeliveryDead {
		d.Attempts = 0
	}
	d.State, d.NextAttemptAt = pay.DeliveryPending, tx.Now()
	if d.Endpoint != "" {
		ep, err := tx.WebhookEndpoint(d.Endpoint)
		if err != nil {
			return pay.Delivery{}, err
		}
		if ep.Disabled {
			ep.Disabled, ep.DisabledAt, ep.DisabledReason, ep.FailingSince = false, time.Time{}, "", time.Time{}
			if err := tx.PutWebhookEndpoint(ep); err != nil {
				return pay.Delivery{}, err
			}
			id := ep.ID
			tx.OnCommit(func() {
				s.Logger.Warn().Str("endpoint", id).Str("delivery_id", d.ID).Str("payment_id", d.PaymentID).Msg("webhook endpoint re-enabled by a retry")
			})
		}
	}
	if err := tx.UpdateDelivery(d); err != nil {
		return pay.Delivery{}, err
	}
	return tx.Delivery(d.ID)
}

// Deliveries returns a page of deliveries in one state, oldest first by
// the time they entered it, and the cursor of the next page ("" at the
// end).
func (s *Service) Deliveries(ctx context.Context, f pay.DeliveryFilter) (ds []pay.Delivery, next string, err error) {
	err = store.View(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		ds, next, err = tx.ListDeliveries(f)
		return err
	})
	return ds, next, err
}

// Customer returns what the loyalty and retention effects keep about a
// customer, or ENOTFOUND.
func (s *Service) Customer(ctx context.Context, id string) (c store.CustomerAccount, err error) {
	err = store.View(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
		c, err = tx.CustomerAccount(id)
		return err
	})
	return c, err
}
