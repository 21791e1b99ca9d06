package bolt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/filltest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/storetest"
)

// schema1 copies testdata/schema1/paystate.db, written by the store of
// schema 1 (testdata/schema1/gen), into a temporary directory, and returns
// the copy's path and what that store read back from it.
func schema1(t *testing.T) (string, storetest.Dump, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "paystate.db")
	testkit.CopyFile(t, filepath.Join("testdata", "schema1", "paystate.db"), path)
	want, err := os.ReadFile(filepath.Join("testdata", "schema1", "dump.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d storetest.Dump
	if err := json.Unmarshal(want, &d); err != nil {
		t.Fatal(err)
	}
	return path, d, want
}

// dumpJSON reads db's dump, printed as gen prints dump.json.
func dumpJSON(t *testing.T, db *bolt.DB, keys storetest.Keys) []byte {
	t.Helper()
	d, err := storetest.ReadDump(context.Background(), db, keys)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// valueStarts counts the values of the file's record buckets by their
// first byte: '{' for JSON, anything else for CBOR.
func valueStarts(t *testing.T, path string) (jsonValues, others int) {
	t.Helper()
	viewFile(t, path, func(tx *bbolt.Tx) error {
		for _, name := range []string{"payments", "timeline", "inbox", "outbox", "deliveries", "ledger", "review", "idempotency_keys", "customers", "effects", "webhook_endpoints", "psp_answers", "leases", "processed"} {
			_ = tx.Bucket([]byte(name)).ForEach(func(_, v []byte) error {
				if len(v) > 0 && v[0] == '{' {
					jsonValues++
				} else {
					others++
				}
				return nil
			})
		}
		return nil
	})
	return jsonValues, others
}

// TestMigrate_Schema1: a file written by the store of schema 1 (JSON
// values) is migrated at Open: every value becomes CBOR, the schema
// version becomes 2, and the store reads back exactly what the old one
// read from the file; the next Open has nothing to migrate.
func TestMigrate_Schema1(t *testing.T) {
	t.Parallel()
	path, old, want := schema1(t)
	if j, _ := valueStarts(t, path); j == 0 {
		t.Fatal("the schema 1 file has no JSON values")
	}
	// Nine seconds after gen wrote the file: one lease (of pay_…2) is
	// still in force, and the migration indexes it in leases_in_force.
	now := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC) }
	db, err := bolt.Open(path, &bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if db.Migrated() == 0 {
		t.Fatal("Open migrated no values")
	}
	if got := dumpJSON(t, db, old.Keys); string(got) != string(want) {
		t.Fatalf("after the migration the store reads\n%s\nwant (schema 1's store)\n%s", got, want)
	}
	if err := db.Check(); err != nil {
		t.Fatalf("check after the migration: %v", err)
	}
	if n, err := db.EndLeases(context.Background()); err != nil || n != 1 {
		t.Fatalf("EndLeases after the migration ended %d leases (%v), want the 1 in force", n, err)
	}
	want = dumpJSON(t, db, old.Keys) // with that lease ended
	migrated := db.Migrated()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Migrated counts the values rewritten and the keys of schema 3.
	if j, o := valueStarts(t, path); j != 0 || o == 0 || o > migrated {
		t.Fatalf("after the migration: %d JSON values, %d others; want 0 and at most the %d rewritten", j, o, migrated)
	}
	db, err = bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.Migrated(); n != 0 {
		t.Fatalf("the second Open migrated %d values", n)
	}
	if got := dumpJSON(t, db, old.Keys); string(got) != string(want) {
		t.Fatalf("after reopening the store reads\n%s\nwant\n%s", got, want)
	}
}

// TestMigrate_Interrupted: a migration stopped after some of its
// transactions (a crash) leaves a file that the next Open migrates to the
// end, with the same result.
func TestMigrate_Interrupted(t *testing.T) {
	path, old, want := schema1(t)
	crash := errors.New("crash")
	batches := 0
	bolt.SetMigrateBatch(t, 2, func() error {
		if batches++; batches == 5 {
			return crash
		}
		return nil
	})
	if _, err := bolt.Open(path, nil); !errors.Is(err, crash) {
		t.Fatalf("Open with a crash in the migration: %v", err)
	}
	j, o := valueStarts(t, path)
	if j == 0 || o == 0 {
		t.Fatalf("after the crash: %d JSON values and %d others, want some of each", j, o)
	}
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.Migrated(); n < j {
		t.Fatalf("the second Open migrated %d values, want at least the %d JSON values left", n, j)
	}
	if got := dumpJSON(t, db, old.Keys); string(got) != string(want) {
		t.Fatalf("after the resumed migration the store reads\n%s\nwant\n%s", got, want)
	}
}

// TestMigrate_ReadOnlyRefused: tools that open read-only (verify) refuse
// a file of schema 1 with a message that says how to migrate it, and
// leave it as it is.
func TestMigrate_ReadOnlyRefused(t *testing.T) {
	t.Parallel()
	path, _, _ := schema1(t)
	_, err := bolt.Open(path, &bolt.Options{ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "schema version 1") || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("read-only Open of schema 1: %v", err)
	}
	if _, o := valueStarts(t, path); o != 0 {
		t.Fatalf("the read-only Open changed %d values", o)
	}
}

// schema2 copies testdata/schema2/paystate.db, written by the store of
// schema 2 (testdata/schema2/gen), into a temporary directory, and returns
// the copy's path and what that store read back from it: its dump and
// its refunds, disputes and charges (money.json).
func schema2(t *testing.T) (path string, old storetest.Dump, want, wantMoney []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "paystate.db")
	testkit.CopyFile(t, filepath.Join("testdata", "schema2", "paystate.db"), path)
	want, err := os.ReadFile(filepath.Join("testdata", "schema2", "dump.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &old); err != nil {
		t.Fatal(err)
	}
	if wantMoney, err = os.ReadFile(filepath.Join("testdata", "schema2", "money.json")); err != nil {
		t.Fatal(err)
	}
	return path, old, want, wantMoney
}

// moneyJSON reads what testdata/schema2/gen's ReadMoney reads, printed as
// gen prints money.json.
func moneyJSON(t *testing.T, db *bolt.DB) []byte {
	t.Helper()
	var m struct {
		Refunds  []pay.Refund      `json:"refunds"`
		Disputes []pay.Dispute     `json:"disputes"`
		Charges  []store.PSPCharge `json:"charges"`
	}
	const id = "pay_01KB0000000000000000000001"
	err := db.View(context.Background(), func(tx store.Tx) error {
		var err error
		if m.Refunds, err = tx.RefundsForPayment(id); err != nil {
			return err
		}
		if m.Disputes, err = tx.DisputesForPayment(id); err != nil {
			return err
		}
		for _, k := range []string{"charge-" + id, "refund-re_01KB0000000000000000000001"} {
			c, err := tx.PSPCharge(k)
			if err != nil {
				return err
			}
			m.Charges = append(m.Charges, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// textSymbols counts the values of the record buckets that hold one of a
// few symbols as CBOR text (schema 2): "EUR", "captured", "mock". The
// inbox is left out: its raw bodies hold such words as JSON.
func textSymbols(t *testing.T, path string) int {
	t.Helper()
	n := 0
	texts := [][]byte{append([]byte{0x63}, "EUR"...), append([]byte{0x68}, "captured"...), append([]byte{0x64}, "mock"...)}
	viewFile(t, path, func(tx *bbolt.Tx) error {
		for _, name := range []string{"payments", "timeline", "outbox", "deliveries", "ledger", "review", "idempotency_keys", "psp_answers", "psp_charges", "refunds", "disputes"} {
			_ = tx.Bucket([]byte(name)).ForEach(func(_, v []byte) error {
				for _, s := range texts {
					if bytes.Contains(v, s) {
						n++
						break
					}
				}
				return nil
			})
		}
		return nil
	})
	return n
}

// textIDs counts the keys of the file that hold a payment, delivery or
// event id paystate made as text ("pay_01", "dlv_01", "evt_01": schema 2),
// and the values of payments_by_ref and deliveries_open that do. Keys that
// are not ids stay text: the mock PSP's charge keys ("charge-pay_…"),
// review item ids (the payment's id, in testdata/schema2) and, in the
// inbox and processed buckets, the PSP's event ids.
func textIDs(t *testing.T, path string) int {
	t.Helper()
	n := 0
	viewFile(t, path, func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			switch string(name) {
			case "psp_charges", "review", "review_by_created":
				return nil
			}
			values := string(name) == "payments_by_ref" || string(name) == "deliveries_open"
			return b.ForEach(func(k, v []byte) error {
				for _, p := range []string{"pay_01", "dlv_01", "evt_01"} {
					if bytes.Contains(k, []byte(p)) || values && bytes.Contains(v, []byte(p)) {
						n++
						break
					}
				}
				return nil
			})
		})
	})
	return n
}

// TestMigrate_Schema2: a file written by the store of schema 2 (symbols as
// CBOR text) is migrated at Open: the records that hold symbols are
// written again with their codes, the file's size per record drops, and
// the store reads back exactly what the old one read from the file; the
// next Open has nothing to migrate.
func TestMigrate_Schema2(t *testing.T) {
	t.Parallel()
	path, old, want, wantMoney := schema2(t)
	if n := textSymbols(t, path); n == 0 {
		t.Fatal("the schema 2 file holds no symbols as text")
	}
	if n := textIDs(t, path); n == 0 {
		t.Fatal("the schema 2 file holds no ids as text in its keys")
	}
	now := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC) }
	db, err := bolt.Open(path, &bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if db.Migrated() == 0 {
		t.Fatal("Open migrated no values")
	}
	if got := dumpJSON(t, db, old.Keys); string(got) != string(want) {
		t.Fatalf("after the migration the store reads\n%s\nwant (schema 2's store)\n%s", got, want)
	}
	if got := moneyJSON(t, db); string(got) != string(wantMoney) {
		t.Fatalf("after the migration the store reads\n%s\nwant (schema 2's store)\n%s", got, wantMoney)
	}
	if err := db.Check(); err != nil {
		t.Fatalf("check after the migration: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := textSymbols(t, path); n != 0 {
		t.Fatalf("after the migration %d values still hold symbols as text", n)
	}
	if n := textIDs(t, path); n != 0 {
		t.Fatalf("after the migration %d keys still hold ids as text", n)
	}
	wantMigrated(t, path, now, old.Keys, want)
}

// TestMigrate_Schema2Interrupted: a migration from schema 2 stopped after
// some of its transactions leaves a file that the next Open migrates to
// the end, rewriting only what the first run had not, with the same
// result.
func TestMigrate_Schema2Interrupted(t *testing.T) {
	full, _, _, _ := schema2(t)
	db, err := bolt.Open(full, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := db.Migrated()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	path, old, want, wantMoney := schema2(t)
	crash := errors.New("crash")
	batches := 0
	bolt.SetMigrateBatch(t, 2, func() error {
		if batches++; batches == 4 {
			return crash
		}
		return nil
	})
	if _, err := bolt.Open(path, nil); !errors.Is(err, crash) {
		t.Fatalf("Open with a crash in the migration: %v", err)
	}
	if textSymbols(t, path) == 0 || textIDs(t, path) == 0 {
		t.Fatal("after the crash no value holds a symbol as text, or no key an id: the crash came too late")
	}
	db, err = bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.Migrated(); n == 0 || n >= all {
		t.Fatalf("the second Open migrated %d values, want some of the %d, not all", n, all)
	}
	if got := dumpJSON(t, db, old.Keys); string(got) != string(want) {
		t.Fatalf("after the resumed migration the store reads\n%s\nwant\n%s", got, want)
	}
	if got := moneyJSON(t, db); string(got) != string(wantMoney) {
		t.Fatalf("after the resumed migration the store reads\n%s\nwant\n%s", got, wantMoney)
	}
}

// schema3 copies testdata/schema3/paystate.db, written by the store of
// schema 3 (testdata/schema3/gen), into a temporary directory, and returns
// the copy's path and what that store read back from it: its dump, its
// refunds, disputes and charges (money.json) and the processed ids its
// Export gave (processed.json).
func schema3(t *testing.T) (path string, old storetest.Dump, want, wantMoney, wantProcessed []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "paystate.db")
	testkit.CopyFile(t, filepath.Join("testdata", "schema3", "paystate.db"), path)
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", "schema3", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	want, wantMoney, wantProcessed = read("dump.json"), read("money.json"), read("processed.json")
	if err := json.Unmarshal(want, &old); err != nil {
		t.Fatal(err)
	}
	return path, old, want, wantMoney, wantProcessed
}

// processedJSON reads the processed ids of db's Export, printed as
// testdata/schema3/gen prints processed.json.
func processedJSON(t *testing.T, db *bolt.DB) []byte {
	t.Helper()
	var r filltest.Records
	if err := db.Export(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	sort.Slice(r.ProcessedIDs, func(i, j int) bool { return r.ProcessedIDs[i].EventID < r.ProcessedIDs[j].EventID })
	data, err := json.MarshalIndent(r.ProcessedIDs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// schema3Layout counts, in the file at path, the entries of processed and
// the inbox values that hold a body as it came (the JSON of a webhook,
// `"type":` or `"type": `, in the clear).
func schema3Layout(t *testing.T, path string) (processed, plainBodies int) {
	t.Helper()
	viewFile(t, path, func(tx *bbolt.Tx) error {
		processed = tx.Bucket([]byte("processed")).Stats().KeyN
		return tx.Bucket([]byte("inbox")).ForEach(func(_, v []byte) error {
			if bytes.Contains(v, []byte(`"type":`)) || bytes.Contains(v, []byte(`"object": "event"`)) {
				plainBodies++
			}
			return nil
		})
	})
	return processed, plainBodies
}

// TestMigrate_Schema3: a file written by the store of schema 3 (bodies as
// they came, every processed id in processed) is migrated at Open: the
// bodies that pack smaller are packed, the processed events of the inbox
// carry their processed time and leave processed, which keeps the id whose
// event never reached the inbox, and the store reads back exactly what the
// old one read, processed times included; the next Open has nothing to
// migrate.
func TestMigrate_Schema3(t *testing.T) {
	t.Parallel()
	path, old, want, wantMoney, wantProcessed := schema3(t)
	if processed, plain := schema3Layout(t, path); processed != 3 || plain != 2 {
		t.Fatalf("the schema 3 file holds %d processed ids and %d bodies in the clear, want 3 and 2", processed, plain)
	}
	now := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC) }
	db, err := bolt.Open(path, &bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if db.Migrated() == 0 {
		t.Fatal("Open migrated no values")
	}
	for name, c := range map[string]struct{ got, want []byte }{
		"dump":      {dumpJSON(t, db, old.Keys), want},
		"money":     {moneyJSON(t, db), wantMoney},
		"processed": {processedJSON(t, db), wantProcessed},
	} {
		if string(c.got) != string(c.want) {
			t.Fatalf("after the migration the store reads (%s)\n%s\nwant (schema 3's store)\n%s", name, c.got, c.want)
		}
	}
	if err := db.Check(); err != nil {
		t.Fatalf("check after the migration: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// (evt_psp_2's body, {"id":"evt_psp_2"}, packs no smaller and stays as
	// it came; schema3Layout does not count it.)
	if processed, plain := schema3Layout(t, path); processed != 1 || plain != 0 {
		t.Fatalf("after the migration the file holds %d processed ids and %d bodies in the clear, want 1 and 0", processed, plain)
	}
	wantMigrated(t, path, now, old.Keys, want)
}

// TestMigrate_Schema3Interrupted: a migration from schema 3 stopped after
// any one of its transactions (one value each: a key rewritten, an inbox
// event, a step moved into its timeline, which leaves a timeline half
// moved) leaves a file that the next Open migrates to the end, with the
// same result.
func TestMigrate_Schema3Interrupted(t *testing.T) {
	halfTimeline := false
	for stop := 1; ; stop++ {
		path, old, want, _, wantProcessed := schema3(t)
		crash := errors.New("crash")
		batches := 0
		bolt.SetMigrateBatch(t, 1, func() error {
			if batches++; batches == stop {
				return crash
			}
			return nil
		})
		db, err := bolt.Open(path, nil)
		if err == nil { // the migration ended before its transaction stop
			_ = db.Close()
			if stop < 10 || !halfTimeline {
				t.Fatalf("the migration took %d transactions, and none left a timeline half moved", stop-1)
			}
			return
		} else if !errors.Is(err, crash) {
			t.Fatalf("Open with a crash after transaction %d of the migration: %v", stop, err)
		}
		if timelineShapes(t, path) == "[array map map map]" {
			halfTimeline = true
		}
		bolt.SetMigrateBatch(t, 1, nil)
		db, err = bolt.Open(path, nil)
		if err != nil {
			t.Fatalf("after a crash after transaction %d: %v", stop, err)
		}
		if got := dumpJSON(t, db, old.Keys); string(got) != string(want) {
			t.Fatalf("after a crash after transaction %d, the resumed migration reads\n%s\nwant\n%s", stop, got, want)
		}
		if got := processedJSON(t, db); string(got) != string(wantProcessed) {
			t.Fatalf("after a crash after transaction %d, the resumed migration reads\n%s\nwant\n%s", stop, got, wantProcessed)
		}
		if err := db.Check(); err != nil {
			t.Fatalf("after a crash after transaction %d, check: %v", stop, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// timelineShapes lists the CBOR major type of each timeline value of the
// file at path, in key order: "array" for a timeline of schema 4, "map" for
// a step of schema 3.
func timelineShapes(t *testing.T, path string) string {
	t.Helper()
	var shapes []string
	viewFile(t, path, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("timeline")).ForEach(func(_, v []byte) error {
			shapes = append(shapes, map[byte]string{4: "array", 5: "map"}[v[0]>>5])
			return nil
		})
	})
	return fmt.Sprint(shapes)
}

// wantMigrated opens the migrated file at path again and checks that Open
// migrates nothing and the store reads want.
func wantMigrated(t *testing.T, path string, now func() time.Time, keys storetest.Keys, want []byte) {
	t.Helper()
	db, err := bolt.Open(path, &bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.Migrated(); n != 0 {
		t.Fatalf("the second Open migrated %d values", n)
	}
	if got := dumpJSON(t, db, keys); string(got) != string(want) {
		t.Fatalf("after reopening the store reads\n%s\nwant\n%s", got, want)
	}
}

// viewFile runs fn in a read transaction of the bbolt file at path, opened
// read-only, and fails the test on an error.
func viewFile(t *testing.T, path string, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(fn); err != nil {
		t.Fatal(err)
	}
}
