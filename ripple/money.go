package ripple

import (
	"fmt"
	"math/big"

	"github.com/paystate/paystate/pay"
)

// Points returns the loyalty points of an amount in minor units:
// amount × perUnit ÷ 10^pay.CurrencyDecimals(currency), rounded toward zero. It
// fails only if the result does not fit an int64.
func Points(amount int64, currency string, perUnit int64) (int64, error) {
	p := new(big.Int).Mul(big.NewInt(amount), big.NewInt(perUnit))
	p.Quo(p, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(pay.CurrencyDecimals(currency))), nil))
	if !p.IsInt64() {
		return 0, fmt.Errorf("points of %d %s at %d per unit overflow", amount, currency, perUnit)
	}
	return p.Int64(), nil
}
