package pay

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// DayRevenue is what one UTC day brought in one currency, as the journal
// says: the captures and refunds posted that day, in minor units.
type DayRevenue struct {
	Day      time.Time // midnight UTC
	Currency string
	Captured int64
	Refunded int64
	Net      int64 // Captured - Refunded
}

// RevenueBook sums journal lines into DayRevenue. Feed it every line in Seq
// order with Add, then read Days.
//
// A posting is the run of consecutive lines of one EventID (finalize writes
// one posting per transition, its lines next to each other). A posting of
// two lines that moves an amount into psp_receivable against
// merchant_revenue is a capture; the reverse move is a refund. Any other
// posting (none yet; fees, payouts or disputes would be) counts in neither:
// the ledger balances show it. A line counts on the UTC day of its At, when
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

// Days returns the days with a capture or a refund, oldest first, then by
// currency. It ends the posting being read: call it after the last Add.
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

// flush classifies the posting read so far and adds it to its day.
func (b *RevenueBook) flush() error {
	p := b.posting
	b.posting = b.posting[:0]
	if len(p) != 2 || p[0].Currency != p[1].Currency || p[0].Amount != -p[1].Amount || p[0].Amount == math.MinInt64 {
		return nil
	}
	recv, rev := p[0], p[1]
	if recv.Account != AccountPSPReceivable {
		recv, rev = rev, recv
	}
	if recv.Account != AccountPSPReceivable || rev.Account != AccountMerchantRevenue {
		return nil
	}
	at := recv.At.UTC()
	if (!b.From.IsZero() && at.Before(b.From)) || (!b.Before.IsZero() && !at.Before(b.Before)) {
		return nil
	}
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	k := revenueKey{day.Unix(), recv.Currency}
	if b.days == nil {
		b.days = make(map[revenueKey]*DayRevenue)
	}
	d := b.days[k]
	if d == nil {
		d = &DayRevenue{Day: day, Currency: recv.Currency}
		b.days[k] = d
	}
	captured, refunded, ok := d.Captured, d.Refunded, false
	if recv.Amount > 0 {
		captured, ok = AddInt64(captured, recv.Amount)
	} else {
		refunded, ok = AddInt64(refunded, -recv.Amount)
	}
	net, netOK := AddInt64(captured, -refunded)
	if !ok || !netOK {
		return Errorf(EINVALID, "revenue in %s on %s overflows", recv.Currency, day.Format(time.DateOnly))
	}
	d.Captured, d.Refunded, d.Net = captured, refunded, net
	return nil
}
