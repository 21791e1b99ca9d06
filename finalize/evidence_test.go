package finalize_test

import (
	"context"
	"strings"
	"testing"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// reviewOf returns the review item of a payment, failing if there is none.
func reviewOf(t *testing.T, s snapshot, id string) pay.ReviewItem {
	t.Helper()
	for _, r := range s.review {
		if r.PaymentID == id {
			return r
		}
	}
	t.Fatalf("payment %s is not on the review queue (%+v)", id, s.review)
	return pay.ReviewItem{}
}

// TestFinalize_AmountMismatch: an observation that reports another amount or
// currency than the payment's is not applied, whatever its source; the
// payment goes on the review queue with the evidence, the timeline records
// it and a webhook's event is processed in the same transaction.
func TestFinalize_AmountMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Amount", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		f := finalize.New(db)
		seed(t, db, "pay_amt", pay.Processing) // 1250 EUR
		res, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_amt", Source: pay.SourceWebhook, Status: pay.Captured,
			Provider: "mock", EventID: "evt_amt", Amount: 1, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.Rejected, pay.ReasonAmountMismatch; got != want {
			t.Fatalf("Rejected=%q, want %q", got, want)
		}
		if res.Flipped {
			t.Fatal("Flipped: the observation was applied")
		}
		s := snap(t, db, "pay_amt", "mock", "evt_amt")
		if s.p.Status != pay.Processing || s.p.Version != 1 || len(s.outbox) != 0 || len(s.ledger) != 0 {
			t.Fatalf("payment %s, %d outbox records, ledger %v: want it untouched", s.p, len(s.outbox), s.ledger)
		}
		if !s.handled {
			t.Fatal("event not recorded as processed: the inbox would retry it")
		}
		item := reviewOf(t, s, "pay_amt")
		if item.Reason != pay.ReasonAmountMismatch || item.EventID != "evt_amt" || item.Observed != pay.Captured {
			t.Fatalf("review item=%+v", item)
		}
		for _, want := range []string{"captured 0.01 EUR;", "is for 12.50 EUR", "evt_amt"} {
			if !strings.Contains(item.Note, want) {
				t.Fatalf("review note %q does not say %q", item.Note, want)
			}
		}
		if len(s.steps) != 1 || s.steps[0].Kind != pay.StepReview || s.steps[0].EventID != "evt_amt" || !strings.Contains(s.steps[0].Note, pay.ReasonAmountMismatch) {
			t.Fatalf("timeline=%+v, want one review step with the event", s.steps)
		}
	})

	t.Run("Currency", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		f := finalize.New(db)
		seed(t, db, "pay_cur", pay.Created)
		res, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_cur", Source: pay.SourceSync, Status: pay.Captured, Amount: 1250, Currency: "usd"})
		if err != nil {
			t.Fatal(err)
		}
		s := snap(t, db, "pay_cur", "", "")
		if res.Rejected != pay.ReasonAmountMismatch || s.p.Status != pay.Created {
			t.Fatalf("Rejected=%q, status %s: want amount_mismatch and no capture", res.Rejected, s.p.Status)
		}
		if item := reviewOf(t, s, "pay_cur"); !strings.Contains(item.Note, "USD") {
			t.Fatalf("note %q does not name the reported currency", item.Note)
		}
	})

	t.Run("SameAmountLowerCaseCurrency", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		f := finalize.New(db)
		seed(t, db, "pay_ok", pay.Processing)
		// Stripe sends currencies in lower case: eur is EUR.
		res, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_ok", Source: pay.SourceSweeper, Status: pay.Captured, Amount: 1250, Currency: "eur"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Flipped || res.Rejected != "" {
			t.Fatalf("res=%+v, want captured", res)
		}
		if s := snap(t, db, "pay_ok", "", ""); len(s.review) != 0 {
			t.Fatalf("review=%+v, want none", s.review)
		}
	})

	t.Run("RepeatWritesNothing", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		f := finalize.New(db)
		seed(t, db, "pay_rep", pay.FinalizePending)
		obs := pay.Observation{PaymentID: "pay_rep", Source: pay.SourceSweeper, Status: pay.Captured, Amount: 99, Currency: "EUR"}
		for range 3 {
			if res, err := f.Finalize(ctx, obs); err != nil || res.Rejected == "" {
				t.Fatalf("res=%+v err=%v", res, err)
			}
		}
		// A sweeper pass that learns nothing new writes nothing.
		if s := snap(t, db, "pay_rep", "", ""); len(s.steps) != 1 || len(s.review) != 1 {
			t.Fatalf("%d steps, %d review items after three equal observations, want 1 and 1", len(s.steps), len(s.review))
		}
	})
}

// TestFinalize_ProviderRefConflict: a PSP reference bound to another
// payment, or other than the one the payment has, is not applied and puts
// the payment on the review queue with both ids; it is not an error (so the
// inbox does not retry it forever).
func TestFinalize_ProviderRefConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("BoundToAnother", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		f := finalize.New(db)
		seed(t, db, "pay_owner", pay.Processing)
		seed(t, db, "pay_other", pay.Processing)
		if _, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_owner", Source: pay.SourceSync, Status: pay.Processing, ProviderRef: "psp_shared"}); err != nil {
			t.Fatal(err)
		}
		res, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_other", Source: pay.SourceWebhook, Status: pay.Captured,
			ProviderRef: "psp_shared", Provider: "mock", EventID: "evt_shared"})
		if err != nil {
			t.Fatalf("a reference bound to another payment must not be an error: %v", err)
		}
		if got, want := res.Rejected, pay.ReasonProviderRefConflict; got != want {
			t.Fatalf("Rejected=%q, want %q", got, want)
		}
		s := snap(t, db, "pay_other", "mock", "evt_shared")
		if s.p.Status != pay.Processing || s.p.ProviderRef != "" || !s.handled {
			t.Fatalf("payment %s ref %q handled=%v: want it untouched and the event processed", s.p, s.p.ProviderRef, s.handled)
		}
		item := reviewOf(t, s, "pay_other")
		if item.Reason != pay.ReasonProviderRefConflict || item.EventID != "evt_shared" || item.ProviderRef != "psp_shared" ||
			!strings.Contains(item.Note, "pay_owner") || !strings.Contains(item.Note, "pay_other") {
			t.Fatalf("review item=%+v, want both payment ids and the event", item)
		}
	})

	t.Run("OtherThanItsOwn", func(t *testing.T) {
		t.Parallel()
		db := bolttest.MustOpen(t, nil)
		f := finalize.New(db)
		seed(t, db, "pay_own", pay.Processing)
		if _, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_own", Source: pay.SourceSync, Status: pay.Processing, ProviderRef: "psp_1"}); err != nil {
			t.Fatal(err)
		}
		res, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_own", Source: pay.SourceReport, Status: pay.Failed, ProviderRef: "psp_2"})
		if err != nil {
			t.Fatal(err)
		}
		s := snap(t, db, "pay_own", "", "")
		if res.Rejected != pay.ReasonProviderRefConflict || s.p.Status != pay.Processing || s.p.ProviderRef != "psp_1" {
			t.Fatalf("Rejected=%q, payment %s ref %s: want the report refused", res.Rejected, s.p, s.p.ProviderRef)
		}
		if item := reviewOf(t, s, "pay_own"); !strings.Contains(item.Note, "psp_1") || !strings.Contains(item.Note, "psp_2") {
			t.Fatalf("note %q, want both references", item.Note)
		}
	})
}

// TestQueueReview: one function queues a review item with its timeline
// step; a payment already on the queue keeps its first item, and the new
// evidence goes into the timeline.
func TestQueueReview(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	ctx := context.Background()
	seed(t, db, "pay_q", pay.FinalizePending)
	queue := func(item pay.ReviewItem) bool {
		t.Helper()
		var added bool
		if err := db.Update(ctx, func(tx store.Tx) (err error) {
			added, err = finalize.QueueReview(tx, item, pay.SourceWebhook)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return added
	}
	if !queue(pay.ReviewItem{PaymentID: "pay_q", Reason: pay.ReasonUnresolved, Note: "first"}) {
		t.Fatal("first item not added")
	}
	if queue(pay.ReviewItem{PaymentID: "pay_q", Reason: pay.ReasonInboxExhausted, EventID: "evt_q", Note: "second"}) {
		t.Fatal("second item replaced the first")
	}
	s := snap(t, db, "pay_q", "", "")
	if len(s.review) != 1 || s.review[0].ID != "pay_q" || s.review[0].Reason != pay.ReasonUnresolved || s.review[0].CreatedAt.IsZero() {
		t.Fatalf("review=%+v, want the first item", s.review)
	}
	if len(s.steps) != 2 || s.steps[1].Kind != pay.StepReview || s.steps[1].EventID != "evt_q" || !strings.Contains(s.steps[1].Note, "inbox_exhausted: second") {
		t.Fatalf("steps=%+v, want two review steps, the second with the event", s.steps)
	}
	// An orphan has no payment: the item alone.
	if !queue(pay.ReviewItem{ID: "orphan_mock_evt_o", Reason: pay.ReasonOrphan, EventID: "evt_o"}) {
		t.Fatal("orphan not added")
	}
}
