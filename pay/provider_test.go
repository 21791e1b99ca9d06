package pay_test

import (
	"testing"

	"github.com/paystate/paystate/pay"
)

// TestCheckCreate: what every provider's Create refuses before it calls its
// PSP, with the provider's name and its own name for the key.
func TestCheckCreate(t *testing.T) {
	t.Parallel()
	ok := pay.Payment{ID: "pay_1", Amount: 1500, Currency: "EUR"}
	if err := pay.CheckCreate("paypal", "PayPal-Request-Id", ok, "charge-pay_1"); err != nil {
		t.Fatalf("CheckCreate(valid): %v", err)
	}
	noID, badAmount, badCurrency := ok, ok, ok
	noID.ID = ""
	badAmount.Amount = 0
	badCurrency.Currency = "eur"
	for _, c := range []struct {
		p    pay.Payment
		key  string
		want string
	}{
		{ok, "", "paypal: PayPal-Request-Id is required"},
		{noID, "charge-", "paypal: payment id is required"},
		{badAmount, "charge-pay_1", "amount must be a positive number of minor units, got 0"},
		{badCurrency, "charge-pay_1", `currency must be an ISO 4217 code of three upper-case letters, got "eur"`},
	} {
		err := pay.CheckCreate("paypal", "PayPal-Request-Id", c.p, c.key)
		if pay.ErrorCode(err) != pay.EINVALID || pay.ErrorMessage(err) != c.want {
			t.Errorf("CheckCreate(%+v, %q) = %v (%s), want EINVALID %q", c.p, c.key, err, pay.ErrorCode(err), c.want)
		}
	}
}
