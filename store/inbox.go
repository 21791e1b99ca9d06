package store

import (
	"bytes"
	"time"

	"github.com/paystate/paystate/pay"
)

// checkEvent checks the parts of an event key.
func checkEvent(provider, eventID string) error {
	if err := checkPart("provider", provider, true); err != nil {
		return err
	}
	return checkPart("event id", eventID, true)
}

// PutInbox stores a new webhook event and returns true, or returns false
// and stores nothing if (provider, event id) is already in the inbox. A zero
// ReceivedAt becomes Tx.Now and a zero NextAttemptAt becomes ReceivedAt, so
// a new event is due at once. An event already recorded as processed (by
// MarkProcessed) is archived with Processed set and is not pending;
// otherwise Processed is cleared and the event is pending.
func (t *tx) PutInbox(e pay.InboxEvent) (bool, error) {
	if err := checkEvent(e.Provider, e.EventID); err != nil {
		return false, err
	}
	if err := checkPart("payment id", e.PaymentID, false); err != nil {
		return false, err
	}
	key := eventKey(e.Provider, e.EventID)
	if t.has(bucketInbox, key) {
		return false, nil
	}
	if e.ReceivedAt.IsZero() {
		e.ReceivedAt = t.now
	}
	if e.NextAttemptAt.IsZero() {
		e.NextAttemptAt = e.ReceivedAt
	}
	e.Processed = t.has(bucketProcessed, key)

	if err := t.putJSON(bucketInbox, key, fromInbox(e)); err != nil {
		return false, err
	}
	if !e.Processed {
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
	var r inboxRecord
	if ok, err := t.getJSON(bucketInbox, key, &r); err != nil || !ok {
		return pay.InboxEvent{}, false, err
	}
	return r.event(), true, nil
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
	e, ok, err := t.inboxEvent(key)
	if err != nil {
		return err
	} else if !ok {
		return pay.Errorf(pay.ENOTFOUND, "webhook event %s/%s not found", provider, eventID)
	} else if e.Processed {
		return nil
	}
	if err := t.del(bucketInboxPending, pendingKey(e.NextAttemptAt, provider, eventID)); err != nil {
		return err
	}
	e.Attempts++
	e.NextAttemptAt = next.UTC()
	e.LastError = lastErr
	if err := t.putJSON(bucketInbox, key, fromInbox(e)); err != nil {
		return err
	}
	return t.put(bucketInboxPending, pendingKey(e.NextAttemptAt, provider, eventID), nil)
}

// IsProcessed reports whether the event was recorded as processed.
func (t *tx) IsProcessed(provider, eventID string) (bool, error) {
	return t.has(bucketProcessed, eventKey(provider, eventID)), nil
}

// MarkProcessed records the event as processed at Tx.Now (a second call
// keeps the first time), takes it off the pending list and sets Processed
// on its inbox entry. The event need not be in the inbox.
func (t *tx) MarkProcessed(provider, eventID string) error {
	if err := checkEvent(provider, eventID); err != nil {
		return err
	}
	key := eventKey(provider, eventID)
	if !t.has(bucketProcessed, key) {
		if err := t.putJSON(bucketProcessed, key, processedRecord{At: t.now}); err != nil {
			return err
		}
		if err := t.indexProcessed(t.now, key); err != nil {
			return err
		}
	}
	e, ok, err := t.inboxEvent(key)
	if err != nil || !ok || e.Processed {
		return err
	}
	if err := t.del(bucketInboxPending, pendingKey(e.NextAttemptAt, provider, eventID)); err != nil {
		return err
	}
	e.Processed = true
	return t.putJSON(bucketInbox, key, fromInbox(e))
}
