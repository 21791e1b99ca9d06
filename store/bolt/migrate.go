package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
)

// Schema history:
//
//	1  values are JSON objects (field names, RFC 3339 times, base64 bytes)
//	2  values are CBOR maps with integer keys (codec.go); keys unchanged;
//	   new bucket leases_in_force
//	3  strings of a closed vocabulary (statuses, event types, currencies,
//	   effects, accounts: symbol.go) are stored as small integer codes, and
//	   an idempotency record's owner as bytes if it is hexadecimal; payment
//	   and delivery ids inside keys (and the values of payments_by_ref and
//	   deliveries_open) as key ids, 17 bytes for the 30 of the text
//	   (keys.go, appendKeyID), and effect keys with their event id so too
//	   (effectKey). The migration rewrites those keys (schema3Keys), then
//	   re-encodes the records that hold such strings (a schema 2 value
//	   reads as it is).
//	4  an inbox event's body is a zstd frame with a dictionary (body.go)
//	   where that is smaller, and an event in the inbox carries its
//	   processed time (ProcessedAt) instead of an entry in processed, which
//	   keeps only the ids of events not in the inbox; a payment's timeline
//	   is one value, the array of its steps, under its key id, instead of
//	   a key str(key id) ‖ be64(seq) per step; effect keys, scoped
//	   idempotency keys, the mock PSP's charge keys and the entries of
//	   payments_by_status and deliveries_by_state start with the code of
//	   their effect, operation, kind, status or state (keys.go: keyCoded),
//	   and a provider's name in the keys of the inbox, the processed ids,
//	   payments_by_ref and refunds_by_ref is its code (appendWord);
//	   outbox records and ledger entries leave out the Seq their key
//	   holds. The migration rewrites those keys (schema4Keys) and records
//	   (schema3Records), the inbox (schema4Inbox) and the timeline
//	   (schema4Timeline).
//
// A database of an older schema is migrated at Open, before anything
// reads it; a read-only Open refuses it.

// bucketRecord is a bucket that holds records and the type they decode
// into.
type bucketRecord struct {
	bucket []byte
	record func() any
}

// schema1Records are the buckets whose values were JSON in schema 1, with
// the record type each holds. Every other bucket holds index entries or
// raw integers, the same in both.
var schema1Records = []bucketRecord{
	{bucketPayments, func() any { return new(paymentRecord) }},
	{bucketTimeline, func() any { return new(stepRecord) }},
	{bucketInbox, func() any { return new(inboxRecord) }},
	{bucketProcessed, func() any { return new(processedRecord) }},
	{bucketLeases, func() any { return new(leaseRecord) }},
	{bucketOutbox, func() any { return new(outboxRecord) }},
	{bucketDeliveries, func() any { return new(deliveryRecord) }},
	{bucketLedger, func() any { return new(ledgerRecord) }},
	{bucketReview, func() any { return new(reviewRecord) }},
	{bucketIdem, func() any { return new(idemRecord) }},
	{bucketCustomers, func() any { return new(customerRecord) }},
	{bucketEffects, func() any { return new(effectRecord) }},
	{bucketWebhookEndpoints, func() any { return new(endpointRecord) }},
	{bucketPSPAnswers, func() any { return new(pspAnswerRecord) }},
}

// schema2Records are the buckets whose records hold symbols (schema 3),
// with the record type each holds.
var schema2Records = []bucketRecord{
	{bucketPayments, func() any { return new(paymentRecord) }},
	{bucketTimeline, func() any { return new(stepRecord) }},
	{bucketInbox, func() any { return new(inboxRecord) }},
	{bucketOutbox, func() any { return new(outboxRecord) }},
	{bucketDeliveries, func() any { return new(deliveryRecord) }},
	{bucketLedger, func() any { return new(ledgerRecord) }},
	{bucketReview, func() any { return new(reviewRecord) }},
	{bucketIdem, func() any { return new(idemRecord) }},
	{bucketPSPAnswers, func() any { return new(pspAnswerRecord) }},
	{bucketPSPCharges, func() any { return new(pspChargeRecord) }},
	{bucketRefunds, func() any { return new(refundRecord) }},
	{bucketDisputes, func() any { return new(disputeRecord) }},
}

// migrateBatch is how many values one migration transaction rewrites, so
// that a large file is migrated in bounded memory. A variable for tests.
var migrateBatch = 20000

// afterMigrateBatch, if set, runs after each migration transaction
// committed; an error stops the migration there (tests: a crash).
var afterMigrateBatch func() error

// storedVersion returns the schema version recorded in the file, 0 for a
// new file.
func storedVersion(btx *bbolt.Tx) (uint64, error) {
	meta := btx.Bucket(bucketMeta)
	if meta == nil {
		return 0, nil
	}
	v := meta.Get(keySchemaVersion)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("schema version: %d bytes, want 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// migrate brings a file of schema 1, 2 or 3 to SchemaVersion and returns how
// many values it rewrote. Each transaction rewrites at most migrateBatch
// values; the version is raised in the last one. A value already in the
// current encoding (a migration interrupted by a crash) is left as it is,
// so that a migration can always run again from the start. Files of other
// versions are left to initSchema's check.
func migrate(bdb *bbolt.DB, now func() time.Time) (int, error) {
	var version uint64
	if err := bdb.View(func(btx *bbolt.Tx) (err error) {
		version, err = storedVersion(btx)
		return err
	}); err != nil || version < 1 || version >= SchemaVersion {
		return 0, err
	}
	var records = schema1Records
	switch version {
	case 2:
		records = schema2Records
	case 3:
		records = schema3Records
	}
	total := 0
	for _, rec := range records {
		n, err := inBatches(func(after []byte) (int, []byte, error) {
			return migrateSome(bdb, version, rec.bucket, rec.record, after)
		})
		if total += n; err != nil {
			return total, err
		}
	}
	if version == 1 {
		// The leases_in_force entries it makes have schema 3's keys.
		if err := bdb.Update(func(btx *bbolt.Tx) error { return indexLeasesInForce(btx, now()) }); err != nil {
			return total, err
		}
	}
	if version < 3 {
		for _, rk := range schema3Keys {
			n, err := inBatches(func(after []byte) (int, []byte, error) { return rekeySome(bdb, rk, after) })
			if total += n; err != nil {
				return total, err
			}
		}
	}
	for _, rk := range schema4Keys {
		n, err := inBatches(func(after []byte) (int, []byte, error) { return rekeySome(bdb, rk, after) })
		if total += n; err != nil {
			return total, err
		}
	}
	for _, step := range []func(*bbolt.DB, []byte) (int, []byte, error){schema4Inbox, schema4Timeline} {
		n, err := inBatches(func(after []byte) (int, []byte, error) { return step(bdb, after) })
		if total += n; err != nil {
			return total, err
		}
	}
	err := bdb.Update(func(btx *bbolt.Tx) error {
		return btx.Bucket(bucketMeta).Put(keySchemaVersion, be64(SchemaVersion))
	})
	return total, err
}

// firstAfter moves c to the first key after the key after, or to the
// first key if after is nil: where a migration batch resumes.
func firstAfter(c *bbolt.Cursor, after []byte) (k, v []byte) {
	if after == nil {
		return c.First()
	}
	if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
		k, v = c.Next()
	}
	return k, v
}

// inBatches runs batch, one transaction, from the start of a bucket until
// it returns no last key, each time after the last key of the one before,
// and returns how many values the batches rewrote.
func inBatches(batch func(after []byte) (n int, last []byte, err error)) (int, error) {
	total := 0
	var after []byte
	for {
		n, last, err := batch(after)
		if total += n; err != nil {
			return total, err
		}
		if afterMigrateBatch != nil {
			if err := afterMigrateBatch(); err != nil {
				return total, err
			}
		}
		if last == nil {
			return total, nil
		}
		after = last
	}
}

// rekey says how one bucket's schema 2 keys and values become schema 3's.
// Each function returns the new bytes, or nil if the old ones are already
// schema 3's (a migration interrupted by a crash) or stay as they are.
type rekey struct {
	bucket []byte
	key    func(k []byte) ([]byte, error) // nil: keys stay
	value  func(v []byte) ([]byte, error) // nil: values stay
}

// schema3Keys are the buckets whose keys or values hold payment or
// delivery ids (or event ids, in effect keys).
var schema3Keys = []rekey{
	{bucket: bucketPayments, key: rekeyTail(0)},
	{bucket: bucketPaymentsByStatus, key: rekeyStatusTail},
	{bucket: bucketPaymentsByCreated, key: rekeyTail(8)},
	{bucket: bucketPaymentsByOrder, key: rekeyOrderTail},
	{bucket: bucketPaymentsByRef, value: rekeyTail(0)},
	{bucket: bucketTimeline, key: rekeyStrID(0)},
	{bucket: bucketInboxByPayment, key: rekeyStrID(0)},
	{bucket: bucketLeases, key: rekeyTail(0)},
	{bucket: bucketLeasesInForce, key: rekeyTail(8)},
	{bucket: bucketOutboxByPayment, key: rekeyStrID(0)},
	{bucket: bucketDeliveries, key: rekeyTail(0)},
	{bucket: bucketDeliveriesDue, key: rekeyTail(8)},
	{bucket: bucketDeliveriesOpen, key: rekeyOpenKey, value: rekeyTail(0)},
	{bucket: bucketDeliveriesByState, key: rekeyStatusTail},
	{bucket: bucketEffects, key: rekeyEffect},
	{bucket: bucketPSPAnswers, key: rekeyTail(0)},
	{bucket: bucketRefundsByPayment, key: rekeyStrID(0)},
	{bucket: bucketDisputesByPayment, key: rekeyStrID(0)},
	{bucket: bucketSettlementsByPayment, key: rekeyStrID(0)},
}

// schema4Keys are the buckets whose keys start with a symbol's code in
// schema 4.
var schema4Keys = []rekey{
	{bucket: bucketEffects, key: rekeyCoded(parseEffectKey, effectKey, 0)},
	{bucket: bucketIdem, key: rekeyCoded(parseIdemKey, idemKey, 0)},
	{bucket: bucketIdemByExpiry, key: rekeyCoded(parseIdemKey, idemKey, 8)},
	{bucket: bucketPSPCharges, key: rekeyCoded(parsePSPChargeKey, pspChargeKey, 0)},
	{bucket: bucketPaymentsByStatus, key: rekeyCodedPrefix},
	{bucket: bucketDeliveriesByState, key: rekeyCodedPrefix},
	{bucket: bucketPaymentsByRef, key: rekeyWordAt(0)},
	{bucket: bucketRefundsByRef, key: rekeyWordAt(0)},
	{bucket: bucketInbox, key: rekeyWordAt(0)},
	{bucket: bucketProcessed, key: rekeyWordAt(0)},
	{bucket: bucketInboxPending, key: rekeyWordAt(8)},
	{bucket: bucketProcessedByTime, key: rekeyWordAt(8)},
	{bucket: bucketInboxByPayment, key: func(k []byte) ([]byte, error) {
		_, rest, ok := readStr(k)
		if !ok || len(rest) < 8 {
			return nil, fmt.Errorf("%x: not str(payment key id) ‖ be64 ‖ …", k)
		}
		return rekeyWordAt(len(k) - len(rest) + 8)(k)
	}},
}

// schema3Records are the buckets whose records drop a field in schema 4
// (the Seq their key holds).
var schema3Records = []bucketRecord{
	{bucketOutbox, func() any { return new(outboxRecord) }},
	{bucketLedger, func() any { return new(ledgerRecord) }},
}

// rekeyWordAt rewrites the str(word) at byte n of k as appendWord writes
// it, keeping what follows.
func rekeyWordAt(n int) func(k []byte) ([]byte, error) {
	return func(k []byte) ([]byte, error) {
		if len(k) <= n {
			return nil, fmt.Errorf("%x: %d bytes, want more than %d", k, len(k), n)
		}
		if k[n] == keyCoded {
			return nil, nil
		}
		word, rest, ok := readStr(k[n:])
		if !ok {
			return nil, fmt.Errorf("%x: not str(word) at byte %d", k, n)
		}
		if nk := appendWord(bytes.Clone(k[:n]), word); nk[n] == keyCoded {
			return append(nk, rest...), nil
		}
		return nil, nil
	}
}

// rekeyCodedPrefix rewrites word ‖ 0x00 ‖ rest as codedPrefix(word) ‖ rest.
func rekeyCodedPrefix(k []byte) ([]byte, error) {
	if len(k) > 0 && k[0] == keyCoded {
		return nil, nil
	}
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return nil, fmt.Errorf("%x: no 0x00 after the word", k)
	}
	if p := codedPrefix(string(k[:i])); p[0] == keyCoded {
		return append(p, k[i+1:]...), nil
	}
	return nil, nil
}

// rekeyCoded rewrites the key after the first n bytes of k, as parse
// reads it, as format writes it.
func rekeyCoded(parse func([]byte) (string, bool), format func(string) []byte, n int) func(k []byte) ([]byte, error) {
	return func(k []byte) ([]byte, error) {
		if len(k) <= n {
			return nil, fmt.Errorf("%x: %d bytes, want more than %d", k, len(k), n)
		}
		if k[n] == keyCoded {
			return nil, nil
		}
		key, ok := parse(k[n:])
		if !ok {
			return nil, fmt.Errorf("%x: not a key", k)
		}
		if nk := format(key); !bytes.Equal(nk, k[n:]) {
			return append(bytes.Clone(k[:n]), nk...), nil
		}
		return nil, nil
	}
}

// rekeyTail rewrites the id that ends b after its first n bytes.
func rekeyTail(n int) func(b []byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		if len(b) <= n {
			return nil, fmt.Errorf("%x: %d bytes, want more than %d", b, len(b), n)
		}
		if isKeyID(b[n:]) {
			return nil, nil
		}
		return appendKeyID(bytes.Clone(b[:n]), string(b[n:])), nil
	}
}

// rekeyStatusTail rewrites state ‖ 0x00 ‖ be64 ‖ id.
func rekeyStatusTail(k []byte) ([]byte, error) {
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return nil, fmt.Errorf("%x: no 0x00 after the state", k)
	}
	return rekeyTail(i + 1 + 8)(k)
}

// rekeyOrderTail rewrites str(order id) ‖ be64 ‖ id.
func rekeyOrderTail(k []byte) ([]byte, error) {
	_, rest, ok := readStr(k)
	if !ok {
		return nil, fmt.Errorf("%x: not str(order id) ‖ …", k)
	}
	return rekeyTail(len(k) - len(rest) + 8)(k)
}

// rekeyStrID rewrites the str(id) at byte n of k, keeping what follows.
func rekeyStrID(n int) func(k []byte) ([]byte, error) {
	return func(k []byte) ([]byte, error) {
		if len(k) < n {
			return nil, fmt.Errorf("%x: %d bytes, want at least %d", k, len(k), n)
		}
		id, rest, ok := readStr(k[n:])
		if !ok || id == "" {
			return nil, fmt.Errorf("%x: not str(id) at byte %d", k, n)
		}
		if isKeyID([]byte(id)) {
			return nil, nil
		}
		return append(appendStrID(bytes.Clone(k[:n]), id), rest...), nil
	}
}

// rekeyOpenKey rewrites str(target) ‖ str(payment id) ‖ be64(seq).
func rekeyOpenKey(k []byte) ([]byte, error) {
	_, rest, ok := readStr(k)
	if !ok {
		return nil, fmt.Errorf("%x: not str(target) ‖ …", k)
	}
	return rekeyStrID(len(k) - len(rest))(k)
}

// rekeyEffect rewrites "<effect>:<event id>".
func rekeyEffect(k []byte) ([]byte, error) {
	if bytes.IndexByte(k, keyIDText) >= 0 {
		return nil, nil
	}
	if nk := effectKey(string(k)); !bytes.Equal(nk, k) {
		return nk, nil
	}
	return nil, nil
}

// rekeySome rewrites the keys and values of rk.bucket after the key after
// (from the first key if nil), visiting up to migrateBatch keys, in one
// transaction. It returns how many entries it rewrote and the last key it
// visited, or nil once the bucket is done. A rewritten key sorts anywhere:
// the next call may visit it again and leaves it as it is.
func rekeySome(bdb *bbolt.DB, rk rekey, after []byte) (n int, last []byte, err error) {
	err = bdb.Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(rk.bucket)
		if b == nil {
			return nil // created by initSchema
		}
		type change struct{ k, nk, nv []byte }
		var batch []change
		c := b.Cursor()
		k, v := firstAfter(c, after)
		for visited := 0; k != nil && visited < migrateBatch; k, v = c.Next() {
			visited++
			last = append(last[:0:0], k...)
			var ch change
			var err error
			if rk.key != nil {
				if ch.nk, err = rk.key(k); err != nil {
					return fmt.Errorf("migrate %s key: %w", rk.bucket, err)
				}
			}
			if rk.value != nil && len(v) > 0 {
				if ch.nv, err = rk.value(v); err != nil {
					return fmt.Errorf("migrate %s value: %w", rk.bucket, err)
				}
			}
			if ch.nk == nil && ch.nv == nil {
				continue
			}
			ch.k = last
			if ch.nv == nil {
				ch.nv = bytes.Clone(v)
			}
			batch = append(batch, ch)
		}
		if k == nil {
			last = nil
		}
		if appendOnly[string(rk.bucket)] {
			b.FillPercent = appendFill
		}
		for _, ch := range batch {
			if ch.nk != nil {
				if err := b.Delete(ch.k); err != nil {
					return fmt.Errorf("migrate %s: %w", rk.bucket, err)
				}
				ch.k = ch.nk
			}
			if err := b.Put(ch.k, ch.nv); err != nil {
				return fmt.Errorf("migrate %s: %w", rk.bucket, err)
			}
		}
		n = len(batch)
		return nil
	})
	return n, last, err
}

// indexLeasesInForce creates leases_in_force (new in schema 2) with an
// entry for every lease in force at now.
func indexLeasesInForce(btx *bbolt.Tx, now time.Time) error {
	ix, err := btx.CreateBucketIfNotExists(bucketLeasesInForce)
	if err != nil {
		return fmt.Errorf("migrate: create %s: %w", bucketLeasesInForce, err)
	}
	return btx.Bucket(bucketLeases).ForEach(func(k, v []byte) error {
		var r leaseRecord
		if err := decode("lease", v, &r); err != nil {
			return fmt.Errorf("migrate lease %q: %w", k, err)
		}
		id := string(k)
		if isKeyID(k) { // a run before this one rewrote the key
			var ok bool
			if id, ok = parseKeyID(k); !ok {
				return fmt.Errorf("migrate lease %x: not a payment id", k)
			}
		}
		if (pay.Lease{Token: r.Token, ExpiresAt: r.ExpiresAt.Time}).Held(now) {
			return ix.Put(leaseInForceKey(r.ExpiresAt.Time, id), nil)
		}
		return nil
	})
}

// migrateSome rewrites the values of bucket after the key after (from the
// first key if nil), up to migrateBatch of them, in one transaction: from
// schema 1, the JSON values; from schema 2, the values whose encoding
// changes. It returns the last key it visited, or nil once the bucket is
// done.
func migrateSome(bdb *bbolt.DB, from uint64, bucket []byte, record func() any, after []byte) (n int, last []byte, err error) {
	err = bdb.Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bucket)
		if b == nil {
			return nil // created by initSchema
		}
		type kv struct{ k, v []byte }
		var batch []kv
		c := b.Cursor()
		k, v := firstAfter(c, after)
		for ; k != nil && len(batch) < migrateBatch; k, v = c.Next() {
			last = append(last[:0:0], k...)
			isJSON := len(v) > 0 && v[0] == '{' // a CBOR record is a map: 0xa0 and up
			if from == 1 && !isJSON {
				continue // already CBOR: an earlier, interrupted run
			}
			r := record()
			var err error
			if isJSON {
				err = decodeJSON(string(bucket), v, r)
			} else {
				err = decode(string(bucket), v, r)
			}
			if err != nil {
				return fmt.Errorf("migrate %s %q: %w", bucket, k, err)
			}
			data, err := encode(string(bucket), r)
			if err != nil {
				return fmt.Errorf("migrate %s %q: %w", bucket, k, err)
			}
			if bytes.Equal(data, v) {
				continue // already schema 3: an earlier, interrupted run
			}
			batch = append(batch, kv{last, data})
		}
		if k == nil {
			last = nil
		}
		b.FillPercent = 1 // rewritten in key order, each value smaller
		for _, e := range batch {
			if err := b.Put(e.k, e.v); err != nil {
				return fmt.Errorf("migrate %s: %w", bucket, err)
			}
		}
		n = len(batch)
		return nil
	})
	return n, last, err
}

// schema4Inbox rewrites the inbox events after the key after (from the
// first if nil), up to migrateBatch of them, in one transaction: a body
// that packs smaller becomes a frame (setBody), and a processed event
// takes its time from its entry in processed, which it removes (its
// processed_by_time entry, of the same time, stays). An event already so
// (an earlier, interrupted run) is left as it is. It returns the last key
// it visited, or nil once the inbox is done.
func schema4Inbox(bdb *bbolt.DB, after []byte) (n int, last []byte, err error) {
	err = bdb.Update(func(btx *bbolt.Tx) error {
		inbox, processed := btx.Bucket(bucketInbox), btx.Bucket(bucketProcessed)
		if inbox == nil || processed == nil {
			return nil // created by initSchema
		}
		type kv struct{ k, v []byte }
		var batch []kv
		var done [][]byte
		c := inbox.Cursor()
		k, v := firstAfter(c, after)
		for ; k != nil && len(batch) < migrateBatch; k, v = c.Next() {
			last = append(last[:0:0], k...)
			var r inboxRecord
			if err := decodeAt("inbox event", k, v, &r); err != nil {
				return fmt.Errorf("migrate %s %x: %w", bucketInbox, k, err)
			}
			changed := false
			if r.BodyZ == nil && len(r.Body) > 0 {
				r.setBody(r.Body)
				changed = r.BodyZ != nil
			}
			if r.Processed {
				var p processedRecord
				if pv := processed.Get(k); pv == nil {
					return fmt.Errorf("migrate %s %x: processed, but not in %s", bucketInbox, k, bucketProcessed)
				} else if err := decode("processed", pv, &p); err != nil {
					return fmt.Errorf("migrate %s %x: %w", bucketProcessed, k, err)
				}
				r.Processed, r.ProcessedAt = false, p.At
				done = append(done, last)
				changed = true
			}
			if !changed {
				continue
			}
			data, err := encode(string(bucketInbox), r)
			if err != nil {
				return fmt.Errorf("migrate %s %x: %w", bucketInbox, k, err)
			}
			batch = append(batch, kv{last, data})
		}
		if k == nil {
			last = nil
		}
		for _, e := range batch {
			if err := inbox.Put(e.k, e.v); err != nil {
				return fmt.Errorf("migrate %s: %w", bucketInbox, err)
			}
		}
		for _, k := range done {
			if err := processed.Delete(k); err != nil {
				return fmt.Errorf("migrate %s: %w", bucketProcessed, err)
			}
		}
		n = len(batch)
		return nil
	})
	return n, last, err
}

// schema4Timeline moves the steps stored after the key after (from the
// first if nil), up to migrateBatch of them, in one transaction, from
// their keys str(key id) ‖ be64(seq) into their payment's timeline value,
// an array under the key id (timeline.go). A step is a CBOR map, a
// timeline an array: a value already moved (an earlier, interrupted run,
// or this one's, sorted after the cursor) is left as it is. Steps come in
// Seq order, so each extends its timeline by one, perhaps one that an
// earlier batch began. It returns the last key it visited, or nil once the
// bucket is done.
func schema4Timeline(bdb *bbolt.DB, after []byte) (n int, last []byte, err error) {
	err = bdb.Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bucketTimeline)
		if b == nil {
			return nil // created by initSchema
		}
		timelines := map[string][]stepRecord{} // by new key
		var order []string
		var moved [][]byte
		c := b.Cursor()
		k, v := firstAfter(c, after)
		for ; k != nil && len(moved) < migrateBatch; k, v = c.Next() {
			last = append(last[:0:0], k...)
			if major, _, _ := readHead(v); major == 4 {
				continue // a timeline already
			}
			var r stepRecord
			if err := decodeAt("step", k, v, &r); err != nil {
				return fmt.Errorf("migrate %s %x: %w", bucketTimeline, k, err)
			}
			key := string(timelineKey(r.PaymentID))
			steps, ok := timelines[key]
			if !ok {
				if tv := b.Get([]byte(key)); tv != nil {
					if err := decode("timeline", tv, &steps); err != nil {
						return fmt.Errorf("migrate %s %x: %w", bucketTimeline, key, err)
					}
				}
				order = append(order, key)
			}
			if r.Seq != uint64(len(steps))+1 {
				return fmt.Errorf("migrate %s %x: step %d follows step %d", bucketTimeline, k, r.Seq, len(steps))
			}
			timelines[key] = append(steps, r)
			moved = append(moved, last)
		}
		if k == nil {
			last = nil
		}
		for _, k := range moved {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("migrate %s: %w", bucketTimeline, err)
			}
		}
		b.FillPercent = appendFill
		for _, key := range order {
			data, err := encode("timeline", timelines[key])
			if err != nil {
				return fmt.Errorf("migrate %s %x: %w", bucketTimeline, key, err)
			}
			if err := b.Put([]byte(key), data); err != nil {
				return fmt.Errorf("migrate %s: %w", bucketTimeline, err)
			}
		}
		n = len(moved)
		return nil
	})
	return n, last, err
}
