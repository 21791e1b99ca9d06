package sweeper

import (
	"context"
	"fmt"
	"time"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// sweepRefunds reconciles the refunds left pending longer than MinAge,
// as payments are: a refund is a candidate through the store's index of
// pending refunds (Tx.PendingRefunds, O(candidates)); under its
// payment's lease the provider is asked about it (RefundStatus) and a
// final answer is finalized as any observation is. A refund still pending,
// unknown to the PSP or whose provider cannot say (standard: its webhook
// settles it) past GiveUpAfter goes on the review queue, reason
// refund_unresolved.
func (s *Sweeper) sweepRefunds(ctx context.Context, now time.Time, rep *Report) error {
	bound := now.Add(-s.MinAge)
	batch := defaults.Or(s.Batch, DefaultBatch)
	f := pay.RefundFilter{UpdatedBefore: bound, Limit: batch}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var page []pay.Refund
		if err := store.View(ctx, s.Store, asTx, func(tx Tx) (err error) { page, err = tx.PendingRefunds(f); return err }); err != nil {
			return fmt.Errorf("refund candidates: %w", err)
		}
		for _, r := range page {
			rep.Candidates++
			candidatesTotal.Inc()
			switch err := s.sweepRefund(ctx, r, now, rep); pay.ErrorCode(err) {
			case "":
			case pay.ELEASEHELD:
				rep.Skipped++
				leaseHeldTotal.Inc()
			default:
				if ctx.Err() != nil {
					return ctx.Err()
				}
				rep.Errors++
				errorsTotal.Inc()
				s.Logger.Warn().Err(err).Str("payment_id", r.PaymentID).Str("refund_id", r.ID).Msg("sweeper: refund not settled this pass")
			}
		}
		if len(page) < batch {
			break
		}
		f.AfterUpdated, f.AfterID = page[len(page)-1].UpdatedAt, page[len(page)-1].ID
	}
	return nil
}

// sweepRefund settles one pending refund, under its payment's lease.
func (s *Sweeper) sweepRefund(ctx context.Context, r pay.Refund, now time.Time, rep *Report) error {
	prov, ok := s.Providers[r.Provider]
	pastGiveUp := now.Sub(r.CreatedAt) >= defaults.Or(s.GiveUpAfter, DefaultGiveUpAfter)
	if !ok {
		if !pastGiveUp {
			return nil
		}
		return s.refundReview(ctx, r, fmt.Sprintf("provider %q is not configured: no way to ask the PSP about refund %s", r.Provider, r.ID), rep)
	}
	if err := s.limiter(r.Provider).Wait(ctx); err != nil {
		return err
	}
	return s.Leases.Do(ctx, r.PaymentID, func(ctx context.Context, token uint64) error {
		// Re-read: the refund may have moved since the scan.
		var (
			cur pay.Refund
			p   pay.Payment
		)
		err := store.View(ctx, s.Store, asTx, func(tx Tx) (err error) {
			if cur, err = tx.Refund(r.ID); err != nil {
				return err
			}
			p, err = tx.Payment(r.PaymentID)
			return err
		})
		if err != nil || cur.Status != pay.RefundPending || !cur.UpdatedAt.Equal(r.UpdatedAt) {
			return err
		}
		var ans pay.RefundResult
		_, err = s.call(ctx, p.Provider, func(ctx context.Context) (pay.PSPResult, error) {
			var err error
			ans, err = prov.RefundStatus(ctx, p, cur)
			return pay.PSPResult{}, err
		})
		switch {
		case pay.ErrorCode(err) == pay.EUNSUPPORTED:
			if !pastGiveUp {
				return nil // its webhook settles it
			}
			return s.refundReview(ctx, cur, fmt.Sprintf("refund %s is pending since %s and provider %s cannot say more", cur.ID, cur.CreatedAt.Format("2006-01-02T15:04:05Z"), p.Provider), rep)
		case err != nil:
			return fmt.Errorf("refund status at the PSP: %w", err)
		case !ans.Found || !ans.Status.Terminal():
			if !pastGiveUp {
				return nil
			}
			said := "does not know it"
			if ans.Found {
				said = "says " + string(ans.Status)
			}
			return s.refundReview(ctx, cur, fmt.Sprintf("refund %s is pending past sweeper.give_up_after; the PSP %s (%s)", cur.ID, said, ans.Raw), rep)
		}
		res, err := s.Finalizer.Finalize(ctx, pay.Observation{
			PaymentID: p.ID, Source: pay.SourceSweeper, LeaseToken: token, Note: "refund status: " + ans.Raw,
			Refund: &pay.RefundChange{ID: cur.ID, ProviderRef: ans.ProviderRef, Status: ans.Status},
		})
		if err != nil {
			return err
		}
		if res.Flipped {
			rep.Corrected++
			s.Logger.Info().Str("payment_id", p.ID).Str("refund_id", cur.ID).Str("to", string(ans.Status)).
				Uint64("version", res.Payment.Version).Msg("sweeper: pending refund settled")
		}
		return nil
	})
}

// refundReview puts a refund nobody could settle on the review queue
// (refund_unresolved, item "refund_<refund id>"), once.
func (s *Sweeper) refundReview(ctx context.Context, r pay.Refund, note string, rep *Report) error {
	added, err := s.queueReview(ctx, "refund_"+r.ID, rep, func(Tx) (pay.ReviewItem, error) {
		return pay.ReviewItem{
			ID: "refund_" + r.ID, PaymentID: r.PaymentID, Reason: pay.ReasonRefundUnresolved, Provider: r.Provider,
			ProviderRef: r.ProviderRef, Note: note,
		}, nil
	})
	if err == nil && added {
		s.Logger.Warn().Str("payment_id", r.PaymentID).Str("refund_id", r.ID).Str("reason", pay.ReasonRefundUnresolved).
			Str("note", note).Msg("refund needs a human: on the review queue")
	}
	return err
}
