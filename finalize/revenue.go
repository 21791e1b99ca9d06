package finalize

import (
	"context"
	"time"

	"github.com/paystate/paystate/pay"
)

// journalPage is how many journal lines Revenue reads per transaction.
const journalPage = 2000

// Revenue returns the captures, refunds, dispute losses, fees and net of
// each UTC day in [from, before) per currency (pay.RevenueBook), oldest
// first; days without any are left out. It reads the whole journal in Seq order, a
// page of journal lines per read transaction, so it costs O(journal
// lines) and holds no transaction for long: a line written while it reads
// is counted when it lands after the page being read.
func (s *Payments) Revenue(ctx context.Context, from, before time.Time) ([]pay.DayRevenue, error) {
	book := pay.RevenueBook{From: from, Before: before}
	for after := uint64(0); ; {
		var page []pay.LedgerEntry
		err := ReadTx(ctx, s.Store, func(tx Tx) (err error) {
			page, err = tx.LedgerEntries(after, journalPage)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if err := book.Add(e); err != nil {
				return nil, err
			}
		}
		if len(page) < journalPage {
			return book.Days()
		}
		after = page[len(page)-1].Seq
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
