package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Keys names the records a Dump reads that no Tx method lists: they are
// fetched one by one.
type Keys struct {
	IdemKeys  []string `json:"idem_keys"`
	Customers []string `json:"customers"`
	Effects   []string `json:"effects"`
	Endpoints []string `json:"endpoints"`
}

// Dump is everything a store holds that its Tx methods read, in one value
// that encoding/json prints the same way whatever the backend or schema
// that holds it: two stores with the same records have equal dumps. Lists
// are in the order the store returns them.
type Dump struct {
	Payments   []pay.Payment                    `json:"payments"`
	Steps      map[string][]pay.Step            `json:"steps"`
	Inbox      map[string][]pay.InboxEvent      `json:"inbox"`
	Outbox     []pay.OutboxRecord               `json:"outbox"`
	Leases     map[string]pay.Lease             `json:"leases"`
	PSPAnswers map[string]pay.PSPAnswer         `json:"psp_answers"`
	Deliveries map[string][]pay.Delivery        `json:"deliveries"`
	Balances   []pay.Balance                    `json:"balances"`
	Review     []pay.ReviewItem                 `json:"review"`
	IdemKeys   map[string]pay.IdemRecord        `json:"idem_keys"`
	Customers  map[string]store.CustomerAccount `json:"customers"`
	Effects    map[string]store.EffectRecord    `json:"effects"`
	Endpoints  map[string]store.WebhookEndpoint `json:"endpoints"`
	Processed  map[string]bool                  `json:"processed"`
	Cursor     uint64                           `json:"ripple_cursor"`
	Horizon    time.Time                        `json:"outbox_horizon"`
	Keys       Keys                             `json:"keys"`
	PendingDue []string                         `json:"pending_inbox"`
}

// ReadDump reads every record of s in one read transaction.
func ReadDump(ctx context.Context, s store.Store, keys Keys) (Dump, error) {
	d := Dump{
		Steps: map[string][]pay.Step{}, Inbox: map[string][]pay.InboxEvent{}, Leases: map[string]pay.Lease{},
		PSPAnswers: map[string]pay.PSPAnswer{}, Deliveries: map[string][]pay.Delivery{},
		IdemKeys: map[string]pay.IdemRecord{}, Customers: map[string]store.CustomerAccount{},
		Effects: map[string]store.EffectRecord{}, Endpoints: map[string]store.WebhookEndpoint{},
		Processed: map[string]bool{}, Keys: keys,
	}
	err := s.View(ctx, func(tx store.Tx) error {
		for cursor := ""; ; {
			ps, next, err := tx.ListPayments(pay.PaymentFilter{Limit: 500, Cursor: cursor})
			if err != nil {
				return fmt.Errorf("list payments: %w", err)
			}
			d.Payments = append(d.Payments, ps...)
			if next == "" {
				break
			}
			cursor = next
		}
		for _, p := range d.Payments {
			if err := d.readPayment(tx, p.ID); err != nil {
				return err
			}
		}
		var err error
		if d.Outbox, err = tx.OutboxAfter(0, 1<<30); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		for _, state := range []string{pay.DeliveryPending, pay.DeliveryDone, pay.DeliveryDead} {
			for cursor := ""; ; {
				ds, next, err := tx.ListDeliveries(pay.DeliveryFilter{State: state, Limit: 1000, Cursor: cursor})
				if err != nil {
					return fmt.Errorf("deliveries %s: %w", state, err)
				}
				d.Deliveries[state] = append(d.Deliveries[state], ds...)
				if next == "" {
					break
				}
				cursor = next
			}
		}
		if d.Balances, err = tx.LedgerBalances(); err != nil {
			return fmt.Errorf("balances: %w", err)
		}
		if d.Review, err = tx.ListReview(); err != nil {
			return fmt.Errorf("review: %w", err)
		}
		pending, err := tx.PendingInbox(time.Unix(1<<40, 0), 1<<20)
		if err != nil {
			return fmt.Errorf("pending inbox: %w", err)
		}
		for _, e := range pending {
			d.PendingDue = append(d.PendingDue, e.Provider+"/"+e.EventID)
		}
		if d.Cursor, err = tx.RippleCursor(); err != nil {
			return fmt.Errorf("ripple cursor: %w", err)
		}
		if d.Horizon, err = tx.OutboxHorizon(); err != nil {
			return fmt.Errorf("outbox horizon: %w", err)
		}
		return d.readKeys(tx, keys)
	})
	return d, err
}

// readPayment reads the records kept per payment.
func (d *Dump) readPayment(tx store.Tx, id string) error {
	steps, err := tx.Steps(id)
	if err != nil {
		return fmt.Errorf("steps of %s: %w", id, err)
	}
	d.Steps[id] = steps
	events, err := tx.InboxForPayment(id)
	if err != nil {
		return fmt.Errorf("inbox of %s: %w", id, err)
	}
	d.Inbox[id] = events
	for _, e := range events {
		done, err := tx.IsProcessed(e.Provider, e.EventID)
		if err != nil {
			return fmt.Errorf("processed %s/%s: %w", e.Provider, e.EventID, err)
		}
		d.Processed[e.Provider+"/"+e.EventID] = done
	}
	if l, err := tx.Lease(id); err == nil {
		d.Leases[id] = l
	} else if pay.ErrorCode(err) != pay.ENOTFOUND {
		return fmt.Errorf("lease of %s: %w", id, err)
	}
	if a, err := tx.PSPAnswer(id); err == nil {
		d.PSPAnswers[id] = a
	} else if pay.ErrorCode(err) != pay.ENOTFOUND {
		return fmt.Errorf("psp answer of %s: %w", id, err)
	}
	return nil
}

// readKeys reads the records named by keys.
func (d *Dump) readKeys(tx store.Tx, keys Keys) error {
	var errs []error
	for _, k := range keys.IdemKeys {
		r, err := tx.IdemKey(k)
		errs = append(errs, err)
		d.IdemKeys[k] = r
	}
	for _, k := range keys.Customers {
		c, err := tx.CustomerAccount(k)
		errs = append(errs, err)
		d.Customers[k] = c
	}
	for _, k := range keys.Effects {
		e, found, err := tx.Effect(k)
		if err == nil && !found {
			err = fmt.Errorf("effect %s not found", k)
		}
		errs = append(errs, err)
		d.Effects[k] = e
	}
	for _, k := range keys.Endpoints {
		e, err := tx.WebhookEndpoint(k)
		errs = append(errs, err)
		d.Endpoints[k] = e
	}
	return errors.Join(errs...)
}
