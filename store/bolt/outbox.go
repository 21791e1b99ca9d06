package bolt

// The outbox (outbox, with outbox_by_payment), the ripple fan-out cursor
// and the purge horizon (meta), and the deliveries the fan-out makes of
// each record, one per target (deliveries, with deliveries_due,
// deliveries_open and deliveries_by_state).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// AppendOutbox appends r with the next Seq of the outbox (from 1, never
// reused); r.Seq is ignored. A zero CreatedAt becomes Tx.Now. The caller
// reads the assigned Seq back with OutboxForPayment.
func (t *tx) AppendOutbox(r pay.OutboxRecord) error {
	if err := checkPart("payment id", r.PaymentID, true); err != nil {
		return err
	}
	seq, err := t.nextSeq(bucketOutbox)
	if err != nil {
		return err
	}
	r.Seq = seq
	store.NowIfZero(t.now, &r.CreatedAt)
	if err := t.putRecord(bucketOutbox, seqKey(seq), fromOutbox(r)); err != nil {
		return err
	}
	return t.put(bucketOutboxByPayment, outboxPaymentKey(r.PaymentID, seq), nil)
}

// OutboxForPayment returns a payment's outbox records in Seq order.
func (t *tx) OutboxForPayment(paymentID string) ([]pay.OutboxRecord, error) {
	prefix := paymentPrefix(paymentID)
	var out []pay.OutboxRecord
	c := t.bucket(bucketOutboxByPayment).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		seq, ok := trailingSeq(k)
		if !ok || len(k) != len(prefix)+8 {
			return nil, corrupt(bucketOutboxByPayment, "key %x", k)
		}
		var r outboxRecord
		if found, err := t.getRecord(bucketOutbox, seqKey(seq), &r); err != nil {
			return nil, err
		} else if !found {
			return nil, corrupt(bucketOutboxByPayment, "key %x points to missing record %d", k, seq)
		}
		out = append(out, r.record())
	}
	return out, nil
}

// OutboxAfter returns up to limit outbox records with Seq > seq, in Seq
// order.
func (t *tx) OutboxAfter(seq uint64, limit int) ([]pay.OutboxRecord, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if seq == ^uint64(0) {
		return nil, nil
	}
	var out []pay.OutboxRecord
	c := t.bucket(bucketOutbox).Cursor()
	for k, v := c.Seek(seqKey(seq + 1)); k != nil && len(out) < limit; k, v = c.Next() {
		var r outboxRecord
		if err := decodeAt("outbox record", k, v, &r); err != nil {
			return nil, err
		}
		out = append(out, r.record())
	}
	return out, nil
}

// OutboxRecord returns the outbox record with the given Seq, or ENOTFOUND.
func (t *tx) OutboxRecord(seq uint64) (pay.OutboxRecord, error) {
	var r outboxRecord
	if err := t.getFound(bucketOutbox, seqKey(seq), &r, "outbox record %d not found", seq); err != nil {
		return pay.OutboxRecord{}, err
	}
	return r.record(), nil
}

// RippleCursor returns the Seq of the last outbox record fanned out, 0 if
// none.
func (t *tx) RippleCursor() (uint64, error) { return t.metaUint64(keyRippleCursor) }

// SetRippleCursor records the last outbox record fanned out. The cursor
// never moves back (EINVALID): a record fanned out twice would be
// delivered twice.
func (t *tx) SetRippleCursor(seq uint64) error {
	cur, err := t.RippleCursor()
	if err != nil {
		return err
	}
	if seq < cur {
		return pay.Errorf(pay.EINVALID, "ripple cursor cannot move back from %d to %d", cur, seq)
	}
	return t.put(bucketMeta, keyRippleCursor, be64(seq))
}

// ClaimUnfanned returns up to limit records after the fan-out cursor:
// with one writer, no other transaction claims them.
func (t *tx) ClaimUnfanned(limit int) ([]pay.OutboxRecord, error) {
	cur, err := t.RippleCursor()
	if err != nil {
		return nil, err
	}
	return t.OutboxAfter(cur, limit)
}

// MarkFanned moves the fan-out cursor past the last of seqs, the records
// ClaimUnfanned returned: they follow the cursor in Seq order.
func (t *tx) MarkFanned(seqs []uint64) error {
	cur, err := t.RippleCursor()
	if err != nil {
		return err
	}
	last := cur
	for _, s := range seqs {
		last = max(last, s)
	}
	if last == cur {
		return nil
	}
	return t.SetRippleCursor(last)
}

// ClaimDeliveries returns the deliveries among ids that are pending, due
// at Tx.Now and first in line (firstInLine), by id: the one writer holds
// them to the end of its transaction.
func (t *tx) ClaimDeliveries(ids []string) ([]pay.Delivery, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	out := make([]pay.Delivery, 0, len(ids))
	open := t.bucket(bucketDeliveriesOpen).Cursor()
	for _, id := range ids {
		d, err := t.Delivery(id)
		switch {
		case pay.ErrorCode(err) == pay.ENOTFOUND:
			continue
		case err != nil:
			return nil, err
		}
		if d.State == pay.DeliveryPending && !d.NextAttemptAt.After(t.Now()) && firstInLine(open, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// firstInLine reports whether no earlier outbox record of pending d's
// payment is pending for d's target: d's is the first key of its target
// and payment in deliveries_open, read with open.
func firstInLine(open *bbolt.Cursor, d pay.Delivery) bool {
	first, _ := open.Seek(deliveryOpenPrefix(d.Target(), d.PaymentID))
	return bytes.Equal(first, deliveryOpenKey(d.Target(), d.PaymentID, d.EventSeq))
}

// PurgeOutbox removes up to limit delivered outbox records created
// strictly before before, oldest first, and returns how many it removed.
// A record is delivered when it was fanned out (its Seq is at or below the
// ripple cursor), none of its deliveries is pending, and none became dead
// at or after before: a young dead letter may be retried, which needs its
// record; an old one retried finds its record gone and stays dead. The
// oldest pending delivery bounds the walk (deliveries_by_state orders
// pending deliveries by their record's time, Delivery.EventAt), so no
// record with a pending delivery is ever removed. With each record go its
// outbox_by_payment entry and its events' dedupe keys
// ("<effect>:<event id>", store.EventEffects): with the record gone, no delivery
// of it can run again, so no effect can be applied twice. Keys per
// payment (the receipt sent, the points credited, which a later refund
// claws back) are kept. The walk stops at the first record that is not
// due, so a purge costs O(removed + dead letters younger than before).
// The purge horizon (OutboxHorizon) moves past every record removed.
// EINVALID for a limit below 1.
func (t *tx) PurgeOutbox(before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	cursor, err := t.RippleCursor()
	if err != nil {
		return 0, err
	}
	bound := keyTime(before)
	if oldest, ok, err := t.OldestPendingDelivery(); err != nil {
		return 0, err
	} else if ok {
		bound = min(bound, keyTime(oldest.EventAt))
	}
	// Records of young dead letters.
	held := map[uint64]bool{}
	prefix := deliveryStatePrefix(pay.DeliveryDead)
	c := t.bucket(bucketDeliveriesByState).Cursor()
	for k, _ := c.Seek(binary.BigEndian.AppendUint64(bytes.Clone(prefix), keyTime(before))); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		_, id, ok := splitTimeKeyID(k, len(prefix))
		if !ok {
			return 0, corrupt(bucketDeliveriesByState, "key %x", k)
		}
		d, err := t.Delivery(id)
		if err != nil {
			return 0, err
		}
		held[d.EventSeq] = true
	}

	type due struct {
		seq       uint64
		paymentID string
		eventID   string
		created   uint64
	}
	var purge []due
	c = t.bucket(bucketOutbox).Cursor()
	for k, v := c.First(); k != nil && len(purge) < limit; k, v = c.Next() {
		var r outboxRecord
		if err := decodeAt("outbox record", k, v, &r); err != nil {
			return 0, err
		}
		created := keyTime(r.CreatedAt.Time)
		if r.Seq > cursor || created >= bound {
			break
		}
		if held[r.Seq] {
			continue
		}
		purge = append(purge, due{r.Seq, string(r.PaymentID), string(r.ID), created})
	}
	horizon, err := t.outboxHorizon()
	if err != nil {
		return 0, err
	}
	for _, d := range purge {
		if err := t.del(bucketOutbox, seqKey(d.seq)); err != nil {
			return 0, err
		}
		if err := t.del(bucketOutboxByPayment, outboxPaymentKey(d.paymentID, d.seq)); err != nil {
			return 0, err
		}
		for _, e := range store.EventEffects {
			if err := t.del(bucketEffects, effectKey(e+":"+d.eventID)); err != nil {
				return 0, err
			}
		}
		horizon = max(horizon, d.created+1)
	}
	if len(purge) > 0 {
		if err := t.put(bucketMeta, keyOutboxHorizon, be64(horizon)); err != nil {
			return 0, err
		}
	}
	return len(purge), nil
}

// OutboxHorizon returns the outbox purge horizon: every outbox record
// created before it may have been purged, every later one is kept. The
// zero time if no record was ever purged.
func (t *tx) OutboxHorizon() (time.Time, error) {
	ns, err := t.outboxHorizon()
	if err != nil || ns == 0 {
		return time.Time{}, err
	}
	return time.Unix(0, int64(ns)).UTC(), nil
}

// outboxHorizon returns the stored horizon as a key time, 0 if none.
func (t *tx) outboxHorizon() (uint64, error) { return t.metaUint64(keyOutboxHorizon) }

// metaUint64 returns the be64 stored under key in meta, 0 if there is none.
func (t *tx) metaUint64(key []byte) (uint64, error) {
	v := t.bucket(bucketMeta).Get(key)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, corrupt(bucketMeta, "%s is %d bytes", key, len(v))
}

// stateTime is the time a delivery entered its state, as its state index
// orders it: a pending delivery has waited since its event, a done or
// dead one since its last update.
func stateTime(d pay.Delivery) time.Time {
	if d.State == pay.DeliveryPending {
		return d.EventAt
	}
	return d.UpdatedAt
}

// putDeliveryIndexes writes d's index entries: its state entry always, and
// while pending its due and open entries.
func (t *tx) putDeliveryIndexes(d pay.Delivery) error {
	if err := t.put(bucketDeliveriesByState, deliveryStateKey(d.State, stateTime(d), d.ID), nil); err != nil {
		return err
	}
	if d.State != pay.DeliveryPending {
		return nil
	}
	if err := t.put(bucketDeliveriesDue, deliveryDueKey(d.NextAttemptAt, d.ID), nil); err != nil {
		return err
	}
	return t.put(bucketDeliveriesOpen, deliveryOpenKey(d.Target(), d.PaymentID, d.EventSeq), keyID(d.ID))
}

// delDeliveryIndexes removes the index entries putDeliveryIndexes wrote.
func (t *tx) delDeliveryIndexes(d pay.Delivery) error {
	if err := t.del(bucketDeliveriesByState, deliveryStateKey(d.State, stateTime(d), d.ID)); err != nil {
		return err
	}
	if d.State != pay.DeliveryPending {
		return nil
	}
	if err := t.del(bucketDeliveriesDue, deliveryDueKey(d.NextAttemptAt, d.ID)); err != nil {
		return err
	}
	return t.del(bucketDeliveriesOpen, deliveryOpenKey(d.Target(), d.PaymentID, d.EventSeq))
}

// InsertDelivery stores a new delivery and its index entries. Zero times
// become Tx.Now (NextAttemptAt only for a pending delivery). ECONFLICT if
// the id exists, or if the same target already has a pending delivery of
// the same outbox record; EINVALID for a missing id, effect, event id or
// payment id, or an unknown state.
func (t *tx) InsertDelivery(d pay.Delivery) error {
	if err := store.CheckStoredDelivery(d); err != nil {
		return err
	}
	if t.bucket(bucketDeliveries).Get(keyID(d.ID)) != nil {
		return pay.Errorf(pay.ECONFLICT, "delivery %s already exists", d.ID)
	}
	if d.State == pay.DeliveryPending && t.has(bucketDeliveriesOpen, deliveryOpenKey(d.Target(), d.PaymentID, d.EventSeq)) {
		return pay.Errorf(pay.ECONFLICT, "event %d of payment %s is already pending for %s", d.EventSeq, d.PaymentID, d.Target())
	}
	store.NowIfZero(t.now, &d.EventAt, &d.CreatedAt, &d.UpdatedAt)
	if d.State == pay.DeliveryPending && d.NextAttemptAt.IsZero() {
		d.NextAttemptAt = t.now
	}
	d = fromDelivery(d).delivery() // UTC, as stored
	if err := t.putRecord(bucketDeliveries, keyID(d.ID), fromDelivery(d)); err != nil {
		return err
	}
	return t.putDeliveryIndexes(d)
}

// Delivery returns one delivery, or ENOTFOUND.
func (t *tx) Delivery(id string) (pay.Delivery, error) {
	var r deliveryRecord
	if err := t.getFound(bucketDeliveries, keyID(id), &r, "delivery %s not found", id); err != nil {
		return pay.Delivery{}, err
	}
	return r.delivery(), nil
}

// UpdateDelivery writes d's State, Attempts, NextAttemptAt, LastError and
// Note over the stored delivery with the same id; UpdatedAt becomes
// Tx.Now, and a pending delivery with a zero NextAttemptAt is due at
// Tx.Now. What the delivery is about (effect, endpoint, event, payment,
// times of creation and event) is kept as stored. ENOTFOUND if the
// delivery is not stored.
func (t *tx) UpdateDelivery(d pay.Delivery) error {
	if !pay.ValidDeliveryState(d.State) {
		return pay.Errorf(pay.EINVALID, "delivery state %q is not one of pending, done, dead", d.State)
	}
	old, err := t.Delivery(d.ID)
	if err != nil {
		return err
	}
	nd := old
	nd.State, nd.Attempts, nd.NextAttemptAt, nd.LastError, nd.Note = d.State, d.Attempts, d.NextAttemptAt.UTC(), d.LastError, d.Note
	nd.UpdatedAt = t.now
	if nd.State == pay.DeliveryPending && nd.NextAttemptAt.IsZero() {
		nd.NextAttemptAt = t.now
	}
	if err := t.delDeliveryIndexes(old); err != nil {
		return err
	}
	if err := t.putRecord(bucketDeliveries, keyID(nd.ID), fromDelivery(nd)); err != nil {
		return err
	}
	return t.putDeliveryIndexes(nd)
}

// DueDeliveries walks deliveries_due from the start up to due and returns
// up to limit pending deliveries, soonest first, that are first in line:
// no earlier outbox record of the same payment is pending for the same
// target (deliveries_open). It reads every due entry it passes, blocked
// ones included, so a pass costs O(due deliveries).
func (t *tx) DueDeliveries(due time.Time, limit int) ([]pay.Delivery, error) {
	return t.DueDeliveriesSkipping(due, limit, nil)
}

// DueDeliveriesSkipping is DueDeliveries, except that it passes over the
// entries whose delivery id skip reports, without reading the delivery:
// they are neither returned nor counted against limit. A nil skip skips
// nothing. Ripple skips what it has claimed already and what waits for a
// full lane, so that a pass over a backlog costs a walk of the index keys,
// not a decode of every delivery in it.
func (t *tx) DueDeliveriesSkipping(due time.Time, limit int, skip func(id string) bool) ([]pay.Delivery, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	bound := keyTime(due)
	open := t.bucket(bucketDeliveriesOpen).Cursor()
	var out []pay.Delivery
	c := t.bucket(bucketDeliveriesDue).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		if len(k) < 8+1 {
			return nil, corrupt(bucketDeliveriesDue, "key %x", k)
		}
		if binary.BigEndian.Uint64(k[:8]) > bound {
			break
		}
		id, ok := parseKeyID(k[8:])
		if !ok {
			return nil, corrupt(bucketDeliveriesDue, "key %x", k)
		}
		if skip != nil && skip(id) {
			continue
		}
		d, err := t.Delivery(id)
		if err != nil {
			return nil, missing(err, bucketDeliveriesDue, "key %x points to missing delivery %s", k, id)
		}
		if !firstInLine(open, d) {
			continue // an earlier record of this payment goes first
		}
		out = append(out, d)
	}
	return out, nil
}

// ListDeliveries returns up to f.Limit deliveries in f.State, oldest first
// by the time they entered it (deliveries_by_state), from f.Since or after
// f.Cursor, and the cursor of the next page ("" at the end). EINVALID for
// an unknown state, a limit outside 1..1000 or a cursor of another list.
func (t *tx) ListDeliveries(f pay.DeliveryFilter) ([]pay.Delivery, string, error) {
	if err := store.CheckDeliveryFilter(f); err != nil {
		return nil, "", err
	}
	prefix := deliveryStatePrefix(f.State)
	c := t.bucket(bucketDeliveriesByState).Cursor()
	var k []byte
	if f.Cursor != "" {
		after, err := decodeCursor(f.Cursor, cursorDeliveries, prefix)
		if err != nil {
			return nil, "", err
		}
		if k, _ = c.Seek(after); k != nil && bytes.Equal(k, after) {
			k, _ = c.Next()
		}
	} else {
		k, _ = c.Seek(binary.BigEndian.AppendUint64(bytes.Clone(prefix), keyTime(f.Since)))
	}
	var out []pay.Delivery
	var last []byte
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(out) == f.Limit {
			return out, encodeCursor(cursorDeliveries, last), nil
		}
		_, id, ok := splitTimeKeyID(k, len(prefix))
		if !ok {
			return nil, "", corrupt(bucketDeliveriesByState, "key %x", k)
		}
		d, err := t.Delivery(id)
		if err != nil {
			return nil, "", missing(err, bucketDeliveriesByState, "key %x points to missing delivery %s", k, id)
		}
		out = append(out, d)
		last = bytes.Clone(k)
	}
	return out, "", nil
}

// OldestPendingDelivery returns the pending delivery whose event is the
// oldest (the first pending entry of deliveries_by_state).
func (t *tx) OldestPendingDelivery() (pay.Delivery, bool, error) {
	prefix := deliveryStatePrefix(pay.DeliveryPending)
	k, _ := t.bucket(bucketDeliveriesByState).Cursor().Seek(prefix)
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return pay.Delivery{}, false, nil
	}
	_, id, ok := splitTimeKeyID(k, len(prefix))
	if !ok {
		return pay.Delivery{}, false, corrupt(bucketDeliveriesByState, "key %x", k)
	}
	d, err := t.Delivery(id)
	if err != nil {
		return pay.Delivery{}, false, err
	}
	return d, true, nil
}

// CountDeliveries counts the entries of one state in deliveries_by_state:
// O(deliveries in that state).
func (t *tx) CountDeliveries(state string) (int, error) {
	if !pay.ValidDeliveryState(state) {
		return 0, pay.Errorf(pay.EINVALID, "state %q is not one of pending, done, dead", state)
	}
	prefix := deliveryStatePrefix(state)
	n := 0
	c := t.bucket(bucketDeliveriesByState).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n, nil
}

// PurgeDoneDeliveries removes up to limit deliveries that are done and
// entered that state strictly before before, with their index entries, and
// returns how many it removed. It walks deliveries_by_state from the start
// of "done" and stops at the first entry that is not due, so a purge costs
// O(removed). Dead letters, pending deliveries, the outbox records and the
// effects' dedupe keys are kept: a dead letter waits for a human, the
// outbox is the event history `paystate verify` replays, and a dedupe key
// is what keeps an effect from being applied twice.
func (t *tx) PurgeDoneDeliveries(before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, pay.Errorf(pay.EINVALID, "limit must be at least 1, got %d", limit)
	}
	prefix := deliveryStatePrefix(pay.DeliveryDone)
	end := binary.BigEndian.AppendUint64(bytes.Clone(prefix), keyTime(before))
	var ids []string
	c := t.bucket(bucketDeliveriesByState).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.Compare(k, end) < 0 && len(ids) < limit; k, _ = c.Next() {
		_, id, ok := splitTimeKeyID(k, len(prefix))
		if !ok {
			return 0, corrupt(bucketDeliveriesByState, "key %x", k)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		d, err := t.Delivery(id)
		if err != nil {
			return 0, err
		}
		if err := t.delDeliveryIndexes(d); err != nil {
			return 0, err
		}
		if err := t.del(bucketDeliveries, keyID(id)); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// checkOutbox reports outbox records without their by-payment entry (and
// entries without a record), a ripple cursor or purge horizon that does
// not decode, and deliveries without their index entries: every delivery
// has its deliveries_by_state entry, a pending one also its
// deliveries_due and deliveries_open entries.
func (c *checker) checkOutbox() {
	var nOutbox int
	_ = c.bucket(bucketOutbox).ForEach(func(k, v []byte) error {
		nOutbox++
		var r outboxRecord
		if err := decodeAt("outbox record", k, v, &r); err != nil {
			c.report(fmt.Errorf("outbox record %x: %w", k, err))
			return nil
		}
		c.want(bucketOutboxByPayment, outboxPaymentKey(string(r.PaymentID), r.Seq), fmt.Sprintf("outbox record %d", r.Seq))
		return nil
	})
	c.wantCount(bucketOutboxByPayment, nOutbox, "records")
	if _, err := c.RippleCursor(); err != nil {
		c.report(err)
	}
	if _, err := c.outboxHorizon(); err != nil {
		c.report(err)
	}

	var nDeliveries, nPending int
	_ = c.bucket(bucketDeliveries).ForEach(func(k, v []byte) error {
		nDeliveries++
		var r deliveryRecord
		if err := decodeAt("delivery", k, v, &r); err != nil {
			c.report(fmt.Errorf("delivery %s: %w", k, err))
			return nil
		}
		d := r.delivery()
		what := "delivery " + d.ID
		c.want(bucketDeliveriesByState, deliveryStateKey(d.State, stateTime(d), d.ID), what)
		if d.State == pay.DeliveryPending {
			nPending++
			c.want(bucketDeliveriesDue, deliveryDueKey(d.NextAttemptAt, d.ID), what)
			c.want(bucketDeliveriesOpen, deliveryOpenKey(d.Target(), d.PaymentID, d.EventSeq), what)
		}
		return nil
	})
	c.wantCount(bucketDeliveriesByState, nDeliveries, "deliveries")
	c.wantCount(bucketDeliveriesDue, nPending, "pending deliveries")
	c.wantCount(bucketDeliveriesOpen, nPending, "pending deliveries")
}
