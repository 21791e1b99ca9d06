package sweeper

import (
	"context"
	"fmt"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// housekeeping removes what is past its retention, one bounded batch per
// transaction, so that writers never wait long behind it. Done deliveries
// go before the outbox records they delivered.
func (s *Sweeper) housekeeping(ctx context.Context, now time.Time, rep *Report) error {
	retention := defaults.Or(s.ProcessedRetention, DefaultProcessedRetention)
	outboxRetention := defaults.Or(s.OutboxRetention, DefaultOutboxRetention)
	var err error
	rep.PurgedIdemKeys, err = s.purge(ctx, "idempotency_keys", func(tx Tx, limit int) (int, error) {
		return tx.PurgeIdemKeys(now, limit)
	})
	if err != nil {
		return err
	}
	rep.PurgedProcessed, err = s.purge(ctx, "processed_events", func(tx Tx, limit int) (int, error) {
		return tx.PurgeProcessed(now.Add(-retention), limit)
	})
	if err != nil {
		return err
	}
	rep.PurgedDeliveries, err = s.purge(ctx, "deliveries", func(tx Tx, limit int) (int, error) {
		return tx.PurgeDoneDeliveries(now.Add(-outboxRetention), limit)
	})
	if err != nil {
		return err
	}
	rep.PurgedOutbox, err = s.purge(ctx, "outbox", func(tx Tx, limit int) (int, error) {
		return tx.PurgeOutbox(now.Add(-outboxRetention), limit)
	})
	return err
}

// purge runs fn in write transactions of one batch each until a batch
// removes less than a full batch, and returns the total.
func (s *Sweeper) purge(ctx context.Context, what string, fn func(tx Tx, limit int) (int, error)) (int, error) {
	batch := defaults.Or(s.Batch, DefaultBatch)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int
		err := store.Update(ctx, s.Store, asTx, func(tx Tx) error {
			var err error
			n, err = fn(tx, batch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", what, err)
		}
		total += n
		if n > 0 {
			purgedTotal(what).Add(n)
		}
		if n < batch {
			return total, nil
		}
	}
}

// tidyQueue takes unresolved review items off the queue whose payment has
// become final since they were queued (a late webhook, a later pass), and
// sets paystate_sweeper_unresolved (paystate_review_queue_size is read
// from the store at each scrape, httpd/metrics.go). It reads the whole queue: O(review items), and
// opens a write transaction only for an item it drops (finalize.DropSettled
// checks again there).
func (s *Sweeper) tidyQueue(ctx context.Context, rep *Report) error {
	var settled []pay.ReviewItem
	var items []pay.ReviewItem
	err := store.View(ctx, s.Store, asTx, func(tx Tx) error {
		var err error
		if items, err = tx.ListReview(); err != nil {
			return err
		}
		for _, it := range items {
			if it.Reason != pay.ReasonUnresolved || it.PaymentID == "" {
				continue
			}
			p, err := tx.Payment(it.PaymentID)
			if pay.ErrorCode(err) == pay.ENOTFOUND {
				continue // a human decides
			} else if err != nil {
				return err
			}
			if p.Status.Terminal() {
				settled = append(settled, it)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("review queue: %w", err)
	}
	for _, it := range settled {
		var (
			status  pay.Status
			dropped bool
		)
		err := store.Update(ctx, s.Store, asTx, func(tx Tx) (err error) {
			status, dropped, err = finalize.DropSettled(tx, it.ID)
			return err
		})
		if err != nil {
			return fmt.Errorf("review queue: %w", err)
		}
		if dropped {
			rep.Dropped++
			s.Logger.Info().Str("payment_id", it.PaymentID).Str("status", string(status)).
				Msg("unresolved payment is final now: taken off the review queue")
		}
	}

	rep.ReviewQueue = len(items) - rep.Dropped
	for _, it := range items {
		if it.Reason == pay.ReasonUnresolved {
			rep.Unresolved++
		}
	}
	rep.Unresolved -= rep.Dropped
	unresolvedGauge.Set(float64(rep.Unresolved))
	return nil
}
