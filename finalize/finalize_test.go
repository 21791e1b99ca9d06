package finalize_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seed stores a payment in status st at version 1.
func seed(t *testing.T, db store.Store, id string, st pay.Status) pay.Payment {
	t.Helper()
	p := pay.Payment{
		ID: id, OrderID: "order-" + id, Amount: 1250, Currency: "EUR",
		Customer: pay.Customer{ID: "cus_1", Email: "a@example.com"},
		Provider: "mock", Status: st, Version: 1, ClientSecret: "cs_secret", RedirectURL: "https://psp.invalid/3ds",
		CreatedAt: t0, UpdatedAt: t0,
	}
	if err := db.Update(context.Background(), func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
		t.Fatal(err)
	}
	return p
}

type snapshot struct {
	p       pay.Payment
	steps   []pay.Step
	outbox  []pay.OutboxRecord
	review  []pay.ReviewItem
	ledger  []pay.Balance
	handled bool
}

func snap(t *testing.T, db store.Store, id, provider, eventID string) snapshot {
	t.Helper()
	var s snapshot
	err := db.View(context.Background(), func(tx store.Tx) error {
		var err error
		if s.p, err = tx.Payment(id); err != nil {
			return err
		}
		if s.steps, err = tx.Steps(id); err != nil {
			return err
		}
		if s.outbox, err = tx.OutboxForPayment(id); err != nil {
			return err
		}
		s.outbox = statusRecords(s.outbox)
		if s.review, err = tx.ListReview(); err != nil {
			return err
		}
		if s.ledger, err = tx.LedgerBalances(); err != nil {
			return err
		}
		if eventID != "" {
			s.handled, err = tx.IsProcessed(provider, eventID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFinalize_EveryPair walks every (current, observed) status pair
// through Finalize on a real database and checks what was written.
func TestFinalize_EveryPair(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, &bolt.Options{Now: func() time.Time { return t0.Add(time.Minute) }})
	f := finalize.New(db)
	ctx := context.Background()
	for i, cur := range pay.Statuses {
		for j, obs := range pay.Statuses {
			id := fmt.Sprintf("pay_%02d_%02d", i, j)
			seed(t, db, id, cur)
			ev := "evt_" + id
			res, err := f.Finalize(ctx, pay.Observation{PaymentID: id, Source: pay.SourceWebhook, Status: obs, Provider: "mock", EventID: ev})
			if err != nil {
				t.Fatalf("%s→%s: %v", cur, obs, err)
			}
			s := snap(t, db, id, "mock", ev)
			d := pay.Decide(cur, obs)
			name := fmt.Sprintf("%s→%s", cur, obs)

			if got, want := res.Decision, d; got != want {
				t.Errorf("%s: Decision=%s, want %s", name, got, want)
			}
			if got, want := res.Flipped, d == pay.Apply; got != want {
				t.Errorf("%s: Flipped=%v, want %v", name, got, want)
			}
			wantStatus, wantVersion, wantOutbox := cur, uint64(1), 0
			if d == pay.Apply {
				wantStatus, wantVersion, wantOutbox = obs, 2, 1
			}
			if got, want := s.p.Status, wantStatus; got != want {
				t.Errorf("%s: stored Status=%s, want %s", name, got, want)
			}
			if got, want := s.p.Version, wantVersion; got != want {
				t.Errorf("%s: stored Version=%d, want %d", name, got, want)
			}
			if got, want := res.Payment.Version, wantVersion; got != want {
				t.Errorf("%s: result Version=%d, want %d", name, got, want)
			}
			if got, want := len(s.outbox), wantOutbox; got != want {
				t.Errorf("%s: outbox records=%d, want %d", name, got, want)
			} else if wantOutbox == 1 {
				if got, want := s.outbox[0].Type, "payment."+string(obs); got != want {
					t.Errorf("%s: outbox Type=%s, want %s", name, got, want)
				}
			}
			if !s.handled {
				t.Errorf("%s: event not recorded as processed", name)
			}
			if got, want := len(s.steps), 1; got != want {
				t.Fatalf("%s: steps=%d, want %d", name, got, want)
			}
			wantKind := map[pay.Decision]string{pay.Apply: pay.StepTransition, pay.Duplicate: pay.StepDuplicate, pay.Stale: pay.StepStale, pay.ConflictingTerminal: pay.StepAnomaly}[d]
			if got := s.steps[0].Kind; got != wantKind {
				t.Errorf("%s: step Kind=%s, want %s", name, got, wantKind)
			}
			if got, want := s.steps[0].EventID, ev; got != want {
				t.Errorf("%s: step EventID=%s, want %s", name, got, want)
			}
			inReview := false
			for _, r := range s.review {
				if r.PaymentID == id && r.Reason == pay.ReasonConflictingTerminal {
					inReview = true
					// The item says what was observed, from which event, against what.
					if want := fmt.Sprintf("stored %s, %s reported %s", cur, pay.SourceWebhook, obs); r.Observed != obs || r.EventID != ev || r.Note != want {
						t.Errorf("%s: review item Observed=%q EventID=%q Note=%q, want %q %q %q", name, r.Observed, r.EventID, r.Note, obs, ev, want)
					}
				}
			}
			if got, want := inReview, d == pay.ConflictingTerminal; got != want {
				t.Errorf("%s: on review queue=%v, want %v", name, got, want)
			}
			if got, want := res.Anomaly, d == pay.ConflictingTerminal; got != want {
				t.Errorf("%s: Anomaly=%v, want %v", name, got, want)
			}
			if got, want := res.Stale, d == pay.Stale; got != want {
				t.Errorf("%s: Stale=%v, want %v", name, got, want)
			}
			if s.p.Status.Terminal() && (s.p.ClientSecret != "" || s.p.RedirectURL != "") && d == pay.Apply {
				t.Errorf("%s: terminal payment still stores its secrets", name)
			}
		}
	}
}

func TestFinalize_DuplicateEvent(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	f := finalize.New(db)
	ctx := context.Background()
	seed(t, db, "pay_dup", pay.Processing)
	obs := pay.Observation{PaymentID: "pay_dup", Source: pay.SourceWebhook, Status: pay.Captured, Provider: "mock", EventID: "evt_1"}
	for i := range 3 {
		res, err := f.Finalize(ctx, obs)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.Flipped, i == 0; got != want {
			t.Fatalf("delivery %d: Flipped=%v, want %v", i, got, want)
		}
	}
	s := snap(t, db, "pay_dup", "mock", "evt_1")
	if got, want := len(s.steps), 1; got != want {
		t.Fatalf("steps=%d, want %d: a processed event must not touch the timeline again", got, want)
	}
	if got, want := len(s.outbox), 1; got != want {
		t.Fatalf("outbox=%d, want %d", got, want)
	}
	if got, want := s.p.Version, uint64(2); got != want {
		t.Fatalf("Version=%d, want %d", got, want)
	}
}

func TestFinalize_VersionConflict(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	f := finalize.New(db)
	ctx := context.Background()
	seed(t, db, "pay_vc", pay.Created)

	// The webhook wins the race.
	if _, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_vc", Source: pay.SourceWebhook, Status: pay.Captured, Provider: "mock", EventID: "evt_w"}); err != nil {
		t.Fatal(err)
	}
	// The sync answer read version 1 before the PSP call and says requires_action.
	res, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_vc", Source: pay.SourceSync, Status: pay.RequiresAction,
		ClientSecret: "cs_late", RedirectURL: "https://psp.invalid/late", ExpectedVersion: 1})
	if err != nil {
		t.Fatalf("a version conflict must not be an error: %v", err)
	}
	if !res.Conflict || !res.Stale || res.Flipped {
		t.Fatalf("res=%+v, want conflict and stale, not flipped", res)
	}
	if got, want := res.Payment.Status, pay.Captured; got != want {
		t.Fatalf("Status=%s, want %s", got, want)
	}
	v := finalize.NewView(res.Payment)
	if s, ok := v.ClientSecret(); ok || s != "" {
		t.Fatalf("client secret %q shown for a captured payment", s)
	}
	if u, ok := v.RedirectURL(); ok || u != "" {
		t.Fatalf("redirect URL %q shown for a captured payment", u)
	}
	s := snap(t, db, "pay_vc", "", "")
	kinds := []string{}
	for _, st := range s.steps {
		kinds = append(kinds, st.Kind)
	}
	if got, want := fmt.Sprint(kinds), fmt.Sprint([]string{pay.StepTransition, pay.StepConflict, pay.StepStale}); got != want {
		t.Fatalf("timeline=%s, want %s", got, want)
	}
}

func TestFinalize_LeaseFencing(t *testing.T) {
	t.Parallel()
	now := t0
	db := bolttest.MustOpen(t, &bolt.Options{Now: func() time.Time { return now }})
	f := finalize.New(db)
	ctx := context.Background()
	seed(t, db, "pay_l", pay.Processing)

	var old pay.Lease
	if err := db.Update(ctx, func(tx store.Tx) (err error) { old, err = tx.AcquireLease("pay_l", "a", 30*time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	// The lease runs out while its holder is slow; another worker takes it.
	now = now.Add(time.Minute)
	var cur pay.Lease
	if err := db.Update(ctx, func(tx store.Tx) (err error) { cur, err = tx.AcquireLease("pay_l", "b", 30*time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	if cur.Token <= old.Token {
		t.Fatalf("new token %d not above old %d", cur.Token, old.Token)
	}
	_, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_l", Source: pay.SourceWebhook, Status: pay.Failed, Provider: "mock", EventID: "evt_old", LeaseToken: old.Token})
	if got, want := pay.ErrorCode(err), pay.ELEASELOST; got != want {
		t.Fatalf("stale lease: code=%q, want %q", got, want)
	}
	s := snap(t, db, "pay_l", "mock", "evt_old")
	if s.p.Status != pay.Processing || s.p.Version != 1 || len(s.steps) != 0 || s.handled {
		t.Fatalf("a fenced-off write changed state: %+v", s)
	}
	res, err := f.Finalize(ctx, pay.Observation{PaymentID: "pay_l", Source: pay.SourceWebhook, Status: pay.Captured, Provider: "mock", EventID: "evt_new", LeaseToken: cur.Token})
	if err != nil || !res.Flipped {
		t.Fatalf("current lease: res=%+v err=%v", res, err)
	}
}

func TestFinalize_Ledger(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, nil)
	f := finalize.New(db)
	ctx := context.Background()
	seed(t, db, "pay_a", pay.Processing)
	seed(t, db, "pay_b", pay.Processing)
	for _, o := range []pay.Observation{
		{PaymentID: "pay_a", Source: pay.SourceSync, Status: pay.Captured},
		{PaymentID: "pay_b", Source: pay.SourceSync, Status: pay.Captured},
		{PaymentID: "pay_a", Source: pay.SourceSync, Status: pay.Refunded},
		{PaymentID: "pay_a", Source: pay.SourceWebhook, Status: pay.Refunded}, // duplicate: no second reversal
	} {
		if _, err := f.Finalize(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s := snap(t, db, "pay_a", "", "")
	sum := map[string]int64{}
	got := map[string]int64{}
	for _, b := range s.ledger {
		sum[b.Currency] += b.Amount
		got[b.Account] = b.Amount
	}
	if sum["EUR"] != 0 {
		t.Fatalf("ledger does not balance: EUR sum=%d", sum["EUR"])
	}
	if got, want := got[pay.AccountPSPReceivable], int64(1250); got != want {
		t.Fatalf("psp_receivable=%d, want %d (one capture left after the refund)", got, want)
	}
}

func TestView_Secrets(t *testing.T) {
	t.Parallel()
	for _, st := range pay.Statuses {
		v := finalize.NewView(pay.Payment{ID: "pay_x", Status: st, ClientSecret: "cs", RedirectURL: "https://r"})
		_, okS := v.ClientSecret()
		_, okR := v.RedirectURL()
		if want := st.ShowsSecrets(); okS != want || okR != want {
			t.Errorf("%s: secret shown=%v redirect shown=%v, want %v", st, okS, okR, want)
		}
	}
}

// statusRecords are the outbox records of status transitions; those of a
// refund or a dispute (a captured payment refunded in full settles its
// refunds, each with its payment.refund.succeeded) are left out, and
// checked by the refund tests.
func statusRecords(rs []pay.OutboxRecord) []pay.OutboxRecord {
	var out []pay.OutboxRecord
	for _, r := range rs {
		if r.RefundID == "" && r.DisputeID == "" {
			out = append(out, r)
		}
	}
	return out
}
