package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
	bolt "go.etcd.io/bbolt"
)

// Schema history:
//
//	1  values are JSON objects (field names, RFC 3339 times, base64 bytes)
//	2  values are CBOR maps with integer keys (codec.go); keys unchanged;
//	   new bucket leases_in_force
//	3  strings of a closed vocabulary (statuses, event types, currencies,
//	   effects, accounts: symbol.go) are stored as small integer codes, and
//	   an idempotency record's owner as bytes if it is hexadecimal; keys
//	   unchanged. A schema 2 value reads as it is, so the migration only
//	   re-encodes the records that hold such strings.
//
// A database of an older schema is migrated at Open, before anything
// reads it; a read-only Open refuses it.

// schema1Records are the buckets whose values were JSON in schema 1, with
// the record type each holds. Every other bucket holds index entries or
// raw integers, the same in both.
var schema1Records = []struct {
	bucket []byte
	record func() any
}{
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
var schema2Records = []struct {
	bucket []byte
	record func() any
}{
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
func storedVersion(btx *bolt.Tx) (uint64, error) {
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

// migrate brings a file of schema 1 or 2 to SchemaVersion and returns how
// many values it rewrote. Each transaction rewrites at most migrateBatch
// values; the version is raised in the last one. A value already in the
// current encoding (a migration interrupted by a crash) is left as it is,
// so that a migration can always run again from the start. Files of other
// versions are left to initSchema's check.
func migrate(bdb *bolt.DB, now func() time.Time) (int, error) {
	var version uint64
	if err := bdb.View(func(btx *bolt.Tx) (err error) {
		version, err = storedVersion(btx)
		return err
	}); err != nil || (version != 1 && version != 2) {
		return 0, err
	}
	records := schema1Records
	if version == 2 {
		records = schema2Records
	}
	total := 0
	for _, rec := range records {
		var after []byte
		for {
			n, last, err := migrateSome(bdb, version, rec.bucket, rec.record, after)
			if err != nil {
				return total, err
			}
			total += n
			if afterMigrateBatch != nil {
				if err := afterMigrateBatch(); err != nil {
					return total, err
				}
			}
			if last == nil {
				break
			}
			after = last
		}
	}
	err := bdb.Update(func(btx *bolt.Tx) error {
		if version == 1 {
			if err := indexLeasesInForce(btx, now()); err != nil {
				return err
			}
		}
		return btx.Bucket(bucketMeta).Put(keySchemaVersion, be64(SchemaVersion))
	})
	return total, err
}

// indexLeasesInForce creates leases_in_force (new in schema 2) with an
// entry for every lease in force at now.
func indexLeasesInForce(btx *bolt.Tx, now time.Time) error {
	ix, err := btx.CreateBucketIfNotExists(bucketLeasesInForce)
	if err != nil {
		return fmt.Errorf("migrate: create %s: %w", bucketLeasesInForce, err)
	}
	return btx.Bucket(bucketLeases).ForEach(func(k, v []byte) error {
		var r leaseRecord
		if err := decode("lease", v, &r); err != nil {
			return fmt.Errorf("migrate lease %q: %w", k, err)
		}
		if (pay.Lease{Token: r.Token, ExpiresAt: r.ExpiresAt.Time}).Held(now) {
			return ix.Put(leaseInForceKey(r.ExpiresAt.Time, string(k)), nil)
		}
		return nil
	})
}

// migrateSome rewrites the values of bucket after the key after (from the
// first key if nil), up to migrateBatch of them, in one transaction: from
// schema 1, the JSON values; from schema 2, the values whose encoding
// changes. It returns the last key it visited, or nil once the bucket is
// done.
func migrateSome(bdb *bolt.DB, from uint64, bucket []byte, record func() any, after []byte) (n int, last []byte, err error) {
	err = bdb.Update(func(btx *bolt.Tx) error {
		b := btx.Bucket(bucket)
		if b == nil {
			return nil // created by initSchema
		}
		type kv struct{ k, v []byte }
		var batch []kv
		c := b.Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); k != nil && string(k) == string(after) {
				k, v = c.Next()
			}
		}
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
