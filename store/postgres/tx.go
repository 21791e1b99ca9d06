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

	"github.com/paystate/paystate/pay"
)

// tx is one PostgreSQL transaction seen as a pay.Tx. It is used by one
// goroutine.
type tx struct {
	ctx      context.Context
	ptx      pgx.Tx
	now      time.Time
	writable bool // Update, not View: rows may be locked (DueDeliveries)
	onCommit []func()

	// failed is the error of the first statement that failed: PostgreSQL
	// has aborted the transaction, every later statement fails with it,
	// and so does the commit.
	failed error

	// locked are the record keys whose advisory lock the transaction
	// holds (lock).
	locked map[string]bool

	// outboxN is how many outbox records the transaction appended.
	outboxN int
	// fanOut, if set, gives the deliveries of an appended record
	// (DB.SetFanOut).
	fanOut func(pay.OutboxRecord, time.Time) []pay.Delivery
}

var _ pay.Tx = (*tx)(nil)

// Now returns the time read when the transaction began, in UTC.
func (t *tx) Now() time.Time { return t.now }

// OnCommit registers fn to run after a successful commit.
func (t *tx) OnCommit(fn func()) { t.onCommit = append(t.onCommit, fn) }

// nowNS is Tx.Now as stored.
func (t *tx) nowNS() int64 { return keyNS(t.now) }

// lock takes, in a write transaction, the transaction-level advisory
// locks of records (their family and key: "payment", id), in the order
// given, skipping those it holds; in a read transaction it does nothing.
// Every method of a write transaction that reads or writes one record
// takes its lock first and keeps it until the commit or rollback, so two
// transactions that touch the same record take turns, and the second
// reads what the first committed (READ COMMITTED gives each statement a
// snapshot taken after the lock was granted): a function that reads a
// record and then decides what to write sees no concurrent change of it,
// as under bbolt's single writer. The lock key is the 64-bit hash of the
// family and the key.
func (t *tx) lock(family string, keys ...string) error {
	if !t.writable {
		return nil
	}
	var need []string
	for _, k := range keys {
		k = family + ":" + k
		if !t.locked[k] && !slices.Contains(need, k) {
			need = append(need, k)
		}
	}
	switch len(need) {
	case 0:
		return nil
	case 1:
		if _, err := t.exec("lock "+family, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, need[0]); err != nil {
			return err
		}
	default:
		if _, err := t.exec("lock "+family, `SELECT pg_advisory_xact_lock(h) FROM (
			SELECT hashtextextended(k, 0) AS h FROM unnest($1::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n) s`, need); err != nil {
			return err
		}
	}
	if t.locked == nil {
		t.locked = map[string]bool{}
	}
	for _, k := range need {
		t.locked[k] = true
	}
	return nil
}

// lockedRow reads the row of one record with sql (a query of at most one
// row, without a locking clause) and, in a write transaction, locks the
// record first as lock would, for records that usually exist (a delivery,
// a customer): one statement instead of two. A row that exists is read
// FOR NO KEY UPDATE: its row lock is taken and, after any transaction that
// held it ended, its newest version read. A row that does not exist (or
// that another transaction is creating) has nothing to lock: then the
// advisory lock of family and key is taken and the row read again, FOR NO
// KEY UPDATE, so that a transaction creating it is waited for and the row
// it created is locked too. Writers of such a family (an UPDATE, an
// INSERT ... ON CONFLICT DO UPDATE) wait for the row lock themselves; a
// writer that did not read first takes lock as before.
func lockedRow[T any](t *tx, family, key, op, sql string, scan func(pgx.Row) (T, error), args ...any) (T, bool, error) {
	k := family + ":" + key
	if !t.writable || t.locked[k] {
		return queryOne(t, op, sql, scan, args...)
	}
	v, found, err := queryOne(t, op, sql+` FOR NO KEY UPDATE`, scan, args...)
	if err != nil {
		return v, false, err
	}
	if !found {
		if err := t.lock(family, key); err != nil {
			return v, false, err
		}
		if v, found, err = queryOne(t, op, sql+` FOR NO KEY UPDATE`, scan, args...); err != nil {
			return v, false, err
		}
	}
	if t.locked == nil {
		t.locked = map[string]bool{}
	}
	t.locked[k] = true
	return v, found, nil
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
	if err := t.usable(op, args); err != nil {
		return 0, err
	}
	tag, err := t.ptx.Exec(t.ctx, sql, args...)
	if err != nil {
		return 0, t.fail(op, err)
	}
	return tag.RowsAffected(), nil
}

// queryOne runs a query of at most one row and scans it with scan; found
// is false if there is no row.
func queryOne[T any](t *tx, op, sql string, scan func(pgx.Row) (T, error), args ...any) (v T, found bool, err error) {
	if err := t.usable(op, args); err != nil {
		return v, false, err
	}
	v, err = scan(t.ptx.QueryRow(t.ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return v, false, nil
	} else if err != nil {
		return v, false, t.fail(op, err)
	}
	return v, true, nil
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](t *tx, op, sql string, scan func(pgx.Row) (T, error), args ...any) ([]T, error) {
	if err := t.usable(op, args); err != nil {
		return nil, err
	}
	rows, err := t.ptx.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, t.fail(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if err != nil {
		return nil, t.fail(op, err)
	}
	return out, nil
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
	checkPart  = pay.CheckStoredPart
	checkLimit = pay.CheckStoredLimit
)
