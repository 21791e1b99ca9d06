package pay_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
)

// posting is the pair of journal lines finalize writes for a capture
// (amount > 0) or a refund (amount < 0).
func posting(event, currency string, amount int64, at time.Time) []pay.LedgerEntry {
	return []pay.LedgerEntry{
		{EventID: event, Account: pay.AccountPSPReceivable, Currency: currency, Amount: amount, At: at},
		{EventID: event, Account: pay.AccountMerchantRevenue, Currency: currency, Amount: -amount, At: at},
	}
}

func TestRevenueBook(t *testing.T) {
	t.Parallel()
	day1 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	paris := time.FixedZone("CET", 3600)
	var lines []pay.LedgerEntry
	lines = append(lines, posting("evt_1", "EUR", 1000, day1.Add(9*time.Hour))...)
	lines = append(lines, posting("evt_2", "EUR", 500, day1.Add(23*time.Hour+59*time.Minute))...)
	lines = append(lines, posting("evt_3", "USD", 700, day1.Add(10*time.Hour))...)
	lines = append(lines, posting("evt_4", "EUR", -1000, day2.Add(time.Hour))...)
	// 00:30 in Paris on day 2 is 23:30 UTC on day 1.
	lines = append(lines, posting("evt_5", "EUR", 250, day2.Add(30*time.Minute).In(paris).Add(-time.Hour))...)
	// A fee on its own, and a settlement line's fee and payout in one
	// posting (four lines of one event): the fees count, the payout does
	// not (the merchant had that money already). A fee given back counts
	// negative.
	move := func(event, debit, credit, currency string, amount int64, at time.Time) []pay.LedgerEntry {
		return []pay.LedgerEntry{
			{EventID: event, Account: debit, Currency: currency, Amount: amount, At: at},
			{EventID: event, Account: credit, Currency: currency, Amount: -amount, At: at},
		}
	}
	lines = append(lines, move("evt_fee", pay.AccountPSPFees, pay.AccountPSPReceivable, "EUR", 30, day1)...)
	lines = append(lines, move("txn_1", pay.AccountPSPFees, pay.AccountPSPReceivable, "EUR", 45, day1.Add(time.Hour))...)
	lines = append(lines, move("txn_1", pay.AccountPayouts, pay.AccountPSPReceivable, "EUR", 955, day1.Add(time.Hour))...)
	lines = append(lines, move("txn_back", pay.AccountPSPFees, pay.AccountPSPReceivable, "USD", -15, day1.Add(time.Hour))...)
	// Disputes: opened (held, not lost), lost, and one won: only the
	// loss counts.
	lines = append(lines, move("evt_dp_open", pay.AccountDisputes, pay.AccountPSPReceivable, "EUR", 400, day1.Add(2*time.Hour))...)
	lines = append(lines, move("evt_dp_lost", pay.AccountDisputeLosses, pay.AccountDisputes, "EUR", 400, day2.Add(2*time.Hour))...)
	lines = append(lines, move("evt_dp2_open", pay.AccountDisputes, pay.AccountPSPReceivable, "USD", 100, day1.Add(2*time.Hour))...)
	lines = append(lines, move("evt_dp2_won", pay.AccountPSPReceivable, pay.AccountDisputes, "USD", 100, day2.Add(2*time.Hour))...)
	// Not a capture or a refund: no event id, so no posting.
	lines = append(lines,
		pay.LedgerEntry{Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 5, At: day1},
		pay.LedgerEntry{Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -5, At: day1},
	)
	// Before the range.
	lines = append(lines, posting("evt_old", "EUR", 9999, day1.Add(-time.Nanosecond))...)

	book := pay.RevenueBook{From: day1, Before: day2.AddDate(0, 0, 1)}
	for _, e := range lines {
		if err := book.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := book.Days()
	if err != nil {
		t.Fatal(err)
	}
	want := []pay.DayRevenue{
		{Day: day1, Currency: "EUR", Captured: 1750, Fees: 75, Net: 1675},
		{Day: day1, Currency: "USD", Captured: 700, Fees: -15, Net: 715},
		{Day: day2, Currency: "EUR", Refunded: 1000, DisputeLosses: 400, Net: -1400},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Days=%+v\nwant %+v", got, want)
	}

	t.Run("Bounds", func(t *testing.T) {
		t.Parallel()
		b := pay.RevenueBook{From: day2, Before: day2.AddDate(0, 0, 1)}
		for _, e := range lines {
			_ = b.Add(e)
		}
		got, _ := b.Days()
		if want := want[2:]; !slices.Equal(got, want) {
			t.Fatalf("Days=%+v, want %+v", got, want)
		}
	})

	t.Run("ErrOverflow", func(t *testing.T) {
		t.Parallel()
		var b pay.RevenueBook
		for i, e := range append(posting("evt_a", "EUR", math.MaxInt64, day1), posting("evt_b", "EUR", 1, day1)...) {
			if err := b.Add(e); err != nil {
				if i < 2 {
					t.Fatalf("line %d: %v", i, err)
				}
				return
			}
		}
		if _, err := b.Days(); pay.ErrorCode(err) != pay.EINVALID {
			t.Fatalf("Days: %v, want EINVALID", err)
		}
	})
}
