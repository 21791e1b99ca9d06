package ripple

import (
	"context"

	"github.com/paystate/paystate/store"
)

// rippleTx is what the ripple workers use of a storage transaction, and
// all that their functions receive: the outbox and its fan-out (a cursor
// on bbolt, claims on PostgreSQL), deliveries and their indexes, and the
// effect state (customer accounts, effect dedupe records, merchant
// endpoints). Payments, the ledger and the inbox are finalize's: the
// compiler keeps ripple out of them.
type rippleTx interface {
	store.Core
	store.Outbox
	store.Deliveries
	store.Effects
}

// view runs fn in a read transaction of s, handing it ripple's Tx.
func view(ctx context.Context, s store.Store, fn func(tx rippleTx) error) error {
	return s.View(ctx, func(tx store.Tx) error { return fn(tx) })
}

// update runs fn in a write transaction of s, handing it ripple's Tx.
func update(ctx context.Context, s store.Store, fn func(tx rippleTx) error) error {
	return s.Update(ctx, func(tx store.Tx) error { return fn(tx) })
}
