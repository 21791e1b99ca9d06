package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// benchPayment returns payment i, as the store's tests store them.
func benchPayment(i int64) pay.Payment {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return pay.Payment{
		ID: fmt.Sprintf("pay_%026d", i), OrderID: fmt.Sprintf("order-%d", i), Amount: 1000, Currency: "EUR",
		Provider: "mock", Status: pay.Created, Version: 1, CreatedAt: t0, UpdatedAt: t0,
	}
}

// commitModes are the ways BenchmarkCommit commits the same transaction
// (one payment with its indexes): through DB.Update (the committer), and
// through bbolt's own DB.Update and DB.Batch (with the MaxBatchDelay of
// 2 ms that Update used before the committer) on the same kind of file.
var commitModes = []struct {
	name  string
	write func(db *DB, i int64) error
}{
	{"committer", func(db *DB, i int64) error {
		return db.Update(context.Background(), func(t store.Tx) error { return t.InsertPayment(benchPayment(i)) })
	}},
	{"bolt-Update", func(db *DB, i int64) error {
		return db.bolt.Update(func(btx *bbolt.Tx) error { return db.begin(btx).InsertPayment(benchPayment(i)) })
	}},
	{"bolt-Batch", func(db *DB, i int64) error {
		return db.bolt.Batch(func(btx *bbolt.Tx) error { return db.begin(btx).InsertPayment(benchPayment(i)) })
	}},
}

// BenchmarkCommit compares, in one run, the committer with raw bbolt
// db.Update and db.Batch: a lone writer (p50 and p99 latency) and 256
// concurrent writers (writes/s). Each writes one payment per transaction
// into its own new file; commits/write is the committer's (bbolt's Update
// makes one commit per write, and Batch groups whatever arrives within
// 2 ms).
func BenchmarkCommit(b *testing.B) {
	for _, m := range commitModes {
		b.Run("lone/"+m.name, func(b *testing.B) {
			db := benchDB(b)
			var lat []time.Duration
			i := int64(0)
			for b.Loop() {
				start := time.Now()
				if err := m.write(db, i); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				i++
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			reportCommits(b, db, m.name)
		})
		b.Run("parallel256/"+m.name, func(b *testing.B) {
			db := benchDB(b)
			var next atomic.Int64
			b.SetParallelism((256 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := m.write(db, next.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			reportCommits(b, db, m.name)
		})
	}
}

// benchDB opens a new database in b.TempDir(), with bbolt's Batch set as
// Update used to set it.
func benchDB(b *testing.B) *DB {
	b.Helper()
	db, err := Open(filepath.Join(b.TempDir(), "paystate.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	db.bolt.MaxBatchDelay = 2 * time.Millisecond
	b.Cleanup(func() { db.Close() })
	return db
}

// reportCommits reports the committer's commits per write.
func reportCommits(b *testing.B, db *DB, mode string) {
	if s := db.commits.snapshot(); mode == "committer" && s.Writes > 0 {
		b.ReportMetric(float64(s.Commits)/float64(s.Writes), "commits/write")
	}
}

// BenchmarkOpen measures Open of a file that holds 100,000 payments (with
// their four indexes) after a clean Close and after a crash (closed
// without Close's last transaction: no freelist written, no record of a
// clean shutdown), next to a new, empty database, with the file in the
// page cache. Close (timer stopped) keeps each file in its state.
func BenchmarkOpen(b *testing.B) {
	const payments = 100_000
	dir := b.TempDir()
	empty, full := filepath.Join(dir, "empty.db"), filepath.Join(dir, "full.db")
	for _, path := range []string{empty, full} {
		db, err := Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		for n := int64(0); path == full && n < payments; n += 10_000 {
			err := db.Update(context.Background(), func(t store.Tx) error {
				for i := n; i < n+10_000; i++ {
					if err := t.InsertPayment(benchPayment(i)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		path  string
		crash bool
	}{{"empty", empty, false}, {"payments=100000/clean", full, false}, {"payments=100000/crashed", full, true}} {
		b.Run(c.name, func(b *testing.B) {
			if c.crash { // the clean case before closed the file cleanly
				db, err := Open(c.path, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := db.bolt.Close(); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				db, err := Open(c.path, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(db.checkedPages), "pages-checked")
				if c.crash {
					err = db.bolt.Close() // no last transaction: as after a crash
				} else {
					err = db.Close()
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCodec encodes and decodes typical records, once as the CBOR of
// the store (schema 2) and once as the JSON of schema 1, through the same
// record types; it reports the encoded size (bytes/value) next to the
// time and allocations of a decode.
func BenchmarkCodec(b *testing.B) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC)
	p := benchPayment(7)
	p.ProviderRef, p.Status, p.Version = "pi_3Qx7b2LkdIwHu7ix0s9aE4Tz", pay.Captured, 3
	records := []struct {
		name string
		rec  any
		new  func() any
	}{
		{"payment", fromPayment(p), func() any { return new(paymentRecord) }},
		{"delivery", fromDelivery(pay.Delivery{
			ID: "dlv_01KBA7Y3M2C8Q5W0R9T6V4X1ZE", Effect: pay.EffectWebhook, Endpoint: "ep_4c1f0a9d", EventID: "evt_01KBA7Y3M1J2K3L4M5N6P7Q8R9",
			EventType: "payment.captured", EventSeq: 91234, EventAt: now, PaymentID: p.ID, State: pay.DeliveryDone,
			Attempts: 1, NextAttemptAt: now, Note: "HTTP 200", CreatedAt: now, UpdatedAt: now,
		}), func() any { return new(deliveryRecord) }},
		{"inbox", fromInbox(pay.InboxEvent{
			Provider: "mock", EventID: "evt_01KBA7Y3M1J2K3L4M5N6P7Q8R9", Type: "payment.captured", PaymentID: p.ID,
			ProviderRef: p.ProviderRef, Status: pay.Captured, Amount: 1500, Currency: "EUR", OccurredAt: now, ReceivedAt: now,
			Body:      []byte(`{"id":"evt_01KBA7Y3M1J2K3L4M5N6P7Q8R9","type":"payment.captured","created":1764590400,"data":{"object":{"id":"pi_3Qx7b2LkdIwHu7ix0s9aE4Tz","amount":1500,"currency":"eur","metadata":{"payment_id":"pay_01KBA7Y3M0000000000000007"}}}}`),
			Processed: true, NextAttemptAt: now,
		}), func() any { return new(inboxRecord) }},
	}
	for _, r := range records {
		for _, c := range []struct {
			name   string
			encode func(any) ([]byte, error)
			decode func([]byte, any) error
		}{
			{"cbor", func(v any) ([]byte, error) { return encode(r.name, v) }, func(d []byte, v any) error { return decode(r.name, d, v) }},
			{"json", json.Marshal, json.Unmarshal},
		} {
			data, err := c.encode(r.rec)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(r.name+"/"+c.name+"/decode", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.decode(data, r.new()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(data)), "bytes/value")
			})
			b.Run(r.name+"/"+c.name+"/encode", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.encode(r.rec); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
