package bolt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/internal/testkit/filltest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

var _ store.ExportSink = (*filltest.Records)(nil)

// exported maps each bucket that holds records to the number of records
// of its family in an export (timeline: the number of payments with
// steps); every other bucket is in indexBuckets.
func exported(r *filltest.Records) map[string]int {
	timelines := map[string]bool{} // one value per payment, with its steps
	for _, s := range r.Steps {
		timelines[s.PaymentID] = true
	}
	return map[string]int{
		"payments": len(r.Payments), "timeline": len(timelines), "inbox": len(r.Inbox), "processed_by_time": len(r.ProcessedIDs),
		"leases": len(r.Leases), "outbox": len(r.OutboxRecords), "deliveries": len(r.Deliveries), "ledger": len(r.Ledger),
		"balances": len(r.Balances), "review": len(r.ReviewItems), "idempotency_keys": len(r.IdemKeys),
		"customers": len(r.Customers), "effects": len(r.Effects), "webhook_endpoints": len(r.Endpoints),
		"psp_answers": len(r.PSPAnswers), "psp_charges": len(r.PSPCharges), "refunds": len(r.Refunds), "disputes": len(r.Disputes),
		"settlements": len(r.Settlements), "recon_runs": len(r.ReconRuns),
	}
}

// indexBuckets are derived from the records (a backend rebuilds them), or
// hold the single values that ExportSink.Counters carries (meta).
// processed_by_time holds every processed id (in an export, ProcessedIDs);
// processed, those of them whose event is not in the inbox.
var indexBuckets = []string{
	"meta", "payments_by_status", "payments_by_created", "payments_by_order", "payments_by_ref",
	"inbox_by_payment", "inbox_pending", "processed", "leases_in_force", "outbox_by_payment",
	"deliveries_due", "deliveries_open", "deliveries_by_state", "review_by_created", "idempotency_keys_by_expiry",
	"refunds_by_payment", "refunds_by_ref", "refunds_pending", "disputes_by_payment", "disputes_by_due",
	"settlements_by_payment",
}

// fillStart is the time of the stores that export fills.
var fillStart = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)

// export fills a new store with filltest.Fill at start and exports it.
func export(t *testing.T, start time.Time) (*bolt.DB, *filltest.Records) {
	t.Helper()
	clock := storetest.NewClock(start)
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	ctx := context.Background()
	if err := filltest.Fill(ctx, db); err != nil {
		t.Fatal(err)
	}
	var r filltest.Records
	if err := db.Export(ctx, &r); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return db, &r
}

// TestDB_Export: an export holds every record of the file: as many of each
// family as its bucket holds keys (every bucket of the file is either a
// record family or an index of one), each equal to what the Tx methods
// read (storetest.ReadDump, filltest.ReadExtra), the orphans and the
// processed id without an event included, and the counters with the
// outbox Seq past the purged record.
func TestDB_Export(t *testing.T) {
	t.Parallel()
	db, r := export(t, fillStart)
	ctx := context.Background()

	// Every bucket is accounted for, and each family is complete.
	counts := exported(r)
	err := bolt.BoltDB(db).View(func(btx *bbolt.Tx) error {
		return btx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			n, ok := counts[string(name)]
			switch {
			case slices.Contains(indexBuckets, string(name)):
			case !ok:
				t.Errorf("bucket %s is neither exported nor an index: DB.Export must copy its records", name)
			case b.Stats().KeyN != n:
				t.Errorf("bucket %s holds %d records, the export %d", name, b.Stats().KeyN, n)
			case n == 0:
				t.Errorf("bucket %s is empty: filltest.Fill must write some of its records", name)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}

	if n, err := db.ExportSize(ctx); err != nil || n != r.Len() {
		t.Errorf("ExportSize=%d, %v; the export has %d records", n, err, r.Len())
	}

	// Each record as the Tx methods read it.
	d, err := storetest.ReadDump(ctx, db, r.Keys())
	if err != nil {
		t.Fatal(err)
	}
	x, err := filltest.ReadExtra(ctx, db, r)
	if err != nil {
		t.Fatal(err)
	}
	var steps []pay.Step
	for _, p := range d.Payments {
		steps = append(steps, d.Steps[p.ID]...)
	}
	var deliveries []pay.Delivery
	for _, s := range []string{pay.DeliveryPending, pay.DeliveryDone, pay.DeliveryDead} {
		deliveries = append(deliveries, d.Deliveries[s]...)
	}
	idem, customers, effects, endpoints := mapped(r.IdemKeys, func(k pay.IdemRecord) string { return k.Key }),
		mapped(r.Customers, func(c store.CustomerAccount) string { return c.ID }),
		mapped(r.Effects, func(e store.EffectRecord) string { return e.Key }),
		mapped(r.Endpoints, func(e store.WebhookEndpoint) string { return e.ID })
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"payments", r.Payments, d.Payments},
		{"steps", r.Steps, steps},
		{"inbox", mapped(r.Inbox, func(e pay.InboxEvent) string { return e.Provider + "/" + e.EventID }), x.Inbox},
		{"leases", mapped(r.Leases, func(l pay.Lease) string { return l.PaymentID }), x.Leases},
		{"outbox", r.OutboxRecords, d.Outbox},
		{"deliveries", r.Deliveries, deliveries},
		{"ledger", r.Ledger, x.Ledger},
		{"balances", r.Balances, d.Balances},
		{"review", r.ReviewItems, d.Review},
		{"idempotency keys", idem, d.IdemKeys},
		{"customers", customers, d.Customers},
		{"effects", effects, d.Effects},
		{"endpoints", endpoints, d.Endpoints},
		{"psp answers", mapped(r.PSPAnswers, func(a pay.PSPAnswer) string { return a.PaymentID }), x.PSPAnswers},
		{"psp charges", mapped(r.PSPCharges, func(c store.PSPCharge) string { return c.Key }), x.PSPCharges},
		{"refunds", r.Refunds, flat(d.Payments, x.Refunds)},
		{"disputes", r.Disputes, flat(d.Payments, x.Disputes)},
	} {
		if got, want := asJSON(t, c.got), asJSON(t, c.want); got != want {
			t.Errorf("%s:\n got  %s\n want %s", c.what, got, want)
		}
	}

	// The records a list method would not have found.
	var orphans, processed []string
	for _, e := range r.Inbox {
		if e.PaymentID == "" {
			orphans = append(orphans, e.EventID)
		}
	}
	for _, p := range r.ProcessedIDs {
		if p.At.IsZero() || !x.Processed[p.Provider+"/"+p.EventID] {
			t.Errorf("processed %+v: no time, or not processed", p)
		}
		processed = append(processed, p.Provider+"/"+p.EventID)
	}
	if got, want := orphans, []string{"evt_orphan_1", "evt_orphan_2"}; !slices.Equal(got, want) {
		t.Errorf("orphan events=%v, want %v", got, want)
	}
	if got, want := processed, []string{"mock/evt_psp_1", "stripe/evt_never_stored", "standard/evt_orphan_1"}; !slices.Equal(got, want) {
		t.Errorf("processed=%v, want %v", got, want)
	}

	// The counters: four outbox records were appended and the first
	// purged, two postings of two lines each.
	if r.Single == nil {
		t.Fatal("no counters")
	}
	if got, want := *r.Single, (filltest.Counters{OutboxSeq: 4, LedgerSeq: 4, RippleCursor: 3, OutboxHorizon: d.Horizon}); got != want {
		t.Errorf("counters=%+v, want %+v", got, want)
	}
	if d.Horizon.IsZero() || len(r.OutboxRecords) != 3 || r.OutboxRecords[0].Seq != 2 {
		t.Errorf("horizon %s, outbox %d records from Seq %d: want a horizon and the first record purged", d.Horizon, len(r.OutboxRecords), r.OutboxRecords[0].Seq)
	}
}

// TestDB_ExportSource: two exports of an unchanged file have the same
// source; a write changes it, and so do other records. (Two files that
// hold the same records byte for byte share their source, which is
// harmless: resuming a copy of one with the other copies the same.)
func TestDB_ExportSource(t *testing.T) {
	t.Parallel()
	db, first := export(t, fillStart)
	ctx := context.Background()
	var again filltest.Records
	if err := db.Export(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if first.Source != again.Source || first.Source == 0 {
		t.Fatalf("sources %x and %x of an unchanged file, want equal and set", first.Source, again.Source)
	}
	if err := db.Update(ctx, func(tx store.Tx) error {
		return tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_9", Points: 1})
	}); err != nil {
		t.Fatal(err)
	}
	var after filltest.Records
	if err := db.Export(ctx, &after); err != nil {
		t.Fatal(err)
	}
	_, other := export(t, fillStart.Add(time.Second)) // the same history an instant later: other records
	if after.Source == first.Source || other.Source == first.Source {
		t.Fatalf("source after a write %x, of another file %x: want both unlike %x", after.Source, other.Source, first.Source)
	}
}

// TestDB_ExportSinkError: an error of the sink ends the export with it,
// naming the family.
func TestDB_ExportSinkError(t *testing.T) {
	t.Parallel()
	db, _ := export(t, fillStart)
	err := db.Export(context.Background(), failingSink{&filltest.Records{}})
	if err == nil || err.Error() != "export timeline: sink refused step 1 of "+filltest.PaymentIDs[2] {
		t.Fatalf("Export=%v, want the sink's error", err)
	}
}

// failingSink refuses the first step.
type failingSink struct{ *filltest.Records }

func (f failingSink) Step(s pay.Step) error {
	return fmt.Errorf("sink refused step %d of %s", s.Seq, s.PaymentID)
}

// flat concatenates the lists of byPayment in the order of ps.
func flat[T any](ps []pay.Payment, byPayment map[string][]T) []T {
	var out []T
	for _, p := range ps {
		out = append(out, byPayment[p.ID]...)
	}
	return out
}

// mapped indexes xs by key.
func mapped[T any](xs []T, key func(T) string) map[string]T {
	m := map[string]T{}
	for _, x := range xs {
		m[key(x)] = x
	}
	return m
}

// asJSON prints v for a comparison.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
