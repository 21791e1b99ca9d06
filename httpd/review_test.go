package httpd_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/storetest"
)

// faultStore is the real bbolt store whose transactions cannot remove a
// review item while failDelete is set: the storage error (or the crash)
// that strikes between a resolution and the removal of its item.
type faultStore struct {
	store.Store
	failDelete atomic.Bool
}

func (s *faultStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(faultTx{Tx: tx, s: s}) })
}

// faultTx is a transaction of faultStore.
type faultTx struct {
	store.Tx
	s *faultStore
}

func (tx faultTx) DeleteReview(id string) error {
	if tx.s.failDelete.Load() {
		return errors.New("delete review item: injected storage failure")
	}
	return tx.Tx.DeleteReview(id)
}

// TestServer_ResolveReviewAtomic: resolving a review item finalizes the
// payment and removes the item in one transaction. When the removal fails,
// the queue stays consistent: the item is still open and the payment
// unchanged, or the item is gone and the payment resolved — never a
// resolved payment whose item is still on the queue (the resolution used
// to commit first and remove the item in a second transaction).
func TestServer_ResolveReviewAtomic(t *testing.T) {
	t.Parallel()
	// The review routes of this server run on their own database, behind
	// faultStore.
	clock := storetest.NewClock(time.Now().UTC())
	db := bolttest.MustOpen(t, &bolt.Options{Now: clock.Now})
	fs := &faultStore{Store: db}
	fin := finalize.New(fs)
	d := newDashServerWith(t, func(s *httpd.Server) {
		s.Review = &finalize.Review{Finalizer: fin, Leases: &finalize.Leases{Store: fs, Holder: "review", TTL: 30 * time.Second}}
	})
	ctx := context.Background()

	// A payment whose PSP answer was lost, on the review queue.
	now := clock.Now()
	p := pay.Payment{ID: "pay_rev", OrderID: "o-rev", Amount: 1000, Currency: "EUR", Provider: "standard",
		Status: pay.FinalizePending, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := db.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertPayment(p); err != nil {
			return err
		}
		_, err := finalize.QueueReview(tx, pay.ReviewItem{PaymentID: p.ID, Reason: pay.ReasonUnresolved}, pay.SourceSweeper)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	state := func() (open bool, cur pay.Payment) {
		t.Helper()
		if err := db.View(ctx, func(tx store.Tx) error {
			_, err := tx.Review(p.ID)
			if open = err == nil; !open && pay.ErrorCode(err) != pay.ENOTFOUND {
				return err
			}
			cur, err = tx.Payment(p.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return open, cur
	}
	resolve := func() answer {
		return d.do("POST", "/v1/review/"+p.ID+"/resolve", "application/json", `{"status":"captured","note":"settled at the PSP"}`, nil)
	}

	fs.failDelete.Store(true)
	if a := resolve(); a.status == http.StatusOK {
		t.Fatalf("resolve with a failing removal: status=%d, want an error: %s", a.status, a.body)
	}
	switch open, cur := state(); {
	case open && cur.Status == p.Status && cur.Version == p.Version:
		// Still open, the payment as it was: the human retries.
	case !open && cur.Status == pay.Captured:
		// Done as a whole.
	default:
		t.Fatalf("after a failed removal: item open=%v, payment %s at version %d: want open with the payment unchanged (%s, %d) or gone with it captured",
			open, cur.Status, cur.Version, p.Status, p.Version)
	}

	fs.failDelete.Store(false)
	if a := resolve(); a.status != http.StatusOK {
		t.Fatalf("retry: status=%d: %s", a.status, a.body)
	}
	if open, cur := state(); open || cur.Status != pay.Captured {
		t.Fatalf("after the retry: item open=%v, payment %s: want the item gone and the payment captured", open, cur.Status)
	}
}
