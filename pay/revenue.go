package pay

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// DayRevenue is what one UTC day brought in one currency, as the journal
// says: the captures, refunds, dispute losses and PSP fees posted that
// day, in minor units, each counted positive, and the net they leave.
type DayRevenue struct {
	Day           time.Time // midnight UTC
	Currency      string
	Captured      int64
	Refunded      int64
	DisputeLosses int64 // disputes lost that day
	Fees          int64 // the PSP's fees posted that day (settlement reconciliation); a fee given back counts negative
	Net           int64 // Captured - Refunded - DisputeLosses - Fees
}

// RevenueBook sums journal lines into DayRevenue. Feed it every line in Seq
// order with Add, then read Days.
//
// finalize writes every posting as balanced pairs of lines, one pair per
// money move, the lines of one event next to each other. A posting is the
// run of consecutive lines of one EventID, read pair by pair. A pair that
// moves an amount into psp_receivable against merchant_revenue is a
// capture, the reverse move a refund; disputes → dispute_losses is a
// dispute lost; psp_receivable → psp_fees a fee (negative when the PSP
// gave it back). Any other pair (a dispute opened or won, a payout) moves
// money the merchant still has or already had, and counts in none: the
// ledger balances show it. A pair counts on the UTC day of its At, when
// that day is within [From, Before); a zero bound is no bound.
type RevenueBook struct {
	From, Before time.Time

	days    map[revenueKey]*DayRevenue
	posting []LedgerEntry // the lines of the posting being read
}

type revenueKey struct {
	day      int64 // Unix seconds of midnight UTC
	currency string
}

// Add reads the next journal line. EINVALID if a day's sum leaves the int64
// range.
func (b *RevenueBook) Add(e LedgerEntry) error {
	if n := len(b.posting); n > 0 && (e.EventID == "" || e.EventID != b.posting[n-1].EventID) {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.posting = append(b.posting, e)
	return nil
}

// Days returns the days with a capture, a refund, a dispute lost or a
// fee, oldest first, then by currency. It ends the posting being read:
// call it after the last Add.
func (b *RevenueBook) Days() ([]DayRevenue, error) {
	if err := b.flush(); err != nil {
		return nil, err
	}
	out := make([]DayRevenue, 0, len(b.days))
	for _, d := range b.days {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b DayRevenue) int {
		return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.Currency, b.Currency))
	})
	return out, nil
}

// flush classifies the posting read so far, pair by pair, and adds each
// pair that counts to its day.
func (b *RevenueBook) flush() error {
	p := b.posting
	b.posting = b.posting[:0]
	for i := 0; i+1 < len(p); i += 2 {
		if err := b.pair(p[i], p[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// revenueMove is what a pair of journal lines is to revenue.
type revenueMove int

const (
	moveNone revenueMove = iota
	moveCapture
	moveRefund
	moveDisputeLost
	moveFee
)

// classify says what the balanced pair (debit, credit) is, with its
// amount (the debit's).
func classify(x, y LedgerEntry) (revenueMove, int64, LedgerEntry) {
	if x.Currency != y.Currency || x.Amount != -y.Amount || x.Amount == math.MinInt64 || x.Amount == 0 {
		return moveNone, 0, x
	}
	debit, credit := x, y
	if debit.Amount < 0 {
		debit, credit = y, x
	}
	a := debit.Amount
	switch {
	case debit.Account == AccountPSPReceivable && credit.Account == AccountMerchantRevenue:
		return moveCapture, a, debit
	case debit.Account == AccountMerchantRevenue && credit.Account == AccountPSPReceivable:
		return moveRefund, a, debit
	case debit.Account == AccountDisputeLosses && credit.Account == AccountDisputes:
		return moveDisputeLost, a, debit
	case debit.Account == AccountPSPFees && credit.Account == AccountPSPReceivable:
		return moveFee, a, debit
	case debit.Account == AccountPSPReceivable && credit.Account == AccountPSPFees:
		return moveFee, -a, debit // a fee given back
	}
	return moveNone, 0, x
}

// pair adds one balanced pair of lines to its day, if it counts.
func (b *RevenueBook) pair(x, y LedgerEntry) error {
	kind, amount, e := classify(x, y)
	if kind == moveNone {
		return nil
	}
	at := e.At.UTC()
	if (!b.From.IsZero() && at.Before(b.From)) || (!b.Before.IsZero() && !at.Before(b.Before)) {
		return nil
	}
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	k := revenueKey{day.Unix(), e.Currency}
	if b.days == nil {
		b.days = make(map[revenueKey]*DayRevenue)
	}
	d := b.days[k]
	if d == nil {
		d = &DayRevenue{Day: day, Currency: e.Currency}
		b.days[k] = d
	}
	next := *d
	var ok bool
	switch kind {
	case moveCapture:
		next.Captured, ok = AddInt64(d.Captured, amount)
	case moveRefund:
		next.Refunded, ok = AddInt64(d.Refunded, amount)
	case moveDisputeLost:
		next.DisputeLosses, ok = AddInt64(d.DisputeLosses, amount)
	case moveFee:
		next.Fees, ok = AddInt64(d.Fees, amount)
	}
	net, netOK := AddInt64(next.Captured, -next.Refunded)
	if netOK {
		net, netOK = AddInt64(net, -next.DisputeLosses)
	}
	if netOK {
		net, netOK = AddInt64(net, -next.Fees)
	}
	if !ok || !netOK || next.Refunded == math.MinInt64 || next.DisputeLosses == math.MinInt64 || next.Fees == math.MinInt64 {
		return Errorf(EINVALID, "revenue in %s on %s overflows", e.Currency, day.Format(time.DateOnly))
	}
	next.Net = net
	*d = next
	return nil
}
