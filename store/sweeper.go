package store

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/paystate/paystate/pay"
)

// This file implements pay.SweeperTx: candidates in pages, housekeeping
// through the time indexes idempotency_keys_by_expiry and
// processed_by_time, and the last PSP answer per payment (psp_answers).
// PutIdemKey and MarkProcessed keep the two indexes in step through
// indexIdem and indexProcessed.

var _ pay.SweeperTx = (*tx)(nil)

// CandidatesAfter returns up to limit payments in the given statuses whose
// UpdatedAt is strictly before updatedBefore and whose (UpdatedAt, ID) is
// greater than (afterUpdated, afterID), oldest first (ties by id). For each
// status it seeks payments_by_status to status ‖ 0x00 ‖ be64(afterUpdated)
// ‖ afterID and reads at most limit entries below the bound, so a page
// costs O(statuses × limit) whatever the number of payments. EINVALID for
// an unknown status or a limit below 1.
func (t *tx) CandidatesAfter(statuses []pay.Status, updatedBefore, afterUpdated time.Time, afterID string, limit int) ([]pay.Payment, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if err := checkPart("payment id", afterID, false); err != nil {
		return nil, err
	}
	type cand struct {
		ns uint64
		id string
	}
	var (
		cs   []cand
		seen = make(map[pay.Status]bool, len(statuses))
	)
	for _, s := range statuses {
		if !s.Valid() {
			return nil, pay.Errorf(pay.EINVALID, "status %q is not a known status", s)
		}
		if seen[s] {
			continue
		}
		seen[s] = true
		prefix, end := statusPrefix(s), statusBound(s, updatedBefore)
		from := statusKey(s, afterUpdated, afterID)
		c := t.bucket(bucketPaymentsByStatus).Cursor()
		k, _ := c.Seek(from)
		if k != nil && bytes.Equal(k, from) {
			k, _ = c.Next() // strictly after the cursor
		}
		for n := 0; k != nil && bytes.Compare(k, end) < 0 && n < limit; k, _ = c.Next() {
			t.indexSteps++
			ns, id, ok := splitTimeID(k, len(prefix))
			if !ok {
				return nil, corrupt(bucketPaymentsByStatus, "key %x", k)
			}
			cs = append(cs, cand{ns, id})
			n++
		}
	}

	// Merge: oldest first over all statuses, then cap.
	slices.SortFunc(cs, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.id, b.id))
	})
	if len(cs) > limit {
		cs = cs[:limit]
	}
	out := make([]pay.Payment, 0, len(cs))
	for _, c := range cs {
		p, ok, err := t.payment(c.id)
		if err != nil {
			return nil, err
		} else if !ok {
			return nil, corrupt(bucketPaymentsByStatus, "entry points to missing payment %s", c.id)
		}
		out = append(out, p)
	}
	return out, nil
}

// indexIdem moves the expiry index entry of the idempotency key to
// expires, from the ExpiresAt of the record stored under key, if any.
// PutIdemKey calls it before it writes the record.
func (t *tx) indexIdem(key string, expires time.Time) error {
	var old idemRecord
	found, err := t.getJSON(bucketIdem, []byte(key), &old)
	if err != nil {
		return err
	}
	if found {
		if err := t.del(bucketIdemByExpiry, idemExpiryKey(old.ExpiresAt, key)); err != nil {
			return err
		}
	}
	return t.put(bucketIdemByExpiry, idemExpiryKey(expires, key), nil)
}

// indexProcessed records that the event with key event (eventKey) was
// processed at at. MarkProcessed calls it when it first records an event.
func (t *tx) indexProcessed(at time.Time, event []byte) error {
	return t.put(bucketProcessedByTime, processedTimeKey(at, event), nil)
}

// PurgeIdemKeys removes up to limit idempotency keys whose ExpiresAt is at
// or before expiredBy (the merchant API treats such a key as unknown),
// oldest expiry first, and returns how many it removed. It walks
// idempotency_keys_by_expiry from its start, so the cost is O(removed).
// EINVALID for a limit below 1.
func (t *tx) PurgeIdemKeys(expiredBy time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	bound := keyTime(expiredBy)
	type entry struct {
		ix  []byte
		key string
	}
	var due []entry
	c := t.bucket(bucketIdemByExpiry).Cursor()
	for k, _ := c.First(); k != nil && len(due) < limit; k, _ = c.Next() {
		ns, key, ok := splitTimeKey(k)
		if !ok {
			return 0, corrupt(bucketIdemByExpiry, "key %x", k)
		}
		if ns > bound {
			break
		}
		due = append(due, entry{bytes.Clone(k), string(key)})
	}
	n := 0
	for _, e := range due {
		// The record is removed only if this entry is its current one.
		var r idemRecord
		found, err := t.getJSON(bucketIdem, []byte(e.key), &r)
		if err != nil {
			return n, err
		}
		if found && bytes.Equal(idemExpiryKey(r.ExpiresAt, e.key), e.ix) {
			if err := t.del(bucketIdem, []byte(e.key)); err != nil {
				return n, err
			}
			n++
		}
		if err := t.del(bucketIdemByExpiry, e.ix); err != nil {
			return n, err
		}
	}
	return n, nil
}

// PurgeProcessed removes up to limit processed event ids recorded strictly
// before before, oldest first, and with each its inbox entry (and the
// entry's by-payment index) if that entry is processed. It walks
// processed_by_time from its start, so the cost is O(removed). It returns
// how many event ids it removed. EINVALID for a limit below 1.
func (t *tx) PurgeProcessed(before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	bound := keyTime(before)
	type entry struct {
		ix, event []byte
	}
	var due []entry
	c := t.bucket(bucketProcessedByTime).Cursor()
	for k, _ := c.First(); k != nil && len(due) < limit; k, _ = c.Next() {
		ns, event, ok := splitTimeKey(k)
		if !ok {
			return 0, corrupt(bucketProcessedByTime, "key %x", k)
		}
		if ns >= bound {
			break
		}
		due = append(due, entry{bytes.Clone(k), event})
	}
	for i, e := range due {
		if err := t.del(bucketProcessed, e.event); err != nil {
			return i, err
		}
		if err := t.del(bucketProcessedByTime, e.ix); err != nil {
			return i, err
		}
		ev, found, err := t.inboxEvent(e.event)
		if err != nil {
			return i, err
		}
		if !found || !ev.Processed {
			continue
		}
		if ev.PaymentID != "" {
			if err := t.del(bucketInboxByPayment, inboxPaymentKey(ev.PaymentID, ev.ReceivedAt, ev.Provider, ev.EventID)); err != nil {
				return i, err
			}
		}
		if err := t.del(bucketInbox, e.event); err != nil {
			return i, err
		}
	}
	return len(due), nil
}

// pspAnswerRecord is the value of psp_answers; the payment id is the key.
type pspAnswerRecord struct {
	Provider string    `json:"provider,omitempty"`
	Status   string    `json:"status,omitempty"`
	Found    bool      `json:"found"`
	Raw      string    `json:"raw,omitempty"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
}

// PutPSPAnswer stores a as the payment's last PSP answer. A zero At
// becomes Tx.Now. The payment need not exist.
func (t *tx) PutPSPAnswer(a pay.PSPAnswer) error {
	if err := checkPart("payment id", a.PaymentID, true); err != nil {
		return err
	}
	if a.At.IsZero() {
		a.At = t.now
	}
	return t.putJSON(bucketPSPAnswers, []byte(a.PaymentID), pspAnswerRecord{
		Provider: a.Provider, Status: string(a.Status), Found: a.Found, Raw: a.Raw, Error: a.Error, At: a.At.UTC(),
	})
}

// PSPAnswer returns the payment's last PSP answer, or ENOTFOUND.
func (t *tx) PSPAnswer(paymentID string) (pay.PSPAnswer, error) {
	var r pspAnswerRecord
	if found, err := t.getJSON(bucketPSPAnswers, []byte(paymentID), &r); err != nil {
		return pay.PSPAnswer{}, err
	} else if !found {
		return pay.PSPAnswer{}, pay.Errorf(pay.ENOTFOUND, "no PSP answer recorded for payment %s", paymentID)
	}
	return pay.PSPAnswer{
		PaymentID: paymentID, Provider: r.Provider, Status: pay.Status(r.Status), Found: r.Found,
		Raw: r.Raw, Error: r.Error, At: r.At.UTC(),
	}, nil
}

// checkSweeperIndexes reports every disagreement between the idempotency
// keys and processed ids and their time indexes, and PSP answers that do
// not decode. DB.Check calls it.
func (t *tx) checkSweeperIndexes(report func(error)) {
	count := func(bucket []byte) int { return t.bucket(bucket).Stats().KeyN }

	var nIdem int
	_ = t.bucket(bucketIdem).ForEach(func(k, v []byte) error {
		nIdem++
		var r idemRecord
		if err := decode("idempotency key", v, &r); err != nil {
			return nil // reported with the other records
		}
		if ix := idemExpiryKey(r.ExpiresAt, string(k)); !t.has(bucketIdemByExpiry, ix) {
			report(fmt.Errorf("idempotency key %q: no %s entry %x", k, bucketIdemByExpiry, ix))
		}
		return nil
	})
	if n := count(bucketIdemByExpiry); n != nIdem {
		report(fmt.Errorf("%s has %d entries for %d keys", bucketIdemByExpiry, n, nIdem))
	}

	var nProcessed int
	_ = t.bucket(bucketProcessed).ForEach(func(k, v []byte) error {
		nProcessed++
		var r processedRecord
		if err := decode("processed", v, &r); err != nil {
			return nil // reported with the other records
		}
		if ix := processedTimeKey(r.At, k); !t.has(bucketProcessedByTime, ix) {
			report(fmt.Errorf("processed event %x: no %s entry %x", k, bucketProcessedByTime, ix))
		}
		return nil
	})
	if n := count(bucketProcessedByTime); n != nProcessed {
		report(fmt.Errorf("%s has %d entries for %d processed events", bucketProcessedByTime, n, nProcessed))
	}

	_ = t.bucket(bucketPSPAnswers).ForEach(func(k, v []byte) error {
		var r pspAnswerRecord
		if err := decode("psp answer", v, &r); err != nil {
			report(fmt.Errorf("%s %q: %w", bucketPSPAnswers, k, err))
		}
		return nil
	})
}
