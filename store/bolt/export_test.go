package bolt

import (
	"testing"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// IndexSteps returns how many status index entries Candidates visited in
// the transaction tx.
func IndexSteps(t store.Tx) int { return t.(*tx).indexSteps }

// BoltDB returns the bbolt handle of db.
func BoltDB(db *DB) *bbolt.DB { return db.bolt }

// Bucket names for tests that damage a database on purpose.
var (
	BucketMeta             = bucketMeta
	BucketPaymentsByStatus = bucketPaymentsByStatus
	BucketDeliveriesDue    = bucketDeliveriesDue
	KeySchemaVersion       = keySchemaVersion
)

// RefusedWrite classifies a failed commit: refused before anything reached
// the disk, and whether for want of space.
var RefusedWrite = refusedWrite

// CommitStats returns what the committer of db has done so far.
func CommitStats(db *DB) commitStats { return db.commits.snapshot() }

// CheckedPages returns how many pages the check of the file read when db
// was opened (the meta pages aside).
func CheckedPages(db *DB) int { return db.checkedPages }

// LedgerValue is the stored value of a ledger entry.
func LedgerValue(e pay.LedgerEntry) []byte {
	b, err := encode("ledger entry", fromLedger(e))
	if err != nil {
		panic(err)
	}
	return b
}

// SetMigrateBatch sets the values per migration transaction and a hook run
// after each, until the test ends.
func SetMigrateBatch(tb testing.TB, n int, after func() error) {
	oldN, oldAfter := migrateBatch, afterMigrateBatch
	migrateBatch, afterMigrateBatch = n, after
	tb.Cleanup(func() { migrateBatch, afterMigrateBatch = oldN, oldAfter })
}
