package bolt

// The webhook inbox (inbox, with inbox_pending and inbox_by_payment) and
// the processed event ids (processed_by_time, and processed for the ids of
// events not in the inbox). An event in the inbox carries its processed
// time itself (schema 4); MarkProcessed records an event id whether or
// not the event is in the inbox, and PutInbox moves such an id into the
// event it stores. PurgeProcessed removes old ids together with their
// archived inbox entries, after which a redelivery is accepted as new.

import (
	"bytes"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// PutInbox stores a new webhook event and returns true, or returns false
// and stores nothing if (provider, event id) is already in the inbox. A zero
// ReceivedAt becomes Tx.Now and a zero NextAttemptAt becomes ReceivedAt, so
// a new event is due at once. An event already recorded as processed (by
// MarkProcessed) is archived as processed, at the time recorded then, and
// is not pending; otherwise the event is pending.
func (t *tx) PutInbox(e pay.InboxEvent) (bool, error) {
	e, err := store.NewInboxEvent(e, t.now)
	if err != nil {
		return false, err
	}
	key := eventKey(e.Provider, e.EventID)
	if t.has(bucketInbox, key) {
		return false, nil
	}
	r := fromInbox(e)
	var done processedRecord
	if ok, err := t.getRecord(bucketProcessed, key, &done); err != nil {
		return false, err
	} else if ok {
		// The id moves into the event; its processed_by_time entry stays.
		r.ProcessedAt = done.At
		if err := t.del(bucketProcessed, key); err != nil {
			return false, err
		}
	}

	if err := t.putRecord(bucketInbox, key, r); err != nil {
		return false, err
	}
	if r.ProcessedAt.IsZero() {
		if err := t.put(bucketInboxPending, pendingKey(e.NextAttemptAt, e.Provider, e.EventID), nil); err != nil {
			return false, err
		}
	}
	if e.PaymentID != "" {
		if err := t.put(bucketInboxByPayment, inboxPaymentKey(e.PaymentID, e.ReceivedAt, e.Provider, e.EventID), nil); err != nil {
			return false, err
		}
	}
	return true, nil
}

// InboxEvent returns one stored event, or ENOTFOUND.
func (t *tx) InboxEvent(provider, eventID string) (pay.InboxEvent, error) {
	e, ok, err := t.inboxEvent(eventKey(provider, eventID))
	if err != nil {
		return pay.InboxEvent{}, err
	} else if !ok {
		return pay.InboxEvent{}, pay.Errorf(pay.ENOTFOUND, "webhook event %s/%s not found", provider, eventID)
	}
	return e, nil
}

// inboxEvent loads an event by its key and reports whether it exists.
func (t *tx) inboxEvent(key []byte) (pay.InboxEvent, bool, error) {
	r, ok, err := t.inboxRecord(key)
	if err != nil || !ok {
		return pay.InboxEvent{}, false, err
	}
	e, err := r.event()
	return e, true, err
}

// inboxRecord loads an event's record, its body still packed, by its key
// and reports whether it exists.
func (t *tx) inboxRecord(key []byte) (inboxRecord, bool, error) {
	var r inboxRecord
	ok, err := t.getRecord(bucketInbox, key, &r)
	return r, ok, err
}

// InboxForPayment returns the archived webhooks of a payment, oldest
// received first.
func (t *tx) InboxForPayment(paymentID string) ([]pay.InboxEvent, error) {
	prefix := paymentPrefix(paymentID)
	var out []pay.InboxEvent
	c := t.bucket(bucketInboxByPayment).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) < len(prefix)+8+2 {
			return nil, corrupt(bucketInboxByPayment, "key %x", k)
		}
		e, ok, err := t.inboxEvent(k[len(prefix)+8:])
		if err != nil {
			return nil, err
		} else if !ok {
			return nil, corrupt(bucketInboxByPayment, "key %x points to a missing event", k)
		}
		out = append(out, e)
	}
	return out, nil
}

// PendingInbox returns up to limit unprocessed events whose NextAttemptAt
// is at or before due, earliest first. EINVALID for a limit below 1.
func (t *tx) PendingInbox(due time.Time, limit int) ([]pay.InboxEvent, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	bound := keyTime(due)
	var out []pay.InboxEvent
	c := t.bucket(bucketInboxPending).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		ns, key, ok := splitPendingKey(k)
		if !ok {
			return nil, corrupt(bucketInboxPending, "key %x", k)
		}
		if ns > bound {
			break
		}
		e, found, err := t.inboxEvent(key)
		if err != nil {
			return nil, err
		} else if !found {
			return nil, corrupt(bucketInboxPending, "key %x points to a missing event", k)
		}
		out = append(out, e)
	}
	return out, nil
}

// DeferInbox records a deferral of a pending event: Attempts+1,
// NextAttemptAt = next, LastError = lastErr. ENOTFOUND if the event is not
// in the inbox; an event already processed is left as it is.
func (t *tx) DeferInbox(provider, eventID string, next time.Time, lastErr string) error {
	key := eventKey(provider, eventID)
	r, ok, err := t.inboxRecord(key)
	if err != nil {
		return err
	} else if !ok {
		return pay.Errorf(pay.ENOTFOUND, "webhook event %s/%s not found", provider, eventID)
	} else if !r.ProcessedAt.IsZero() {
		return nil
	}
	if err := t.del(bucketInboxPending, pendingKey(r.NextAttemptAt.Time, provider, eventID)); err != nil {
		return err
	}
	r.Attempts++
	r.NextAttemptAt = at(next)
	r.LastError = lastErr
	if err := t.putRecord(bucketInbox, key, r); err != nil {
		return err
	}
	return t.put(bucketInboxPending, pendingKey(r.NextAttemptAt.Time, provider, eventID), nil)
}

// IsProcessed reports whether the event was recorded as processed.
func (t *tx) IsProcessed(provider, eventID string) (bool, error) {
	key := eventKey(provider, eventID)
	if t.has(bucketProcessed, key) {
		return true, nil
	}
	var r processedAtRecord
	ok, err := t.getRecord(bucketInbox, key, &r)
	return ok && !r.ProcessedAt.IsZero(), err
}

// processedAtRecord is the part of an inboxRecord IsProcessed reads.
type processedAtRecord struct {
	ProcessedAt stamp `cbor:"20,keyasint,omitzero"`
}

// MarkProcessed records the event as processed at Tx.Now (a second call
// keeps the first time) and takes it off the pending list: in its inbox
// record if it is in the inbox, else in processed.
func (t *tx) MarkProcessed(provider, eventID string) error {
	if err := store.CheckStoredKeys("provider", provider, "event id", eventID); err != nil {
		return err
	}
	key := eventKey(provider, eventID)
	r, ok, err := t.inboxRecord(key)
	if err != nil {
		return err
	}
	if !ok {
		if t.has(bucketProcessed, key) {
			return nil
		}
		if err := t.putRecord(bucketProcessed, key, processedRecord{At: at(t.now)}); err != nil {
			return err
		}
		return t.indexProcessed(t.now, key)
	}
	if !r.ProcessedAt.IsZero() {
		return nil
	}
	if err := t.del(bucketInboxPending, pendingKey(r.NextAttemptAt.Time, provider, eventID)); err != nil {
		return err
	}
	r.ProcessedAt = at(t.now)
	if err := t.putRecord(bucketInbox, key, r); err != nil {
		return err
	}
	return t.indexProcessed(t.now, key)
}

// indexProcessed records that the event with key event (eventKey) was
// processed at at. MarkProcessed calls it when it first records an event.
func (t *tx) indexProcessed(at time.Time, event []byte) error {
	return t.put(bucketProcessedByTime, processedTimeKey(at, event), nil)
}

// PurgeProcessed removes up to limit processed event ids recorded strictly
// before before, oldest first, and with each its inbox entry (and the
// entry's by-payment index) if that entry is processed. It walks
// processed_by_time from its start, so the cost is O(removed). It returns
// how many event ids it removed. EINVALID for a limit below 1.
func (t *tx) PurgeProcessed(before time.Time, limit int) (int, error) {
	bound := keyTime(before)
	due, err := t.oldestTimeKeys(bucketProcessedByTime, limit, func(ns uint64) bool { return ns < bound })
	if err != nil {
		return 0, err
	}
	for i, e := range due {
		if err := t.del(bucketProcessed, e.rest); err != nil {
			return i, err
		}
		if err := t.del(bucketProcessedByTime, e.ix); err != nil {
			return i, err
		}
		r, found, err := t.inboxRecord(e.rest)
		if err != nil {
			return i, err
		}
		if !found || r.ProcessedAt.IsZero() {
			continue
		}
		if r.PaymentID != "" {
			if err := t.del(bucketInboxByPayment, inboxPaymentKey(string(r.PaymentID), r.ReceivedAt.Time, r.Provider, r.EventID)); err != nil {
				return i, err
			}
		}
		if err := t.del(bucketInbox, e.rest); err != nil {
			return i, err
		}
	}
	return len(due), nil
}

// checkInbox reports inbox events without their pending, processed or
// by-payment entries or with a body that does not unpack, processed ids
// without their time index entry or also in the inbox, and index entries
// without their record.
func (c *checker) checkInbox() {
	var nPending, nByPayment, nProcessed int
	_ = c.bucket(bucketInbox).ForEach(func(k, v []byte) error {
		var r inboxRecord
		if err := decodeAt("inbox event", k, v, &r); err != nil {
			c.report(fmt.Errorf("inbox event %x: %w", k, err))
			return nil
		}
		what := "webhook event " + r.Provider + "/" + r.EventID
		if _, err := r.event(); err != nil {
			c.report(err)
		}
		if !r.ProcessedAt.IsZero() {
			nProcessed++
			c.want(bucketProcessedByTime, processedTimeKey(r.ProcessedAt.Time, k), what)
		} else {
			nPending++
			c.want(bucketInboxPending, pendingKey(r.NextAttemptAt.Time, r.Provider, r.EventID), what)
		}
		if r.PaymentID != "" {
			nByPayment++
			c.want(bucketInboxByPayment, inboxPaymentKey(string(r.PaymentID), r.ReceivedAt.Time, r.Provider, r.EventID), what)
		}
		return nil
	})
	c.wantCount(bucketInboxPending, nPending, "pending events")
	c.wantCount(bucketInboxByPayment, nByPayment, "events of a payment")

	inbox := c.bucket(bucketInbox)
	_ = c.bucket(bucketProcessed).ForEach(func(k, v []byte) error {
		nProcessed++
		var r processedRecord
		if err := decodeAt("processed", k, v, &r); err != nil {
			c.report(fmt.Errorf("%s %x: %w", bucketProcessed, k, err))
			return nil
		}
		if inbox.Get(k) != nil {
			c.report(fmt.Errorf("processed event %x is in %s and in %s", k, bucketProcessed, bucketInbox))
		}
		c.want(bucketProcessedByTime, processedTimeKey(r.At.Time, k), fmt.Sprintf("processed event %x", k))
		return nil
	})
	c.wantCount(bucketProcessedByTime, nProcessed, "processed events")
}
