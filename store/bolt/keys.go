package bolt

// This file holds the schema: bucket names and every key encoding, grouped
// by record family in the order of the table in doc.go; keep the two in
// step.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/paystate/paystate/pay"
)

// SchemaVersion is the layout of buckets, keys and values this package reads
// and writes. Open stores it in a new database and refuses a database with a
// newer one.
const SchemaVersion = 4

// Bucket names. Open creates every one of them.
var (
	bucketMeta = []byte("meta")

	// Payments and their indexes (payments.go).
	bucketPayments          = []byte("payments")
	bucketPaymentsByStatus  = []byte("payments_by_status")
	bucketPaymentsByCreated = []byte("payments_by_created")
	bucketPaymentsByOrder   = []byte("payments_by_order")
	bucketPaymentsByRef     = []byte("payments_by_ref")

	// Timeline (timeline.go).
	bucketTimeline = []byte("timeline")

	// Inbox and processed event ids (inbox.go).
	bucketInbox           = []byte("inbox")
	bucketInboxByPayment  = []byte("inbox_by_payment")
	bucketInboxPending    = []byte("inbox_pending")
	bucketProcessed       = []byte("processed")
	bucketProcessedByTime = []byte("processed_by_time")

	// Leases (lease.go).
	bucketLeases        = []byte("leases")
	bucketLeasesInForce = []byte("leases_in_force")

	// Outbox and deliveries (outbox.go).
	bucketOutbox            = []byte("outbox")
	bucketOutboxByPayment   = []byte("outbox_by_payment")
	bucketDeliveries        = []byte("deliveries")
	bucketDeliveriesDue     = []byte("deliveries_due")
	bucketDeliveriesOpen    = []byte("deliveries_open")
	bucketDeliveriesByState = []byte("deliveries_by_state")

	// Ledger (ledger.go).
	bucketLedger   = []byte("ledger")
	bucketBalances = []byte("balances")

	// Review queue (review.go).
	bucketReview          = []byte("review")
	bucketReviewByCreated = []byte("review_by_created")

	// Idempotency keys (idempotency.go).
	bucketIdem         = []byte("idempotency_keys")
	bucketIdemByExpiry = []byte("idempotency_keys_by_expiry")

	// Effect state (effects.go).
	bucketCustomers        = []byte("customers")
	bucketEffects          = []byte("effects")
	bucketWebhookEndpoints = []byte("webhook_endpoints")

	// PSP answers and the mock PSP's charges (pspanswer.go).
	bucketPSPAnswers = []byte("psp_answers")
	bucketPSPCharges = []byte("psp_charges")

	// Refunds (refunds.go).
	bucketRefunds          = []byte("refunds")
	bucketRefundsByPayment = []byte("refunds_by_payment")
	bucketRefundsByRef     = []byte("refunds_by_ref")
	bucketRefundsPending   = []byte("refunds_pending")

	// Disputes (disputes.go).
	bucketDisputes          = []byte("disputes")
	bucketDisputesByPayment = []byte("disputes_by_payment")
	bucketDisputesByDue     = []byte("disputes_by_due")

	// Settlement reconciliation (reconcile.go).
	bucketSettlements          = []byte("settlements")
	bucketSettlementsByPayment = []byte("settlements_by_payment")
	bucketReconRuns            = []byte("recon_runs")

	allBuckets = [][]byte{
		bucketMeta,
		bucketPayments, bucketPaymentsByStatus, bucketPaymentsByCreated, bucketPaymentsByOrder, bucketPaymentsByRef,
		bucketTimeline,
		bucketInbox, bucketInboxByPayment, bucketInboxPending, bucketProcessed,
		bucketLeases,
		bucketOutbox, bucketOutboxByPayment,
		bucketLedger, bucketBalances,
		bucketReview, bucketReviewByCreated,
		bucketIdem,
		bucketDeliveries, bucketDeliveriesDue, bucketDeliveriesOpen, bucketDeliveriesByState, bucketCustomers, bucketEffects, bucketWebhookEndpoints,
		bucketIdemByExpiry, bucketProcessedByTime, bucketPSPAnswers, bucketLeasesInForce, bucketPSPCharges,
		bucketRefunds, bucketRefundsByPayment, bucketRefundsByRef, bucketRefundsPending,
		bucketDisputes, bucketDisputesByPayment, bucketDisputesByDue,
		bucketSettlements, bucketSettlementsByPayment, bucketReconRuns,
	}
)

// appendFill is the fill of the pages of the buckets whose keys grow with
// time (ULIDs, sequences, times, or one of these after a short prefix):
// new keys land at the end of the bucket or of one of a few regions, so a
// split page is not written again and bbolt's default of half-full pages
// would leave half of each empty for good. The other buckets (keys the
// merchant or the PSP chose: order ids, references, event ids,
// idempotency keys, customers) keep the default 50 %, room for keys that
// land between others.
const appendFill = 0.95

// appendOnly are the buckets filled to appendFill.
var appendOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, b := range [][]byte{
		bucketPayments, bucketPaymentsByStatus, bucketPaymentsByCreated,
		bucketTimeline, bucketInboxByPayment, bucketInboxPending, bucketProcessedByTime,
		bucketOutbox, bucketOutboxByPayment, bucketDeliveries, bucketDeliveriesDue, bucketDeliveriesByState,
		bucketLedger, bucketReviewByCreated, bucketIdemByExpiry, bucketEffects, bucketLeasesInForce, bucketPSPCharges,
		bucketRefunds, bucketRefundsByPayment, bucketRefundsPending, bucketReconRuns,
	} {
		m[string(b)] = true
	}
	return m
}()

// Keys of the meta bucket.
var (
	// keySchemaVersion is the key of the schema version; its value is
	// be64(SchemaVersion).
	keySchemaVersion = []byte("schema_version")

	// keyCleanShutdown is present only while the database is closed after
	// a clean shutdown; its value is be64(id of Close's last transaction)
	// ‖ be64(unix ns of the file's modification time Close set). See
	// checkFile.
	keyCleanShutdown = []byte("clean_shutdown")

	// keyRippleCursor is the key of the ripple fan-out cursor; its value is
	// be64(seq of the last outbox record fanned out).
	keyRippleCursor = []byte("ripple_cursor")

	// keyOutboxHorizon is the key of the outbox purge horizon; its value is
	// be64(unix nanoseconds): every outbox record created before that time
	// may have been purged (PurgeOutbox). Absent: none was.
	keyOutboxHorizon = []byte("outbox_horizon")

	// keyReadyProbe is the key the readiness check writes (WriteProbe);
	// its value is be64(unix nanoseconds of the last probe).
	keyReadyProbe = []byte("ready_probe")
)

// Key times are nanoseconds since the Unix epoch. Times outside what an
// int64 of nanoseconds can hold are clamped: the zero time and anything
// before 1970 encode as 0, anything after 2262 as MaxInt64.
var (
	minKeyTime = time.Unix(0, 0)
	maxKeyTime = time.Unix(0, math.MaxInt64)
)

// keyTime encodes t for a time index, so that byte order is time order.
func keyTime(t time.Time) uint64 {
	switch {
	case t.IsZero() || t.Before(minKeyTime):
		return 0
	case t.After(maxKeyTime):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

// be64 returns v as 8 big-endian bytes.
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

// appendStr appends s with a big-endian uint16 length prefix, so that a
// variable-length part can be followed by more parts without ambiguity and
// a scan of the prefix appendStr(nil, s) sees exactly the keys of s.
// Callers check len(s) <= pay.MaxStoredPart first.
func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// readStr reads a part written by appendStr and returns the rest of b.
func readStr(b []byte) (s string, rest []byte, ok bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// Payment and delivery ids in keys (schema 3). An id that paystate made,
// "<prefix>_" and a canonical ULID (ident's compactID), is written as its
// prefix code (0, 1 or 2) and the ULID's 16 bytes, 17 bytes instead of 30;
// any other id as 0xff and its bytes. Both sort as their ids do among ids
// of the same shape and prefix (a ULID's bytes sort as its text), and the
// first byte tells the shapes apart from each other and from a schema 2
// key, whose ids are UTF-8 text that paystate or the API made (no control
// character, never 0xff): isKeyID.
const keyIDText = 0xff

// appendKeyID appends id as a key part.
func appendKeyID(b []byte, id string) []byte {
	if code, u, ok := compactID(id); ok {
		return append(append(b, code), u[:]...)
	}
	return append(append(b, keyIDText), id...)
}

// keyID is id as a key part (appendKeyID).
func keyID(id string) []byte { return appendKeyID(make([]byte, 0, 1+len(ulid.ULID{})), id) }

// isKeyID reports whether b starts like a part written by appendKeyID.
func isKeyID(b []byte) bool {
	return len(b) > 0 && (int(b[0]) < len(identPrefixes) || b[0] == keyIDText)
}

// parseKeyID reads a part written by appendKeyID that is all of b.
func parseKeyID(b []byte) (string, bool) {
	switch {
	case len(b) == 1+len(ulid.ULID{}) && int(b[0]) < len(identPrefixes):
		return identPrefixes[b[0]] + ulid.ULID(b[1:]).String(), true
	case len(b) > 1 && b[0] == keyIDText:
		return string(b[1:]), true
	}
	return "", false
}

// appendStrID appends str(key id): the key part of id (appendKeyID) with a
// big-endian uint16 length prefix, so that more parts may follow it.
func appendStrID(b []byte, id string) []byte {
	n := len(b)
	b = appendKeyID(append(b, 0, 0), id)
	binary.BigEndian.PutUint16(b[n:], uint16(len(b)-n-2))
	return b
}

// readStrID reads a part written by appendStrID and returns the rest of b.
func readStrID(b []byte) (id string, rest []byte, ok bool) {
	part, rest, ok := readStr(b)
	if !ok {
		return "", nil, false
	}
	id, ok = parseKeyID([]byte(part))
	return id, rest, ok
}

// splitTimeID splits a time index key after its prefix of length n into
// the be64 time and the trailing id, written as it is (refund and review
// ids).
func splitTimeID(k []byte, n int) (ns uint64, id string, ok bool) {
	if len(k) < n+8+1 {
		return 0, "", false
	}
	return binary.BigEndian.Uint64(k[n : n+8]), string(k[n+8:]), true
}

// splitTimeKeyID is splitTimeID for an index whose trailing id is a key id
// (appendKeyID): payments and deliveries.
func splitTimeKeyID(k []byte, n int) (ns uint64, id string, ok bool) {
	if len(k) < n+8+1 {
		return 0, "", false
	}
	id, ok = parseKeyID(k[n+8:])
	return binary.BigEndian.Uint64(k[n : n+8]), id, ok
}

// splitTimeKey splits a key of idempotency_keys_by_expiry or
// processed_by_time into its time and a copy of the rest.
func splitTimeKey(k []byte) (ns uint64, rest []byte, ok bool) {
	if len(k) < 8+1 {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(k[:8]), bytes.Clone(k[8:]), true
}

// timeKey is an entry of idempotency_keys_by_expiry or processed_by_time:
// its key ix and, a copy, the rest after the time.
type timeKey struct{ ix, rest []byte }

// oldestTimeKeys returns up to limit entries of the time index bucket
// (idempotency_keys_by_expiry or processed_by_time) from its start, as
// long as due holds for their time. The cost is O(returned). EINVALID for
// a limit below 1.
func (t *tx) oldestTimeKeys(bucket []byte, limit int, due func(ns uint64) bool) ([]timeKey, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	var out []timeKey
	c := t.bucket(bucket).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		ns, rest, ok := splitTimeKey(k)
		if !ok {
			return nil, corrupt(bucket, "key %x", k)
		}
		if !due(ns) {
			break
		}
		out = append(out, timeKey{bytes.Clone(k), rest})
	}
	return out, nil
}

// seqKey is be64(seq): the key of outbox and ledger.
func seqKey(seq uint64) []byte { return be64(seq) }

// trailingSeq returns the be64 that ends a key of stepKey or
// outboxPaymentKey.
func trailingSeq(k []byte) (uint64, bool) {
	if len(k) < 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// prefixEnd returns the smallest key greater than every key that starts
// with p, or nil if there is none (p is empty or all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// List cursors name the index they continue, so that a cursor of one list
// cannot be replayed against another.
const (
	cursorCreated    = 'c' // payments_by_created
	cursorStatus     = 's' // payments_by_status
	cursorOrder      = 'o' // payments_by_order
	cursorDeliveries = 'd' // deliveries_by_state
)

// encodeCursor returns the opaque cursor after index key k: unpadded
// base64url of kind ‖ k.
func encodeCursor(kind byte, k []byte) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{kind}, k...))
}

// decodeCursor returns the index key of a cursor made by encodeCursor for
// the same kind and prefix, or EINVALID.
func decodeCursor(s string, kind byte, prefix []byte) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 1+len(prefix)+8+1 || b[0] != kind || !bytes.HasPrefix(b[1:], prefix) {
		return nil, pay.Invalidf("cursor", "cursor is not valid for this list")
	}
	return b[1:], nil
}

// Payments and their indexes.

// statusPrefix is codedPrefix(status): the start of one status in
// payments_by_status. Statuses are known constants without a NUL byte.
func statusPrefix(s pay.Status) []byte { return codedPrefix(string(s)) }

// statusKey is codedPrefix(status) ‖ be64(updated_at) ‖ key id.
func statusKey(s pay.Status, updated time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64(statusPrefix(s), keyTime(updated))
	return appendKeyID(k, id)
}

// statusBound is the first key of status s at or after time t: keys below
// it have updated_at strictly before t.
func statusBound(s pay.Status, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(statusPrefix(s), keyTime(t))
}

// createdKey is be64(created_at) ‖ key id.
func createdKey(created time.Time, id string) []byte {
	return appendKeyID(be64(keyTime(created)), id)
}

// orderPrefix is str(order id): the start of one order in payments_by_order.
func orderPrefix(orderID string) []byte { return appendStr(nil, orderID) }

// orderKey is str(order id) ‖ be64(created_at) ‖ key id.
func orderKey(orderID string, created time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64(orderPrefix(orderID), keyTime(created))
	return appendKeyID(k, id)
}

// refKey is word(provider) ‖ provider ref.
func refKey(provider, ref string) []byte { return append(appendWord(nil, provider), ref...) }

// appendWord appends a word followed by more key parts, a provider's
// name: keyCoded and its code if it is a symbol (schema 4), else str(word).
func appendWord(b []byte, word string) []byte {
	if code, ok := symbolCodes[word]; ok {
		return append(b, keyCoded, byte(code))
	}
	return appendStr(b, word)
}

// readWord reads a part written by appendWord and returns the rest of b.
func readWord(b []byte) (word string, rest []byte, ok bool) {
	if len(b) >= 2 && b[0] == keyCoded {
		if int(b[1]) >= len(symbols) {
			return "", nil, false
		}
		return symbols[b[1]], b[2:], true
	}
	return readStr(b)
}

// paymentPrefix is str(key id of the payment): the start of one payment in
// the timeline, inbox_by_payment, outbox_by_payment and the other
// by-payment buckets.
func paymentPrefix(paymentID string) []byte { return appendStrID(nil, paymentID) }

// Timeline.

// timelineKey is the key id of the payment: the key of its timeline.
func timelineKey(paymentID string) []byte { return keyID(paymentID) }

// Inbox and processed event ids.

// eventKey is word(provider) ‖ event id: the key of inbox and processed.
func eventKey(provider, eventID string) []byte {
	return append(appendWord(nil, provider), eventID...)
}

// inboxPaymentKey is str(payment id) ‖ be64(received_at) ‖ eventKey.
func inboxPaymentKey(paymentID string, received time.Time, provider, eventID string) []byte {
	k := binary.BigEndian.AppendUint64(paymentPrefix(paymentID), keyTime(received))
	return append(k, eventKey(provider, eventID)...)
}

// pendingKey is be64(next_attempt_at) ‖ eventKey.
func pendingKey(next time.Time, provider, eventID string) []byte {
	return append(be64(keyTime(next)), eventKey(provider, eventID)...)
}

// splitPendingKey returns the time and a copy of the event key of a
// pendingKey.
func splitPendingKey(k []byte) (ns uint64, event []byte, ok bool) {
	if len(k) < 8+2 {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(k[:8]), bytes.Clone(k[8:]), true
}

// processedTimeKey is be64(processed_at) ‖ eventKey: the key of
// processed_by_time.
func processedTimeKey(at time.Time, event []byte) []byte {
	return append(be64(keyTime(at)), event...)
}

// Outbox and deliveries.

// outboxPaymentKey is str(payment id) ‖ be64(seq).
func outboxPaymentKey(paymentID string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(paymentPrefix(paymentID), seq)
}

// deliveryDueKey is be64(next_attempt_at) ‖ key id of the delivery: the
// key of deliveries_due.
func deliveryDueKey(next time.Time, id string) []byte {
	return appendKeyID(be64(keyTime(next)), id)
}

// deliveryOpenPrefix is str(target) ‖ str(payment id): the start of one
// payment's pending deliveries to one target in deliveries_open.
func deliveryOpenPrefix(target, paymentID string) []byte {
	return appendStrID(appendStr(nil, target), paymentID)
}

// deliveryOpenKey is str(target) ‖ str(payment id) ‖ be64(event seq).
func deliveryOpenKey(target, paymentID string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(deliveryOpenPrefix(target, paymentID), seq)
}

// deliveryStatePrefix is codedPrefix(state): the start of one state in
// deliveries_by_state. States are known constants without a NUL byte.
func deliveryStatePrefix(state string) []byte { return codedPrefix(state) }

// deliveryStateKey is codedPrefix(state) ‖ be64(at) ‖ delivery id, where at is
// when the delivery entered the state (a pending one: its event's time).
func deliveryStateKey(state string, at time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64(deliveryStatePrefix(state), keyTime(at))
	return appendKeyID(k, id)
}

// Ledger.

// balanceKey is str(account) ‖ currency.
func balanceKey(account, currency string) []byte {
	return append(appendStr(nil, account), currency...)
}

// splitBalanceKey is the inverse of balanceKey.
func splitBalanceKey(k []byte) (account, currency string, ok bool) {
	account, rest, ok := readStr(k)
	return account, string(rest), ok
}

// Review queue.

// reviewKey is be64(created_at) ‖ review id: the key of review_by_created.
func reviewKey(created time.Time, id string) []byte {
	return append(be64(keyTime(created)), id...)
}

// Idempotency keys.

// leaseInForceKey is be64(expires_at) ‖ key id of the payment: the entry
// of a lease that was in force when it was written.
func leaseInForceKey(expires time.Time, paymentID string) []byte {
	return appendKeyID(be64(keyTime(expires)), paymentID)
}

// keyCoded starts a key part that is a symbol's code (symbol.go, schema
// 4): a status or delivery state (codedPrefix), a provider (appendWord),
// an effect or the mock's charge kind (appendCodedID), an idempotency
// operation (idemKey). It never starts the UTF-8 of a key written as
// text, nor a str (whose length is at most 1024).
const keyCoded = 0xfe

// codedPrefix is the start of a key whose first part is word, a status or
// a delivery state: keyCoded and word's code (schema 4), or, for a word
// that is not a symbol, word ‖ 0x00 (as every word was in schema 3).
func codedPrefix(word string) []byte {
	if code, ok := symbolCodes[word]; ok {
		return []byte{keyCoded, byte(code)}
	}
	return append([]byte(word), 0)
}

// appendCodedID appends keyCoded, the code of word and the 17 bytes of
// appendKeyID of id to b, if word is a symbol and id an id paystate made.
func appendCodedID(b []byte, word, id string) ([]byte, bool) {
	sym, ok := symbolCodes[word]
	code, u, compact := compactID(id)
	if !ok || !compact {
		return b, false
	}
	return append(append(b, keyCoded, byte(sym), code), u[:]...), true
}

// parseCodedID reads a key of appendCodedID as word ‖ sep ‖ id.
func parseCodedID(k []byte, sep string) (string, bool) {
	if len(k) < 3 || k[0] != keyCoded || int(k[1]) >= len(symbols) || k[2] == keyIDText {
		return "", false
	}
	id, ok := parseKeyID(k[2:])
	return symbols[k[1]] + sep + id, ok
}

// pspChargeKey is the key of psp_charges: a key "<kind>-<id>" (the mock
// PSP's "charge-pay_…") as appendCodedID writes it where it can, 19 bytes
// for the 37 of the text; any other key as it is.
func pspChargeKey(key string) []byte {
	if kind, id, ok := strings.Cut(key, "-"); ok {
		if k, ok := appendCodedID(nil, kind, id); ok {
			return k
		}
	}
	return []byte(key)
}

// parsePSPChargeKey is the inverse of pspChargeKey.
func parsePSPChargeKey(k []byte) (string, bool) {
	if len(k) > 0 && k[0] == keyCoded {
		return parseCodedID(k, "-")
	}
	return string(k), true
}

// idemKey is the key of a scoped idempotency key in idempotency_keys. A
// key scoped by API key, as keys were stored before they were scoped by
// merchant, "<op>:<16 hex digits of the API key's hash>:<client key>"
// (httpd.LegacyScopedKey), is keyCoded, the code of op, the 8 bytes of the
// hash and the client's key, 10 bytes for the 24 of "create:…:"; any other
// key, "<op>:merchant:<client key>" (httpd.ScopedKey) among them, is the
// text as it is.
func idemKey(scoped string) []byte {
	op, rest, ok := strings.Cut(scoped, ":")
	code, known := symbolCodes[op]
	if !ok || !known || len(rest) < 17 || rest[16] != ':' {
		return []byte(scoped)
	}
	b := make([]byte, 2, 10+len(rest)-17)
	b[0], b[1] = keyCoded, byte(code)
	b, err := hex.AppendDecode(b, []byte(rest[:16]))
	if err != nil || hex.EncodeToString(b[2:]) != rest[:16] { // upper case stays text
		return []byte(scoped)
	}
	return append(b, rest[17:]...)
}

// parseIdemKey is the inverse of idemKey.
func parseIdemKey(k []byte) (string, bool) {
	if len(k) == 0 || k[0] != keyCoded {
		return string(k), true
	}
	if len(k) < 10 || int(k[1]) >= len(symbols) {
		return "", false
	}
	return symbols[k[1]] + ":" + hex.EncodeToString(k[2:10]) + ":" + string(k[10:]), true
}

// idemExpiryKey is be64(expires_at) ‖ the key of idempotency_keys
// (idemKey): the key of idempotency_keys_by_expiry.
func idemExpiryKey(expires time.Time, stored []byte) []byte {
	return append(be64(keyTime(expires)), stored...)
}

// Effects.

// effectKey is the key of an effect's dedupe record. A key
// "<effect>:<id>" whose id paystate made (the event's "evt_" id, the
// payment's "pay_" id) is written, if the effect is a symbol, as keyCoded,
// the effect's code and the id's 17 bytes of appendKeyID, 19 bytes for
// the 38 of "retention:evt_…" (schema 4); else as effect ‖ 0xff ‖ the id's
// 17 bytes (schema 3); any other key as it is (0xfe and 0xff never occur
// in the UTF-8 of a schema 2 key).
func effectKey(key string) []byte {
	if i := strings.LastIndexByte(key, ':'); i >= 0 {
		if k, ok := appendCodedID(nil, key[:i], key[i+1:]); ok {
			return k
		}
		if code, u, ok := compactID(key[i+1:]); ok {
			b := make([]byte, 0, i+2+len(u))
			return append(append(append(b, key[:i]...), keyIDText, code), u[:]...)
		}
	}
	return []byte(key)
}

// parseEffectKey is the inverse of effectKey.
func parseEffectKey(k []byte) (string, bool) {
	if len(k) > 0 && k[0] == keyCoded {
		return parseCodedID(k, ":")
	}
	i := bytes.IndexByte(k, keyIDText)
	if i < 0 {
		return string(k), true
	}
	id, ok := parseKeyID(k[i+1:])
	if !ok || k[i+1] == keyIDText {
		return "", false
	}
	return string(k[:i]) + ":" + id, true
}

// Refunds.

// refundPaymentKey is str(payment id) ‖ refund id: the key of
// refunds_by_payment (refund ids are ULIDs: creation order).
func refundPaymentKey(paymentID, refundID string) []byte {
	return append(paymentPrefix(paymentID), refundID...)
}

// refundPendingKey is be64(updated_at) ‖ refund id: the key of
// refunds_pending, which holds pending refunds only.
func refundPendingKey(updated time.Time, refundID string) []byte {
	return append(be64(keyTime(updated)), refundID...)
}

// Disputes.

// disputeKey is str(provider) ‖ dispute id: the key of disputes.
func disputeKey(provider, id string) []byte { return append(appendStr(nil, provider), id...) }

// disputePaymentKey is str(payment id) ‖ disputeKey: the key of
// disputes_by_payment.
func disputePaymentKey(paymentID, provider, id string) []byte {
	return append(paymentPrefix(paymentID), disputeKey(provider, id)...)
}

// disputeDuePrefix is status ‖ 0x00: the start of one status in
// disputes_by_due. Statuses are known constants without a NUL byte.
func disputeDuePrefix(s pay.DisputeStatus) []byte { return append([]byte(s), 0) }

// disputeDueKey is status ‖ 0x00 ‖ be64(evidence_due_by) ‖ disputeKey,
// a dispute without a deadline sorting last (MaxInt64).
func disputeDueKey(s pay.DisputeStatus, due time.Time, provider, id string) []byte {
	ns := keyTime(due)
	if due.IsZero() {
		ns = math.MaxInt64
	}
	k := binary.BigEndian.AppendUint64(disputeDuePrefix(s), ns)
	return append(k, disputeKey(provider, id)...)
}

// Settlement reconciliation.

// settlementKey is str(provider) ‖ balance-transaction id: the key of
// settlements.
func settlementKey(provider, id string) []byte { return append(appendStr(nil, provider), id...) }

// settlementPaymentKey is str(payment id) ‖ settlementKey: the key of
// settlements_by_payment.
func settlementPaymentKey(paymentID, provider, id string) []byte {
	return append(paymentPrefix(paymentID), settlementKey(provider, id)...)
}
