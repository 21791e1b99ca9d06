package postgres

// The ledger: the journal (ledger) and the running balance of each
// account and currency (balances), written together by AppendLedger.

import (
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
)

// AppendLedger appends the journal lines of one posting, each with the
// next Seq of the ledger (the counter meta "ledger_seq"), and writes the
// assigned Seq (and At, Tx.Now when zero) back into entries. The lines
// must sum to zero per currency, and no balance may leave the int64 range,
// else EINVALID and nothing is written (both are checked before anything
// is sent, so the transaction stays usable). Account and Currency are
// required.
func (t *tx) AppendLedger(entries []pay.LedgerEntry) error {
	// Check the posting first: it balances (then no balance overflows).
	if err := pay.CheckPosting(entries); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}

	// No balance overflows.
	type key struct{ account, currency string }
	var accounts, currencies []string
	for _, e := range entries {
		accounts, currencies = append(accounts, e.Account), append(currencies, e.Currency)
	}
	type balance struct {
		key
		amount int64
	}
	var keys []string
	for _, e := range entries {
		keys = append(keys, joinKey(e.Account, e.Currency))
	}
	slices.Sort(keys) // one order for every posting: no deadlock between two
	if err := t.lock("balance", keys...); err != nil {
		return err
	}
	stored, err := queryAll(t, "read balances", `SELECT account, currency, amount FROM balances
		WHERE (account, currency) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, func(r pgx.Row) (balance, error) {
		var b balance
		err := r.Scan(&b.account, &b.currency, &b.amount)
		return b, err
	}, accounts, currencies)
	if err != nil {
		return err
	}
	after := map[key]int64{}
	for _, b := range stored {
		after[b.key] = b.amount
	}
	var order []key // the balances the posting moves, in the order of its lines
	for _, e := range entries {
		k := key{e.Account, e.Currency}
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
		b, ok := pay.AddInt64(after[k], e.Amount)
		if !ok {
			return pay.Errorf(pay.EINVALID, "ledger balance of %s in %s overflows", e.Account, e.Currency)
		}
		after[k] = b
	}

	// Write the lines and the balances after them (read under their
	// locks, so no concurrent posting moved them since), in one statement.
	n := len(entries)
	var (
		paymentIDs, eventIDs = make([]string, n), make([]string, n)
		amounts, ats         = make([]int64, n), make([]int64, n)
		c                    = enc{what: "ledger entry"}
	)
	for i := range entries {
		e := &entries[i]
		if e.At.IsZero() {
			e.At = t.now
		}
		paymentIDs[i], eventIDs[i], amounts[i], ats[i] = e.PaymentID, e.EventID, e.Amount, c.stamp(e.At)
	}
	if c.err != nil {
		return c.err
	}
	var (
		bAccounts, bCurrencies []string
		bAmounts               []int64
	)
	for _, k := range order {
		bAccounts, bCurrencies, bAmounts = append(bAccounts, k.account), append(bCurrencies, k.currency), append(bAmounts, after[k])
	}
	last, _, err := queryOne(t, "append ledger", `WITH s AS (
			UPDATE meta SET value = value + $1 WHERE key = 'ledger_seq' RETURNING value),
		lines AS (
			INSERT INTO ledger (seq, payment_id, event_id, account, currency, amount, at)
			SELECT s.value - $1 + l.ord, l.payment_id, l.event_id, l.account, l.currency, l.amount, l.at
			FROM s, unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
				WITH ORDINALITY AS l(payment_id, event_id, account, currency, amount, at, ord)),
		moved AS (
			INSERT INTO balances (account, currency, amount) SELECT * FROM unnest($8::text[], $9::text[], $10::bigint[])
			ON CONFLICT (account, currency) DO UPDATE SET amount = excluded.amount)
		SELECT value FROM s`, scalar[int64],
		int64(n), paymentIDs, eventIDs, accounts, currencies, amounts, ats, bAccounts, bCurrencies, bAmounts)
	if err != nil {
		return err
	}
	for i := range entries {
		entries[i].Seq = uint64(last - int64(n) + int64(i) + 1)
		entries[i].At = entries[i].At.UTC()
	}
	return nil
}

// LedgerBalances returns the running balance of every account and currency
// that has a journal line, sorted by account, then currency.
func (t *tx) LedgerBalances() ([]pay.Balance, error) {
	return queryAll(t, "read balances", `SELECT account, currency, amount FROM balances ORDER BY account, currency`, func(r pgx.Row) (pay.Balance, error) {
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
