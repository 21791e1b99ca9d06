package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"

	"github.com/paystate/paystate/pay"
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
	if r.CreatedAt.IsZero() {
		r.CreatedAt = t.now
	}
	if err := t.putJSON(bucketOutbox, seqKey(seq), fromOutbox(r)); err != nil {
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
		if found, err := t.getJSON(bucketOutbox, seqKey(seq), &r); err != nil {
			return nil, err
		} else if !found {
			return nil, corrupt(bucketOutboxByPayment, "key %x points to missing record %d", k, seq)
		}
		out = append(out, r.record())
	}
	return out, nil
}

// AppendLedger appends the journal lines of one posting, each with the
// next Seq of the ledger, and writes the assigned Seq (and At, Tx.Now when
// zero) back into entries. The lines must sum to zero per currency, else
// EINVALID and nothing is written. Account and Currency are required.
func (t *tx) AppendLedger(entries []pay.LedgerEntry) error {
	// Check the posting first: it balances, and no balance overflows.
	sums := map[string]int64{}
	for _, e := range entries {
		if err := checkPart("ledger account", e.Account, true); err != nil {
			return err
		}
		if err := checkPart("ledger currency", e.Currency, true); err != nil {
			return err
		}
		s, ok := add(sums[e.Currency], e.Amount)
		if !ok {
			return pay.Errorf(pay.EINVALID, "ledger posting overflows in %s", e.Currency)
		}
		sums[e.Currency] = s
	}
	for cur, s := range sums {
		if s != 0 {
			return pay.Errorf(pay.EINVALID, "ledger posting does not balance in %s: off by %d", cur, s)
		}
	}
	balances := map[string]int64{} // balanceKey → balance after the posting
	for _, e := range entries {
		k := string(balanceKey(e.Account, e.Currency))
		b, ok := balances[k]
		if !ok {
			b = t.balance(e.Account, e.Currency)
		}
		if b, ok = add(b, e.Amount); !ok {
			return pay.Errorf(pay.EINVALID, "ledger balance of %s in %s overflows", e.Account, e.Currency)
		}
		balances[k] = b
	}

	// Write the lines and move the running balances.
	for i := range entries {
		e := &entries[i]
		seq, err := t.nextSeq(bucketLedger)
		if err != nil {
			return err
		}
		e.Seq = seq
		if e.At.IsZero() {
			e.At = t.now
		}
		e.At = e.At.UTC()
		if err := t.putJSON(bucketLedger, seqKey(seq), fromLedger(*e)); err != nil {
			return err
		}
	}
	for k, b := range balances {
		if err := t.put(bucketBalances, []byte(k), be64(uint64(b))); err != nil {
			return err
		}
	}
	return nil
}

// balance returns the running balance of an account in a currency.
func (t *tx) balance(account, currency string) int64 {
	v := t.bucket(bucketBalances).Get(balanceKey(account, currency))
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// add returns a+b and whether it did not overflow.
func add(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return s, true
}

// LedgerBalances returns the running balance of every account and currency
// that has a journal line, sorted by account, then currency.
func (t *tx) LedgerBalances() ([]pay.Balance, error) {
	var out []pay.Balance
	err := t.bucket(bucketBalances).ForEach(func(k, v []byte) error {
		account, currency, ok := splitBalanceKey(k)
		if !ok || len(v) != 8 {
			return corrupt(bucketBalances, "entry %x", k)
		}
		out = append(out, pay.Balance{Account: account, Currency: currency, Amount: int64(binary.BigEndian.Uint64(v))})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b pay.Balance) int {
		return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.Currency, b.Currency))
	})
	return out, nil
}
