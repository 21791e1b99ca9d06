package postgres

// The outbox (outbox, with outbox_by_payment), the ripple fan-out cursor
// and the purge horizon (meta), and the deliveries the fan-out makes of
// each record, one per target (deliveries, with deliveries_due,
// deliveries_open and deliveries_by_state).

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// outboxCols are the columns scanOutbox reads, in its order.
const outboxCols = `seq, id, type, payment_id, status, from_status, version, order_id, amount, currency,
	customer_id, customer_email, provider, created_at, refund_id, dispute_id, object_amount, object_status, amount_refunded`

// scanOutbox reads the outboxCols of a row.
func scanOutbox(r pgx.Row) (pay.OutboxRecord, error) {
	var (
		o                     pay.OutboxRecord
		seq, version, created int64
	)
	err := r.Scan(&seq, &o.ID, &o.Type, &o.PaymentID, &o.Status, &o.From, &version, &o.OrderID, &o.Amount, &o.Currency,
		&o.Customer.ID, &o.Customer.Email, &o.Provider, &created, &o.RefundID, &o.DisputeID, &o.ObjectAmount, &o.ObjectStatus, &o.AmountRefunded)
	o.Seq, o.Version, o.CreatedAt = uint64(seq), uint64(version), fromNS(created)
	return o, err
}

// outboxBase is the lowest Seq of a record appended by this package since
// schema 7; the Seqs below it are those of the outbox counter before, and
// those a copy from a bbolt file brings.
const outboxBase = 1 << 47

// outboxPerTx is how many records one transaction may append: the low 16
// bits of Seq number them.
const outboxPerTx = 1 << 16

// AppendOutbox appends r with the next Seq of the outbox; r.Seq is
// ignored. A zero CreatedAt becomes Tx.Now. The Seq is outboxBase +
// xid·2^16 + n, with xid the transaction's id (pg_current_xact_id()) and n
// the record's number within the transaction: increasing in append order
// within a transaction, never reused, and taken without any row that
// other transactions write. Seq order is the order of the transactions'
// ids, not of their commits; OutboxAfter makes it safe to follow
// (outboxBound).
func (t *tx) AppendOutbox(r pay.OutboxRecord) error {
	if err := checkPart("payment id", r.PaymentID, true); err != nil {
		return err
	}
	if t.outboxN >= outboxPerTx {
		return pay.Errorf(pay.EINVALID, "a transaction appends at most %d outbox records", outboxPerTx)
	}
	store.NowIfZero(t.now, &r.CreatedAt)
	e := enc{what: "outbox record " + r.ID}
	created := e.stamp(r.CreatedAt)
	args := []any{r.ID, r.Type, r.PaymentID, string(r.Status), string(r.From), e.u64("version", r.Version), r.OrderID, r.Amount, r.Currency,
		r.Customer.ID, r.Customer.Email, r.Provider, created, r.RefundID, r.DisputeID, r.ObjectAmount, r.ObjectStatus, r.AmountRefunded,
		int64(outboxBase + t.outboxN)}
	if e.err != nil {
		return e.err
	}
	insert := `INSERT INTO outbox (` + outboxCols + `, fanned)
		VALUES ($19::bigint + (pg_current_xact_id()::text::bigint << 16), $1, $2, $3, $4, $5, $6::bigint, $7, $8::bigint, $9, $10, $11, $12,
			$13::bigint, $14, $15, $16::bigint, $17, $18::bigint, $20)`
	// Queued with the transaction's other writes (later).
	var err error
	if t.fanOut == nil {
		err = t.later("append outbox", insert, nil, append(args, false)...)
	} else {
		// The record and its deliveries in one statement.
		var dids, effects, endpoints []string
		ds := t.fanOut.deliveries(r, t.now)
		for i, d := range ds {
			dids, effects, endpoints = append(dids, d.ID), append(effects, d.Effect), append(endpoints, d.Endpoint)
			// As the statement stores it.
			d.EventSeq, d.EventAt, d.PaymentID, d.EventID, d.EventType = 0, fromNS(created), r.PaymentID, r.ID, r.Type
			d.State, d.Attempts, d.LastError, d.Note = pay.DeliveryPending, 0, "", ""
			d.NextAttemptAt, d.CreatedAt, d.UpdatedAt = fromNS(t.nowNS()), fromNS(t.nowNS()), fromNS(t.nowNS())
			ds[i] = d
		}
		if len(ds) > 0 && t.fanOut.committed != nil {
			if len(t.fanned) == 0 {
				committed := t.fanOut.committed
				t.OnCommit(func() { committed(t.fanned) })
			}
			t.fanned = append(t.fanned, ds...)
		}
		err = t.later("append outbox", `WITH o AS (`+insert+` RETURNING seq)
			INSERT INTO deliveries (`+deliveryCols+`)
			SELECT d.id, d.effect, d.endpoint, $1, $2, o.seq, $13::bigint, $3, 'pending', 0, $21::bigint, '', '', $21::bigint, $21::bigint
			FROM o, unnest($22::text[], $23::text[], $24::text[]) AS d(id, effect, endpoint)`, nil,
			append(args, true, t.nowNS(), dids, effects, endpoints)...)
	}
	if err == nil {
		t.outboxN++
	}
	return err
}

// outboxBound is a query of one column, the lowest Seq that a record
// appended by a transaction not yet ended, or by a later one, can have as
// the statement's snapshot sees it: outboxBase + xid·2^16 for the oldest
// transaction still running (the snapshot's in-progress ids, but those of
// backends of other databases, which cannot write this outbox), or the
// snapshot's xmax. Every record below it is committed (and visible) or
// will never be: a reader that moves its cursor up to the records below
// it never passes one that commits later.
const outboxBound = `SELECT (1::bigint << 47) + (least(pg_snapshot_xmax(s), (
		SELECT min(x) FROM pg_snapshot_xip(s) x WHERE NOT EXISTS (
			SELECT 1 FROM pg_stat_activity a
			WHERE a.backend_xid IS NOT NULL AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
				AND a.backend_xid::text::bigint = (x::text::bigint & 4294967295)))
	)::text::bigint << 16) FROM pg_current_snapshot() s`

// OutboxForPayment returns a payment's outbox records in the order of its
// versions, then Seq (see firstInLine).
func (t *tx) OutboxForPayment(paymentID string) ([]pay.OutboxRecord, error) {
	return queryAll(t, "read outbox of payment", `SELECT `+outboxCols+` FROM outbox WHERE payment_id = $1 ORDER BY version, seq`, scanOutbox, paymentID)
}

// OutboxAfter returns up to limit outbox records with Seq > seq, in Seq
// order, among those below outboxBound: the records of a transaction that
// began writing before another one still running (in this database) are
// held back until that one ends, so that no record can ever appear behind
// a cursor that follows OutboxAfter (the ripple fan-out, the NATS relay).
// A long transaction delays the feed; it never loses a record.
func (t *tx) OutboxAfter(seq uint64, limit int) ([]pay.OutboxRecord, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if seq >= math.MaxInt64 {
		return nil, nil
	}
	return queryAll(t, "read outbox", `SELECT `+outboxCols+` FROM outbox WHERE seq > $1 AND seq < (`+outboxBound+`)
		ORDER BY seq LIMIT $2`, scanOutbox, int64(seq), limit)
}

// OutboxRecord returns the outbox record with the given Seq, or ENOTFOUND.
func (t *tx) OutboxRecord(seq uint64) (pay.OutboxRecord, error) {
	var (
		r     pay.OutboxRecord
		found bool
		err   error
	)
	if r, ok := t.records[seq]; ok {
		return r, nil
	}
	if seq <= math.MaxInt64 {
		// About that record alone: the queued writes of ripple's
		// batch (customers, effects, deliveries) stay queued.
		r, found, err = queryOne(t.about("outbox:"+strconv.FormatUint(seq, 10)), "read outbox",
			`SELECT `+outboxCols+` FROM outbox WHERE seq = $1`, scanOutbox, int64(seq))
	}
	return orNotFound(r, found, err, "outbox record %d not found", seq)
}

// meta returns the value of a meta row.
func (t *tx) meta(key string) (int64, error) {
	v, _, err := queryOne(t, "read "+key, `SELECT value FROM meta WHERE key = $1`, scalar[int64], key)
	return v, err
}

// RippleCursor returns the Seq of the last outbox record fanned out
// before the first one that is not (or the last record, if every one
// is), and at least the last SetRippleCursor, 0 if none: records are
// fanned out by claims (fanned), not in Seq order, so this is derived
// from them, for the callers that follow the outbox from it (the
// gauges, the copy). No lock and no row written.
func (t *tx) RippleCursor() (uint64, error) {
	v, _, err := queryOne(t, "read ripple cursor", `SELECT greatest((SELECT value FROM meta WHERE key = 'ripple_cursor'),
		(SELECT coalesce(max(seq), 0) FROM outbox WHERE seq < coalesce((SELECT min(seq) FROM outbox WHERE NOT fanned), `+
		`9223372036854775807) AND seq < (`+outboxBound+`)))`, scalar[int64])
	return uint64(v), err
}

// SetRippleCursor marks the outbox records up to seq fanned out and
// records seq as the cursor's floor. It never moves back (EINVALID): a
// record fanned out twice would be delivered twice. One statement, which
// locks the meta row only for its own update: the ripple workers do not
// call it on PostgreSQL (ClaimUnfanned).
func (t *tx) SetRippleCursor(seq uint64) error {
	e := enc{what: "ripple cursor"}
	v := e.u64("seq", seq)
	if e.err != nil {
		return e.err
	}
	cur, found, err := queryOne(t, "set ripple cursor", `WITH m AS (
			UPDATE meta SET value = $1 WHERE key = 'ripple_cursor' AND value <= $1 RETURNING value),
		f AS (UPDATE outbox SET fanned = true WHERE seq <= $1 AND NOT fanned AND EXISTS (SELECT 1 FROM m))
		SELECT value FROM meta WHERE key = 'ripple_cursor' AND NOT EXISTS (SELECT 1 FROM m)`, scalar[int64], v)
	if err != nil {
		return err
	} else if found {
		return pay.Errorf(pay.EINVALID, "ripple cursor cannot move back from %d to %d", cur, seq)
	}
	return nil
}

// ClaimUnfanned returns up to limit outbox records that are not fanned
// out, in Seq order, locked (FOR UPDATE SKIP LOCKED) so that workers of
// other instances claim others, and none of which has an earlier record
// of its payment (by version, then Seq) not fanned out: a payment's
// deliveries are created in its order. The caller writes their
// deliveries and calls MarkFanned in the same transaction. Outside a
// write transaction it locks nothing.
func (t *tx) ClaimUnfanned(limit int) ([]pay.OutboxRecord, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	lock := ""
	if t.writable {
		lock = ` FOR UPDATE SKIP LOCKED`
	}
	return queryAll(t, "claim outbox", `SELECT `+outboxCols+` FROM outbox o WHERE NOT fanned
		AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.payment_id = o.payment_id AND NOT p.fanned AND (p.version, p.seq) < (o.version, o.seq))
		ORDER BY seq LIMIT $1`+lock, scanOutbox, limit)
}

// MarkFanned marks outbox records fanned out (ClaimUnfanned).
func (t *tx) MarkFanned(seqs []uint64) error {
	v := make([]int64, 0, len(seqs))
	for _, s := range seqs {
		if s > math.MaxInt64 {
			return pay.Errorf(pay.EINVALID, "outbox seq %d is out of range", s)
		}
		v = append(v, int64(s))
	}
	_, err := t.exec("mark outbox fanned out", `UPDATE outbox SET fanned = true WHERE seq = ANY($1)`, v)
	return err
}

// PurgeOutbox removes up to limit delivered outbox records created
// strictly before before, oldest first, and returns how many it removed,
// with the rules of the bbolt store: a record is delivered when it was
// fanned out (its deliveries exist: fanned), none of its deliveries
// is pending and none became dead at or after before. The walk from the
// oldest record stops at the first one created at or after before or
// after the oldest pending delivery's event, or not fanned out. With each
// record go its events' dedupe keys ("<effect>:<event id>"); the purge
// horizon (OutboxHorizon) moves past every record removed. EINVALID for a
// limit below 1.
func (t *tx) PurgeOutbox(before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	bound := keyNS(before)
	if oldest, ok, err := t.OldestPendingDelivery(); err != nil {
		return 0, err
	} else if ok {
		bound = min(bound, keyNS(oldest.EventAt))
	}
	// Records of young dead letters.
	held, err := queryAll(t, "read dead deliveries", `SELECT DISTINCT event_seq FROM deliveries
		WHERE state = 'dead' AND state_at >= $1`, scalar[int64], keyNS(before))
	if err != nil {
		return 0, err
	}
	type due struct {
		seq     int64
		eventID string
		created int64
		fanned  bool
	}
	// A record is fanned out once and stays so; the walk reads no record
	// that a transaction still running may be followed by (outboxBound).
	recs, err := queryAll(t, "read outbox", `SELECT seq, id, created_at, fanned FROM outbox WHERE seq < (`+outboxBound+`)
		ORDER BY seq LIMIT $1`,
		func(r pgx.Row) (due, error) {
			var d due
			err := r.Scan(&d.seq, &d.eventID, &d.created, &d.fanned)
			return d, err
		}, limit+len(held))
	if err != nil {
		return 0, err
	}
	var (
		seqs []int64
		keys []string
		last int64
	)
	for _, r := range recs {
		if len(seqs) == limit || max(r.created, 0) >= bound || !r.fanned {
			break
		}
		if slices.Contains(held, r.seq) {
			continue
		}
		seqs = append(seqs, r.seq)
		for _, e := range store.EventEffects {
			keys = append(keys, e+":"+r.eventID)
		}
		last = max(last, max(r.created, 0)+1)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	_, err = t.exec("purge outbox", `WITH gone AS (DELETE FROM outbox WHERE seq = ANY($1)),
			effects AS (DELETE FROM effects WHERE key = ANY($2))
		UPDATE meta SET value = greatest(value, $3) WHERE key = 'outbox_horizon'`, seqs, keys, last)
	if err != nil {
		return 0, err
	}
	return len(seqs), nil
}

// OutboxHorizon returns the outbox purge horizon: every outbox record
// created before it may have been purged, every later one is kept. The
// zero time if no record was ever purged.
func (t *tx) OutboxHorizon() (time.Time, error) {
	ns, err := t.meta("outbox_horizon")
	return fromNS(ns), err
}

// deliveryCols are the columns scanDelivery reads, in its order.
const deliveryCols = `id, effect, endpoint, event_id, event_type, event_seq, event_at, payment_id, state,
	attempts, next_attempt_at, last_error, note, created_at, updated_at`

// scanDelivery reads the deliveryCols of a row.
func scanDelivery(r pgx.Row) (pay.Delivery, error) {
	var (
		d                      pay.Delivery
		seq, eventAt, attempts int64
		next, created, updated int64
	)
	err := r.Scan(&d.ID, &d.Effect, &d.Endpoint, &d.EventID, &d.EventType, &seq, &eventAt, &d.PaymentID, &d.State,
		&attempts, &next, &d.LastError, &d.Note, &created, &updated)
	d.EventSeq, d.EventAt, d.Attempts = uint64(seq), fromNS(eventAt), int(attempts)
	d.NextAttemptAt, d.CreatedAt, d.UpdatedAt = fromNS(next), fromNS(created), fromNS(updated)
	return d, err
}

// InsertDelivery stores a new delivery. Zero times become Tx.Now
// (NextAttemptAt only for a pending delivery). ECONFLICT if the id exists,
// or if the same target already has a pending delivery of the same outbox
// record (the unique index deliveries_open); one INSERT ... ON CONFLICT DO
// NOTHING, so a conflict leaves the transaction usable. EINVALID for a
// missing id, effect, event id or payment id, or an unknown state.
func (t *tx) InsertDelivery(d pay.Delivery) error {
	if err := store.CheckStoredDelivery(d); err != nil {
		return err
	}
	store.NowIfZero(t.now, &d.EventAt, &d.CreatedAt, &d.UpdatedAt)
	if d.State == pay.DeliveryPending && d.NextAttemptAt.IsZero() {
		d.NextAttemptAt = t.now
	}
	e := enc{what: "delivery " + d.ID}
	args := []any{d.ID, d.Effect, d.Endpoint, d.EventID, d.EventType, e.u64("event seq", d.EventSeq), e.stamp(d.EventAt), d.PaymentID, d.State,
		int64(d.Attempts), e.stamp(d.NextAttemptAt), d.LastError, d.Note, e.stamp(d.CreatedAt), e.stamp(d.UpdatedAt)}
	if e.err != nil {
		return e.err
	}
	// No lock: the id is new, and the unique indexes make a concurrent
	// insert of the same id or pending key wait for the other's outcome.
	n, err := t.exec("insert delivery", `INSERT INTO deliveries (`+deliveryCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT DO NOTHING`, args...)
	if err != nil || n == 1 {
		return err
	}
	exists, _, err := queryOne(t, "read delivery", `SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = $1)`, scalar[bool], d.ID)
	if err != nil {
		return err
	} else if exists {
		return pay.Errorf(pay.ECONFLICT, "delivery %s already exists", d.ID)
	}
	return pay.Errorf(pay.ECONFLICT, "event %d of payment %s is already pending for %s", d.EventSeq, d.PaymentID, d.Target())
}

// Delivery returns one delivery, or ENOTFOUND. In a write transaction the
// delivery is locked (lockedRow: its row, FOR NO KEY UPDATE).
func (t *tx) Delivery(id string) (pay.Delivery, error) {
	d, found, err := lockedRow(t, "delivery", id, "read delivery", `SELECT `+deliveryCols+` FROM deliveries WHERE id = $1`, scanDelivery, id)
	return orNotFound(d, found, err, "delivery %s not found", id)
}

// ClaimDeliveries returns the deliveries among ids that are pending, due
// at Tx.Now and first in line (firstInLine), each locked by its row (FOR
// NO KEY UPDATE) to the end of the transaction, as Delivery locks one, in
// one statement; those that another transaction holds are skipped (SKIP
// LOCKED), not waited for: a ripple worker of another instance is
// applying them. Outside a write transaction it locks nothing. In a write
// transaction it also reads their outbox records and locks the customers
// of the loyalty and retention deliveries (prefetch).
func (t *tx) ClaimDeliveries(ids []string) ([]pay.Delivery, error) {
	lock := ""
	if t.writable {
		lock = ` FOR NO KEY UPDATE OF d SKIP LOCKED`
	}
	ds, err := queryAll(t, "claim deliveries", `SELECT `+deliveryCols+` FROM deliveries d
		WHERE d.id = ANY($1) AND d.state = 'pending' AND d.next_attempt_at <= $2 AND `+firstInLine+`
		ORDER BY d.id`+lock, scanDelivery, ids, t.nowNS())
	if err != nil || !t.writable {
		return ds, err
	}
	for _, d := range ds {
		t.hold("delivery:" + d.ID)
	}
	return ds, t.prefetch(ds)
}

// prefetch reads, for the deliveries a write transaction claimed, their
// outbox records (OutboxRecord then costs no statement) and locks the
// accounts of the customers that the loyalty and retention deliveries
// among them will credit, in the order of their ids, in one statement
// each: the batches of two instances that credit the same customers take
// those row locks in one order, not each in its deliveries' order, and
// so never deadlock; CustomerAccount then costs no statement.
func (t *tx) prefetch(ds []pay.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	var seqs, custSeqs []int64
	for _, d := range ds {
		if d.EventSeq > math.MaxInt64 || slices.Contains(seqs, int64(d.EventSeq)) {
			continue
		}
		seqs = append(seqs, int64(d.EventSeq))
		if d.Effect == pay.EffectLoyalty || d.Effect == pay.EffectRetention {
			custSeqs = append(custSeqs, int64(d.EventSeq))
		}
	}
	recs, err := queryAll(t.about("outbox"), "read outbox", `SELECT `+outboxCols+` FROM outbox WHERE seq = ANY($1)`, scanOutbox, seqs)
	if err != nil {
		return err
	}
	if t.records == nil {
		t.records = map[uint64]pay.OutboxRecord{}
	}
	var customers []string
	for _, r := range recs {
		t.records[r.Seq] = r
		if r.Customer.ID != "" && slices.Contains(custSeqs, int64(r.Seq)) && !slices.Contains(customers, r.Customer.ID) {
			if _, known := t.customers[r.Customer.ID]; !known && !t.locked["customer:"+r.Customer.ID] {
				customers = append(customers, r.Customer.ID)
			}
		}
	}
	found, err := lockedRows(t, "customer", "lock customers", `SELECT id, points, last_visit_at, updated_at FROM customers
		WHERE id = ANY($1) ORDER BY id`, customers, func(r pgx.Row) (store.CustomerAccount, error) {
		var (
			c              store.CustomerAccount
			visit, updated int64
		)
		err := r.Scan(&c.ID, &c.Points, &visit, &updated)
		c.LastVisitAt, c.UpdatedAt = fromNS(visit), fromNS(updated)
		return c, err
	})
	if err != nil {
		return err
	}
	for _, id := range customers {
		t.keepCustomer(id, false, store.CustomerAccount{})
	}
	for _, c := range found {
		t.keepCustomer(c.ID, true, c)
		t.hold("customer:" + c.ID)
	}
	return nil
}

// UpdateDelivery writes d's State, Attempts, NextAttemptAt, LastError and
// Note over the stored delivery with the same id; UpdatedAt becomes
// Tx.Now, and a pending delivery with a zero NextAttemptAt is due at
// Tx.Now. What the delivery is about is kept as stored. ENOTFOUND if the
// delivery is not stored. Making a delivery pending again while another
// delivery of the same record is pending for the same target breaks the
// unique index deliveries_open: ECONFLICT, and the transaction is aborted.
func (t *tx) UpdateDelivery(d pay.Delivery) error {
	if !pay.ValidDeliveryState(d.State) {
		return pay.Errorf(pay.EINVALID, "delivery state %q is not one of pending, done, dead", d.State)
	}
	e := enc{what: "delivery " + d.ID}
	next := e.stamp(d.NextAttemptAt)
	if e.err != nil {
		return e.err
	}
	if d.State == pay.DeliveryPending && next == 0 {
		next = t.nowNS()
	}
	// No lock but the row's, which the UPDATE takes. A delivery this
	// transaction holds (Delivery, ClaimDeliveries) and that leaves the
	// pending state cannot miss nor break deliveries_open: the update is
	// queued with the other writes (later).
	const update = `UPDATE deliveries SET state = $2, attempts = $3, next_attempt_at = $4,
		last_error = $5, note = $6, updated_at = $7 WHERE id = $1`
	args := []any{d.ID, d.State, int64(d.Attempts), next, d.LastError, d.Note, t.nowNS()}
	if t.locked["delivery:"+d.ID] && d.State != pay.DeliveryPending {
		return t.laterRow("delivery update", "delivery:"+d.ID, args...)
	}
	n, err := t.exec("update delivery", update, args...)
	if err != nil {
		if pay.ErrorCode(err) == pay.ECONFLICT && !isRetryable(err) {
			return pay.Errorf(pay.ECONFLICT, "delivery %s: another delivery of its event is pending for its target", d.ID)
		}
		return err
	}
	if n == 0 {
		return pay.Errorf(pay.ENOTFOUND, "delivery %s not found", d.ID)
	}
	return nil
}

// firstInLine is the condition of a pending delivery d that no earlier
// outbox record of the same payment is pending for the same target
// (deliveries_open). Earlier is by the payment's version, then Seq: a
// payment's transitions are ordered by its version (the compare-and-set),
// while Seqs follow transaction ids, which a transaction that wrote
// something before it took the payment may hold from before the previous
// transition. A delivery whose record is gone counts as version 0. It
// reads the pending rows whether another transaction has locked them or
// not.
const firstInLine = `NOT EXISTS (SELECT 1 FROM deliveries e
	LEFT JOIN outbox eo ON eo.seq = e.event_seq
	WHERE e.state = 'pending' AND e.target = d.target AND e.payment_id = d.payment_id
		AND (coalesce(eo.version, 0), e.event_seq) < (coalesce((SELECT version FROM outbox WHERE seq = d.event_seq), 0), d.event_seq))`

// DueDeliveries returns up to limit pending deliveries due at or before
// due, soonest first (deliveries_due), that are first in line for their
// payment and target. In a write transaction (Update) it locks the rows
// it returns, FOR UPDATE SKIP LOCKED: a delivery that another transaction
// has locked (another instance's worker that took it in its own Update)
// is passed over, and the deliveries behind it in line too, so two
// instances that ask at once get different deliveries. In View it locks
// nothing. (Delivery, in an Update, locks the row too: a delivery another
// transaction read to claim or record it is passed over as well.)
func (t *tx) DueDeliveries(due time.Time, limit int) ([]pay.Delivery, error) {
	return t.DueDeliveriesSkipping(due, limit, nil)
}

// DueDeliveriesSkipping is DueDeliveries passing over the deliveries whose
// id skip reports, without reading them: they are neither returned, nor
// counted against limit, nor locked. It reads pages of the ids and due
// times of deliveries_due, asks skip, then reads (and in Update locks) the
// rest. A nil skip skips nothing, and then it is one statement.
func (t *tx) DueDeliveriesSkipping(due time.Time, limit int, skip func(id string) bool) ([]pay.Delivery, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	lock := ""
	if t.writable {
		lock = ` FOR UPDATE OF d SKIP LOCKED`
	}
	bound := keyNS(due)
	if skip == nil {
		return queryAll(t, "read due deliveries", `SELECT `+deliveryCols+` FROM deliveries d
			WHERE d.state = 'pending' AND d.next_attempt_at <= $1 AND `+firstInLine+`
			ORDER BY d.next_attempt_at, d.id LIMIT $2`+lock, scanDelivery, bound, limit)
	}
	type entry struct {
		id   string
		next int64
	}
	page := min(max(2*limit, 64), 1000)
	var (
		out      []pay.Delivery
		afterNS  = int64(math.MinInt64)
		afterID  = ""
		readRows = func(r pgx.Row) (entry, error) {
			var e entry
			err := r.Scan(&e.id, &e.next)
			return e, err
		}
	)
	for len(out) < limit {
		es, err := queryAll(t, "read due deliveries", `SELECT id, next_attempt_at FROM deliveries
			WHERE state = 'pending' AND next_attempt_at <= $1 AND (next_attempt_at, id) > ($2, $3)
			ORDER BY next_attempt_at, id LIMIT $4`, readRows, bound, afterNS, afterID, page)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, e := range es {
			if !skip(e.id) {
				ids = append(ids, e.id)
			}
		}
		if len(ids) > 0 {
			ds, err := queryAll(t, "read due deliveries", `SELECT `+deliveryCols+` FROM deliveries d
				WHERE d.id = ANY($1) AND d.state = 'pending' AND d.next_attempt_at <= $2 AND `+firstInLine+`
				ORDER BY d.next_attempt_at, d.id LIMIT $3`+lock, scanDelivery, ids, bound, limit-len(out))
			if err != nil {
				return nil, err
			}
			out = append(out, ds...)
		}
		if len(es) < page {
			break
		}
		afterNS, afterID = es[len(es)-1].next, es[len(es)-1].id
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
	prefix := statePrefix(f.State)
	var (
		ds  []pay.Delivery
		err error
	)
	const q = `SELECT ` + deliveryCols + `, state_at FROM deliveries WHERE state = $1 AND `
	type row struct {
		d  pay.Delivery
		at int64
	}
	scan := func(r pgx.Row) (row, error) {
		var x row
		var seq, eventAt, attempts, next, created, updated int64
		err := r.Scan(&x.d.ID, &x.d.Effect, &x.d.Endpoint, &x.d.EventID, &x.d.EventType, &seq, &eventAt, &x.d.PaymentID, &x.d.State,
			&attempts, &next, &x.d.LastError, &x.d.Note, &created, &updated, &x.at)
		x.d.EventSeq, x.d.EventAt, x.d.Attempts = uint64(seq), fromNS(eventAt), int(attempts)
		x.d.NextAttemptAt, x.d.CreatedAt, x.d.UpdatedAt = fromNS(next), fromNS(created), fromNS(updated)
		return x, err
	}
	var rows []row
	if f.Cursor != "" {
		ns, id, derr := decodeCursor(f.Cursor, cursorDeliveries, prefix)
		if derr != nil {
			return nil, "", derr
		}
		rows, err = queryAll(t, "list deliveries", q+`(state_at, id) > ($2, $3) ORDER BY state_at, id LIMIT $4`, scan, f.State, ns, id, f.Limit+1)
	} else {
		rows, err = queryAll(t, "list deliveries", q+`state_at >= $2 ORDER BY state_at, id LIMIT $3`, scan, f.State, keyNS(f.Since), f.Limit+1)
	}
	if err != nil {
		return nil, "", err
	}
	for _, r := range rows[:min(len(rows), f.Limit)] {
		ds = append(ds, r.d)
	}
	if len(rows) <= f.Limit {
		return ds, "", nil
	}
	last := rows[f.Limit-1]
	return ds, encodeCursor(cursorDeliveries, prefix, last.at, last.d.ID), nil
}

// OldestPendingDelivery returns the pending delivery whose event is the
// oldest (the first pending row of deliveries_by_state).
func (t *tx) OldestPendingDelivery() (pay.Delivery, bool, error) {
	return queryOne(t, "read oldest pending delivery", `SELECT `+deliveryCols+` FROM deliveries
		WHERE state = 'pending' ORDER BY state_at, id LIMIT 1`, scanDelivery)
}

// CountDeliveries counts the deliveries in one state.
func (t *tx) CountDeliveries(state string) (int, error) {
	if !pay.ValidDeliveryState(state) {
		return 0, pay.Errorf(pay.EINVALID, "state %q is not one of pending, done, dead", state)
	}
	n, _, err := queryOne(t, "count deliveries", `SELECT count(*) FROM deliveries WHERE state = $1`, scalar[int64], state)
	return int(n), err
}

// PurgeDoneDeliveries removes up to limit deliveries that are done and
// entered that state strictly before before, oldest first, and returns how
// many it removed. Dead letters, pending deliveries, the outbox records and
// the effects' dedupe keys are kept.
func (t *tx) PurgeDoneDeliveries(before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, pay.Errorf(pay.EINVALID, "limit must be at least 1, got %d", limit)
	}
	// The outer condition is checked again on a row that a concurrent
	// transaction changed (READ COMMITTED): a delivery retried meanwhile
	// is kept.
	n, err := t.exec("purge done deliveries", `DELETE FROM deliveries WHERE id IN (
		SELECT id FROM deliveries WHERE state = 'done' AND state_at < $1 ORDER BY state_at, id LIMIT $2)
		AND state = 'done' AND state_at < $1`, keyNS(before), limit)
	return int(n), err
}
