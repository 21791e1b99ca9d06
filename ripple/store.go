package ripple

import (
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

// asRippleTx is where the compiler checks that a store.Tx is a rippleTx;
// the workers' transactions are store.View and store.Update with it.
func asRippleTx(tx store.Tx) rippleTx { return tx }
