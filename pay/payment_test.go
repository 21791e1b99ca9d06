package pay_test

import (
	"strings"
	"testing"

	"github.com/paystate/paystate/pay"
)

func TestValidateAmount(t *testing.T) {
	t.Parallel()
	if got, want := pay.MaxAmount, int64(1_000_000_000_000_000); got != want {
		t.Fatalf("MaxAmount=%d, want 10^15", got)
	}
	for _, ok := range []int64{1, 1500, pay.MaxAmount} {
		if err := pay.ValidateAmount(ok); err != nil {
			t.Errorf("ValidateAmount(%d): %v", ok, err)
		}
	}
	// The second of these overflowed the ledger after the PSP charged it.
	for _, bad := range []int64{0, -1, pay.MaxAmount + 1, 9_223_372_036_854_775_800} {
		err := pay.ValidateAmount(bad)
		if pay.ErrorCode(err) != pay.EINVALID || !strings.Contains(pay.ErrorMessage(err), "amount") {
			t.Errorf("ValidateAmount(%d)=%v, want invalid naming amount", bad, err)
		}
	}
}

func TestProviderLabel(t *testing.T) {
	t.Parallel()
	known := map[string]pay.Provider{"mock": nil, "stripe": nil}
	for name, want := range map[string]string{"mock": "mock", "stripe": "stripe", "zq42acee2af38a": "unknown", "": "unknown", "unknown": "unknown"} {
		if got := pay.ProviderLabel(name, known); got != want {
			t.Errorf("ProviderLabel(%q)=%q, want %q", name, got, want)
		}
	}
}
