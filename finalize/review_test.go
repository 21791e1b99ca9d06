package finalize_test

import (
	"context"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// TestQueueReview_Precedence: the sweeper's unresolved item adds nothing
// to a payment queued for another reason; a conflicting_terminal item
// replaces an unresolved one (which DropSettled would otherwise take off
// the queue once the payment is final) and is recorded by the anomaly step
// alone.
func TestQueueReview_Precedence(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	ctx := context.Background()
	queue := func(item pay.ReviewItem) bool {
		t.Helper()
		var added bool
		if err := db.Update(ctx, func(tx store.Tx) (err error) {
			added, err = finalize.QueueReview(tx, item, pay.SourceSweeper)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return added
	}

	t.Run("UnresolvedAfterOther", func(t *testing.T) {
		seed(t, db, "pay_u", pay.FinalizePending)
		if !queue(pay.ReviewItem{PaymentID: "pay_u", Reason: pay.ReasonInboxExhausted, EventID: "evt_u"}) {
			t.Fatal("first item not added")
		}
		if queue(pay.ReviewItem{PaymentID: "pay_u", Reason: pay.ReasonUnresolved, Note: "still open"}) {
			t.Fatal("unresolved replaced the item")
		}
		s := snap(t, db, "pay_u", "", "")
		if it := reviewOf(t, s, "pay_u"); it.Reason != pay.ReasonInboxExhausted {
			t.Fatalf("review item %+v, want inbox_exhausted kept", it)
		}
		if got, want := len(s.steps), 1; got != want {
			t.Fatalf("steps=%d, want %d: an unresolved item for a queued payment writes nothing", got, want)
		}
	})

	t.Run("ConflictingTerminalReplacesUnresolved", func(t *testing.T) {
		seed(t, db, "pay_c", pay.Captured)
		if !queue(pay.ReviewItem{PaymentID: "pay_c", Reason: pay.ReasonUnresolved, Note: "the PSP does not answer"}) {
			t.Fatal("unresolved not added")
		}
		res, err := finalize.New(db).Finalize(ctx, pay.Observation{PaymentID: "pay_c", Source: pay.SourceWebhook, Status: pay.Failed, Provider: "mock", EventID: "evt_c"})
		if err != nil || !res.Anomaly {
			t.Fatalf("res=%+v err=%v, want an anomaly", res, err)
		}
		s := snap(t, db, "pay_c", "mock", "evt_c")
		if it := reviewOf(t, s, "pay_c"); it.Reason != pay.ReasonConflictingTerminal || it.EventID != "evt_c" {
			t.Fatalf("review item %+v, want conflicting_terminal with evt_c", it)
		}
		if got, want := len(s.steps), 2; got != want || s.steps[1].Kind != pay.StepAnomaly {
			t.Fatalf("steps=%+v, want the review step and the anomaly step only", s.steps)
		}
		var dropped bool
		if err := db.Update(ctx, func(tx store.Tx) (err error) { _, dropped, err = finalize.DropSettled(tx, "pay_c"); return err }); err != nil {
			t.Fatal(err)
		}
		if dropped {
			t.Fatal("DropSettled took the conflicting_terminal item off the queue")
		}
	})
}

// TestReview_Resolve: the state machine decides a resolution; an orphan
// can only be dismissed; a held lease defers it; each refusal changes
// nothing.
func TestReview_Resolve(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	ctx := context.Background()
	r := &finalize.Review{Finalizer: finalize.New(db), Leases: &finalize.Leases{Store: db, Holder: "review", TTL: 30 * time.Second}}
	seed(t, db, "pay_f", pay.Failed)
	seed(t, db, "pay_p", pay.FinalizePending)
	if err := db.Update(ctx, func(tx store.Tx) error {
		for _, it := range []pay.ReviewItem{
			{PaymentID: "pay_f", Reason: pay.ReasonConflictingTerminal},
			{PaymentID: "pay_p", Reason: pay.ReasonUnresolved},
			{ID: "orphan_mock_evt_o", Reason: pay.ReasonOrphan, Provider: "mock", EventID: "evt_o"},
		} {
			if _, err := finalize.QueueReview(tx, it, pay.SourceSweeper); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	queued := func() int {
		t.Helper()
		cases, err := r.Queue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(cases)
	}

	for _, tc := range []struct {
		name, id, status, note, code string
	}{
		{"NoNote", "pay_p", "captured", "", pay.EINVALID},
		{"OtherFinalOutcome", "pay_f", "captured", "x", pay.ECONFLICT},
		{"OlderStatus", "pay_f", "processing", "x", pay.ECONFLICT},
		{"OrphanWithStatus", "orphan_mock_evt_o", "captured", "x", pay.EINVALID},
		{"PaymentDismissed", "pay_p", finalize.StatusDismissed, "x", pay.EINVALID},
		{"UnknownStatus", "pay_p", "settled", "x", pay.EINVALID},
		{"UnknownItem", "pay_none", "captured", "x", pay.ENOTFOUND},
	} {
		if _, err := r.Resolve(ctx, tc.id, tc.status, tc.note); pay.ErrorCode(err) != tc.code {
			t.Errorf("%s: err=%v, want %s", tc.name, err, tc.code)
		}
	}
	if got, want := queued(), 3; got != want {
		t.Fatalf("queue=%d, want %d: a refused resolution changed it", got, want)
	}

	// Another holder has the lease: come back later.
	if err := db.Update(ctx, func(tx store.Tx) error { _, err := tx.AcquireLease("pay_p", "sweeper", 30*time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, "pay_p", "captured", "seen at the PSP"); pay.ErrorCode(err) != pay.ELEASEHELD {
		t.Fatalf("err=%v, want %s", err, pay.ELEASEHELD)
	}
	if got := snap(t, db, "pay_p", "", ""); got.p.Status != pay.FinalizePending {
		t.Fatalf("Status=%s, want unchanged", got.p.Status)
	}

	res, err := r.Resolve(ctx, "orphan_mock_evt_o", finalize.StatusDismissed, "test charge")
	if err != nil || !res.Dismissed {
		t.Fatalf("dismiss: res=%+v err=%v", res, err)
	}
	res, err = r.Resolve(ctx, "pay_f", "failed", "the PSP says failed")
	if err != nil || res.Payment.Status != pay.Failed {
		t.Fatalf("resolve with the current status: res=%+v err=%v", res, err)
	}
	if got, want := queued(), 1; got != want {
		t.Fatalf("queue=%d, want %d", got, want)
	}
}
