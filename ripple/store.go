package ripple

import (
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// rippleTx is what the ripple workers use of a storage transaction: the
// outbox after the fan-out cursor, deliveries and their indexes, and the
// effect state (customer accounts, effect dedupe records, merchant
// endpoints). The store hands every function a store.Tx, which has all of
// these; a backend that is to run ripple implements them first
// (store/storetest: RippleCursor, Delivery, DueDeliveries (and Skipping),
// DeliveriesInOrder, ListDeliveries, CustomerAccount, Effect,
// WebhookEndpoint).
type rippleTx interface {
	Now() time.Time
	OnCommit(fn func())

	// The outbox and its fan-out cursor.
	OutboxAfter(seq uint64, limit int) ([]pay.OutboxRecord, error)
	OutboxRecord(seq uint64) (pay.OutboxRecord, error)
	RippleCursor() (uint64, error)
	SetRippleCursor(seq uint64) error

	// Deliveries.
	InsertDelivery(d pay.Delivery) error
	Delivery(id string) (pay.Delivery, error)
	UpdateDelivery(d pay.Delivery) error
	DueDeliveries(due time.Time, limit int) ([]pay.Delivery, error)
	DueDeliveriesSkipping(due time.Time, limit int, skip func(id string) bool) ([]pay.Delivery, error)
	ListDeliveries(f pay.DeliveryFilter) ([]pay.Delivery, string, error)
	OldestPendingDelivery() (pay.Delivery, bool, error)
	CountDeliveries(state string) (int, error)

	// Effect state.
	CustomerAccount(id string) (store.CustomerAccount, error)
	PutCustomerAccount(c store.CustomerAccount) error
	Effect(key string) (store.EffectRecord, bool, error)
	PutEffect(r store.EffectRecord) error
	ClaimEffect(r store.EffectRecord) (bool, error)
	WebhookEndpoint(id string) (store.WebhookEndpoint, error)
	PutWebhookEndpoint(e store.WebhookEndpoint) error
}

// A store.Tx is a rippleTx.
var _ rippleTx = store.Tx(nil)
