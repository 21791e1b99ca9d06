package store

import (
	"bytes"
	"fmt"

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
	return t.putRecord(bucketTimeline, stepKey(s.PaymentID, s.Seq), fromStep(s))
}

// Steps returns a payment's timeline in Seq order; empty (no error) for a
// payment without steps.
func (t *tx) Steps(paymentID string) ([]pay.Step, error) {
	prefix := paymentPrefix(paymentID)
	var out []pay.Step
	c := t.bucket(bucketTimeline).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var r stepRecord
		if err := decodeAt("step", k, v, &r); err != nil {
			return nil, err
		}
		out = append(out, r.step())
	}
	return out, nil
}

// checkTimeline reports steps whose key or value does not decode and
// timelines that do not number their steps 1, 2, 3...
func (c *checker) checkTimeline() {
	var prevPrefix string
	var prevSeq uint64
	_ = c.bucket(bucketTimeline).ForEach(func(k, v []byte) error {
		var r stepRecord
		if err := decodeAt("step", k, v, &r); err != nil {
			c.report(fmt.Errorf("step %x: %w", k, err))
			return nil
		}
		prefix := string(paymentPrefix(r.PaymentID))
		if prefix != prevPrefix {
			prevSeq = 0
		}
		if r.Seq != prevSeq+1 {
			c.report(fmt.Errorf("payment %s: step %d follows step %d", r.PaymentID, r.Seq, prevSeq))
		}
		prevPrefix, prevSeq = prefix, r.Seq
		return nil
	})
}
