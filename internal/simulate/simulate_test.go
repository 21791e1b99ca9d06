package simulate_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/paystate/paystate/internal/simulate"
)

// run runs a simulation, logs its table and fails the test unless every
// invariant held and every payment was made.
func run(t *testing.T, opts simulate.Options) (simulate.Report, string) {
	t.Helper()
	rep, err := simulate.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Log("\n" + out.String())
	if !rep.OK() {
		t.Fatalf("an invariant broke:\n%s", out.String())
	}
	if got, want := rep.Payments, opts.N; got != want {
		t.Fatalf("Payments=%d, want %d", got, want)
	}
	return rep, out.String()
}

// TestRun runs a small chaos simulation and checks its invariants and that
// the chaos actually happened.
func TestRun(t *testing.T) {
	n := 120
	if testing.Short() {
		n = 60
	}
	rep, out := run(t, simulate.Options{N: n, Concurrency: 4, Seed: 42})
	// The mock's lost answers (amounts ending in 04) must have been
	// corrected by the sweeper, and duplicates absorbed.
	if rep.DriftCorrected == 0 {
		t.Errorf("no drift corrected: the sweeper did not run against the lost answers")
	}
	if rep.DuplicatesAbsorbed == 0 {
		t.Errorf("no duplicates absorbed")
	}
	// Partial refunds raced each other, and the mock disputed (05).
	if rep.PartialRefunds == 0 || rep.Disputes == 0 {
		t.Errorf("partial refunds=%d disputes=%d: the money chaos did not happen", rep.PartialRefunds, rep.Disputes)
	}
	// Refunds of disputed payments and with null amounts were tried, and
	// refused.
	if rep.RefundsDisputed == 0 || rep.NullAmounts == 0 {
		t.Errorf("refunds refused as disputed=%d, null amounts refused=%d: the tries did not happen", rep.RefundsDisputed, rep.NullAmounts)
	}
	for _, row := range []string{"refunded or charged back more than captured", "refunds answered against the rules", "captures announced twice counted twice"} {
		if !strings.Contains(out, row) {
			t.Errorf("table lacks the row %q", row)
		}
	}
	if !strings.Contains(out, "every invariant held") {
		t.Errorf("table does not say the invariants held")
	}
}

// TestRunCheckout runs the checkout mode: Checkout Sessions completed
// paid, completed unpaid then async success or failure, expired by event,
// left to the sweeper or paid without an event, their session and
// PaymentIntent events duplicated and reordered; every invariant holds
// and every outcome was tried.
func TestRunCheckout(t *testing.T) {
	n := 90
	if testing.Short() {
		n = 48
	}
	rep, out := run(t, simulate.Options{Mode: simulate.ModeCheckout, N: n, Concurrency: 4, Seed: 34})
	for name, v := range map[string]int{
		"paid": rep.CheckoutPaid, "async succeeded": rep.CheckoutAsyncSucceeded, "async failed": rep.CheckoutAsyncFailed,
		"expired by event": rep.CheckoutExpired, "left open": rep.CheckoutLeftOpen, "paid without an event": rep.CheckoutPaidSilently,
	} {
		if v == 0 {
			t.Errorf("no session %s: the outcome was not tried", name)
		}
	}
	// Duplicates were absorbed, and the sweeper finalized the sessions
	// left to it.
	if rep.DuplicatesAbsorbed == 0 || rep.StripeEvents <= rep.Payments {
		t.Errorf("duplicates absorbed=%d, events sent=%d: the duplicates did not happen", rep.DuplicatesAbsorbed, rep.StripeEvents)
	}
	// Checkout payments were refunded through their PaymentIntents, in
	// parts that raced each other.
	if rep.Refunds == 0 || rep.PartialRefunds == 0 {
		t.Errorf("refunds=%d partial=%d: the refunds were not tried", rep.Refunds, rep.PartialRefunds)
	}
	if rep.DriftCorrected < rep.CheckoutLeftOpen+rep.CheckoutPaidSilently {
		t.Errorf("sweeper corrections=%d, want at least the %d sessions left to it", rep.DriftCorrected, rep.CheckoutLeftOpen+rep.CheckoutPaidSilently)
	}
	for _, row := range []string{"captures announced twice counted twice", "effects applied twice", "lost updates",
		"refunded or charged back more than captured", "ledger unbalanced", "sessions completed unpaid, async failed"} {
		if !strings.Contains(out, row) {
			t.Errorf("table lacks the row %q", row)
		}
	}
}
