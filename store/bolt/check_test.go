package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// oneDelivery opens a new database holding one pending delivery, and
// returns it with the delivery.
func oneDelivery(t *testing.T) (*bolt.DB, pay.Delivery) {
	t.Helper()
	db := open(t, filepath.Join(t.TempDir(), "paystate.db"), nil)
	d := pay.Delivery{
		ID: "dlv_1", Effect: pay.EffectRetention, EventID: "evt_1", EventType: "payment.captured", EventSeq: 1,
		PaymentID: "pay_1", State: pay.DeliveryPending,
	}
	if err := db.Update(context.Background(), func(tx store.Tx) error { return tx.InsertDelivery(d) }); err != nil {
		t.Fatal(err)
	}
	return db, d
}

// TestDB_CheckDeliveries: Check finds a pending delivery whose due entry
// is gone, as it finds a payment without its index entries.
func TestDB_CheckDeliveries(t *testing.T) {
	t.Parallel()
	db, d := oneDelivery(t)
	if err := db.Check(); err != nil {
		t.Fatalf("Check of a sound database: %v", err)
	}

	err := bolt.BoltDB(db).Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bolt.BucketDeliveriesDue)
		k, _ := b.Cursor().First()
		if k == nil {
			return errors.New("empty due index")
		}
		return b.Delete(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Check()
	if err == nil {
		t.Fatal("Check of a damaged delivery index found nothing")
	}
	if !strings.Contains(err.Error(), d.ID) || !strings.Contains(err.Error(), "deliveries_due") {
		t.Fatalf("Check error %q does not name delivery %s and deliveries_due", err, d.ID)
	}
}

// TestDB_CheckDamagedID: a delivery record whose payment id is an empty
// byte string (a damaged value: ids are stored as 17 bytes or as text) is
// reported by Check, naming the bucket, instead of panicking in the
// decoder.
func TestDB_CheckDamagedID(t *testing.T) {
	t.Parallel()
	db, _ := oneDelivery(t)
	err := bolt.BoltDB(db).Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket([]byte("deliveries"))
		k, _ := b.Cursor().First()
		if k == nil {
			return errors.New("no delivery")
		}
		// A map of one entry: field 8 (PaymentID), an empty byte string.
		return b.Put(k, []byte{0xa1, 0x08, 0x40})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Check()
	if err == nil {
		t.Fatal("Check of a delivery with a damaged payment id found nothing")
	}
	if !strings.Contains(err.Error(), "deliveries") || !strings.Contains(err.Error(), "id of 0 bytes") {
		t.Fatalf("Check error %q does not name deliveries and the damaged id", err)
	}
}

// TestDB_CheckClosed: Check of a closed database is EUNAVAILABLE, as View
// and Update are, which is how bolttest.MustOpen tells a database that a
// test closed itself.
func TestDB_CheckClosed(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	err := db.Check()
	if got, want := pay.ErrorCode(err), pay.EUNAVAILABLE; got != want {
		t.Fatalf("Check after Close: error %v: code=%q, want %q", err, got, want)
	}
}
