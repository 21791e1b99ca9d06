package bolt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

// recordKinds are the values FuzzDecodeRecord decodes: every bucket that
// holds records, as its readers decode them (the timeline is one array of
// steps per payment; the idempotency expiry index and IsProcessed decode
// only a part of their record). A kind's index is part of the seeds in
// testdata/fuzz: new kinds go at the end.
var recordKinds = []bucketRecord{
	{bucketPayments, func() any { return new(paymentRecord) }},
	{bucketTimeline, func() any { return new([]stepRecord) }},
	{bucketInbox, func() any { return new(inboxRecord) }},
	{bucketInbox, func() any { return new(processedAtRecord) }},
	{bucketProcessed, func() any { return new(processedRecord) }},
	{bucketLeases, func() any { return new(leaseRecord) }},
	{bucketOutbox, func() any { return new(outboxRecord) }},
	{bucketDeliveries, func() any { return new(deliveryRecord) }},
	{bucketLedger, func() any { return new(ledgerRecord) }},
	{bucketReview, func() any { return new(reviewRecord) }},
	{bucketIdem, func() any { return new(idemRecord) }},
	{bucketIdem, func() any { return new(idemExpiry) }},
	{bucketCustomers, func() any { return new(customerRecord) }},
	{bucketEffects, func() any { return new(effectRecord) }},
	{bucketWebhookEndpoints, func() any { return new(endpointRecord) }},
	{bucketPSPAnswers, func() any { return new(pspAnswerRecord) }},
	{bucketPSPCharges, func() any { return new(pspChargeRecord) }},
	{bucketRefunds, func() any { return new(refundRecord) }},
	{bucketDisputes, func() any { return new(disputeRecord) }},
	{bucketSettlements, func() any { return new(settlementRecord) }},
	{bucketReconRuns, func() any { return new(reconRunRecord) }},
}

// FuzzDecodeRecord feeds arbitrary keys and values to the decoder of
// every kind of record, as a damaged file would. Decoding returns an
// error or a record, never panics, and a record it returns is stored
// again as bytes that decode to a record stored as the same bytes. The
// seeds are every record of the schema 3 test file once Open has migrated
// it.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range migratedRecords(f) {
		f.Add(s.kind, s.key, s.value)
	}
	// Every kind also gets its empty record: the test file has no
	// settlements and no reconciliation runs.
	for i, k := range recordKinds {
		empty, err := encode(string(k.bucket), k.record())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), []byte{}, empty)
	}
	f.Fuzz(func(t *testing.T, kind uint8, key, value []byte) {
		k := recordKinds[int(kind)%len(recordKinds)]
		what := string(k.bucket)
		r := k.record()
		if decodeAt(what, key, value, r) != nil {
			return
		}
		once, err := encode(what, r)
		if err != nil {
			return // decodable but refused for storage, as a write would be
		}
		again := k.record()
		if err := decodeAt(what, key, once, again); err != nil {
			t.Fatalf("%s %x: the value %x of the record decoded from %x does not decode: %v", what, key, once, value, err)
		}
		twice, err := encode(what, again)
		if err != nil {
			t.Fatalf("%s %x: the record decoded from %x cannot be stored: %v", what, key, once, err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("%s %x: %x decodes to a record stored as %x, which decodes to one stored as %x", what, key, value, once, twice)
		}
	})
}

// FuzzPackBody checks that a webhook body packed with its record's ids
// as marks unpacks to the same bytes, and that unpacking arbitrary bytes,
// as a damaged frame, returns an error or a body, never panics.
func FuzzPackBody(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","metadata":{"payment_id":"pay_01J"}}}}`), "evt_1", "pay_01J", "pi_1")
	f.Add([]byte(`{"type":"payment.captured","data":{"payment_id":"pay_01Jpay_01J","ref":"r"}}`), "", "pay_01J", "r")
	f.Add([]byte("evt_1evt_1 pi_1pi_"), "evt_1", "", "pi_1")
	f.Fuzz(func(t *testing.T, body []byte, event, payment, ref string) {
		refs := bodyRefs{event: event, payment: payment, ref: ref}
		_, _ = unpackBody(body, refs)
		z := packBody(body, refs)
		if z == nil {
			return // not packed: stored as it came
		}
		got, err := unpackBody(z, refs)
		if err != nil {
			t.Fatalf("unpack %q (refs %q %q %q): %v", body, event, payment, ref, err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("packed %q (refs %q %q %q), unpacked %q", body, event, payment, ref, got)
		}
	})
}

// FuzzCheck damages the migrated schema 3 test file by one entry (a key
// of any bucket set to arbitrary bytes, or removed) and runs every check
// of Check over it, as `paystate check` does on a damaged file: the
// checks report problems, they never panic. Each input's damage is rolled
// back before the next.
func FuzzCheck(f *testing.F) {
	for _, s := range migratedRecords(f) {
		f.Add(bucketIndex(recordKinds[s.kind].bucket), s.key, s.value[:len(s.value)/2], false)
		f.Add(bucketIndex(recordKinds[s.kind].bucket), s.key, []byte(nil), true)
	}
	f.Add(bucketIndex(bucketPaymentsByStatus), []byte{1, 2, 3}, []byte{}, false)
	f.Add(bucketIndex(bucketBalances), []byte("x"), []byte{0xff}, false)
	db := migratedDB(f)
	f.Fuzz(func(t *testing.T, bucket uint8, key, value []byte, remove bool) {
		name := allBuckets[int(bucket)%len(allBuckets)]
		if len(key) == 0 || len(key) > bbolt.MaxKeySize {
			return
		}
		err := db.bolt.Update(func(btx *bbolt.Tx) error {
			b := btx.Bucket(name)
			if remove {
				if err := b.Delete(key); err != nil {
					return err
				}
			} else if err := b.Put(key, value); err != nil {
				return err
			}
			c := &checker{tx: db.begin(btx)}
			for _, check := range familyChecks {
				check(c)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("damage %s %x: %v", name, key, err)
		}
	})
}

// bucketIndex is the index of name in allBuckets.
func bucketIndex(name []byte) uint8 {
	for i, b := range allBuckets {
		if bytes.Equal(b, name) {
			return uint8(i)
		}
	}
	panic("no bucket " + string(name))
}

// migratedDB opens a copy of testdata/schema3/paystate.db, which
// migrates it to this schema; the test's cleanup closes it.
func migratedDB(tb testing.TB) *DB {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "schema3", "paystate.db"))
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "paystate.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	db, err := Open(path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Error(err)
		}
	})
	return db
}

// decodeSeed is one value of a bucket of recordKinds, by kind.
type decodeSeed struct {
	kind       uint8
	key, value []byte
}

// migratedRecords returns the key and value of every record in the
// migrated schema 3 test file (migratedDB).
func migratedRecords(tb testing.TB) []decodeSeed {
	tb.Helper()
	db := migratedDB(tb)
	var seeds []decodeSeed
	err := db.bolt.View(func(btx *bbolt.Tx) error {
		for i, k := range recordKinds {
			err := btx.Bucket(k.bucket).ForEach(func(key, value []byte) error {
				seeds = append(seeds, decodeSeed{uint8(i), bytes.Clone(key), bytes.Clone(value)})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(seeds) < 30 {
		tb.Fatalf("%d records in the migrated test file, want at least 30", len(seeds))
	}
	return seeds
}
