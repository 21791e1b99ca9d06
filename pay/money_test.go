package pay_test

import (
	"math"
	"testing"

	"github.com/paystate/paystate/pay"
)

// TestFormatAmount writes minor units in major units with each currency's
// own decimals.
func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{4000, "EUR", "40.00 EUR"},
		{1250, "EUR", "12.50 EUR"},
		{99, "EUR", "0.99 EUR"},
		{5, "EUR", "0.05 EUR"},
		{0, "EUR", "0.00 EUR"},
		{-5, "EUR", "-0.05 EUR"},
		{-1250, "USD", "-12.50 USD"},
		{3500, "JPY", "3500 JPY"},
		{3500, "jpy", "3500 JPY"},
		{1500, "KRW", "1500 KRW"},
		{1250, "BHD", "1.250 BHD"},
		{7, "KWD", "0.007 KWD"},
		{123, "XYZ", "1.23 XYZ"},
		{2705, "", "27.05"},
		{math.MinInt64, "EUR", "-92233720368547758.08 EUR"},
	} {
		if got := pay.FormatAmount(tc.amount, tc.currency); got != tc.want {
			t.Errorf("FormatAmount(%d, %q)=%q, want %q", tc.amount, tc.currency, got, tc.want)
		}
	}
	for c, want := range map[string]int{"EUR": 2, "JPY": 0, "jpy": 0, "BHD": 3, "XYZ": 2} {
		if got := pay.CurrencyDecimals(c); got != want {
			t.Errorf("CurrencyDecimals(%s)=%d, want %d", c, got, want)
		}
	}
}
