package bolt

import (
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// maxCheckErrors caps the problems Check reports.
const maxCheckErrors = 100

// errRollback ends Check's transaction without a commit.
var errRollback = errors.New("rollback")

// Check verifies the whole database and returns every problem found
// (joined with errors.Join: its Unwrap() []error lists them), or nil:
// bbolt's page-level check (Tx.Check), then the check of each record
// family, next to its records (familyChecks): every index agrees with its
// records (each payment has exactly its status, created, order and
// reference entries; each inbox event its pending and by-payment entries;
// each processed id, outbox record, delivery, review item and idempotency
// key its index entries), timelines number their steps 1, 2, 3..., the
// running balances equal the sum of the ledger, and records without an
// index decode. It reads every record, so it costs O(database). On a
// writable database it runs in a write transaction that it rolls back
// (bbolt cannot check a read transaction while writers commit), so writers
// wait until it is done. An error that is not such a list means the check
// could not run; on a closed database it is EUNAVAILABLE.
func (db *DB) Check() error {
	c := &checker{}
	run := func(btx *bbolt.Tx) error {
		for err := range btx.Check() {
			c.report(err)
		}
		c.tx = db.begin(btx)
		for _, check := range familyChecks {
			check(c)
		}
		return errRollback
	}
	var err error
	if db.bolt.IsReadOnly() {
		err = db.bolt.View(run)
	} else {
		err = db.bolt.Update(run)
	}
	switch {
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return unavailable("check", err)
	case err != nil && !errors.Is(err, errRollback):
		return fmt.Errorf("check: %w", err)
	}
	return errors.Join(c.errs...)
}

// familyChecks are the checks of the record families, in the order of the
// table in doc.go; each lives in its family's file.
var familyChecks = []func(*checker){
	(*checker).checkPayments,
	(*checker).checkTimeline,
	(*checker).checkInbox,
	(*checker).checkLeases,
	(*checker).checkOutbox,
	(*checker).checkLedger,
	(*checker).checkReview,
	(*checker).checkIdempotency,
	(*checker).checkEffects,
	(*checker).checkPSPAnswers,
	(*checker).checkRefunds,
	(*checker).checkDisputes,
	(*checker).checkSettlements, // reconcile.go
}

// checker is one run of Check: the transaction it reads and the problems
// found so far.
type checker struct {
	*tx
	errs []error
}

// report records a problem; past maxCheckErrors it is dropped.
func (c *checker) report(err error) {
	if len(c.errs) < maxCheckErrors {
		c.errs = append(c.errs, err)
	}
}

// want reports what (a record) if key is not in bucket (its index).
func (c *checker) want(bucket, key []byte, what string) {
	if !c.has(bucket, key) {
		c.report(fmt.Errorf("%s: no %s entry %x", what, bucket, key))
	}
}

// wantCount reports an index whose number of entries is not n, the number
// of records (described by what) that have an entry in it.
func (c *checker) wantCount(bucket []byte, n int, what string) {
	if got := c.bucket(bucket).Stats().KeyN; got != n {
		c.report(fmt.Errorf("%s has %d entries for %d %s", bucket, got, n, what))
	}
}

// decodeEach reports every value of bucket that does not decode into v.
func (c *checker) decodeEach(bucket []byte, v any) {
	_ = c.bucket(bucket).ForEach(func(k, data []byte) error {
		if err := decode(string(bucket), data, v); err != nil {
			c.report(fmt.Errorf("%s %x: %w", bucket, k, err))
		}
		return nil
	})
}
