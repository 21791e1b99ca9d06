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
	// Not a capture or a refund: other accounts, one line, no event id.
	lines = append(lines,
		pay.LedgerEntry{EventID: "evt_fee", Account: "psp_fees", Currency: "EUR", Amount: 30, At: day1},
		pay.LedgerEntry{EventID: "evt_fee", Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: -30, At: day1},
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
		{Day: day1, Currency: "EUR", Captured: 1750, Net: 1750},
		{Day: day1, Currency: "USD", Captured: 700, Net: 700},
		{Day: day2, Currency: "EUR", Refunded: 1000, Net: -1000},
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
