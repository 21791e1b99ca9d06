// Package pay is paystate's domain: the Payment, its Status and the one
// transition table (Decide), the Observation that finalize applies, the
// records around a payment (timeline steps, leases, inbox, outbox, ledger,
// review items, idempotency keys), money (currency decimals, amounts in
// major units), the error codes, and the interface the providers
// implement: Provider. Storage is declared by package store, which points
// toward pay as every other package does; pay imports only the standard
// library.
package pay
