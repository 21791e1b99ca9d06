package ripple

import (
	"context"
	"fmt"
	"math/big"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// loyalty credits points to the customer on a capture and claws them back
// on a refund, in one transaction with its dedupe key. Each succeeded
// refund (payment.refund.succeeded) takes back its share of what the
// capture credited, exactly in proportion: the points of the amount
// refunded after it less those of the amount refunded before it (each
// rounded down), so the shares of all the refunds of a payment add up to
// what the capture credited once it is refunded in full, whatever the
// parts. A payment.refunded record says nothing more then; one without
// AmountRefunded (a payment refunded before refunds had records) takes
// back everything the capture credited.
type loyalty struct{ s *Service }

func (*loyalty) name() string     { return pay.EffectLoyalty }
func (*loyalty) endpoint() string { return "" }
func (*loyalty) wants(rec pay.OutboxRecord) bool {
	if rec.Customer.ID == "" {
		return false
	}
	switch rec.Type {
	case pay.EventType(pay.Captured), pay.EventRefundSucceeded:
		return true
	case pay.EventType(pay.Refunded):
		return rec.AmountRefunded == 0
	}
	return false
}

// refundShare returns the points a refund of amount takes back, when
// the payment's amount refunded after it is after: of the credited points
// of a payment of total, the share of after less the share of before,
// each rounded down.
func refundShare(credited, total, after, amount int64) int64 {
	if total <= 0 || credited == 0 {
		return 0
	}
	share := func(part int64) int64 {
		p := new(big.Int).Mul(big.NewInt(credited), big.NewInt(min(max(part, 0), total)))
		return p.Quo(p, big.NewInt(total)).Int64()
	}
	return share(after) - share(after-amount)
}

// loyaltyPaymentKey holds the points a payment's capture credited.
func loyaltyPaymentKey(paymentID string) string { return "loyalty_payment:" + paymentID }

// keys are rec's dedupe key and its payment's record.
func (*loyalty) keys(rec pay.OutboxRecord) []string {
	if rec.Customer.ID == "" {
		return nil
	}
	return []string{pay.EffectLoyalty + ":" + rec.ID, loyaltyPaymentKey(rec.PaymentID)}
}

// deliver applies rec in a transaction of its own; a pass applies many
// records in one transaction with applyTx instead.
func (l *loyalty) deliver(ctx context.Context, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	return deliverInTx(ctx, l.s.Store, l, d, rec)
}

// applyTx credits or claws back the points of rec in tx. Its error is the
// attempt's failure and comes before any write.
func (l *loyalty) applyTx(tx rippleTx, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	if rec.Customer.ID == "" {
		return outcome{note: "no customer id: no points", skipped: true}, nil
	}
	var out outcome
	err := func() error {
		key := pay.EffectLoyalty + ":" + rec.ID
		credited, known, err := tx.Effect(loyaltyPaymentKey(rec.PaymentID))
		if err != nil {
			return err
		}
		// The points are known before the dedupe key is claimed, so the
		// claim stores its final record; a record applied before is
		// skipped even if its points cannot be worked out now.
		fail := func(err error) error {
			if _, done, derr := tx.Effect(key); derr != nil {
				return derr
			} else if done {
				out = outcome{note: "applied before", skipped: true}
				return nil
			}
			return err
		}
		var points int64
		credit := credited.Points // what the payment's record holds after this
		switch {
		case rec.Type == pay.EventRefundSucceeded:
			// The capture's points, as credited (or as the capture will
			// credit them, if its record is applied later).
			full := credited.Points
			if !known {
				if full, err = Points(rec.Amount, rec.Currency, l.s.Config.PointsPerUnit); err != nil {
					return fail(err)
				}
			}
			points = -refundShare(full, rec.Amount, rec.AmountRefunded, rec.ObjectAmount)
			out.note = fmt.Sprintf("clawed back %d points from %s for refund %s of %s", -points, rec.Customer.ID, rec.RefundID, pay.FormatAmount(rec.ObjectAmount, rec.Currency))
		case rec.Status == pay.Captured && known:
			out.note = "the payment was refunded before its capture was applied: no points"
		case rec.Status == pay.Captured:
			if points, err = Points(rec.Amount, rec.Currency, l.s.Config.PointsPerUnit); err != nil {
				return fail(err)
			}
			credit = points
			out.note = fmt.Sprintf("credited %d points to %s", points, rec.Customer.ID)
		default: // refunded, without refund records: take back exactly what the capture credited
			points = -credited.Points
			credit = 0
			out.note = fmt.Sprintf("clawed back %d points from %s", credited.Points, rec.Customer.ID)
		}
		if claimed, err := tx.ClaimEffect(store.EffectRecord{Key: key, DeliveryID: d.ID, Points: points}); err != nil {
			return err
		} else if !claimed {
			out = outcome{note: "applied before", skipped: true}
			return nil
		}
		c, err := tx.CustomerAccount(rec.Customer.ID)
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			c, err = store.CustomerAccount{ID: rec.Customer.ID}, nil
		}
		if err != nil {
			return err
		}
		c.Points += points
		if err := tx.PutCustomerAccount(c); err != nil {
			return err
		}
		if rec.Type == pay.EventRefundSucceeded { // a refund's share leaves the capture's record as it is
			return nil
		}
		return tx.PutEffect(store.EffectRecord{Key: loyaltyPaymentKey(rec.PaymentID), DeliveryID: d.ID, Points: credit})
	}()
	if err != nil {
		return outcome{}, fmt.Errorf("loyalty: %w", err)
	}
	return out, nil
}

// retention moves the customer's last visit to the time of a capture, in
// one transaction with its dedupe key. last_visit_at never moves back, so
// records applied out of order (a dead letter replayed late) are harmless.
type retention struct{ s *Service }

func (*retention) name() string     { return pay.EffectRetention }
func (*retention) endpoint() string { return "" }
func (*retention) wants(rec pay.OutboxRecord) bool {
	return rec.Customer.ID != "" && rec.Type == pay.EventType(pay.Captured)
}

// deliver applies rec in a transaction of its own; a pass applies many
// records in one transaction with applyTx instead.
func (r *retention) deliver(ctx context.Context, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	return deliverInTx(ctx, r.s.Store, r, d, rec)
}

// keys are rec's dedupe key.
func (*retention) keys(rec pay.OutboxRecord) []string {
	if rec.Customer.ID == "" {
		return nil
	}
	return []string{pay.EffectRetention + ":" + rec.ID}
}

// applyTx moves the customer's last visit in tx.
func (r *retention) applyTx(tx rippleTx, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	if rec.Customer.ID == "" {
		return outcome{note: "no customer id", skipped: true}, nil
	}
	var out outcome
	err := func() error {
		if claimed, err := tx.ClaimEffect(store.EffectRecord{Key: pay.EffectRetention + ":" + rec.ID, DeliveryID: d.ID}); err != nil {
			return err
		} else if !claimed {
			out = outcome{note: "applied before", skipped: true}
			return nil
		}
		c, err := tx.CustomerAccount(rec.Customer.ID)
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			c, err = store.CustomerAccount{ID: rec.Customer.ID}, nil
		}
		if err != nil {
			return err
		}
		out.note = "last visit unchanged: a later one is recorded"
		if rec.CreatedAt.After(c.LastVisitAt) {
			c.LastVisitAt = rec.CreatedAt
			out.note = "last visit " + rec.CreatedAt.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
		return tx.PutCustomerAccount(c)
	}()
	if err != nil {
		return outcome{}, fmt.Errorf("retention: %w", err)
	}
	return out, nil
}

// storeEffect is an effect applied inside the store (loyalty, retention):
// a pass applies many of its deliveries, and records them, in one
// transaction.
type storeEffect interface {
	effect
	// applyTx applies rec in tx. An error is the attempt's failure; a
	// failure of the store itself aborts tx.
	applyTx(tx rippleTx, d pay.Delivery, rec pay.OutboxRecord) (outcome, error)
	// keys are the effect records applyTx reads or claims for rec, which
	// a batch locks at once (Tx.LockEffects).
	keys(rec pay.OutboxRecord) []string
}

// deliverInTx applies rec with e in a transaction of its own.
func deliverInTx(ctx context.Context, st store.Store, e storeEffect, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	var (
		out  outcome
		ferr error
	)
	err := store.Update(ctx, st, asRippleTx, func(tx rippleTx) error {
		out, ferr = e.applyTx(tx, d, rec) // the function may run more than once (group commit)
		if ferr != nil {
			return ferr // roll back whatever was written before it
		}
		return nil
	})
	if err != nil {
		return outcome{}, err
	}
	return out, nil
}
