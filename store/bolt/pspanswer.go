package bolt

// The last PSP answer of each payment (psp_answers), kept by the sweeper
// as evidence for the review queue.

import (
	"fmt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// PutPSPAnswer stores a as the payment's last PSP answer. A zero At
// becomes Tx.Now. The payment need not exist.
func (t *tx) PutPSPAnswer(a pay.PSPAnswer) error {
	if err := checkPart("payment id", a.PaymentID, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &a.At)
	return t.putRecord(bucketPSPAnswers, keyID(a.PaymentID), pspAnswerRecord{
		Provider: symbol(a.Provider), Status: symbol(a.Status), Found: a.Found, Raw: a.Raw, Error: a.Error, At: at(a.At),
	})
}

// PSPAnswer returns the payment's last PSP answer, or ENOTFOUND.
func (t *tx) PSPAnswer(paymentID string) (pay.PSPAnswer, error) {
	var r pspAnswerRecord
	if err := t.getFound(bucketPSPAnswers, keyID(paymentID), &r, "no PSP answer recorded for payment %s", paymentID); err != nil {
		return pay.PSPAnswer{}, err
	}
	return pay.PSPAnswer{
		PaymentID: paymentID, Provider: string(r.Provider), Status: pay.Status(r.Status), Found: r.Found,
		Raw: r.Raw, Error: r.Error, At: r.At.UTC(),
	}, nil
}

// checkPSPAnswers reports PSP answers that do not decode.
func (c *checker) checkPSPAnswers() {
	_ = c.bucket(bucketPSPAnswers).ForEach(func(k, v []byte) error {
		var r pspAnswerRecord
		if err := decodeAt("psp answer", k, v, &r); err != nil {
			c.report(fmt.Errorf("%s %q: %w", bucketPSPAnswers, k, err))
		}
		return nil
	})
	c.decodeEach(bucketPSPCharges, &pspChargeRecord{})
}

// PutPSPCharge stores the mock PSP's charge c under its key. A zero
// CreatedAt becomes Tx.Now.
func (t *tx) PutPSPCharge(c store.PSPCharge) error {
	if err := checkPart("charge key", c.Key, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &c.CreatedAt)
	return t.putRecord(bucketPSPCharges, pspChargeKey(c.Key), pspChargeRecord{
		PaymentID: ident(c.PaymentID), ProviderRef: c.ProviderRef, Amount: c.Amount, Currency: symbol(c.Currency),
		Status: symbol(c.Status), ClientSecret: c.ClientSecret, RedirectURL: c.RedirectURL, RefundKey: c.RefundKey,
		Calls: c.Calls, Refunds: c.Refunds, CreatedAt: at(c.CreatedAt), AmountRefunded: c.AmountRefunded,
	})
}

// PSPCharge returns the mock PSP's charge made with key, or ENOTFOUND.
func (t *tx) PSPCharge(key string) (store.PSPCharge, error) {
	var r pspChargeRecord
	if err := t.getFound(bucketPSPCharges, pspChargeKey(key), &r, "no charge with key %s", key); err != nil {
		return store.PSPCharge{}, err
	}
	return store.PSPCharge{
		Key: key, PaymentID: string(r.PaymentID), ProviderRef: r.ProviderRef, Amount: r.Amount, Currency: string(r.Currency),
		Status: pay.Status(r.Status), ClientSecret: r.ClientSecret, RedirectURL: r.RedirectURL, RefundKey: r.RefundKey,
		Calls: r.Calls, Refunds: r.Refunds, CreatedAt: r.CreatedAt.UTC(), AmountRefunded: r.AmountRefunded,
	}, nil
}
