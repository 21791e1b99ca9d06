package pay

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// currencyDecimals lists the ISO 4217 currencies whose minor unit is not a
// hundredth: 0 decimals (the amount is in whole units) or 3. Every other
// currency has 2.
var currencyDecimals = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0,
	"PYG": 0, "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}

// CurrencyDecimals returns the number of decimals of a currency's minor
// unit: 0 for JPY, 3 for BHD, 2 for EUR and any currency not in the table.
// The code is matched in any case (Stripe writes "jpy").
func CurrencyDecimals(currency string) int {
	if e, ok := currencyDecimals[currency]; ok {
		return e
	}
	if e, ok := currencyDecimals[strings.ToUpper(currency)]; ok {
		return e
	}
	return 2
}

// FormatAmount writes an amount in minor units as a person reads it, in
// major units with its currency's decimals: "40.00 EUR", "3500 JPY",
// "1.250 BHD", "-0.05 EUR". Every amount in a message, a timeline note or
// a review note is written with it (SPEC §4), never minor units labelled
// with the currency.
func FormatAmount(amount int64, currency string) string {
	e := CurrencyDecimals(currency)
	digits := strconv.FormatUint(absU(amount), 10)
	if e > 0 {
		if len(digits) <= e {
			digits = strings.Repeat("0", e-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-e] + "." + digits[len(digits)-e:]
	}
	if amount < 0 {
		digits = "-" + digits
	}
	if currency == "" {
		return digits
	}
	return digits + " " + strings.ToUpper(currency)
}

// absU returns |n| as a uint64 (MinInt64 included).
func absU(n int64) uint64 {
	if n < 0 {
		return uint64(-(n + 1)) + 1
	}
	return uint64(n)
}

// ParseAmount reads a decimal amount in major units of currency ("12.50",
// "-4", "1500" for JPY) as minor units, exactly: no floating point, no
// more decimals than the currency has (trailing zeros aside). Settlement
// reports and PSP answers that write amounts as decimal strings (PayPal,
// Mollie) are read with it.
func ParseAmount(s, currency string) (int64, error) {
	exp := CurrencyDecimals(strings.ToUpper(currency))
	orig := s
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	whole, frac, dot := strings.Cut(s, ".")
	if (whole == "" && frac == "") || (dot && frac == "") || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not a decimal amount", orig)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > exp {
		return 0, fmt.Errorf("%q has more decimals than %s's %d", orig, strings.ToUpper(currency), exp)
	}
	frac += strings.Repeat("0", exp-len(frac))
	var v uint64
	for _, c := range whole + frac {
		d := uint64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("%q is too large", orig)
		}
		v = v*10 + d
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// digits reports whether s holds ASCII digits only ("" does).
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// AddInt64 returns a+b and whether it did not overflow.
func AddInt64(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}
