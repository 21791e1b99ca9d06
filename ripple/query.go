package ripple

import (
	"context"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

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
