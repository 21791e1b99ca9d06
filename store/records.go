package store

import (
	"time"

	"github.com/paystate/paystate/pay"
)

// Records that are stored but are not the domain's: their family's
// consumer owns what they mean, the store only keeps them. Ripple's
// effects keep customer accounts, effect dedupe records and merchant
// endpoints (the Effects family); the simulated PSP its charges
// (PSPCharges). They live here, beside the family that stores them,
// rather than in package pay, which holds the payment domain alone; and
// not in ripple or psp/mock, which the backends must not import.

// CustomerAccount is what the loyalty and retention effects keep about a
// customer, by the merchant's customer id.
type CustomerAccount struct {
	ID          string
	Points      int64     // may go below zero after a clawback
	LastVisitAt time.Time // the latest captured payment's time; zero if none
	UpdatedAt   time.Time
}

// EventEffects are the effects whose dedupe keys are "<effect>:<event
// id>" (package ripple); a backend's PurgeOutbox removes them with their
// record.
var EventEffects = []string{pay.EffectLoyalty, pay.EffectRetention, pay.EffectReceipt, pay.EffectWebhook}

// EffectRecord marks an effect as applied, under its dedupe key
// ("loyalty:<event id>", "payment_receipt:<payment id>", ...). It is
// written in the same transaction as the effect's own write, or for an
// external effect right after the send succeeded.
type EffectRecord struct {
	Key        string
	DeliveryID string
	Points     int64 // loyalty: the points credited (negative: clawed back)
	At         time.Time
}

// WebhookEndpoint is the stored state of one merchant endpoint; the URL,
// secrets and event types come from the configuration.
type WebhookEndpoint struct {
	ID             string // derived from the URL
	URL            string
	Disabled       bool
	DisabledAt     time.Time
	DisabledReason string
	FailingSince   time.Time // the first failure since the last success; zero when healthy
	LastSuccessAt  time.Time
	UpdatedAt      time.Time
}

// PSPCharge is a charge as the simulated PSP (psp/mock) made it, kept in
// the store so that every instance on one database answers the same about
// it and a restart forgets nothing. Key is the charge's idempotency key.
type PSPCharge struct {
	Key          string
	PaymentID    string
	ProviderRef  string
	Amount       int64
	Currency     string
	Status       pay.Status
	ClientSecret string // sensitive: only ever returned as the PSP's answer
	RedirectURL  string
	RefundKey    string // the key of the refund made, if any
	// AmountRefunded is what the PSP refunded of the charge so far. The
	// mock keeps each refund as a record of its own too, under the
	// refund's key, with Amount its amount and Status refunded or failed.
	AmountRefunded int64
	Calls          int // Create calls with the key, replays included
	Refunds        int
	CreatedAt      time.Time // a zero CreatedAt becomes Tx.Now
}
