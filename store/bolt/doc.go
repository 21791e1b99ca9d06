// Package bolt is paystate's storage on one bbolt file, the embedded
// default: it implements store.Store and store.Tx, registers itself with
// package store as backend "bolt" (driver.go: a store one process alone
// uses, with Backup, Check, CheckLedger and Export), and passes the
// conformance suite of package store/storetest, as every backend does.
// It is the only package that imports bbolt.
//
// # Transactions
//
// DB.Update runs a function in a bbolt write transaction (one writer at a
// time, so compare-and-set never loses inside bbolt; the check is there for
// backends with concurrent writers and for callers that carry a version
// across transactions). The function has no effect outside the transaction;
// Tx.OnCommit callbacks run after the commit, never after a rollback. Each
// transaction reads the clock (Options.Now) once, when it begins, in UTC:
// Tx.Now. Every time is stored in UTC.
//
// # Schema
//
// Notation: be64(x) is x as 8 big-endian bytes; times in keys are
// be64(nanoseconds since 1970), clamped to [0, MaxInt64], so byte order is
// time order (never RFC 3339 strings). str(s) is be16(len(s)) ‖ s, used for
// a string that is followed by more key parts, so that parts never run into
// each other and a prefix scan of str(s) sees exactly the keys of s. A
// string that ends a key is written as it is. Every string in a key is at
// most 1024 bytes (EINVALID otherwise). kid(id) is a payment or delivery
// id as a key part (schema 3, keys.go): for an id paystate made, "pay_",
// "evt_" or "dlv_" and a ULID, its prefix code (0, 1, 2) and the ULID's 16
// bytes; for any other id 0xff and its bytes. sym(w) is a word of the
// symbol table (symbol.go: a status, a delivery state, an effect, an
// idempotency operation) as a key part (schema 4, keys.go: keyCoded): 0xfe
// and its code, one byte, in place of the word and the 0x00 or separator
// after it; a word not in the table stays text. word(p) is a provider's
// name followed by more key parts: sym(p) if it is in the table, else
// str(p). "—" is an empty value.
//
// The buckets come in record families. Each group of rows below is one
// family and one file, which holds the family's methods of store.Tx and its
// part of DB.Check; every key encoding is in keys.go, every value's record
// type in codec.go.
//
//	bucket                      key                                              value
//
//	db.go: the schema
//	meta                        "schema_version"                                 be64(SchemaVersion)
//	meta                        "clean_shutdown"                                 be64(txid) ‖ be64(file mtime, unix ns); only while closed cleanly
//	meta                        "ready_probe"                                    be64(unix ns of the last readiness probe; observe.go)
//
//	payments.go: payments and their indexes
//	payments                    kid(payment id)                                  payment (CBOR)
//	payments_by_status          sym(status) ‖ be64(updated_at) ‖ kid(payment id)   —
//	payments_by_created         be64(created_at) ‖ kid(payment id)               —
//	payments_by_order           str(order id) ‖ be64(created_at) ‖ kid(payment id)   —
//	payments_by_ref             word(provider) ‖ provider ref                    kid(payment id)   (provider_ref and second_ref)
//
//	timeline.go: the timeline
//	timeline                    kid(payment id)                                  the payment's steps, Seq 1, 2, … (CBOR array)
//
//	inbox.go: the inbox and processed event ids
//	inbox                       word(provider) ‖ event id                        event with its body packed (body.go) and processed time (CBOR)
//	inbox_by_payment            str(kid(payment id)) ‖ be64(received_at) ‖ word(provider) ‖ event id   —
//	inbox_pending               be64(next_attempt_at) ‖ word(provider) ‖ event id   —
//	processed                   word(provider) ‖ event id                        {at: processed time} (CBOR); only for an event not in the inbox
//	processed_by_time           be64(processed_at) ‖ word(provider) ‖ event id   —; every processed id, in the inbox or not
//
//	lease.go: leases
//	leases                      kid(payment id)                                  {holder, token, expires_at} (CBOR)
//	leases_in_force             be64(expires_at) ‖ kid(payment id)               —; only for a lease in force when written
//
//	outbox.go: the outbox and its deliveries
//	outbox                      be64(seq)                                        outbox record (CBOR)
//	outbox_by_payment           str(kid(payment id)) ‖ be64(seq)                 —
//	meta                        "ripple_cursor"                                  be64(seq of the last outbox record fanned out)
//	meta                        "outbox_horizon"                                 be64(unix ns): outbox records created before it may be purged
//	deliveries                  kid(delivery id)                                 delivery (CBOR)
//	deliveries_due              be64(next_attempt_at) ‖ kid(delivery id)         —   (pending only)
//	deliveries_open             str(target) ‖ str(kid(payment id)) ‖ be64(event seq)  kid(delivery id)   (pending only: a payment's order per target)
//	deliveries_by_state         sym(state) ‖ be64(entered state) ‖ kid(delivery id)   —   (pending: the event's time)
//
//	ledger.go: the ledger
//	ledger                      be64(seq)                                        ledger entry (CBOR)
//	balances                    str(account) ‖ currency                          be64(balance as int64, two's complement)
//
//	review.go: the review queue
//	review                      review id                                        review item (CBOR)
//	review_by_created           be64(created_at) ‖ review id                     —
//
//	idempotency.go: idempotency keys
//	idempotency_keys            scoped key as text ("create:merchant:<key>"); a key stored before keys were scoped by merchant: "create:<hash>:<key>" as sym(op) ‖ 8 bytes of hash ‖ key   idempotency record (CBOR)
//	idempotency_keys_by_expiry  be64(expires_at) ‖ scoped key, as above          —
//
//	effects.go: the state of the ripple effects
//	customers                   customer id                                      {points, last_visit_at} (CBOR)
//	effects                     dedupe key ("loyalty:<event id>", ...; sym(effect) ‖ kid(id) for an id paystate made)   {delivery_id, points, at} (CBOR)
//	webhook_endpoints           endpoint id                                      {url, disabled, failing_since, ...} (CBOR)
//
//	pspanswer.go: PSP answers
//	psp_answers                 kid(payment id)                                  last PSP status answer (CBOR)
//	psp_charges                 charge key ("charge-<payment id>"; sym ‖ kid)   the mock PSP's charge (CBOR)
//	psp_charges                 refund key ("refund-<refund id>")                the mock PSP's refund (CBOR)
//
//	refunds.go: refunds
//	refunds                     refund id                                        refund (CBOR)
//	refunds_by_payment          str(kid(payment id)) ‖ refund id                 —
//	refunds_by_ref              word(provider) ‖ provider refund ref             refund id
//	refunds_pending             be64(updated_at) ‖ refund id                     —   (pending only)
//
//	disputes.go: disputes
//	disputes                    str(provider) ‖ dispute id                       dispute (CBOR)
//	disputes_by_payment         str(kid(payment id)) ‖ str(provider) ‖ dispute id   —
//	disputes_by_due             status ‖ 0x00 ‖ be64(evidence_due_by, none = max) ‖ str(provider) ‖ dispute id   —
//
//	reconcile.go: settlement reconciliation
//	settlements                 str(provider) ‖ balance-transaction id           settlement (CBOR): a matched, posted line
//	settlements_by_payment      str(kid(payment id)) ‖ str(provider) ‖ balance-transaction id   —; settlements of a payment only
//	recon_runs                  run id ("rr_" + ULID, time-ordered)              run with its unmatched items (CBOR)
//
// CBOR values are the unexported record types of codec.go: maps keyed by
// the small integer each field's tag fixes, empty fields left out, times
// as integer nanoseconds; the domain types in package pay carry no tags.
// Byte fields (webhook bodies, stored responses) are CBOR byte strings; a
// webhook body is a zstd frame made with a fixed dictionary (body.go)
// where that is smaller; the strings of a closed vocabulary (statuses, event types,
// currencies, effects, ledger accounts: symbol.go) are small integer
// codes, other strings CBOR text. Schema 1 stored the same records as JSON
// objects, schema 2 every string as text, schema 3 bodies as they came
// and every processed id in processed; Open migrates such a file
// (migrate.go). BenchmarkCodec compares JSON with CBOR.
// Sequences (timeline per payment; outbox and ledger through the bucket
// sequence) start at 1 and are never reused.
//
// Who uses which index: Candidates scans payments_by_status from
// status ‖ 0x00 up to the time bound, so a sweeper pass costs O(candidates);
// ListPayments walks payments_by_created (no filter), payments_by_status
// (status filter: newest updated first) or payments_by_order (order filter)
// backwards from an opaque cursor, base64url of the kind of list and the
// last key; PendingInbox walks inbox_pending from the start up to the due
// time; InboxForPayment and OutboxForPayment scan the payment's prefix.
// The sweeper pages through candidates with
// CandidatesAfter, which seeks payments_by_status to the last candidate
// of the page before; PurgeIdemKeys walks idempotency_keys_by_expiry and
// PurgeProcessed walks processed_by_time from the start up to the bound,
// so housekeeping costs O(records removed). PutIdemKey and MarkProcessed
// keep those two indexes in step; a purged processed id takes its
// archived inbox entry (and inbox_by_payment entry) with it. PurgeOutbox
// walks outbox from its start, up to the oldest pending delivery (the
// first pending entry of deliveries_by_state), and takes the records'
// outbox_by_payment entries and "<effect>:<event id>" dedupe keys with
// them; it moves meta "outbox_horizon" past what it removed, which verify
// reads. RefundsForPayment and DisputesForPayment scan the payment's
// prefix; PendingRefunds (the sweeper's refund candidates) seeks
// refunds_pending after the last candidate of the page before;
// ListDisputes scans each status's prefix of disputes_by_due, which
// CountOpenDisputes counts for the open statuses.
//
// # Decisions callers rely on
//
//   - Payments: InsertPayment needs Version 1, a known Status and non-zero
//     CreatedAt and UpdatedAt (they drive the time indexes): EINVALID
//     otherwise. UpdatePayment is compare-and-set: the stored version must
//     be prev and the new one prev+1, else ECONFLICT and nothing is
//     written. A provider reference already held by another payment is
//     ECONFLICT.
//   - Other records: a zero time (Step.At, OutboxRecord.CreatedAt,
//     LedgerEntry.At, ReviewItem.CreatedAt, InboxEvent.ReceivedAt,
//     IdemRecord.CreatedAt) becomes Tx.Now.
//   - Leases: a lease in force is ELEASEHELD for everyone, its own holder
//     included; each acquisition gets the last token + 1; ReleaseLease with
//     a stale token does nothing and a release keeps the token counter.
//   - Inbox: MarkProcessed works for events that are not in the inbox, and
//     PutInbox of an event already processed archives it as processed, not
//     pending (the id moves from processed into the event). DeferInbox of a
//     processed event does nothing.
//   - Refunds: InsertRefund and UpdateRefund sum the payment's pending
//     and succeeded refunds in the transaction and refuse one that would
//     take them past the payment's amount (pay.ERefundExceeds): with one
//     writer at a time no two refunds can both fit in what only one of
//     them fits. A refund's fields other than status, provider reference
//     and event id never change.
//   - Ledger: one AppendLedger call is one posting; it must balance per
//     currency (EINVALID otherwise). Seq and At are written back into the
//     caller's slice.
//   - Writes: concurrent Updates share commits (commit.go): a lone one
//     commits at once, those that arrive during a commit are committed
//     together next, and a failing function fails only its own Update.
//   - Errors: missing records are ENOTFOUND naming what is missing; bad
//     input is EINVALID. A write refused for want of space is EDISKFULL;
//     a failure to begin or commit a write on a read-only file or file
//     system or a closed database is EUNAVAILABLE; the error wraps the
//     cause, so errors.Is(err, syscall.ENOSPC) still works, while its
//     client-safe message names no file. Any other failed commit (a failed
//     fsync, EIO) stops the store (Options.OnFatal): every later
//     transaction is EUNAVAILABLE. Anything else is an internal error
//     wrapped with the operation ("put payments: ...").
//   - Files: Open reads the file before bbolt maps it and refuses one that
//     is damaged (truncated, a bad meta page, a page that does not hold
//     what points to it) with an error wrapping ErrDamaged, one line that
//     says to restore from a backup (fsck.go), and a file that another
//     process holds with one wrapping ErrLocked. After a clean Close that
//     read is a few pages (Close records the shutdown and writes bbolt's
//     freelist), unless the file changed since; after a crash it is every
//     page. Snapshot takes a backup to
//     a local file from a read transaction as short as the copy, so a
//     slow reader of the backup never holds one.
//
// DB.Check verifies bbolt's pages and then each family's records against
// their indexes; bolttest.MustOpen (package store/bolt/bolttest) runs it when a
// test ends.
package bolt
