package ripple

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// exponents lists the ISO 4217 currencies whose minor unit is not a
// hundredth: 0 decimals (the amount is in whole units) or 3. Every other
// currency has 2.
var exponents = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0,
	"PYG": 0, "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}

// MinorUnits returns the number of decimals of a currency's minor unit: 0
// for JPY, 3 for BHD, 2 for EUR and any currency not in the table.
func MinorUnits(currency string) int {
	if e, ok := exponents[currency]; ok {
		return e
	}
	return 2
}

// Points returns the loyalty points of an amount in minor units:
// amount × perUnit ÷ 10^MinorUnits(currency), rounded toward zero. It
// fails only if the result does not fit an int64.
func Points(amount int64, currency string, perUnit int64) (int64, error) {
	p := new(big.Int).Mul(big.NewInt(amount), big.NewInt(perUnit))
	p.Quo(p, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(MinorUnits(currency))), nil))
	if !p.IsInt64() {
		return 0, fmt.Errorf("points of %d %s at %d per unit overflow", amount, currency, perUnit)
	}
	return p.Int64(), nil
}

// FormatAmount formats an amount in minor units with its currency's
// decimals: "1234.50 EUR", "1500 JPY", "1.250 BHD".
func FormatAmount(amount int64, currency string) string {
	e := MinorUnits(currency)
	neg := amount < 0
	digits := strconv.FormatUint(absU(amount), 10)
	if e > 0 {
		if len(digits) <= e {
			digits = strings.Repeat("0", e-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-e] + "." + digits[len(digits)-e:]
	}
	if neg {
		digits = "-" + digits
	}
	return digits + " " + currency
}

// absU returns |n| as a uint64 (MinInt64 included).
func absU(n int64) uint64 {
	if n < 0 {
		return uint64(-(n + 1)) + 1
	}
	return uint64(n)
}
