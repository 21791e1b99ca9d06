package postgres

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// tx is one PostgreSQL transaction seen as a store.Tx. It is used by one
// goroutine.
type tx struct {
	ctx      context.Context
	conn     *pgx.Conn // of the pool, for this transaction alone
	now      time.Time
	writable bool // Update, not View: rows may be locked (DueDeliveries)
	onCommit []func()

	// failed is the error of the first statement that failed: PostgreSQL
	// has aborted the transaction, every later statement fails with it,
	// and so does the commit.
	failed error

	// locked are the record keys ("family:key") the transaction holds:
	// their row, read FOR NO KEY UPDATE (lockedRow) or written.
	locked map[string]bool
	// absent are the record keys a write transaction read and found
	// missing (lockedRow): there was no row to lock, so the record's
	// writer inserts it only if still missing (put).
	absent map[string]bool
	// queued are writes not sent yet (later), after the transaction's
	// BEGIN until its first statement: they go to PostgreSQL in one
	// round trip with the next statement, or with the commit.
	queued []queuedWrite
	// ended is set when the COMMIT was sent and succeeded.
	ended bool
	// next are the records the next statement reads or writes (about):
	// the queued writes of other records stay queued.
	next []string
	// customers are the customer accounts the transaction holds, as
	// stored now (nil: absent), read once (CustomerAccount).
	customers map[string]*store.CustomerAccount
	// records are the outbox records read for the deliveries claimed
	// (ClaimDeliveries): a record never changes.
	records map[uint64]pay.OutboxRecord
	// effects are the effect records the transaction holds (LockEffects),
	// as it stored or found them (nil: absent).
	effects map[string]*store.EffectRecord

	// payments are the payments the transaction holds locked, as stored
	// (read by Payment, or written): read again, they cost no statement.
	payments map[string]pay.Payment
	// leases are the leases read with the payments (Payment), until the
	// transaction writes them.
	leases map[string]pay.Lease
	// processed are the processed marks of events read with their inbox
	// entry (InboxEvent), under the payment's lock.
	processed map[string]processedRead
	// inboxAbsent are the events whose inbox entry InboxEvent found
	// missing: PutInbox expects to insert them.
	inboxAbsent map[string]bool

	// outboxN is how many outbox records the transaction appended.
	outboxN int
	// fanOut, if set, gives the deliveries of an appended record
	// (DB.SetFanOut); fanned are those the transaction wrote, for its
	// committed after the commit.
	fanOut *fanOut
	fanned []pay.Delivery
}

var _ store.Tx = (*tx)(nil)

// Now returns the time read when the transaction began, in UTC.
func (t *tx) Now() time.Time { return t.now }

// OnCommit registers fn to run after a successful commit.
func (t *tx) OnCommit(fn func()) { t.onCommit = append(t.onCommit, fn) }

// nowNS is Tx.Now as stored.
func (t *tx) nowNS() int64 { return keyNS(t.now) }

// hold records that the transaction holds the record k ("family:key").
func (t *tx) hold(k string) {
	if t.locked == nil {
		t.locked = map[string]bool{}
	}
	t.locked[k] = true
	delete(t.absent, k)
}

// lockedRow reads the row of one record with sql (a query of at most one
// row, without a locking clause). In a write transaction the row is read
// FOR NO KEY UPDATE: its row lock is taken and, after any transaction
// that held it ended, its newest version read, in one statement. A
// record that does not exist has no row to lock and takes no other lock:
// it is marked absent, and its writer (put) then inserts it only if it
// is still missing; a transaction that created it meanwhile makes the
// write a conflict that runs the transaction again (retryableError),
// which then finds the row and locks it. No advisory lock: two
// transactions of different records never wait for each other.
func lockedRow[T any](t *tx, family, key, op, sql string, scan func(pgx.Row) (T, error), args ...any) (T, bool, error) {
	k := family + ":" + key
	if !t.writable || t.locked[k] {
		return queryOne(t.about(k), op, sql, scan, args...)
	}
	v, found, err := queryOne(t.about(k), op, sql+` FOR NO KEY UPDATE`, scan, args...)
	if err != nil {
		return v, false, err
	}
	if found {
		t.hold(k)
	} else {
		if t.absent == nil {
			t.absent = map[string]bool{}
		}
		t.absent[k] = true
	}
	return v, found, nil
}

// lockedRows reads the rows of the records of family with the given
// keys with sql (a query of the keys as $1, ending in its ORDER BY, which
// is the order the rows are locked in), each locked by its row (FOR NO
// KEY UPDATE), in one statement about those records (about), and marks
// every key absent: the caller holds those found (hold), and the others
// are inserted only if still missing, as with lockedRow. No keys, no
// statement.
func lockedRows[T any](t *tx, family, op, sql string, keys []string, scan func(pgx.Row) (T, error)) ([]T, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	records := make([]string, len(keys))
	for i, k := range keys {
		records[i] = family + ":" + k
	}
	found, err := queryAll(t.about(records...), op, sql+` FOR NO KEY UPDATE`, scan, keys)
	if err != nil {
		return nil, err
	}
	if t.absent == nil {
		t.absent = map[string]bool{}
	}
	for _, r := range records {
		t.absent[r] = true
	}
	return found, nil
}

// put writes one record of family and key with upsert (an INSERT ... ON
// CONFLICT DO UPDATE), or, if the transaction read the record and found
// it missing (lockedRow), with insert (the INSERT of the same values
// alone), which must insert it: a row that another transaction created
// since the read would be overwritten by a write based on what was read,
// so then the transaction runs again (laterInsert). The write is queued;
// the record is held afterwards.
func (t *tx) put(family, key, op, upsert, insert string, args ...any) error {
	k := family + ":" + key
	if _, ok := rowKinds[family+" upsert"]; ok {
		// A row of a kind that merges: the statement is the kind's.
		kind := family + " upsert"
		if t.absent[k] {
			kind = family + " insert"
		}
		if err := t.laterRow(kind, k, args...); err != nil {
			return err
		}
		t.hold(k)
		return nil
	}
	if !t.absent[k] {
		if err := t.later(op, upsert, nil, args...); err != nil {
			return err
		}
	} else if err := t.laterInsert(op, insert, family+" "+key, args...); err != nil {
		return err
	}
	t.hold(k)
	return nil
}

// laterInsert queues insert, an INSERT without ON CONFLICT that must
// insert (queuedWrite.mustInsert): if the row exists, the transaction
// runs again.
func (t *tx) laterInsert(op, insert, what string, args ...any) error {
	if err := t.usable(op, args); err != nil {
		return err
	}
	t.queued = append(t.queued, queuedWrite{op: op, sql: insert, args: args, mustInsert: what})
	return nil
}

// retry returns an error that runs the transaction again, as a
// serialization failure does: what it read is out of date.
func retry(op, msg string) error {
	return &retryableError{op: op, err: &pgconn.PgError{Severity: "ERROR", Code: "40001", Message: msg}}
}

// queuedWrite is a write that later queued: its statement, and the check
// of how many rows it affected (nil: any number), or mustInsert: the
// statement is an INSERT without ON CONFLICT whose unique violation runs
// the transaction again (a row created by a concurrent transaction).
// PostgreSQL itself fails mustInsert, so a COMMIT queued after it is not
// run; a check runs in the client, so a transaction with a write to
// check sends its COMMIT after the checks (commit).
type queuedWrite struct {
	op, sql    string
	args       []any
	check      func(n int64) error
	mustInsert string // what was created meanwhile, for the error
	// key is the record written ("family:key"), "" when the write is not
	// about one record: a statement about other records (about) leaves
	// it queued.
	key string
	// row, if set, is the write as one row of a kind (rowKinds): when
	// sent, the queued rows of one kind go in one statement (merge).
	row *rowWrite
}

// rowWrite is a queued write of one row of a kind of rowKinds.
type rowWrite struct {
	kind   string
	values []any // the kind's columns, in order: string or int64
}

// rowKind is a write that many rows share: its table, its columns and
// their types, and what is done with the rows: "upsert" (tail, an ON
// CONFLICT clause, after an INSERT ... SELECT of the rows), "insert" (the
// INSERT alone: each row must insert, mustInsert) or "update" (an UPDATE
// of the rows' first column, which each row must find).
type rowKind struct {
	table string
	cols  []string
	types []string
	how   string
	tail  string
}

// rowKinds are the writes that merge: customer accounts, effect records
// and deliveries that leave pending, the writes of ripple's batches.
var rowKinds = map[string]rowKind{
	"customer upsert": {table: "customers", cols: customerCols, types: customerTypes, how: "upsert",
		tail: `ON CONFLICT (id) DO UPDATE SET points = excluded.points, last_visit_at = excluded.last_visit_at, updated_at = excluded.updated_at`},
	"customer insert": {table: "customers", cols: customerCols, types: customerTypes, how: "insert"},
	"effect upsert": {table: "effects", cols: effectCols, types: effectTypes, how: "upsert",
		tail: `ON CONFLICT (key) DO UPDATE SET delivery_id = excluded.delivery_id, points = excluded.points, at = excluded.at`},
	"effect insert": {table: "effects", cols: effectCols, types: effectTypes, how: "insert"},
	"delivery update": {table: "deliveries", how: "update",
		cols:  []string{"id", "state", "attempts", "next_attempt_at", "last_error", "note", "updated_at"},
		types: []string{"text", "text", "bigint", "bigint", "text", "text", "bigint"}},
}

// statement returns the statement that writes rows, and its arguments:
// one array of each column.
func (k rowKind) statement(rows [][]any) (string, []any) {
	var (
		args  = make([]any, len(k.cols))
		parts = make([]string, len(k.cols))
	)
	for c, typ := range k.types {
		parts[c] = "$" + strconv.Itoa(c+1) + "::" + typ + "[]"
		if typ == "text" {
			v := make([]string, len(rows))
			for i, r := range rows {
				v[i] = r[c].(string)
			}
			args[c] = v
		} else {
			v := make([]int64, len(rows))
			for i, r := range rows {
				v[i] = r[c].(int64)
			}
			args[c] = v
		}
	}
	rowsSQL := `unnest(` + strings.Join(parts, ", ") + `) AS v(` + strings.Join(k.cols, ", ") + `)`
	if k.how == "update" {
		set := make([]string, 0, len(k.cols)-1)
		for _, c := range k.cols[1:] {
			set = append(set, c+" = v."+c)
		}
		return `UPDATE ` + k.table + ` t SET ` + strings.Join(set, ", ") + ` FROM ` + rowsSQL + ` WHERE t.` + k.cols[0] + ` = v.` + k.cols[0], args
	}
	// In the order of the key, so that two transactions take the rows'
	// locks in one order.
	return `INSERT INTO ` + k.table + ` (` + strings.Join(k.cols, ", ") + `) SELECT * FROM ` + rowsSQL +
		` ORDER BY 1 ` + k.tail, args
}

// laterRow queues the write of one row of kind, of the record key: a
// queued write of the same record is given the new values instead (it
// keeps its kind: a row that must be inserted still must).
func (t *tx) laterRow(kind, key string, values ...any) error {
	if err := t.usable(kind, values); err != nil {
		return err
	}
	for i := range t.queued {
		if w := &t.queued[i]; w.key == key && w.row != nil {
			w.row.values = values
			return nil
		}
	}
	t.queued = append(t.queued, queuedWrite{op: kind, key: key, row: &rowWrite{kind: kind, values: values}})
	return nil
}

// merge returns q with the rows of each kind written by one statement, in
// the place of the kind's first row.
func merge(q []queuedWrite) []queuedWrite {
	rows := map[string][][]any{}
	for _, w := range q {
		if w.row != nil {
			rows[w.row.kind] = append(rows[w.row.kind], w.row.values)
		}
	}
	if len(rows) == 0 {
		return q
	}
	out := make([]queuedWrite, 0, len(q))
	for _, w := range q {
		if w.row == nil {
			out = append(out, w)
			continue
		}
		rs, ok := rows[w.row.kind]
		if !ok {
			continue // merged into the kind's first row
		}
		delete(rows, w.row.kind)
		k := rowKinds[w.row.kind]
		m := queuedWrite{op: w.row.kind}
		m.sql, m.args = k.statement(rs)
		switch k.how {
		case "insert":
			m.mustInsert = fmt.Sprintf("a row of the %d of %s", len(rs), k.table)
		case "update":
			m.check = func(n int64) error {
				if n != int64(len(rs)) {
					return retry(m.op, fmt.Sprintf("%d of %d rows of %s updated under their row locks", n, len(rs), k.table))
				}
				return nil
			}
		}
		out = append(out, m)
	}
	return out
}

// about says which records ("family:key") the next statement reads or
// writes: the queued writes of other records are not sent with it.
func (t *tx) about(keys ...string) *tx {
	t.next = keys
	return t
}

// flushFirst reports whether the queued writes go before the next
// statement: any, unless the statement said which records it is about
// (about) and no queued write is about one of them or about no one
// record.
func (t *tx) flushFirst() bool {
	keys := t.next
	t.next = nil
	if len(t.queued) == 0 {
		return false
	}
	if keys == nil {
		return true
	}
	for _, w := range t.queued {
		if w.key == "" || slices.Contains(keys, w.key) {
			return true
		}
	}
	return false
}

// commit sends the queued writes and the COMMIT, in one round trip when
// no queued write is checked in the client, and ends the transaction. A
// transaction that sent nothing has nothing to end.
func (t *tx) commit() error {
	if t.failed != nil {
		return t.failed
	}
	if len(t.queued) == 1 && t.queued[0].sql == t.beginSQL() {
		t.queued, t.ended = nil, true
		return nil
	}
	t.queued = merge(t.queued) // the checks of merged rows too
	checked := false
	for _, w := range t.queued {
		checked = checked || w.check != nil
	}
	if checked {
		if err := t.flush(); err != nil {
			return err
		}
	}
	t.queued = append(t.queued, queuedWrite{op: "commit", sql: "COMMIT"})
	if err := t.flush(); err != nil {
		return err
	}
	t.ended = true
	return nil
}

// beginSQL is the BEGIN that begin queued.
func (t *tx) beginSQL() string {
	if t.writable {
		return `BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE`
	}
	return `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
}

// end rolls back a transaction that commit did not end, so that its
// connection goes back to the pool idle (one it cannot reset is closed
// by the pool).
func (t *tx) end() {
	if t.ended || t.conn.PgConn().TxStatus() == 'I' {
		return
	}
	_, _ = t.conn.Exec(context.WithoutCancel(t.ctx), "ROLLBACK")
}

// later queues a write whose outcome the caller does not need at once:
// it is sent with the next statement of the transaction, in one round
// trip (a pgx.Batch), or before the commit, so that a transaction's
// writes cost one round trip, not one each. Its failure fails the
// transaction (the next statement, or the commit, returns it); check,
// if set, sees how many rows it affected and may fail it too.
func (t *tx) later(op, sql string, check func(n int64) error, args ...any) error {
	if err := t.usable(op, args); err != nil {
		return err
	}
	t.queued = append(t.queued, queuedWrite{op: op, sql: sql, args: args, check: check})
	return nil
}

// flush sends the queued writes, in one round trip.
func (t *tx) flush() error {
	if len(t.queued) == 0 {
		return t.failed
	}
	return t.send("", "", nil, nil)
}

// send sends the queued writes and then, if sql is set, the statement
// (sql, args), in one pgx.Batch, and hands sql's result to read. The
// first failure is the transaction's (fail).
func (t *tx) send(op, sql string, args []any, read func(pgx.BatchResults) error) error {
	if t.failed != nil {
		return t.failed
	}
	q := merge(t.queued)
	t.queued = nil
	b := &pgx.Batch{}
	for _, w := range q {
		b.Queue(w.sql, w.args...)
	}
	if sql != "" {
		b.Queue(sql, args...)
	}
	br := t.conn.SendBatch(t.ctx, b)
	var err error
	for _, w := range q {
		tag, werr := br.Exec()
		var pe *pgconn.PgError
		switch {
		case werr != nil && w.mustInsert != "" && errors.As(werr, &pe) && pe.Code == "23505":
			err = retry(w.op, w.mustInsert+" was created by a concurrent transaction after this one read it missing")
			if t.failed == nil {
				t.failed = err
			}
		case werr != nil:
			// A failure that is not PostgreSQL's answer is the
			// connection's (the outcome of a COMMIT in the batch is
			// then unknown): EUNAVAILABLE, never run again.
			err = classify(w.op, werr, true)
			if t.failed == nil {
				t.failed = err
			}
		case w.check != nil:
			if cerr := w.check(tag.RowsAffected()); cerr != nil && t.failed == nil {
				t.failed, err = cerr, cerr
			}
		}
		if err != nil {
			break
		}
	}
	if err == nil && sql != "" {
		if rerr := read(br); rerr != nil {
			err = rerr
		}
	}
	if cerr := br.Close(); cerr != nil && err == nil {
		err = t.fail(op, cerr)
	}
	return err
}

// joinKey joins the parts of a key for lock, each with its length, so
// that parts never run into each other.
func joinKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// exec runs a statement and returns the rows it affected.
func (t *tx) exec(op, sql string, args ...any) (int64, error) {
	flush := t.flushFirst()
	if err := t.usable(op, args); err != nil {
		return 0, err
	}
	if flush {
		var n int64
		err := t.send(op, sql, args, func(br pgx.BatchResults) error {
			tag, err := br.Exec()
			if err != nil {
				return t.fail(op, err)
			}
			n = tag.RowsAffected()
			return nil
		})
		return n, err
	}
	tag, err := t.conn.Exec(t.ctx, sql, args...)
	if err != nil {
		return 0, t.fail(op, err)
	}
	return tag.RowsAffected(), nil
}

// queryOne runs a query of at most one row and scans it with scan; found
// is false if there is no row.
func queryOne[T any](t *tx, op, sql string, scan func(pgx.Row) (T, error), args ...any) (v T, found bool, err error) {
	flush := t.flushFirst()
	if err := t.usable(op, args); err != nil {
		return v, false, err
	}
	if flush {
		err = t.send(op, sql, args, func(br pgx.BatchResults) error {
			var serr error
			v, serr = scan(br.QueryRow())
			if errors.Is(serr, pgx.ErrNoRows) {
				return nil
			} else if serr != nil {
				return t.fail(op, serr)
			}
			found = true
			return nil
		})
		return v, found, err
	}
	v, err = scan(t.conn.QueryRow(t.ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return v, false, nil
	} else if err != nil {
		return v, false, t.fail(op, err)
	}
	return v, true, nil
}

// orNotFound returns the row queryOne or lockedRow read: v, their error,
// or ENOTFOUND with the message of format when there was no row.
func orNotFound[T any](v T, found bool, err error, format string, args ...any) (T, error) {
	var zero T
	switch {
	case err != nil:
		return zero, err
	case !found:
		return zero, pay.Errorf(pay.ENOTFOUND, format, args...)
	}
	return v, nil
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](t *tx, op, sql string, scan func(pgx.Row) (T, error), args ...any) ([]T, error) {
	flush := t.flushFirst()
	if err := t.usable(op, args); err != nil {
		return nil, err
	}
	collect := func(rows pgx.Rows, err error) ([]T, error) {
		if err != nil {
			return nil, t.fail(op, err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
		if err != nil {
			return nil, t.fail(op, err)
		}
		return out, nil
	}
	if flush {
		var out []T
		err := t.send(op, sql, args, func(br pgx.BatchResults) (err error) {
			out, err = collect(br.Query())
			return err
		})
		return out, err
	}
	return collect(t.conn.Query(t.ctx, sql, args...))
}

// scalar scans a row of one column.
func scalar[T any](r pgx.Row) (T, error) {
	var v T
	err := r.Scan(&v)
	return v, err
}

// usable refuses a statement after one failed (the transaction is
// aborted), and text that PostgreSQL cannot store (not UTF-8, or a NUL
// byte) before it is sent, so that bad input is EINVALID and leaves the
// transaction usable.
func (t *tx) usable(op string, args []any) error {
	if t.failed != nil {
		return fmt.Errorf("%s: the transaction was aborted by an earlier error: %w", op, t.failed)
	}
	for _, a := range args {
		switch a := a.(type) {
		case string:
			if err := storableText(a); err != nil {
				return err
			}
		case []string:
			for _, s := range a {
				if err := storableText(s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// storableText returns EINVALID for text that PostgreSQL does not store.
func storableText(s string) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return pay.Errorf(pay.EINVALID, "text %.40q is not UTF-8 or holds a NUL byte: it cannot be stored", s)
	}
	return nil
}

// fail records the first failure of a statement and returns it,
// classified (see classify).
func (t *tx) fail(op string, err error) error {
	err = classify(op, err, false)
	if t.failed == nil {
		t.failed = err
	}
	return err
}

// Times are stored as bigint nanoseconds since 1970, in UTC; 0 is the zero
// time (and so, read back, the instant of 1970 itself, as in the bbolt
// store). A time outside what an int64 of nanoseconds holds (before 1678,
// after 2262) cannot be stored (EINVALID).
var (
	minStamp = time.Unix(0, math.MinInt64)
	maxStamp = time.Unix(0, math.MaxInt64)
)

// enc converts the values of one record for storage, keeping the first
// error.
type enc struct {
	what string
	err  error
}

// stamp returns t as stored.
func (e *enc) stamp(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if t.Before(minStamp) || t.After(maxStamp) {
		if e.err == nil {
			e.err = pay.Errorf(pay.EINVALID, "%s cannot be stored: time %s is outside the years 1678 to 2262", e.what, t.Format(time.RFC3339))
		}
		return 0
	}
	return t.UnixNano()
}

// u64 returns v as a bigint.
func (e *enc) u64(field string, v uint64) int64 {
	if v > math.MaxInt64 {
		if e.err == nil {
			e.err = pay.Errorf(pay.EINVALID, "%s cannot be stored: %s %d is above %d", e.what, field, v, int64(math.MaxInt64))
		}
		return 0
	}
	return int64(v)
}

// fromNS is the inverse of enc.stamp.
func fromNS(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// storedNS is the stored value of a time read back from the database.
func storedNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// keyNS is a time bound of a query: t in nanoseconds, clamped to [0,
// MaxInt64] as the bbolt store clamps the times of its keys (the zero time
// and anything before 1970 are 0).
func keyNS(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Before(time.Unix(0, 0)):
		return 0
	case t.After(maxStamp):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// nilIfEmpty returns nil for an empty byte slice, as the bbolt store reads
// back an empty body.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// orEmpty returns b, or an empty slice for nil: bytea columns are NOT NULL.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// List cursors are opaque to callers: unpadded base64url of the kind of
// list, its prefix (the status or order id it lists), and the sort key of
// the last row of the page (be64 of its time, then its id), the layout of
// the bbolt store's cursors. A cursor of one list is EINVALID for another.
const (
	cursorCreated    = 'c' // ListPayments, no filter: created_at, id
	cursorStatus     = 's' // ListPayments by status: updated_at, id
	cursorOrder      = 'o' // ListPayments by order id: created_at, id
	cursorDeliveries = 'd' // ListDeliveries: state_at, id
)

// statePrefix is s ‖ 0x00: the prefix of a cursor of one status or
// delivery state (known constants without a NUL byte).
func statePrefix(s string) []byte { return append([]byte(s), 0) }

// orderPrefix is be16(len(order id)) ‖ order id: the prefix of a cursor of
// one order.
func orderPrefix(orderID string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(orderID))), orderID...)
}

// encodeCursor returns the cursor after the row (ns, id) of a list.
func encodeCursor(kind byte, prefix []byte, ns int64, id string) string {
	b := append([]byte{kind}, prefix...)
	b = binary.BigEndian.AppendUint64(b, uint64(ns))
	return base64.RawURLEncoding.EncodeToString(append(b, id...))
}

// decodeCursor returns the sort key of a cursor that encodeCursor made for
// the same kind and prefix, or EINVALID.
func decodeCursor(s string, kind byte, prefix []byte) (ns int64, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 1+len(prefix)+8+1 || b[0] != kind || !bytes.HasPrefix(b[1:], prefix) {
		return 0, "", pay.Invalidf("cursor", "cursor is not valid for this list")
	}
	rest := b[1+len(prefix):]
	id = string(rest[8:])
	if len(id) > pay.MaxStoredPart || storableText(id) != nil {
		return 0, "", pay.Invalidf("cursor", "cursor is not valid for this list")
	}
	return int64(binary.BigEndian.Uint64(rest[:8])), id, nil
}

// checkPart and checkLimit are the checks every backend shares.
var (
	checkPart  = store.CheckStoredPart
	checkLimit = store.CheckStoredLimit
)
