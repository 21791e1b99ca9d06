package bolt

// The ledger: the journal (ledger) and the running balance of each
// account and currency (balances), written together by AppendLedger.

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// AppendLedger appends the journal lines of one posting, each with the
// next Seq of the ledger, and writes the assigned Seq (and At, Tx.Now when
// zero) back into entries. The lines must sum to zero per currency, else
// EINVALID and nothing is written. Account and Currency are required.
func (t *tx) AppendLedger(entries []pay.LedgerEntry) error {
	// Check the posting first: it balances (then no balance overflows).
	if err := store.CheckPosting(entries); err != nil {
		return err
	}
	balances := map[string]int64{} // balanceKey → balance after the posting
	for _, e := range entries {
		k := string(balanceKey(e.Account, e.Currency))
		b, ok := balances[k]
		if !ok {
			b = t.balance(e.Account, e.Currency)
		}
		if b, ok = pay.AddInt64(b, e.Amount); !ok {
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
		store.NowIfZero(t.now, &e.At)
		e.At = e.At.UTC()
		if err := t.putRecord(bucketLedger, seqKey(seq), fromLedger(*e)); err != nil {
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

// LedgerEntries returns up to limit journal lines with a Seq greater than
// afterSeq, in Seq order: one seek and limit reads, so a reader pages
// through the journal in short transactions.
func (t *tx) LedgerEntries(afterSeq uint64, limit int) ([]pay.LedgerEntry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if afterSeq == math.MaxUint64 {
		return nil, nil
	}
	var out []pay.LedgerEntry
	c := t.bucket(bucketLedger).Cursor()
	for k, v := c.Seek(seqKey(afterSeq + 1)); k != nil && len(out) < limit; k, v = c.Next() {
		var r ledgerRecord
		if err := decodeAt("ledger entry", k, v, &r); err != nil {
			return nil, err
		}
		seq, ok := trailingSeq(k)
		if !ok || len(k) != 8 {
			return nil, corrupt(bucketLedger, "key %x", k)
		}
		out = append(out, pay.LedgerEntry{
			Seq: seq, PaymentID: string(r.PaymentID), EventID: string(r.EventID), Account: string(r.Account),
			Currency: string(r.Currency), Amount: r.Amount, At: r.At.UTC(),
		})
	}
	return out, nil
}

// CheckLedger sums every journal line per currency, across all accounts,
// and returns the currencies whose lines do not sum to zero, sorted by
// currency; none when the ledger balances. It reads the journal itself,
// not the running balances (Check compares those with the journal), in
// one read transaction: O(journal lines). It is the ledger check of
// `paystate verify`. A line that does not decode (a flipped bit) is
// reported after them, with its Problem, and left out of the sums.
func (db *DB) CheckLedger(ctx context.Context) ([]store.LedgerImbalance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sums := map[string]*store.LedgerImbalance{}
	var unreadable []store.LedgerImbalance
	err := db.bolt.View(func(btx *bbolt.Tx) error {
		return btx.Bucket(bucketLedger).ForEach(func(k, v []byte) error {
			var r ledgerRecord
			if err := decodeAt("ledger entry", k, v, &r); err != nil {
				unreadable = append(unreadable, store.LedgerImbalance{Problem: fmt.Sprintf("ledger entry %x does not decode, left out of the sums: %v", k, err)})
				return nil
			}
			s, ok := sums[string(r.Currency)]
			if !ok {
				s = &store.LedgerImbalance{Currency: string(r.Currency)}
				sums[string(r.Currency)] = s
			}
			s.Lines++
			if sum, ok := pay.AddInt64(s.Sum, r.Amount); ok && !s.Overflow {
				s.Sum = sum
			} else {
				s.Overflow = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("check ledger: %w", err)
	}
	var out []store.LedgerImbalance
	for _, s := range sums {
		if s.Sum != 0 || s.Overflow {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b store.LedgerImbalance) int { return cmp.Compare(a.Currency, b.Currency) })
	return append(out, unreadable...), nil
}

// checkLedger reports running balances that do not equal the sum of
// their journal lines, and journal lines without a balance.
func (c *checker) checkLedger() {
	sums := map[string]int64{}
	_ = c.bucket(bucketLedger).ForEach(func(k, v []byte) error {
		var r ledgerRecord
		if err := decodeAt("ledger entry", k, v, &r); err != nil {
			c.report(fmt.Errorf("ledger entry %x: %w", k, err))
			return nil
		}
		sums[string(balanceKey(string(r.Account), string(r.Currency)))] += r.Amount
		return nil
	})
	_ = c.bucket(bucketBalances).ForEach(func(k, v []byte) error {
		account, currency, _ := splitBalanceKey(k)
		sum, ok := sums[string(k)]
		switch {
		case len(v) != 8:
			c.report(fmt.Errorf("balance %s %s: %d bytes", account, currency, len(v)))
		case !ok:
			c.report(fmt.Errorf("balance %s %s has no ledger entry", account, currency))
		case int64(binary.BigEndian.Uint64(v)) != sum:
			c.report(fmt.Errorf("balance %s %s is %s, ledger sums to %s", account, currency, pay.FormatAmount(int64(binary.BigEndian.Uint64(v)), currency), pay.FormatAmount(sum, currency)))
		}
		delete(sums, string(k))
		return nil
	})
	for k := range sums {
		account, currency, _ := splitBalanceKey([]byte(k))
		c.report(fmt.Errorf("ledger has entries for %s %s but no balance", account, currency))
	}
}
