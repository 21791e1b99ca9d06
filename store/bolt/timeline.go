package bolt

import (
	"fmt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// A payment's timeline is one value (schema 4): the CBOR array of its
// steps, step Seq n at index n-1, under the payment's key id. A step is
// appended by writing the array again; a timeline holds a handful of
// steps, and one key per payment instead of one per step saves a key and
// bbolt's element header for every step after the first.

// AppendStep appends s to its payment's timeline with the next Seq of that
// payment (from 1); s.Seq is ignored. A zero At becomes Tx.Now. The payment
// need not exist, so that a step can record an event about an unknown one.
// The steps already stored are not decoded: the new one is encoded after
// them, under an array head one longer.
func (t *tx) AppendStep(s pay.Step) error {
	if err := checkPart("payment id", s.PaymentID, true); err != nil {
		return err
	}
	key := timelineKey(s.PaymentID)
	old := t.bucket(bucketTimeline).Get(key)
	n, head := 0, 0
	if old != nil {
		var err error
		if n, head, err = timelineHead(old); err != nil {
			return corrupt(bucketTimeline, "key %x: %v", key, err)
		}
	}
	if n >= maxSteps {
		return pay.Errorf(pay.EINVALID, "payment %s has %d timeline steps, the most one timeline holds", s.PaymentID, n)
	}
	s.Seq = uint64(n) + 1
	store.NowIfZero(t.now, &s.At)
	step, err := encode("step", fromStep(s))
	if err != nil {
		return err
	}
	v := appendHead(make([]byte, 0, 3+len(old)-head+len(step)), 4, n+1)
	if old != nil {
		v = append(v, old[head:]...)
	}
	return t.put(bucketTimeline, key, append(v, step...))
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

// maxSteps is the most steps one timeline holds: its array head is at
// most three bytes (appendHead). A payment takes a handful.
const maxSteps = 0xffff

// timelineLen returns how many steps a stored timeline holds, from its
// CBOR array head, without decoding them.
func timelineLen(v []byte) (int, error) {
	n, _, err := timelineHead(v)
	return n, err
}

// timelineHead reads the CBOR array head of a stored timeline: how many
// steps it holds and the head's length.
func timelineHead(v []byte) (n, head int, err error) {
	if len(v) == 0 {
		return 0, 0, fmt.Errorf("an empty value")
	}
	major, head, n := readHead(v)
	if major != 4 || n < 0 {
		return 0, 0, fmt.Errorf("not an array of steps: %x", v[:min(len(v), 4)])
	}
	return n, head, nil
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
