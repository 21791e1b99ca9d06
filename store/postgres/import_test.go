package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/internal/testkit/filltest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/postgres"
	"github.com/paystate/paystate/store/storetest"
)

var _ store.ExportSink = (*postgres.Importer)(nil)

// clock is the clock of the stores of filled, and of the copies that
// compare leases in force with them.
var clock = storetest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC))

// filled returns a bbolt store filled by filltest.Fill and its export.
func filled(t *testing.T) (*bolt.DB, *filltest.Records) {
	t.Helper()
	src := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	ctx := context.Background()
	if err := filltest.Fill(ctx, src); err != nil {
		t.Fatal(err)
	}
	var r filltest.Records
	if err := src.Export(ctx, &r); err != nil {
		t.Fatal(err)
	}
	return src, &r
}

// importer returns a new Importer of db, closed when the test ends.
func importer(t *testing.T, db *postgres.DB, opts store.ImportOptions) *postgres.Importer {
	t.Helper()
	im, err := db.NewImporter(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = im.Close() })
	return im
}

// sameRecords compares the two stores record by record (filltest.Compare).
func sameRecords(t *testing.T, want, got store.Store, r *filltest.Records) {
	t.Helper()
	if err := filltest.Compare(context.Background(), want, got, r); err != nil {
		t.Fatal(err)
	}
}

// TestImporter_Copy: an export of a bbolt store written into an empty
// schema reads back the same, record by record, through store.Tx; the copy
// then goes on where the file stopped: the next outbox and ledger Seq,
// the next fencing token, the processed ids and the ripple cursor.
func TestImporter_Copy(t *testing.T) {
	t.Parallel()
	src, r := filled(t)
	db := mustOpen(t, newEmptySchema(t), &postgres.Options{Now: clock.Now})
	ctx := context.Background()
	var batches []int
	im := importer(t, db, store.ImportOptions{BatchSize: 7, Progress: func(n int) { batches = append(batches, n) }})
	if err := src.Export(ctx, im); err != nil {
		t.Fatalf("Export: %v", err)
	}
	if err := im.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if got, want := len(batches), (r.Len()+6)/7; got != want || batches[len(batches)-1] != r.Len() {
		t.Errorf("progress %v: want %d batches up to %d records", batches, want, r.Len())
	}
	total := 0
	for _, c := range im.Counts() {
		if c.Offered != c.Written || c.Offered == 0 {
			t.Errorf("%s: %d offered, %d written: want all of some", c.Table, c.Offered, c.Written)
		}
		total += c.Written
	}
	if total != r.Len() {
		t.Errorf("written %d, exported %d", total, r.Len())
	}
	sameRecords(t, src, db, r)

	err := db.Update(ctx, func(tx store.Tx) error {
		if err := tx.AppendOutbox(pay.OutboxRecord{ID: "evt_new", Type: "payment.captured", PaymentID: filltest.PaymentIDs[1]}); err != nil {
			return err
		}
		recs, err := tx.OutboxForPayment(filltest.PaymentIDs[1])
		if err != nil {
			return err
		}
		if got, floor := recs[len(recs)-1].Seq, r.Single.OutboxSeq; got <= floor {
			t.Errorf("next outbox Seq=%d, want above %d", got, floor)
		}
		lines := []pay.LedgerEntry{{Account: "a", Currency: "EUR", Amount: 1}, {Account: "b", Currency: "EUR", Amount: -1}}
		if err := tx.AppendLedger(lines); err != nil {
			return err
		}
		if got, want := lines[0].Seq, r.Single.LedgerSeq+1; got != want {
			t.Errorf("next ledger Seq=%d, want %d", got, want)
		}
		l, err := tx.AcquireLease(filltest.PaymentIDs[2], "after-copy", time.Second)
		if err != nil {
			return err
		}
		if got, want := l.Token, uint64(3); got != want {
			t.Errorf("next fencing token=%d, want %d (two acquisitions before the copy)", got, want)
		}
		if _, err := tx.AcquireLease(filltest.PaymentIDs[1], "after-copy", time.Second); pay.ErrorCode(err) != pay.ELEASEHELD {
			t.Errorf("lease in force before the copy: %v, want ELEASEHELD until it expires", err)
		}
		for _, ev := range []string{"evt_psp_1", "evt_never_stored"} {
			provider := map[string]string{"evt_psp_1": "mock", "evt_never_stored": "stripe"}[ev]
			if ok, err := tx.IsProcessed(provider, ev); err != nil || !ok {
				t.Errorf("IsProcessed(%s)=%v, %v; want true", ev, ok, err)
			}
		}
		cursor, err := tx.RippleCursor()
		if err == nil && cursor != r.Single.RippleCursor {
			t.Errorf("ripple cursor=%d, want %d", cursor, r.Single.RippleCursor)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Finished: the database is no longer empty, and a second copy is
	// refused.
	again := importer(t, db, store.ImportOptions{})
	if err := src.Export(ctx, again); !errors.Is(err, store.ErrTargetNotEmpty) || !strings.Contains(err.Error(), "table payments") {
		t.Fatalf("second copy: %v, want ErrTargetNotEmpty naming the tables", err)
	}
}

// TestImporter_Resume: a copy that stopped after some batches (here its
// context was cancelled) is resumed by running it again: the batches
// written are skipped, the rest written, and the result is the same as a
// copy in one go.
func TestImporter_Resume(t *testing.T) {
	t.Parallel()
	src, r := filled(t)
	db := mustOpen(t, newEmptySchema(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	im := importer(t, db, store.ImportOptions{BatchSize: 5, Progress: func(n int) {
		if n >= 15 {
			cancel()
		}
	}})
	if err := src.Export(ctx, im); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted export: %v, want context.Canceled", err)
	}
	if err := im.Finish(); err == nil {
		t.Fatal("Finish of an interrupted export succeeded")
	}
	_ = im.Close()

	// The half-copied database is neither empty nor finished: a copy of
	// another source is refused.
	other := importer(t, db, store.ImportOptions{})
	if err := other.Begin(context.Background(), r.Source+1); !errors.Is(err, store.ErrTargetNotEmpty) || !strings.Contains(err.Error(), "another bbolt database") {
		t.Fatalf("copy of another source into a partial copy: %v, want ErrTargetNotEmpty", err)
	}
	_ = other.Close()

	im = importer(t, db, store.ImportOptions{BatchSize: 5})
	if err := src.Export(context.Background(), im); err != nil {
		t.Fatalf("resumed export: %v", err)
	}
	if err := im.Finish(); err != nil {
		t.Fatal(err)
	}
	offered, written := 0, 0
	for _, c := range im.Counts() {
		offered, written = offered+c.Offered, written+c.Written
	}
	if offered != r.Len() || written > offered-15 {
		t.Errorf("resumed: %d offered, %d written; want %d offered, the first 15 or more skipped", offered, written, r.Len())
	}
	sameRecords(t, src, db, r)
}

// TestImporter_Refuses: a database with records of its own, a second copy
// running at once, and text PostgreSQL cannot store are refused with an
// error naming them; nothing is written.
func TestImporter_Refuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NotEmpty", func(t *testing.T) {
		t.Parallel()
		db := mustOpen(t, newEmptySchema(t), nil)
		if err := db.Update(ctx, func(tx store.Tx) error {
			return tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_own", Points: 1})
		}); err != nil {
			t.Fatal(err)
		}
		err := importer(t, db, store.ImportOptions{}).Begin(ctx, 1)
		if !errors.Is(err, store.ErrTargetNotEmpty) || !strings.Contains(err.Error(), "table customers") {
			t.Fatalf("Begin=%v, want ErrTargetNotEmpty naming customers", err)
		}
	})

	t.Run("TwoAtOnce", func(t *testing.T) {
		t.Parallel()
		db := mustOpen(t, newEmptySchema(t), nil)
		if err := importer(t, db, store.ImportOptions{}).Begin(ctx, 7); err != nil {
			t.Fatal(err)
		}
		if err := importer(t, db, store.ImportOptions{}).Begin(ctx, 7); err == nil || !strings.Contains(err.Error(), "another paystate copy") {
			t.Fatalf("second Begin=%v, want refused while the first runs", err)
		}
	})

	t.Run("BadText", func(t *testing.T) {
		t.Parallel()
		src := bolttest.MustOpen(t, nil)
		now := time.Now().UTC()
		if err := src.Update(ctx, func(tx store.Tx) error {
			return tx.InsertPayment(pay.Payment{ID: "pay_bad", OrderID: "order-\x00", Amount: 1, Currency: "EUR", Provider: "mock",
				Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now})
		}); err != nil {
			t.Fatal(err)
		}
		db := mustOpen(t, newEmptySchema(t), nil)
		err := src.Export(ctx, importer(t, db, store.ImportOptions{}))
		if pay.ErrorCode(err) != pay.EINVALID || !strings.Contains(err.Error(), "payment pay_bad: order_id") {
			t.Fatalf("Export=%v, want EINVALID naming the payment and the field", err)
		}
	})
}

// TestImporter_CountersNeverGoBack: the counters of an export whose
// newest records were purged are above every stored Seq; the next record
// takes the number after them, never one given out before.
func TestImporter_CountersNeverGoBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A database of its own, so that no other test's open transaction
	// holds the outbox record back from OutboxAfter.
	db := mustOpen(t, pgtest.Schema(t), nil)
	im := importer(t, db, store.ImportOptions{})
	horizon := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := im.Begin(ctx, 42); err != nil {
		t.Fatal(err)
	}
	if err := im.Counters(9, 8, 9, horizon); err != nil {
		t.Fatal(err)
	}
	if err := im.Finish(); err != nil {
		t.Fatal(err)
	}
	var lines []pay.LedgerEntry
	err := db.Update(ctx, func(tx store.Tx) error {
		if err := tx.AppendOutbox(pay.OutboxRecord{ID: "evt_a", Type: "payment.captured", PaymentID: "pay_a"}); err != nil {
			return err
		}
		lines = []pay.LedgerEntry{{Account: "a", Currency: "EUR", Amount: 1}, {Account: "b", Currency: "EUR", Amount: -1}}
		return tx.AppendLedger(lines)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The outbox record is read once its transaction has committed. The
	// database is this test's alone; a passing autovacuum's transaction
	// could still hold it back for a moment: read again a bounded number
	// of times.
	var recs []pay.OutboxRecord
	for range 1000 {
		if err := db.View(ctx, func(tx store.Tx) (err error) { recs, err = tx.OutboxAfter(0, 10); return err }); err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			break
		}
	}
	err = db.View(ctx, func(tx store.Tx) error {
		h, err := tx.OutboxHorizon()
		if err != nil {
			return err
		}
		if len(recs) != 1 || recs[0].Seq <= 9 || lines[0].Seq != 9 || !h.Equal(horizon) {
			t.Errorf("outbox %+v, ledger Seq %d, horizon %s: want a Seq above 9, 9, %s", recs, lines[0].Seq, h, horizon)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestImporter_EveryColumn: the importer writes every column of every
// table of the schema but the generated ones (and schema_version and meta,
// which are not records): a migration that adds a column or a table must
// teach the importer to fill it.
func TestImporter_EveryColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newEmptySchema(t)
	db := mustOpen(t, dsn, nil)
	im := importer(t, db, store.ImportOptions{})
	written := map[string]map[string]bool{}
	for _, table := range postgres.ImportColumns(im) {
		written[table.Table] = map[string]bool{}
		for _, c := range table.Columns {
			written[table.Table][c] = true
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	type column struct {
		Table, Column string
		Generated     bool
	}
	q, err := conn.Query(ctx, `SELECT table_name, column_name, is_generated = 'ALWAYS' FROM information_schema.columns
		WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pgx.CollectRows(q, pgx.RowToStructByPos[column])
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("the schema has no columns")
	}
	for _, c := range rows {
		switch {
		case c.Table == "schema_version" || c.Table == "meta" || c.Generated:
		case written[c.Table] == nil:
			t.Errorf("table %s is not copied: import.go must write it", c.Table)
		case !written[c.Table][c.Column]:
			t.Errorf("column %s.%s is not copied: import.go must write it", c.Table, c.Column)
		}
	}
}

// BenchmarkImport copies a bbolt store of 2,000 captured payments (a
// payment, 3 steps, an inbox event and its processed id, an outbox record,
// 2 deliveries, a posting of 2 lines, an idempotency key and a charge:
// 13 records each) into an empty schema, and reports records/s.
func BenchmarkImport(b *testing.B) {
	const payments = 2000
	src := bolttest.MustOpen(b, nil)
	ctx := context.Background()
	err := src.Update(ctx, func(tx store.Tx) error {
		now := tx.Now()
		for i := range payments {
			id := fmt.Sprintf("pay_01KB%022d", i)
			p := pay.Payment{ID: id, OrderID: fmt.Sprint("o-", i), Amount: 1000, Currency: "EUR", Provider: "mock",
				Customer: pay.Customer{ID: "cus_1", Email: "c@example.com"}, Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now}
			if err := tx.InsertPayment(p); err != nil {
				return err
			}
			p.Status, p.Version, p.ProviderRef = pay.Captured, 2, "psp_"+id
			if err := tx.UpdatePayment(p, 1); err != nil {
				return err
			}
			for v := range 3 {
				if err := tx.AppendStep(pay.Step{PaymentID: id, Source: pay.SourceSync, Kind: pay.StepTransition, Version: uint64(v + 1)}); err != nil {
					return err
				}
			}
			ev := "evt_psp_" + id
			if _, err := tx.PutInbox(pay.InboxEvent{Provider: "mock", EventID: ev, PaymentID: id, Status: pay.Captured, Body: []byte(`{"id":"` + ev + `"}`)}); err != nil {
				return err
			}
			if err := tx.MarkProcessed("mock", ev); err != nil {
				return err
			}
			evt := fmt.Sprintf("evt_01KB%022d", i)
			if err := tx.AppendOutbox(pay.OutboxRecord{ID: evt, Type: "payment.captured", PaymentID: id, Status: pay.Captured, Amount: 1000, Currency: "EUR"}); err != nil {
				return err
			}
			for j, eff := range []string{pay.EffectLoyalty, pay.EffectWebhook} {
				d := pay.Delivery{ID: fmt.Sprintf("dlv_01KB%021d%d", i, j), Effect: eff, EventID: evt, EventSeq: uint64(i + 1), PaymentID: id, State: pay.DeliveryDone}
				if eff == pay.EffectWebhook {
					d.Endpoint = "ep_1"
				}
				if err := tx.InsertDelivery(d); err != nil {
					return err
				}
			}
			if err := tx.AppendLedger([]pay.LedgerEntry{{PaymentID: id, EventID: evt, Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1000},
				{PaymentID: id, EventID: evt, Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1000}}); err != nil {
				return err
			}
			if err := tx.PutIdemKey(pay.IdemRecord{Key: "create:" + id, Fingerprint: "ab", State: pay.IdemDone, PaymentID: id, StatusCode: 201, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
			if err := tx.PutPSPCharge(store.PSPCharge{Key: "charge-" + id, PaymentID: id, ProviderRef: "psp_" + id, Amount: 1000, Currency: "EUR", Status: pay.Captured, Calls: 1}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	records, err := src.ExportSize(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		db := mustOpen(b, newEmptySchema(b), nil)
		im, err := db.NewImporter(ctx, store.ImportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := src.Export(ctx, im); err != nil {
			b.Fatal(err)
		}
		if err := im.Finish(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = im.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(records), "records")
}
