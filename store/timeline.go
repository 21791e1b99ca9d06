package store

import (
	"bytes"

	"github.com/paystate/paystate/pay"
)

// AppendStep appends s to its payment's timeline with the next Seq of that
// payment (from 1); s.Seq is ignored. A zero At becomes Tx.Now. The payment
// need not exist, so that a step can record an event about an unknown one.
func (t *tx) AppendStep(s pay.Step) error {
	if err := checkPart("payment id", s.PaymentID, true); err != nil {
		return err
	}
	prefix := paymentPrefix(s.PaymentID)
	s.Seq = 1
	if k := lastWithPrefix(t.bucket(bucketTimeline).Cursor(), prefix); k != nil && bytes.HasPrefix(k, prefix) {
		last, ok := trailingSeq(k)
		if !ok || len(k) != len(prefix)+8 {
			return corrupt(bucketTimeline, "key %x", k)
		}
		s.Seq = last + 1
	}
	if s.At.IsZero() {
		s.At = t.now
	}
	return t.putJSON(bucketTimeline, stepKey(s.PaymentID, s.Seq), fromStep(s))
}

// Steps returns a payment's timeline in Seq order; empty (no error) for a
// payment without steps.
func (t *tx) Steps(paymentID string) ([]pay.Step, error) {
	prefix := paymentPrefix(paymentID)
	var out []pay.Step
	c := t.bucket(bucketTimeline).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var r stepRecord
		if err := decode("step", v, &r); err != nil {
			return nil, err
		}
		out = append(out, r.step())
	}
	return out, nil
}
