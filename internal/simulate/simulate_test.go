package simulate_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/paystate/paystate/internal/simulate"
)

// TestRun runs a small chaos simulation and checks its invariants and that
// the chaos actually happened.
func TestRun(t *testing.T) {
	n := 120
	if testing.Short() {
		n = 60
	}
	rep, err := simulate.Run(context.Background(), simulate.Options{N: n, Concurrency: 4, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Log("\n" + out.String())
	if !rep.OK() {
		t.Fatalf("an invariant broke:\n%s", out.String())
	}
	if got, want := rep.Payments, n; got != want {
		t.Fatalf("Payments=%d, want %d", got, want)
	}
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
	for _, row := range []string{"refunded or charged back more than captured", "refunds answered against the rules"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("table lacks the row %q", row)
		}
	}
	if !strings.Contains(out.String(), "every invariant held") {
		t.Errorf("table does not say the invariants held")
	}
}
