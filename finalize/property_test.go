package finalize_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// propState is what the properties look at after each observation.
type propState struct {
	p      pay.Payment
	steps  []pay.Step
	outbox []pay.OutboxRecord
}

func readProp(t *rapid.T, db store.Store, id string) propState {
	var s propState
	err := db.View(context.Background(), func(tx store.Tx) error {
		var err error
		if s.p, err = tx.Payment(id); err != nil {
			return err
		}
		if s.steps, err = tx.Steps(id); err != nil {
			return err
		}
		s.outbox, err = tx.OutboxForPayment(id)
		s.outbox = statusRecords(s.outbox)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var propSources = []pay.Source{pay.SourceSync, pay.SourceReport, pay.SourceWebhook, pay.SourceSweeper, pay.SourceReview}

// TestFinalize_Properties applies random sequences of observations from
// random sources (with provider data, secrets, expected versions, webhook
// event ids that are sometimes redelivered, and current or stale lease
// tokens) to payments that start in any status, through Finalize on a real
// store, and checks after every step:
//
//   - a terminal status is never left, except captured → refunded;
//   - each real transition appends exactly one outbox record, and at the end
//     the outbox and the transition steps of the timeline match one to one;
//   - the client view never shows a client secret or redirect URL outside
//     created, processing and requires_action, and a payment that becomes
//     terminal keeps no secret;
//   - versions go up by exactly one per write, Flipped is true exactly when
//     the status changed, and the result is the committed record;
//   - a redelivered event, a stale lease token and an expected version
//     above the stored one (which the payment never had) change nothing
//     at all;
//   - a version conflict is reported exactly when the expected version is
//     below the stored one;
//   - the ledger balances per currency.
//
// Iterations: rapid's default of 100 sequences (20 with -short), each of up
// to 24 observations; -rapid.checks=N runs more. Every observation is a
// committed (fsynced) transaction, which is what bounds the sizes.
func TestFinalize_Properties(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Add(int64(time.Second))).UTC() }
	db := bolttest.MustOpen(t, &bolt.Options{Now: now})
	f := finalize.New(db)
	ctx := context.Background()

	var sequences, observations atomic.Int64
	t.Cleanup(func() {
		t.Logf("%d observations in %d sequences", observations.Load(), sequences.Load())
	})
	rapid.Check(t, func(rt *rapid.T) {
		sequences.Add(1)
		// A payment in any status, with secrets stored whatever the status:
		// the view must hide them where the status says so.
		start := rapid.SampledFrom(pay.Statuses).Draw(rt, "start")
		p := pay.Payment{
			ID: ids.Payment(now()), OrderID: "prop", Amount: rapid.Int64Range(1, 1_000_000).Draw(rt, "amount"),
			Currency: rapid.SampledFrom([]string{"EUR", "USD"}).Draw(rt, "currency"), Provider: "standard",
			Status: start, Version: 1, ClientSecret: "cs_seed", RedirectURL: "https://psp.invalid/seed",
			CreatedAt: now(), UpdatedAt: now(),
		}
		if err := db.Update(ctx, func(tx store.Tx) error { return tx.InsertPayment(p) }); err != nil {
			rt.Fatal(err)
		}
		var events []string // webhook events processed so far
		flips := 0
		n := rapid.IntRange(1, 24).Draw(rt, "observations")
		for i := range n {
			before := readProp(rt, db, p.ID)
			obs := pay.Observation{
				PaymentID:    p.ID,
				Source:       rapid.SampledFrom(propSources).Draw(rt, "source"),
				Status:       rapid.SampledFrom(pay.Statuses).Draw(rt, "status"),
				ProviderRef:  rapid.SampledFrom([]string{"", "", "a", "b"}).Draw(rt, "ref"),
				ClientSecret: rapid.SampledFrom([]string{"", "cs_a", "cs_b"}).Draw(rt, "secret"),
				RedirectURL:  rapid.SampledFrom([]string{"", "https://psp.invalid/a"}).Draw(rt, "redirect"),
			}
			if obs.ProviderRef != "" {
				// References are unique per provider: one of this payment's own.
				obs.ProviderRef = "psp_" + obs.ProviderRef + "_" + p.ID
			}
			if rapid.Bool().Draw(rt, "has_expected") {
				obs.ExpectedVersion = rapid.Uint64Range(1, before.p.Version+1).Draw(rt, "expected")
			}
			redelivered := false
			if obs.Source == pay.SourceWebhook {
				obs.Provider = "standard"
				if len(events) > 0 && rapid.IntRange(0, 3).Draw(rt, "redeliver") == 0 {
					obs.EventID = rapid.SampledFrom(events).Draw(rt, "event")
					redelivered = true
				} else {
					obs.EventID = fmt.Sprintf("evt_%s_%d", p.ID, i)
				}
			}

			// Sometimes under a lease, whose token may already be stale.
			var leased pay.Lease
			stale := false
			if obs.Source != pay.SourceReport && rapid.IntRange(0, 3).Draw(rt, "leased") == 0 {
				err := db.Update(ctx, func(tx store.Tx) error {
					var err error
					leased, err = tx.AcquireLease(p.ID, "prop", 30*time.Second)
					return err
				})
				if err != nil {
					rt.Fatal(err)
				}
				obs.LeaseToken = leased.Token
				if leased.Token > 1 && rapid.IntRange(0, 3).Draw(rt, "stale_token") == 0 {
					obs.LeaseToken, stale = leased.Token-1, true
				}
			}

			observations.Add(1)
			res, err := f.Finalize(ctx, obs)
			if leased.Token != 0 {
				if err := db.Update(ctx, func(tx store.Tx) error { return tx.ReleaseLease(p.ID, leased.Token) }); err != nil {
					rt.Fatal(err)
				}
			}
			after := readProp(rt, db, p.ID)

			// A processed event, a stale token or a version the payment
			// never had changes nothing.
			neverHad := obs.ExpectedVersion > before.p.Version
			switch {
			case stale && !redelivered:
				if got, want := pay.ErrorCode(err), pay.ELEASELOST; got != want {
					rt.Fatalf("stale lease token: ErrorCode=%q (%v), want %s", got, err, want)
				}
			case neverHad && !redelivered:
				if got, want := pay.ErrorCode(err), pay.EINVALID; got != want {
					rt.Fatalf("expected version %d above the stored %d: ErrorCode=%q (%v), want %s", obs.ExpectedVersion, before.p.Version, got, err, want)
				}
			case err != nil:
				rt.Fatalf("Finalize(%+v): %v", obs, err)
			}
			if err == nil && obs.EventID != "" && !redelivered {
				events = append(events, obs.EventID) // processed: later uses are redeliveries
			}
			if err != nil || redelivered {
				if after.p != before.p || len(after.steps) != len(before.steps) || len(after.outbox) != len(before.outbox) {
					rt.Fatalf("observation changed the payment (err=%v, redelivered=%v): %v -> %v, %d -> %d steps",
						err, redelivered, before.p, after.p, len(before.steps), len(after.steps))
				}
				continue
			}

			// The result is the committed record.
			if res.Payment != after.p {
				rt.Fatalf("Result.Payment=%v, stored %v", res.Payment, after.p)
			}
			// Terminal statuses are left only by a refund of a capture.
			from, to := before.p.Status, after.p.Status
			if from.Terminal() && to != from && !(from == pay.Captured && to == pay.Refunded) {
				rt.Fatalf("left terminal status: %s -> %s", from, to)
			}
			// Versions: +1 per write, never more; Flipped iff the status changed.
			switch d := after.p.Version - before.p.Version; {
			case d > 1:
				rt.Fatalf("version jumped %d -> %d", before.p.Version, after.p.Version)
			case to != from && d != 1:
				rt.Fatalf("status changed %s -> %s without a new version", from, to)
			}
			if got, want := res.Flipped, to != from; got != want {
				rt.Fatalf("Flipped=%v for %s -> %s", got, from, to)
			}
			if res.Flipped {
				flips++
			}
			// One outbox record per real transition, none otherwise.
			added := len(after.outbox) - len(before.outbox)
			if want := map[bool]int{true: 1, false: 0}[res.Flipped]; added != want {
				rt.Fatalf("%d outbox records for %s -> %s (flipped=%v), want %d", added, from, to, res.Flipped, want)
			}
			// The conflict flag says whether the expected version was stale.
			if got, want := res.Conflict, obs.ExpectedVersion != 0 && obs.ExpectedVersion != before.p.Version; got != want {
				rt.Fatalf("Conflict=%v with expected %d, stored %d", got, obs.ExpectedVersion, before.p.Version)
			}
			// No secret leaves a payment outside created, processing and
			// requires_action, conflict or not.
			v := finalize.NewView(res.Payment)
			if _, ok := v.ClientSecret(); ok && !v.Status.ShowsSecrets() {
				rt.Fatalf("view of a %s payment shows its client secret", v.Status)
			}
			if _, ok := v.RedirectURL(); ok && !v.Status.ShowsSecrets() {
				rt.Fatalf("view of a %s payment shows its redirect URL", v.Status)
			}
			if res.Flipped && to.Terminal() && (after.p.ClientSecret != "" || after.p.RedirectURL != "") {
				rt.Fatalf("payment became %s and kept its secrets", to)
			}
		}

		// The whole timeline against the outbox: one record per transition.
		final := readProp(rt, db, p.ID)
		var transitions []pay.Step
		last := uint64(1)
		for _, s := range final.steps {
			if s.Kind == pay.StepTransition {
				transitions = append(transitions, s)
			}
			if s.Wrote() && s.Kind != pay.StepCreated {
				if s.Version != last+1 {
					rt.Fatalf("timeline writes version %d after %d", s.Version, last)
				}
				last = s.Version
			}
		}
		if last != final.p.Version {
			rt.Fatalf("timeline ends at version %d, payment at %d", last, final.p.Version)
		}
		if got, want := len(final.outbox), len(transitions); got != want || got != flips {
			rt.Fatalf("%d outbox records, %d transition steps, %d flips", got, want, flips)
		}
		for i, r := range final.outbox {
			s := transitions[i]
			if r.Version != s.Version || r.From != s.From || r.Status != s.To {
				rt.Fatalf("outbox record %d (%s -> %s v%d) does not match step (%s -> %s v%d)",
					i, r.From, r.Status, r.Version, s.From, s.To, s.Version)
			}
		}

		// The ledger balances per currency.
		var bal []pay.Balance
		if err := db.View(ctx, func(tx store.Tx) error {
			var err error
			bal, err = tx.LedgerBalances()
			return err
		}); err != nil {
			rt.Fatal(err)
		}
		sum := map[string]int64{}
		for _, b := range bal {
			sum[b.Currency] += b.Amount
		}
		for cur, s := range sum {
			if s != 0 {
				rt.Fatalf("ledger off by %d %s", s, cur)
			}
		}
	})
}
