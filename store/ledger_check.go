package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// LedgerImbalance is a currency whose journal lines do not sum to zero.
type LedgerImbalance struct {
	Currency string
	Sum      int64 // what the lines sum to; meaningless when Overflow
	Overflow bool  // the sum left the int64 range on the way
	Lines    int   // journal lines in this currency
}

// String describes the imbalance for a report.
func (i LedgerImbalance) String() string {
	if i.Overflow {
		return fmt.Sprintf("ledger in %s: the sum of %d lines overflows", i.Currency, i.Lines)
	}
	return fmt.Sprintf("ledger in %s: %d lines sum to %d, want 0", i.Currency, i.Lines, i.Sum)
}

// CheckLedger sums every journal line per currency, across all accounts,
// and returns the currencies whose lines do not sum to zero, sorted by
// currency; none when the ledger balances. It reads the journal itself,
// not the running balances (Check compares those with the journal), in
// one read transaction: O(journal lines). It is the ledger check of
// `paystate verify`.
func (db *DB) CheckLedger(ctx context.Context) ([]LedgerImbalance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sums := map[string]*LedgerImbalance{}
	err := db.bolt.View(func(btx *bolt.Tx) error {
		return btx.Bucket(bucketLedger).ForEach(func(k, v []byte) error {
			var r ledgerRecord
			if err := decode("ledger entry", v, &r); err != nil {
				return fmt.Errorf("ledger entry %x: %w", k, err)
			}
			s, ok := sums[r.Currency]
			if !ok {
				s = &LedgerImbalance{Currency: r.Currency}
				sums[r.Currency] = s
			}
			s.Lines++
			if sum, ok := add(s.Sum, r.Amount); ok && !s.Overflow {
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
	var out []LedgerImbalance
	for _, s := range sums {
		if s.Sum != 0 || s.Overflow {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b LedgerImbalance) int { return cmp.Compare(a.Currency, b.Currency) })
	return out, nil
}
