// Package postgres is paystate's storage on PostgreSQL (15 or later),
// through pgx and its pool: it implements store.Store and store.Tx and passes
// the conformance suite of package store/storetest, so that several
// paystate instances can share one database (SPEC §5). It registers
// itself with package store as backend "postgres" (driver.go: shared by
// instances, a target of `paystate copy`). The bbolt store of package
// store/bolt is the embedded default; this package behaves the same
// wherever store/bolt/doc.go's "Decisions callers rely on" say how (codes,
// orders, limits, defaults), and its differences are listed below.
//
//	db, err := postgres.Open(ctx, "postgres://paystate@db.internal/paystate?search_path=paystate", &postgres.Options{MaxConns: 16})
//
// # Schema
//
// Open applies the embedded migrations (migrations/NNNN_name.sql, each in
// the transaction that records it in schema_version) that the database
// lacks, under a transaction-level advisory lock on the schema's name, so
// that instances that start at once take turns; Migrate does the same for
// `paystate migrate`. The tables live in the first schema of the DSN's
// search_path. One table per record family of store.Tx, in the order of the
// table of store/bolt/doc.go; the indexes stand for the bbolt store's index
// buckets and carry their names:
//
//	table              key                               indexes
//	schema_version     version                           —
//	meta               key                               rows ripple_cursor (a floor, SetRippleCursor), outbox_horizon
//	payments           id                                payments_by_status (status, updated_at, id),
//	                                                     payments_by_created (created_at, id),
//	                                                     payments_by_order (order_id, created_at, id),
//	                                                     payments_by_ref UNIQUE (provider, provider_ref) WHERE provider_ref <> '',
//	                                                     payments_by_second_ref UNIQUE (provider, second_ref) WHERE second_ref <> ''
//	timeline           (payment_id, seq)                 —
//	inbox              (provider, event_id)              inbox_by_payment (payment_id, received_at, …) WHERE payment_id <> '',
//	                                                     inbox_pending (next_attempt_at, …) WHERE NOT processed
//	processed          (provider, event_id)              processed_by_time (at, …)
//	leases             payment_id                        —
//	outbox             seq                               outbox_by_payment (payment_id, seq),
//	                                                     outbox_unfanned (seq) WHERE NOT fanned
//	deliveries         id                                deliveries_due (next_attempt_at, id) WHERE pending,
//	                                                     deliveries_open UNIQUE (target, payment_id, event_seq) WHERE pending,
//	                                                     deliveries_by_state (state, state_at, id)
//	ledger             seq (identity)                    —
//	balances           (account, currency, shard)        — (a balance is the sum of its shards)
//	review             id                                review_by_created (created_at, id)
//	idempotency_keys   key                               idempotency_keys_by_expiry (expires_at, key)
//	customers          id                                —
//	effects            key                               —
//	webhook_endpoints  id                                —
//	psp_answers        payment_id                        —
//
// The events' indexes order by time, then (octet_length(provider),
// provider, event_id): the order of the bbolt keys str(provider) ‖ event
// id. deliveries.target ("webhook:<endpoint>" or the effect) and
// deliveries.state_at (the event's time while pending, the last update's
// after) are generated columns.
//
// Times are bigint nanoseconds since 1970 in UTC, 0 for the zero time,
// which is what the bbolt store keeps: a timestamptz keeps microseconds,
// and callers compare and order times the store gave back with times of
// their own clock (the suite's outbox horizon is a record's time plus one
// nanosecond). The cost is that psql shows numbers (to_timestamp(t /
// 1e9) reads them). A time outside the years 1678 to 2262 is EINVALID, as
// in the bbolt store. Strings that are keys or sort keys are COLLATE "C",
// so that they order by bytes, as bbolt keys do, whatever the database's
// locale.
//
// # Transactions
//
// Every caller of store.Store was written against bbolt's one writer at a
// time: it reads a record, decides and writes (finalize's compare-and-set,
// taking a lease, a loyalty credit). Update keeps that true across instances with
// READ COMMITTED and record locks that are the records' own rows and
// unique keys, never a lock that different records could share. A record
// that is read to be written (a payment, a delivery, a customer account,
// an effect record, an endpoint, a review item, a mock charge) is locked
// by its row in the statement that reads it (lockedRow: FOR NO KEY
// UPDATE) and held to the end; the later of two transactions reads what
// the earlier one committed. A record that does not exist yet has no row
// to lock: the read marks it absent, and its writer (put) inserts it with
// ON CONFLICT DO NOTHING, which must insert: if another transaction
// created it meanwhile, the transaction runs again (as after a
// serialization failure) and then finds the row and locks it
// (TestDB_CustomerRace). Keys that are claimed (ripple's dedupe keys,
// ClaimEffect; settlements, ClaimSettlement; a webhook event's inbox
// record and processed id, PutInbox and MarkProcessed) are decided by
// their unique index in one INSERT … ON CONFLICT DO NOTHING: a concurrent
// claim waits for the first one's transaction and then finds its row. A
// lease is taken in one statement (AcquireLease) and read without a lock
// (Lease: its writers write nothing else). Blind writes (a dispute, a
// settlement, a reconciliation run, a PSP answer, a review item) are one
// upsert. The callers that decide on a processed id lock the payment's
// row first, so a second instance's check runs after the first one's
// commit (TestDB_EventRace). An idempotency key is claimed the same way
// (ClaimIdemKey), and a key that has a record is read with its row locked
// (FOR UPDATE), so that of two requests taking over a key, the second
// reads the first one's record (TestDB_IdemKeyRace). No advisory lock is
// taken on the request path, only by the migrations and a copy
// (TestScale_NoAdvisoryLock).
//
// A write transaction keeps what it locked: the payment (with its lease,
// read in the same statement) is read once, and the processed id of an
// event comes with its inbox entry. Writes whose result the caller does
// not need at once (the compare-and-set of a payment the transaction
// holds, the timeline, the outbox, the processed id, the inbox entry of
// an applied event, customer accounts, effect records, deliveries that
// leave pending) are queued (later) and sent with the next statement, or
// with the COMMIT, in one pgx.Batch; the BEGIN is queued too, and goes
// with the first statement. A webhook is four round trips: BEGIN and the
// payment's read, the inbox entry's read, the compare-and-set with the
// timeline, outbox and ledger, and the processed id with the inbox entry
// and COMMIT (TestWebhookStatements). A queued write that does not do
// what was expected (no row updated under a row lock, an insert that
// found the row) runs the transaction again; a write checked in the
// client (rows affected) is sent before the COMMIT, not with it. A
// statement about one record (lockedRow, ClaimEffect, OutboxRecord) leaves
// the queued writes of other records queued, and the queued rows of one
// kind (customer accounts, effect records, deliveries that leave pending:
// rowKinds) go in one statement: a ripple batch's writes are three
// statements at its commit, not three per delivery. Its claim
// (ClaimDeliveries: the pending, due deliveries first in line among the
// ids asked for) reads the batch's outbox records and locks its
// customers' accounts in the order of their ids, once
// (TestDB_BatchStatements).
// Lists (ListPayments, Candidates, PendingInbox, …) lock
// nothing; the callers act on what they list in later transactions that
// read each record again. No row is written by the transitions of
// every payment (SPEC §5; the tests TestScale_*): transitions of
// different payments take no common lock.
// Deadlocks (40P01) and serialization failures (40001) are rolled back and
// the function runs again (store.Store allows it; Stats counts the retries).
//
// SERIALIZABLE with retries, tried first, gives the same guarantee without
// any lock, but every transition then conflicted with every concurrent one
// on the balance rows and the outbox counter of that time: at 16
// concurrent transitions some failed 50 attempts in a row. View is REPEATABLE READ READ ONLY: one
// snapshot, no locks, never a retry.
//
// Compare-and-set is UPDATE payments … WHERE id = $1 AND version = $2 (no
// row: ECONFLICT, or ENOTFOUND). A lease is taken in one statement, INSERT
// … ON CONFLICT DO UPDATE … WHERE expires_at <= now RETURNING token.
// Processed event ids, inbox events, idempotency keys and provider
// references are unique keys; inserts use ON CONFLICT DO NOTHING where the
// bbolt store answers a conflict, so that a conflict leaves the
// transaction usable. The purges delete with their condition in the outer
// WHERE too, which READ COMMITTED checks again on a row changed meanwhile
// (a key taken over, a delivery retried). An outbox record's Seq is
// 2^47 + its transaction's id (pg_current_xact_id()) · 2^16 + its number
// in the transaction: no counter row. OutboxAfter shows only the records
// below the oldest transaction of this database still running in its
// snapshot (pg_snapshot_xip, pg_snapshot_xmax), so a record never appears
// behind a cursor that follows it (the NATS relay, a copy; a
// plain sequence would allow that), and a long transaction delays the feed
// until it ends. There is no fan-out cursor: once the ripple service has
// given the store its targets (SetFanOut), AppendOutbox writes a record's
// deliveries in the statement that appends it and marks it fanned, and
// hands them to the service after the commit (SetFanOut's committed), so
// that the instance that wrote them claims them by id; the records
// appended without (before that, or by another process) are
// claimed by the workers of any instance, FOR UPDATE SKIP LOCKED
// (ClaimUnfanned), each payment's in its order. RippleCursor is derived
// from the records (the last one fanned out before the first that is
// not), SetRippleCursor marks records fanned (the suite, a copy), and
// PurgeOutbox removes fanned records only. The ledger Seq is an
// identity column (the journal's order, not the commits'), and a balance
// is the sum of shard rows, each posting adding to its connection's
// shard: postings of different payments share no row.
//
// DueDeliveries and DueDeliveriesSkipping, in an Update, lock the
// deliveries they return with FOR UPDATE SKIP LOCKED: two instances'
// workers that take due deliveries in concurrent write transactions get
// different ones, and neither gets a delivery that waits in line behind
// one the other holds. In a View they lock nothing (a read-only
// transaction cannot).
//
// # Errors
//
// The codes are the bbolt store's: ENOTFOUND, EINVALID, ECONFLICT,
// ELEASEHELD with the same messages. A unique violation that another
// transaction caused is ECONFLICT. A server that cannot be reached, that
// shuts down, refuses connections or writes (a standby), a closed DB, a
// failed commit whose outcome is unknown, or 50 attempts that deadlocked
// or did not serialize are EUNAVAILABLE (a full disk EDISKFULL) with a client-safe
// message that names no host, user or database; the error wraps the cause.
// A statement that failed aborts the transaction (PostgreSQL's rule): the
// later statements and Update fail with its error.
//
// # Differences from the bbolt store
//
//   - Text must be UTF-8 without NUL bytes (PostgreSQL's text): other
//     strings are EINVALID, before anything is sent.
//   - UpdateDelivery that makes a delivery pending while another delivery
//     of the same record is pending for the same target is ECONFLICT (the
//     bbolt store overwrote its index entry).
//   - Times before 1970 sort below the zero time (the bbolt store clamps
//     them to it in its keys); paystate writes none.
//   - There is no EndLeases: with several instances, a lease in force at
//     start may belong to a live one; leases end when they expire. Nor is
//     there Snapshot or Check: backups and consistency are PostgreSQL's
//     (pg_dump, constraints).
package postgres
