package sweeper

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/backoff"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// expire handles one payment found by the expiry scan: under its lease it
// is cancelled at the PSP (Provider.Cancel) or, if the provider has no
// cancel API (EUNSUPPORTED) or is not configured, finalized expired. A
// payment expired once before is left to reconciliation.
func (s *Sweeper) expire(ctx context.Context, p pay.Payment, now time.Time, rep *Report) error {
	expireAfter := defaults.Or(s.ExpireAfter, DefaultExpireAfter)
	bound := now.Add(-expireAfter)
	prov, cancels := s.Providers[p.Provider]
	cancels = cancels && s.has(p.Provider, apiCancel)
	if cancels {
		if err := s.limiter(p.Provider).Wait(ctx); err != nil {
			return err
		}
	}
	return s.Leases.Do(ctx, p.ID, func(ctx context.Context, token uint64) error {
		// Re-read: the payment may have moved since the scan.
		var (
			cur          pay.Payment
			expiredOnce  bool
			stillExpires bool
		)
		err := store.View(ctx, s.Store, asTx, func(tx Tx) error {
			var err error
			if cur, err = tx.Payment(p.ID); err != nil {
				return err
			}
			stillExpires = slices.Contains(expiring, cur.Status) && cur.UpdatedAt.Before(bound)
			if !stillExpires {
				return nil
			}
			steps, err := tx.Steps(p.ID)
			expiredOnce = slices.ContainsFunc(steps, func(st pay.Step) bool {
				return st.Kind == pay.StepTransition && st.To == pay.Expired
			})
			return err
		})
		if err != nil || !stillExpires || expiredOnce {
			return err
		}

		if cancels {
			done, err := s.cancel(ctx, prov, cur, token, rep)
			if done || err != nil {
				return err
			}
		}

		r, err := s.finalize(ctx, cur, token, pay.Expired, pay.PSPResult{},
			fmt.Sprintf("no final status within payment.expire_after (%s); the PSP is asked in a later pass", expireAfter))
		if err != nil {
			return err
		}
		if r.Flipped {
			rep.Expired++
			expiredTotal.Inc()
			s.Logger.Info().Str("payment_id", cur.ID).Str("from", string(cur.Status)).Uint64("version", r.Payment.Version).Msg("payment expired")
		}
		return nil
	})
}

// cancel cancels an expiring payment at the PSP under its lease token and
// finalizes what the PSP answers. done is false, with a nil error, if the
// provider has no cancel API (EUNSUPPORTED, remembered): the caller
// expires the payment itself.
func (s *Sweeper) cancel(ctx context.Context, prov pay.Provider, cur pay.Payment, token uint64, rep *Report) (done bool, err error) {
	res, err := s.call(ctx, cur.Provider, func(ctx context.Context) (pay.PSPResult, error) {
		return prov.Cancel(ctx, cur, "cancel-"+cur.ID)
	})
	if pay.ErrorCode(err) == pay.EUNSUPPORTED {
		s.lacks(cur.Provider, apiCancel)
		return false, nil
	}
	if rerr := s.recordAnswer(ctx, cur, res, err); rerr != nil {
		return true, rerr
	}
	if err != nil {
		return true, fmt.Errorf("cancel at the PSP: %w", err)
	}
	st, note := res.Status, "cancelled at the PSP after payment.expire_after: "+res.Raw
	if !st.Terminal() {
		st, note = pay.Expired, "the PSP did not cancel after payment.expire_after: "+res.Raw
	}
	r, err := s.finalize(ctx, cur, token, st, res, note)
	if err != nil {
		return true, err
	}
	if r.Flipped {
		rep.Expired++
		expiredTotal.Inc()
	}
	return true, nil
}

// reconcile handles one payment found by the reconciliation scan: under
// its lease it asks the PSP and finalizes the answer, or puts the payment
// on the review queue.
func (s *Sweeper) reconcile(ctx context.Context, p pay.Payment, now time.Time, rep *Report) error {
	bound := now.Add(-s.MinAge)
	giveUp := defaults.Or(s.GiveUpAfter, DefaultGiveUpAfter)
	prov, ok := s.Providers[p.Provider]
	if !ok {
		if now.Sub(p.CreatedAt) < giveUp {
			return nil
		}
		return s.review(ctx, p.ID, "", fmt.Sprintf("provider %q is not configured: no way to ask the PSP", p.Provider), rep)
	}
	if s.has(p.Provider, apiStatus) {
		if err := s.limiter(p.Provider).Wait(ctx); err != nil {
			return err
		}
	}
	return s.Leases.Do(ctx, p.ID, func(ctx context.Context, token uint64) error {
		// Re-read: the payment may have moved since the scan.
		var cur pay.Payment
		if err := store.View(ctx, s.Store, asTx, func(tx Tx) (err error) { cur, err = tx.Payment(p.ID); return err }); err != nil {
			return err
		}
		if !slices.Contains(reconciling, cur.Status) || !cur.UpdatedAt.Before(bound) {
			return nil
		}
		pastGiveUp := now.Sub(cur.CreatedAt) >= giveUp

		res, err := s.call(ctx, cur.Provider, func(ctx context.Context) (pay.PSPResult, error) {
			return prov.Status(ctx, cur)
		})
		if pay.ErrorCode(err) == pay.EUNSUPPORTED {
			s.lacks(cur.Provider, apiStatus)
			return s.fromHistory(ctx, cur, token, pastGiveUp, rep)
		}
		if err == nil && res.Found && res.Status.Terminal() {
			// The common correction: the answer is stored in the finalize
			// transaction, one commit fewer.
			_, err := s.correct(ctx, cur, token, res, rep)
			return err
		}
		if rerr := s.recordAnswer(ctx, cur, res, err); rerr != nil {
			return rerr
		}
		if err != nil {
			if pastGiveUp {
				if rerr := s.review(ctx, cur.ID, "", "the PSP's status API fails past sweeper.give_up_after: "+pay.ErrorMessage(err), rep); rerr != nil {
					return rerr
				}
			}
			return fmt.Errorf("psp status: %w", err)
		}

		switch {
		case !res.Found:
			return s.review(ctx, cur.ID, "", "the PSP does not know the payment: "+res.Raw, rep)

		case cur.Status == pay.FinalizePending && (res.Status == pay.RequiresAction || res.Status == pay.Created) && s.has(cur.Provider, apiCancel):
			// The create's answer was lost, and with it what the customer
			// needed to pay (the client secret, the hosted page's URL):
			// nobody can pay what the PSP holds open. Cancel it there
			// under the PSP's reference and finalize what the PSP answers
			// (canceled → failed; paid meanwhile → captured).
			if err := s.limiter(cur.Provider).Wait(ctx); err != nil {
				return err
			}
			open := cur
			open.ProviderRef, open.SecondRef = cmp.Or(cur.ProviderRef, res.ProviderRef), cmp.Or(cur.SecondRef, res.SecondRef)
			done, err := s.cancel(ctx, prov, open, token, rep)
			if done || err != nil {
				return err
			}
			if pastGiveUp {
				return s.review(ctx, cur.ID, res.Status, fmt.Sprintf("still %s at the PSP past sweeper.give_up_after: %s", res.Status, res.Raw), rep)
			}
			return nil

		case res.Status == pay.Processing || res.Status == pay.RequiresAction || res.Status == pay.Created:
			// Still open at the PSP: correct the status only if that moves
			// the payment (expired → processing), never write a no-op.
			if pay.Decide(cur.Status, res.Status) == pay.Apply {
				if _, err := s.correct(ctx, cur, token, res, rep); err != nil {
					return err
				}
			}
			if pastGiveUp {
				return s.review(ctx, cur.ID, res.Status, fmt.Sprintf("still %s at the PSP past sweeper.give_up_after: %s", res.Status, res.Raw), rep)
			}
			return nil

		default:
			return s.review(ctx, cur.ID, res.Status, fmt.Sprintf("the PSP answered a status paystate cannot use (%q): %s", res.Status, res.Raw), rep)
		}
	})
}

// fromHistory settles a payment of a provider without a status API from
// its archived webhooks: the latest final status among them is finalized;
// with none, the payment goes on the review queue past give_up_after.
func (s *Sweeper) fromHistory(ctx context.Context, cur pay.Payment, token uint64, pastGiveUp bool, rep *Report) error {
	var evs []pay.InboxEvent
	if err := store.View(ctx, s.Store, asTx, func(tx Tx) (err error) { evs, err = tx.InboxForPayment(cur.ID); return err }); err != nil {
		return err
	}
	var latest *pay.InboxEvent
	for i := range evs {
		e := &evs[i]
		if !e.Status.Terminal() {
			continue
		}
		if latest == nil || e.OccurredAt.After(latest.OccurredAt) ||
			(e.OccurredAt.Equal(latest.OccurredAt) && e.ReceivedAt.After(latest.ReceivedAt)) {
			latest = e
		}
	}

	ans := pay.PSPResult{Found: len(evs) > 0}
	if latest == nil {
		ans.Raw = fmt.Sprintf("%s has no status API; %d archived webhooks, none final", cur.Provider, len(evs))
		if err := s.recordAnswer(ctx, cur, ans, nil); err != nil {
			return err
		}
		if !pastGiveUp {
			return nil
		}
		return s.review(ctx, cur.ID, "", "no status API and no final webhook past sweeper.give_up_after", rep)
	}

	ans.Status, ans.ProviderRef = latest.Status, latest.ProviderRef
	ans.Raw = fmt.Sprintf("%s has no status API; archived webhook %s (%s) says %s", cur.Provider, latest.EventID, latest.Type, latest.Status)
	if err := s.recordAnswer(ctx, cur, ans, nil); err != nil {
		return err
	}
	obs := pay.Observation{
		PaymentID: cur.ID, Source: pay.SourceSweeper, Status: latest.Status, ProviderRef: latest.ProviderRef,
		Amount: latest.Amount, Currency: latest.Currency,
		ExpectedVersion: cur.Version, LeaseToken: token, Note: ans.Raw,
	}
	if !latest.Processed {
		// Apply the event itself, so the inbox worker does not apply it again.
		obs.Provider, obs.EventID = latest.Provider, latest.EventID
	}
	r, err := s.Finalizer.Finalize(ctx, obs)
	if err != nil {
		return fmt.Errorf("finalize from webhook history: %w", err)
	}
	s.corrected(cur, r, rep)
	return nil
}

// correct finalizes a PSP answer with source sweeper under the lease token,
// and stores the answer as the payment's last PSP answer in the same
// transaction. If the finalize fails, the answer is stored on its own, as
// any other answer.
func (s *Sweeper) correct(ctx context.Context, cur pay.Payment, token uint64, res pay.PSPResult, rep *Report) (pay.Result, error) {
	a := answer(cur, res, nil)
	r, err := s.finalizeThen(ctx, cur, token, res.Status, res, "reconciled with the PSP: "+res.Raw,
		func(tx finalize.Tx, _ pay.Result) error { return putAnswer(tx, a) })
	if err != nil {
		if rerr := s.recordAnswer(ctx, cur, res, nil); rerr != nil {
			s.Logger.Warn().Err(rerr).Str("payment_id", cur.ID).Msg("sweeper: store the PSP answer")
		}
		return r, err
	}
	s.corrected(cur, r, rep)
	return r, nil
}

// corrected counts and logs a reconciliation that moved a payment.
func (s *Sweeper) corrected(cur pay.Payment, r pay.Result, rep *Report) {
	if !r.Flipped {
		return
	}
	rep.Corrected++
	correctedTotal(r.Payment.Status).Inc()
	s.Logger.Info().Str("payment_id", cur.ID).Str("provider", cur.Provider).Str("from", string(cur.Status)).
		Str("to", string(r.Payment.Status)).Uint64("version", r.Payment.Version).Msg("drift corrected")
}

// finalize applies an observation of status st with source sweeper.
func (s *Sweeper) finalize(ctx context.Context, cur pay.Payment, token uint64, st pay.Status, res pay.PSPResult, note string) (pay.Result, error) {
	return s.finalizeThen(ctx, cur, token, st, res, note, nil)
}

// finalizeThen is finalize with then, if not nil, run after Apply in the
// finalize transaction (finalize.Finalizer.FinalizeThen); its error rolls
// the transaction back and is returned.
func (s *Sweeper) finalizeThen(ctx context.Context, cur pay.Payment, token uint64, st pay.Status, res pay.PSPResult, note string, then func(finalize.Tx, pay.Result) error) (pay.Result, error) {
	r, err := s.Finalizer.FinalizeThen(ctx, pay.Observation{
		PaymentID: cur.ID, Source: pay.SourceSweeper, Status: st,
		ProviderRef: res.ProviderRef, SecondRef: res.SecondRef, ClientSecret: res.ClientSecret, RedirectURL: res.RedirectURL,
		Amount: res.Amount, Currency: res.Currency,
		ExpectedVersion: cur.Version, LeaseToken: token, Note: note,
	}, then)
	if err != nil {
		return r, fmt.Errorf("finalize %s: %w", st, err)
	}
	return r, nil
}

// call runs a PSP call with retries and exponential backoff; every retry
// waits for the provider's rate limiter too. EUNSUPPORTED and EINVALID are
// not retried.
func (s *Sweeper) call(ctx context.Context, provider string, fn func(context.Context) (pay.PSPResult, error)) (pay.PSPResult, error) {
	retries := defaults.Or(s.Retries, DefaultRetries)
	wait := defaults.Or(s.RetryBackoff, DefaultRetryBackoff)
	for attempt := 1; ; attempt++ {
		res, err := fn(ctx)
		switch code := pay.ErrorCode(err); {
		case err == nil, code == pay.EUNSUPPORTED, code == pay.EINVALID, attempt >= retries, ctx.Err() != nil:
			return res, err
		}
		if backoff.Sleep(ctx, wait) != nil {
			return res, err
		}
		wait *= 2
		if werr := s.limiter(provider).Wait(ctx); werr != nil {
			return res, err
		}
	}
}

// recordAnswer stores the PSP's answer (or the failure of the call) as the
// payment's last PSP answer, unless it says the same as the stored one.
func (s *Sweeper) recordAnswer(ctx context.Context, cur pay.Payment, res pay.PSPResult, callErr error) error {
	a := answer(cur, res, callErr)
	// Read first: an unchanged answer costs no write transaction.
	same := false
	err := store.View(ctx, s.Store, asTx, func(tx Tx) error {
		old, err := tx.PSPAnswer(cur.ID)
		if err != nil && pay.ErrorCode(err) != pay.ENOTFOUND {
			return err
		}
		same = err == nil && old.Same(a)
		return nil
	})
	if err != nil || same {
		return err
	}
	return store.Update(ctx, s.Store, asTx, func(tx Tx) error { return tx.PutPSPAnswer(a) })
}

// answer is the PSP answer stored for a PSP call's result or failure.
func answer(cur pay.Payment, res pay.PSPResult, callErr error) pay.PSPAnswer {
	if callErr != nil {
		return pay.PSPAnswer{PaymentID: cur.ID, Provider: cur.Provider, Error: pay.ErrorMessage(callErr)}
	}
	return pay.PSPAnswer{PaymentID: cur.ID, Provider: cur.Provider, Status: res.Status, Found: res.Found, Raw: res.Raw}
}

// putAnswer stores a as the payment's last PSP answer in tx, unless it
// says the same as the stored one.
func putAnswer(tx store.PSPAnswers, a pay.PSPAnswer) error {
	old, err := tx.PSPAnswer(a.PaymentID)
	switch {
	case err == nil && old.Same(a):
		return nil
	case err != nil && pay.ErrorCode(err) != pay.ENOTFOUND:
		return err
	}
	return tx.PutPSPAnswer(a)
}

// review puts a payment on the review queue as unresolved, with a
// timeline step, unless it is already on the queue (for any reason; see
// finalize.QueueReview).
func (s *Sweeper) review(ctx context.Context, paymentID string, observed pay.Status, note string, rep *Report) error {
	var p pay.Payment
	added, err := s.queueReview(ctx, paymentID, rep, func(tx Tx) (item pay.ReviewItem, err error) {
		if p, err = tx.Payment(paymentID); err != nil {
			return item, err
		}
		last := ""
		if a, err := tx.PSPAnswer(paymentID); err == nil {
			last = finalize.AnswerText(a)
		}
		return pay.ReviewItem{
			PaymentID: p.ID, Reason: pay.ReasonUnresolved, Provider: p.Provider, ProviderRef: p.ProviderRef,
			Observed: observed, Note: note, LastPSP: last,
		}, nil
	})
	if err == nil && added {
		s.Logger.Warn().Str("payment_id", paymentID).Str("provider", p.Provider).Str("status", string(p.Status)).
			Str("reason", pay.ReasonUnresolved).Str("note", note).Msg("payment needs a human: on the review queue")
	}
	return err
}

// queueReview puts the item that build makes in a write transaction on
// the review queue, unless the queue holds the item id already (read
// first: an item already there costs no write transaction), and counts an
// added item in rep and the metric. It reports whether it added the item.
func (s *Sweeper) queueReview(ctx context.Context, id string, rep *Report, build func(tx Tx) (pay.ReviewItem, error)) (bool, error) {
	if queued, err := s.queued(ctx, id); err != nil || queued {
		return false, err
	}
	var added bool
	err := store.Update(ctx, s.Store, asTx, func(tx Tx) error {
		item, err := build(tx)
		if err == nil {
			added, err = finalize.QueueReview(tx, item, pay.SourceSweeper)
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("review queue: %w", err)
	}
	if added {
		rep.Reviewed++
		reviewedTotal.Inc()
	}
	return added, nil
}

// queued reports whether the review queue holds the item id, from a read
// transaction.
func (s *Sweeper) queued(ctx context.Context, id string) (bool, error) {
	queued := false
	err := store.View(ctx, s.Store, asTx, func(tx Tx) error {
		_, err := tx.Review(id)
		queued = err == nil
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			return nil
		}
		return err
	})
	return queued, err
}
