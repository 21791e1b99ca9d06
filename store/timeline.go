package store

import (
	"fmt"

	"github.com/paystate/paystate/pay"
)

// A payment's timeline is one value (schema 4): the CBOR array of its
// steps, step Seq n at index n-1, under the payment's key id. A step is
// appended by writing the array again; a timeline holds a handful of
// steps, and one key per payment instead of one per step saves a key and
// bbolt's element header for every step after the first.

// AppendStep appends s to its payment's timeline with the next Seq of that
// payment (from 1); s.Seq is ignored. A zero At becomes Tx.Now. The payment
// need not exist, so that a step can record an event about an unknown one.
func (t *tx) AppendStep(s pay.Step) error {
	if err := checkPart("payment id", s.PaymentID, true); err != nil {
		return err
	}
	key := timelineKey(s.PaymentID)
	var steps []stepRecord
	if _, err := t.getRecord(bucketTimeline, key, &steps); err != nil {
		return err
	}
	s.Seq = uint64(len(steps)) + 1
	if s.At.IsZero() {
		s.At = t.now
	}
	return t.putRecord(bucketTimeline, key, append(steps, fromStep(s)))
}

// Steps returns a payment's timeline in Seq order; empty (no error) for a
// payment without steps.
func (t *tx) Steps(paymentID string) ([]pay.Step, error) {
	var steps []stepRecord
	if _, err := t.getRecord(bucketTimeline, timelineKey(paymentID), &steps); err != nil {
		return nil, err
	}
	return timelineSteps(paymentID, steps), nil
}

// timelineSteps returns the stored steps of a payment's timeline.
func timelineSteps(paymentID string, steps []stepRecord) []pay.Step {
	var out []pay.Step
	for i, r := range steps {
		r.PaymentID, r.Seq = paymentID, uint64(i)+1
		out = append(out, r.step())
	}
	return out
}

// timelineLen returns how many steps a stored timeline holds, from its
// CBOR array head, without decoding them.
func timelineLen(v []byte) (int, error) {
	if len(v) == 0 {
		return 0, fmt.Errorf("an empty value")
	}
	major, _, n := readHead(v)
	if major != 4 || n < 0 {
		return 0, fmt.Errorf("not an array of steps: %x", v[:min(len(v), 4)])
	}
	return n, nil
}

// checkTimeline reports timelines whose key or value does not decode, or
// that hold no step.
func (c *checker) checkTimeline() {
	_ = c.bucket(bucketTimeline).ForEach(func(k, v []byte) error {
		if _, ok := parseKeyID(k); !ok {
			c.report(fmt.Errorf("timeline %x: the key is not a payment id", k))
			return nil
		}
		var steps []stepRecord
		if err := decode("timeline", v, &steps); err != nil {
			c.report(fmt.Errorf("timeline %x: %w", k, err))
		} else if len(steps) == 0 {
			c.report(fmt.Errorf("timeline %x: no step", k))
		}
		return nil
	})
}
