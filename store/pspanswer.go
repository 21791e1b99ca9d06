package store

// The last PSP answer of each payment (psp_answers), kept by the sweeper
// as evidence for the review queue.

import (
	"fmt"

	"github.com/paystate/paystate/pay"
)

// PutPSPAnswer stores a as the payment's last PSP answer. A zero At
// becomes Tx.Now. The payment need not exist.
func (t *tx) PutPSPAnswer(a pay.PSPAnswer) error {
	if err := checkPart("payment id", a.PaymentID, true); err != nil {
		return err
	}
	if a.At.IsZero() {
		a.At = t.now
	}
	return t.putRecord(bucketPSPAnswers, []byte(a.PaymentID), pspAnswerRecord{
		Provider: a.Provider, Status: string(a.Status), Found: a.Found, Raw: a.Raw, Error: a.Error, At: at(a.At),
	})
}

// PSPAnswer returns the payment's last PSP answer, or ENOTFOUND.
func (t *tx) PSPAnswer(paymentID string) (pay.PSPAnswer, error) {
	var r pspAnswerRecord
	if found, err := t.getRecord(bucketPSPAnswers, []byte(paymentID), &r); err != nil {
		return pay.PSPAnswer{}, err
	} else if !found {
		return pay.PSPAnswer{}, pay.Errorf(pay.ENOTFOUND, "no PSP answer recorded for payment %s", paymentID)
	}
	return pay.PSPAnswer{
		PaymentID: paymentID, Provider: r.Provider, Status: pay.Status(r.Status), Found: r.Found,
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
}
