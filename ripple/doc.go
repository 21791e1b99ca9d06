// Package ripple delivers outbox records to their side effects: loyalty
// points, the customer's last visit (retention), an e-mail receipt over
// SMTP, and signed merchant webhooks. Finalize appends an outbox record in
// the same transaction as every real transition; ripple takes it from
// there, best effort and at least once, and never blocks or fails a
// finalize (finalize only calls Service.Notify, a non-blocking send).
//
// # Fan-out and deliveries
//
// Each pass (RunOnce) first fans out: in one transaction it reads the
// outbox records after a stored cursor, creates one delivery per record
// and target, and moves the cursor. A crash before the commit leaves
// nothing; after it, every delivery exists. Records that no target wants
// cost no write: the pass moves past them in memory and the cursor
// reaches the store with ripple's next write transaction, whatever it is
// (a restart before it reads them again, and they still want nothing).
//
// On a store that can write a record's deliveries itself (the backend's
// declared store.Backend.FanOut, PostgreSQL's, which daemon passes as
// Config.FanOut and New calls with the service's targets), there is no
// cursor: the transaction of the transition writes the deliveries of its
// record, and the records appended without them (before the service
// existed, or by another process) are claimed by the passes of any
// instance in batches (Tx.ClaimUnfanned, FOR UPDATE SKIP LOCKED), at most
// once per Interval in Run. The store hands the deliveries that this
// process's transactions wrote to the service once they have committed
// (adopt), and the next pass claims them by id, without reading the due
// index: its batch of loyalty and retention deliveries in one statement
// (Tx.ClaimDeliveries) that takes only those pending, due and first in
// line for their payment, and skips the ones another instance holds; one
// not first in line yet is kept for a later pass until Config.Grace has
// passed. Run reads the due index only on its first pass, every Interval
// and when its last read left due deliveries behind, and passes over the
// other instances' deliveries never attempted and younger than
// Config.Grace (by the time in their ULID ids), so instances neither poll
// for nor collide on each other's fresh work; a delivery whose instance
// died after its commit is taken by any instance once Config.Grace has
// passed. RunOnce reads the whole due index. The workers receive
// ripple's own transaction type, rippleTx (store.go): the outbox,
// deliveries and effect families, nothing of finalize's.
//
// The targets are the effects
// that want the record's type, read from the configuration at fan-out
// time:
//
//	target                 records                               applied
//	loyalty                captured, refunded; with customer.id  in the store: points to the customer, clawed back on refund
//	retention              captured; with customer.id            in the store: the customer's last_visit_at
//	receipt                captured                              one e-mail per payment, if receipt.smtp_addr is set
//	webhook:<endpoint id>  the endpoint's events                 an HTTP POST signed per Standard Webhooks, one per endpoint
//	nats                   every record, if relay.nats.url is set  a JetStream message on <subject_prefix>.<type>, Nats-Msg-Id = event id (nats.go)
//
// A captured payment without an e-mail address gets a receipt delivery
// that is done at once with a note saying so; one without a customer id
// gets no loyalty or retention delivery at all. The receipt's settings
// and templates are package receipt's; ripple renders it and sends it
// over SMTP (receipt.go).
//
// A delivery is per endpoint, not per effect, so a slow or gone endpoint
// (410) holds up and disables only itself. An endpoint added to the
// configuration receives the records fanned out after it was added.
//
// Each delivery has its own attempts, schedule and state (pending, done,
// dead). A failed attempt is retried after backoff.Delay(base, cap, attempt):
// base·2^(n-1), capped, with jitter in the upper half; the max_attempts-th
// failure, or a failure that retrying cannot fix (410 Gone, an SMTP 5xx, a
// target no longer configured), makes it a dead letter. Service.Retry and
// RetryDead (POST /v1/deliveries/{id}/retry, POST
// /v1/deliveries/retry?state=dead&since=...) put dead letters back.
//
// Per payment, records reach a target in outbox order: a delivery waits
// while an earlier record of the same payment is pending for the same
// target (done or dead lets the next one go). Different payments and
// different targets do not wait for each other.
//
// # One slow target delays nothing else
//
// Each target has its own lane (lane.go): at most ripple.workers attempts
// at once for the receipt, webhooks[].max_in_flight (default 32) for each
// merchant endpoint, which also gets its own HTTP transport capped at that
// many connections. A pass (fan-out, then dispatch) starts an attempt of
// every due delivery whose lane has room and that is not running already,
// queues up to Batch more per lane (an attempt that ends takes the next
// from its lane's queue), and leaves the others due; a pass of Run does
// not wait for what it started, and a recorded attempt wakes Run once its
// lane's queue is short. So a merchant endpoint that takes connections and
// never answers holds its own max_in_flight goroutines and connections
// until its timeout (webhooks[].timeout, default 10 s), and nothing that
// the other targets need. The deliveries waiting for a busy lane stay at
// the head of the due index, so a pass reads past them until it has seen
// every due delivery or passed over none. RunOnce, for tests and tools, is
// the same pass but waits for the attempts it started and for those
// running before it. A delivery is attempted by one goroutine at a time
// (the running ones are kept by delivery id), and an attempt first checks
// that the delivery is still as the pass read it.
//
// Loyalty and retention are applied inside the store: a pass hands all
// their due deliveries it claims (up to Batch, one batch at a time) to one
// transaction that applies the effects and records the deliveries, so N
// deliveries cost one commit; if it fails, each is attempted on its own
// and fails alone. The outcomes of the other targets' attempts that end
// while one is being written wait and are written together in the next
// transaction (record.go), with what they say about their endpoint's
// health (written when it changes, its last success at most once a
// minute). The bbolt backend groups concurrent writes itself, so there
// this saves only calls; on PostgreSQL, where each write transaction is a
// commit, it saves about one commit per webhook delivery (BENCHMARKS.md,
// "Ripple keeps pace").
//
// The service and its lifecycle are in ripple.go, the fan-out in
// fanout.go, the operators' retries and reads in admin.go, and each effect
// in its own file.
//
// # At most once per effect
//
// Every effect has a dedupe key, stored in the effects bucket:
//
//   - loyalty: "loyalty:<event id>", written in the same transaction as
//     the points. A redelivery (after a crash between the effect and the
//     delivery's own update) finds the key and changes nothing. The points
//     a capture credited are also kept under "loyalty_payment:<payment
//     id>", so a refund claws back exactly what was credited, whatever
//     loyalty.points_per_unit says by then, and a capture applied after its
//     refund (a dead letter replayed late) credits nothing.
//   - retention: "retention:<event id>", in the same transaction as
//     last_visit_at, which only ever moves forward.
//
// The loyalty and retention keys are claimed before the effect is
// written (Tx.ClaimEffect; bbolt's single writer orders them): on PostgreSQL in one INSERT … ON CONFLICT DO
// NOTHING, the key's unique index deciding between instances, so an
// instance applying the same record as another waits for the other's
// transaction and then finds the key.
//   - receipt: "payment_receipt:<payment id>": one receipt per payment,
//     ever. It is checked before the send and written right after the SMTP
//     server accepted the message. A crash between the two, or a failure
//     to write the key, sends the receipt again on the next attempt; the
//     resent message carries the same Message-ID
//     (<receipt.<payment id>@<domain of receipt.from>>), so mail systems
//     that deduplicate by Message-ID drop it.
//   - webhook: the delivery is marked done right after a 2xx. A crash in
//     between sends the event again with the same webhook-id (the outbox
//     event id), which is the receiver's dedupe key under Standard
//     Webhooks.
//
// # Money
//
// Amounts are minor units of their currency. Loyalty points are
// amount × points_per_unit ÷ 10^exponent, rounded down, where the exponent
// is the currency's number of decimals in ISO 4217 (2 unless the table in
// money.go says 0 or 3: JPY and KRW have 0, BHD and KWD 3). The ledger is
// not an effect: finalize writes it in the payment's transaction.
//
// # Merchant webhooks
//
// The body is {"id", "type", "created", "data": {payment_id, order_id,
// amount, currency, status, version, customer}} with the outbox event id
// as id and webhook-id; it is signed with every configured secret of the
// endpoint (secret and secrets) and sent with webhook-id,
// webhook-timestamp and webhook-signature. A 2xx within the endpoint's
// timeout counts (webhooks[].timeout: default 10 s, from 100 ms to 15 s,
// the Standard Webhooks limit; a longer one is refused, not shortened);
// redirects are not followed. On 429 and 503 a Retry-After header (seconds
// or an HTTP date) sets the next attempt, clamped to [1 s, backoff cap].
// 410 disables the endpoint (stored, with a warning) and dead-letters the
// delivery; an endpoint with no success for 5 days of failures is disabled
// too. Deliveries to a disabled endpoint become dead letters without being
// sent; retrying one of them re-enables the endpoint.
//
// # Observability
//
// Metrics: paystate_ripple_deliveries_total{effect,outcome} (outcome:
// done, skipped, retry, dead), paystate_ripple_outbox_lag_seconds (the age
// of the oldest record not yet delivered everywhere, from its event's
// time), paystate_ripple_dead_letters. Every failed attempt is logged
// once, after it is recorded, with payment_id, event_id, effect,
// delivery_id and attempt (a warning while it will be retried, an error
// when it is dead).
package ripple
