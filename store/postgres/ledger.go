package postgres

// The ledger: the journal (ledger) and the balance of each account and
// currency, spread over shard rows (balances), written together by
// AppendLedger.

import (
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// balanceShards is how many rows each balance is spread over: a posting
// adds to the shard of its connection (backend pid modulo balanceShards),
// so postings on different connections, up to this many, lock no common
// row.
const balanceShards = 64

// AppendLedger appends the journal lines of one posting, each with the
// next Seq of the ledger (an identity column: increasing within a posting
// and over time, not dense, and a line committed later may hold a lower
// Seq than one committed before it), and writes the assigned Seq (and At,
// Tx.Now when zero) back into entries. Each balance the posting moves is
// added to one shard row of balances (balanceShards); no row is shared by
// every posting. The lines must sum to zero per currency (checked before
// anything is sent), and no balance (the sum of its shards) may leave the
// int64 range: then EINVALID naming the account and currency, and nothing
// is written. The check and the writes are one statement, which writes
// nothing when the check fails, so the transaction stays usable. Account
// and Currency are required.
//
// The overflow check reads the balances without locking them: two
// postings committed at once could together pass the range that each
// alone keeps within (a balance of 9.2·10^18 minor units); LedgerBalances
// would then fail rather than answer a wrong sum.
func (t *tx) AppendLedger(entries []pay.LedgerEntry) error {
	if err := store.CheckPosting(entries); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	n := len(entries)
	var (
		paymentIDs, eventIDs = make([]string, n), make([]string, n)
		accounts, currencies = make([]string, n), make([]string, n)
		amounts, ats         = make([]int64, n), make([]int64, n)
		c                    = enc{what: "ledger entry"}
	)
	for i := range entries {
		e := &entries[i]
		at := e.At
		store.NowIfZero(t.now, &at)
		paymentIDs[i], eventIDs[i], accounts[i], currencies[i], amounts[i], ats[i] = e.PaymentID, e.EventID, e.Account, e.Currency, e.Amount, c.stamp(at)
	}
	if c.err != nil {
		return c.err
	}
	shard := int32(t.conn.PgConn().PID() % balanceShards)
	type row struct {
		seq               int64
		account, currency string
	}
	rows, err := queryAll(t, "append ledger", `WITH lines AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
				WITH ORDINALITY AS l(payment_id, event_id, account, currency, amount, at, ord)),
		moves AS (
			SELECT account, currency, sum(amount) AS amount, min(ord) AS first FROM lines GROUP BY account, currency),
		over AS (
			SELECT m.account, m.currency FROM moves m
			WHERE m.amount + coalesce((SELECT sum(b.amount) FROM balances b WHERE b.account = m.account AND b.currency = m.currency), 0)
				NOT BETWEEN -9223372036854775808 AND 9223372036854775807
			ORDER BY m.first LIMIT 1),
		put AS (
			INSERT INTO ledger (payment_id, event_id, account, currency, amount, at)
			SELECT payment_id, event_id, account, currency, amount, at FROM lines
			WHERE NOT EXISTS (SELECT 1 FROM over) ORDER BY ord
			RETURNING seq),
		moved AS (
			INSERT INTO balances (account, currency, shard, amount)
			SELECT account, currency, $7, amount FROM moves
			WHERE NOT EXISTS (SELECT 1 FROM over) ORDER BY account, currency
			ON CONFLICT (account, currency, shard) DO UPDATE SET amount = balances.amount + excluded.amount)
		SELECT seq, '', '' FROM put UNION ALL SELECT 0, account, currency FROM over`, func(r pgx.Row) (row, error) {
		var x row
		err := r.Scan(&x.seq, &x.account, &x.currency)
		return x, err
	}, paymentIDs, eventIDs, accounts, currencies, amounts, ats, shard)
	if err != nil {
		return err
	}
	var seqs []int64
	for _, r := range rows {
		if r.account != "" {
			return pay.Errorf(pay.EINVALID, "ledger balance of %s in %s overflows", r.account, r.currency)
		}
		seqs = append(seqs, r.seq)
	}
	if len(seqs) != n {
		return fmt.Errorf("append ledger: %d lines written, want %d", len(seqs), n)
	}
	slices.Sort(seqs) // assigned in the order of the lines
	for i := range entries {
		entries[i].Seq, entries[i].At = uint64(seqs[i]), fromNS(ats[i])
	}
	return nil
}

// LedgerBalances returns the balance of every account and currency that
// has a journal line (the sum of its shards), sorted by account, then
// currency.
func (t *tx) LedgerBalances() ([]pay.Balance, error) {
	return queryAll(t, "read balances", `SELECT account, currency, sum(amount)::bigint FROM balances
		GROUP BY account, currency ORDER BY account, currency`, func(r pgx.Row) (pay.Balance, error) {
		var b pay.Balance
		err := r.Scan(&b.Account, &b.Currency, &b.Amount)
		return b, err
	})
}

// LedgerEntries returns up to limit journal lines with a Seq greater than
// afterSeq, in Seq order (a range scan of the primary key).
func (t *tx) LedgerEntries(afterSeq uint64, limit int) ([]pay.LedgerEntry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if afterSeq >= math.MaxInt64 {
		return nil, nil
	}
	return queryAll(t, "read ledger", `SELECT seq, payment_id, event_id, account, currency, amount, at FROM ledger
		WHERE seq > $1 ORDER BY seq LIMIT $2`, func(r pgx.Row) (pay.LedgerEntry, error) {
		var (
			e       pay.LedgerEntry
			seq, ns int64
		)
		err := r.Scan(&seq, &e.PaymentID, &e.EventID, &e.Account, &e.Currency, &e.Amount, &ns)
		e.Seq, e.At = uint64(seq), fromNS(ns)
		return e, err
	}, int64(afterSeq), limit)
}
