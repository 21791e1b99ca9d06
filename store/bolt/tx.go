package bolt

import (
	"bytes"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// tx is one bbolt transaction seen as a store.Tx. It is used by one goroutine.
type tx struct {
	btx      *bbolt.Tx
	now      time.Time
	onCommit []func()

	// indexSteps counts the status index entries Candidates visited, so a
	// test can show that a pass costs O(candidates).
	indexSteps int

	// cached is the payment t decoded last, until t writes a payment
	// (tx.payment).
	cached pay.Payment
}

var _ store.Tx = (*tx)(nil)

// Now returns the time read when the transaction began, in UTC.
func (t *tx) Now() time.Time { return t.now }

// OnCommit registers fn to run after a successful commit.
func (t *tx) OnCommit(fn func()) { t.onCommit = append(t.onCommit, fn) }

// bucket returns a bucket that Open created, with its page fill set for
// writes (appendOnly).
func (t *tx) bucket(name []byte) *bbolt.Bucket {
	b := t.btx.Bucket(name)
	if b != nil && appendOnly[string(name)] {
		b.FillPercent = appendFill
	}
	return b
}

// getRecord decodes the value at key into v and reports whether it was there.
func (t *tx) getRecord(bucket, key []byte, v any) (bool, error) {
	data := t.bucket(bucket).Get(key)
	if data == nil {
		return false, nil
	}
	return true, decodeAt(string(bucket), key, data, v)
}

// getFound is getRecord of a record that must be there: ENOTFOUND, with
// the message of format, when it is not.
func (t *tx) getFound(bucket, key []byte, v any, format string, args ...any) error {
	found, err := t.getRecord(bucket, key, v)
	if err == nil && !found {
		err = pay.Errorf(pay.ENOTFOUND, format, args...)
	}
	return err
}

// has reports whether key is in bucket, whatever its value (index entries
// have empty values, for which Get cannot tell).
func (t *tx) has(bucket, key []byte) bool {
	k, _ := t.bucket(bucket).Cursor().Seek(key)
	return k != nil && bytes.Equal(k, key)
}

// put stores value at key. In a bucket whose keys are chosen outside
// paystate (not appendOnly) it first sets the bucket's fill for this
// transaction (chooseFill).
func (t *tx) put(bucket, key, value []byte) error {
	b := t.bucket(bucket)
	if !appendOnly[string(bucket)] {
		chooseFill(b, key, value)
	}
	if err := b.Put(key, value); err != nil {
		return fmt.Errorf("put %s: %w", bucket, err)
	}
	return nil
}

// chooseFill sets the page fill of a bucket whose keys are chosen outside
// paystate (idempotency keys, order ids, PSP references and event ids) from
// where a write lands, for the whole bbolt transaction (a group's writes
// share its buckets). Keys that only ever go to the end of the bucket —
// one client's increasing order numbers or idempotency keys — fill their
// pages to appendFill, as an appendOnly bucket does: a page split there is
// never written again. As soon as one new key lands between others (random
// UUIDs, several clients' sequences interleaved) or a stored value grows,
// the transaction keeps bbolt's default, which leaves room in each half
// for the keys that will land there. BenchmarkSplitFill measures both.
//
// bbolt creates each transaction's Bucket with DefaultFillPercent, which
// therefore means "no write yet"; mixedFill, one byte below bbolt's split
// threshold at 4 KiB pages, means "a key landed between others".
func chooseFill(b *bbolt.Bucket, key, value []byte) {
	if b.FillPercent == mixedFill {
		return
	}
	k, v := b.Cursor().Seek(key)
	switch {
	case k == nil: // after every key
		b.FillPercent = appendFill
	case bytes.Equal(k, key) && len(value) <= len(v): // in place, no growth
	default:
		b.FillPercent = mixedFill
	}
}

// mixedFill is bbolt's default fill, marked (chooseFill).
const mixedFill = bbolt.DefaultFillPercent - 1.0/4096

// putRecord stores v, encoded, at key. The fields of a keyed record that
// its key holds are not stored (their cbor tag is "-").
func (t *tx) putRecord(bucket, key []byte, v any) error {
	data, err := encode(string(bucket), v)
	if err != nil {
		return err
	}
	return t.put(bucket, key, data)
}

// del removes key from bucket; a missing key is not an error.
func (t *tx) del(bucket, key []byte) error {
	if err := t.bucket(bucket).Delete(key); err != nil {
		return fmt.Errorf("delete %s: %w", bucket, err)
	}
	return nil
}

// nextSeq returns the next value of a bucket's sequence, from 1.
func (t *tx) nextSeq(bucket []byte) (uint64, error) {
	seq, err := t.bucket(bucket).NextSequence()
	if err != nil {
		return 0, fmt.Errorf("next %s sequence: %w", bucket, err)
	}
	return seq, nil
}

// seekBefore positions c on the greatest key below key and returns it.
func seekBefore(c *bbolt.Cursor, key []byte) []byte {
	if k, _ := c.Seek(key); k == nil {
		k, _ = c.Last()
		return k
	}
	k, _ := c.Prev()
	return k
}

// lastWithPrefix positions c on the greatest key that starts with prefix,
// if any, and returns the key it is on (which may lack the prefix).
func lastWithPrefix(c *bbolt.Cursor, prefix []byte) []byte {
	end := prefixEnd(prefix)
	if end == nil {
		k, _ := c.Last()
		return k
	}
	return seekBefore(c, end)
}

// corrupt reports an index entry that does not match its record: a bug or
// a damaged file, never the caller's fault.
func corrupt(bucket []byte, format string, args ...any) error {
	return fmt.Errorf("corrupt %s: %s", bucket, fmt.Sprintf(format, args...))
}

// missing is err of a read an entry of the index bucket led to: its
// ENOTFOUND is the index's corruption (corrupt), any other error stays.
func missing(err error, bucket []byte, format string, args ...any) error {
	if pay.ErrorCode(err) == pay.ENOTFOUND {
		return corrupt(bucket, format, args...)
	}
	return err
}

// checkPart and checkLimit are the checks every backend shares.
var (
	checkPart  = store.CheckStoredPart
	checkLimit = store.CheckStoredLimit
)
