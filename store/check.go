package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// maxCheckErrors caps the problems Check reports.
const maxCheckErrors = 100

// errRollback ends Check's transaction without a commit.
var errRollback = errors.New("rollback")

// Check verifies the whole database and returns every problem found
// (joined with errors.Join: its Unwrap() []error lists them), or nil: bbolt's page-level check (Tx.Check), then that every
// index agrees with its records (each payment has exactly its status,
// created, order and reference entries; each inbox event its pending and
// by-payment entries; each outbox record and review item its index entry;
// timelines number their steps 1, 2, 3...; the running balances equal the
// sum of the ledger). It reads every record, so it costs O(database). On a
// writable database it runs in a write transaction that it rolls back (bbolt
// cannot check a read transaction while writers commit), so writers wait
// until it is done. An error that is not such a list means the check
// could not run.
func (db *DB) Check() error {
	var errs []error
	report := func(err error) {
		if len(errs) < maxCheckErrors {
			errs = append(errs, err)
		}
	}
	run := func(btx *bolt.Tx) error {
		for err := range btx.Check() {
			report(err)
		}
		(&tx{btx: btx}).checkIndexes(report)
		return errRollback
	}
	var err error
	if db.bolt.IsReadOnly() {
		err = db.bolt.View(run)
	} else {
		err = db.bolt.Update(run)
	}
	if err != nil && !errors.Is(err, errRollback) {
		return fmt.Errorf("check: %w", err)
	}
	return errors.Join(errs...)
}

// checkIndexes reports every disagreement between records and indexes.
func (t *tx) checkIndexes(report func(error)) {
	count := func(bucket []byte) int { return t.bucket(bucket).Stats().KeyN }
	want := func(bucket, key []byte, what string) {
		if !t.has(bucket, key) {
			report(fmt.Errorf("%s: no %s entry %x", what, bucket, key))
		}
	}

	// Payments and their four indexes.
	var nPayments, nRefs int
	_ = t.bucket(bucketPayments).ForEach(func(k, v []byte) error {
		nPayments++
		var r paymentRecord
		if err := decode("payment", v, &r); err != nil {
			report(fmt.Errorf("payment %s: %w", k, err))
			return nil
		}
		p := r.payment()
		what := "payment " + p.ID
		if p.ID != string(k) {
			report(fmt.Errorf("%s: stored under key %q", what, k))
		}
		for _, ix := range paymentIndexes(p) {
			want(ix.bucket, ix.key, what)
		}
		if p.ProviderRef != "" {
			nRefs++
			if got := t.bucket(bucketPaymentsByRef).Get(refKey(p.Provider, p.ProviderRef)); got != nil && string(got) != p.ID {
				report(fmt.Errorf("%s: reference %s/%s points to %s", what, p.Provider, p.ProviderRef, got))
			}
		}
		return nil
	})
	for _, b := range [][]byte{bucketPaymentsByStatus, bucketPaymentsByCreated, bucketPaymentsByOrder} {
		if n := count(b); n != nPayments {
			report(fmt.Errorf("%s has %d entries for %d payments", b, n, nPayments))
		}
	}
	if n := count(bucketPaymentsByRef); n != nRefs {
		report(fmt.Errorf("%s has %d entries for %d payments with a reference", bucketPaymentsByRef, n, nRefs))
	}

	// Timelines: steps 1, 2, 3... per payment.
	var prevPrefix string
	var prevSeq uint64
	_ = t.bucket(bucketTimeline).ForEach(func(k, v []byte) error {
		var r stepRecord
		if err := decode("step", v, &r); err != nil {
			report(fmt.Errorf("step %x: %w", k, err))
			return nil
		}
		prefix := string(paymentPrefix(r.PaymentID))
		if string(k) != string(stepKey(r.PaymentID, r.Seq)) {
			report(fmt.Errorf("step %s/%d: stored under key %x", r.PaymentID, r.Seq, k))
		}
		if prefix != prevPrefix {
			prevSeq = 0
		}
		if r.Seq != prevSeq+1 {
			report(fmt.Errorf("payment %s: step %d follows step %d", r.PaymentID, r.Seq, prevSeq))
		}
		prevPrefix, prevSeq = prefix, r.Seq
		return nil
	})

	// Inbox: pending and by-payment entries, processed flags.
	var nPending, nByPayment int
	_ = t.bucket(bucketInbox).ForEach(func(k, v []byte) error {
		var r inboxRecord
		if err := decode("inbox event", v, &r); err != nil {
			report(fmt.Errorf("inbox event %x: %w", k, err))
			return nil
		}
		what := "webhook event " + r.Provider + "/" + r.EventID
		if string(k) != string(eventKey(r.Provider, r.EventID)) {
			report(fmt.Errorf("%s: stored under key %x", what, k))
		}
		if r.Processed {
			want(bucketProcessed, k, what)
		} else {
			nPending++
			want(bucketInboxPending, pendingKey(r.NextAttemptAt, r.Provider, r.EventID), what)
		}
		if r.PaymentID != "" {
			nByPayment++
			want(bucketInboxByPayment, inboxPaymentKey(r.PaymentID, r.ReceivedAt, r.Provider, r.EventID), what)
		}
		return nil
	})
	if n := count(bucketInboxPending); n != nPending {
		report(fmt.Errorf("%s has %d entries for %d pending events", bucketInboxPending, n, nPending))
	}
	if n := count(bucketInboxByPayment); n != nByPayment {
		report(fmt.Errorf("%s has %d entries for %d events of a payment", bucketInboxByPayment, n, nByPayment))
	}

	// Outbox and its by-payment index.
	var nOutbox int
	_ = t.bucket(bucketOutbox).ForEach(func(k, v []byte) error {
		nOutbox++
		var r outboxRecord
		if err := decode("outbox record", v, &r); err != nil {
			report(fmt.Errorf("outbox record %x: %w", k, err))
			return nil
		}
		want(bucketOutboxByPayment, outboxPaymentKey(r.PaymentID, r.Seq), fmt.Sprintf("outbox record %d", r.Seq))
		return nil
	})
	if n := count(bucketOutboxByPayment); n != nOutbox {
		report(fmt.Errorf("%s has %d entries for %d records", bucketOutboxByPayment, n, nOutbox))
	}

	// Ledger against the running balances.
	sums := map[string]int64{}
	_ = t.bucket(bucketLedger).ForEach(func(k, v []byte) error {
		var r ledgerRecord
		if err := decode("ledger entry", v, &r); err != nil {
			report(fmt.Errorf("ledger entry %x: %w", k, err))
			return nil
		}
		sums[string(balanceKey(r.Account, r.Currency))] += r.Amount
		return nil
	})
	_ = t.bucket(bucketBalances).ForEach(func(k, v []byte) error {
		account, currency, _ := splitBalanceKey(k)
		sum, ok := sums[string(k)]
		switch {
		case len(v) != 8:
			report(fmt.Errorf("balance %s %s: %d bytes", account, currency, len(v)))
		case !ok:
			report(fmt.Errorf("balance %s %s has no ledger entry", account, currency))
		case int64(binary.BigEndian.Uint64(v)) != sum:
			report(fmt.Errorf("balance %s %s is %d, ledger sums to %d", account, currency, int64(binary.BigEndian.Uint64(v)), sum))
		}
		delete(sums, string(k))
		return nil
	})
	for k := range sums {
		account, currency, _ := splitBalanceKey([]byte(k))
		report(fmt.Errorf("ledger has entries for %s %s but no balance", account, currency))
	}

	// Review items and their time index.
	var nReview int
	_ = t.bucket(bucketReview).ForEach(func(k, v []byte) error {
		nReview++
		var r reviewRecord
		if err := decode("review item", v, &r); err != nil {
			report(fmt.Errorf("review item %s: %w", k, err))
			return nil
		}
		want(bucketReviewByCreated, reviewKey(r.CreatedAt, r.ID), "review item "+r.ID)
		return nil
	})
	if n := count(bucketReviewByCreated); n != nReview {
		report(fmt.Errorf("%s has %d entries for %d items", bucketReviewByCreated, n, nReview))
	}

	// Idempotency keys and processed ids against their time indexes.
	t.checkSweeperIndexes(report)

	// Records without an index: they must decode.
	for _, c := range []struct {
		bucket []byte
		v      any
	}{{bucketLeases, &leaseRecord{}}, {bucketIdem, &idemRecord{}}, {bucketProcessed, &processedRecord{}}} {
		_ = t.bucket(c.bucket).ForEach(func(k, v []byte) error {
			if err := decode(string(c.bucket), v, c.v); err != nil {
				report(fmt.Errorf("%s %x: %w", c.bucket, k, err))
			}
			return nil
		})
	}
}
