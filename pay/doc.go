// Package pay is paystate's domain: the Payment, its Status and the one
// transition table (Decide), the Observation that finalize applies, the
// records around a payment (timeline steps, leases, inbox, outbox, ledger,
// review items, idempotency keys), the error codes, and the two interfaces
// the adapters implement: Store and Provider. It imports only the standard
// library; every other package points toward it.
package pay
