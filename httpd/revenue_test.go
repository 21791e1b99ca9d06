package httpd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// revenueDay is one row of GET /v1/ledger/revenue.
type revenueDay struct {
	Date          string `json:"date"`
	Currency      string `json:"currency"`
	Captured      int64  `json:"captured"`
	Refunded      int64  `json:"refunded"`
	DisputeLosses int64  `json:"dispute_losses"`
	Fees          int64  `json:"fees"`
	Net           int64  `json:"net"`
}

// revenue reads GET /v1/ledger/revenue with query q.
func (d *dashServer) revenue(q string) (from, to string, days []revenueDay) {
	d.t.Helper()
	a := d.do("GET", "/v1/ledger/revenue"+q, "", "", bearer())
	if a.status != http.StatusOK {
		d.t.Fatalf("GET /v1/ledger/revenue%s: status=%d: %s", q, a.status, a.body)
	}
	var r struct {
		From, To string
		Data     []revenueDay
	}
	if err := json.Unmarshal([]byte(a.body), &r); err != nil {
		d.t.Fatal(err)
	}
	return r.From, r.To, r.Data
}

// dispute opens or closes dispute dp_<payment id> of a payment with a
// signed standard webhook.
func (d *dashServer) dispute(id, evt, typ, status string, amount int64) {
	d.t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"currency":"EUR","dispute":{"id":"dp_%s","amount":%d,"status":%q}}}`,
		evt, typ, d.clock.Now().Unix(), id, id, amount, status))
	hdr := testkit.SignStandard(d.t, standardSecret, evt, d.clock.Now(), body)
	delete(hdr, "Authorization")
	if a := d.do("POST", "/webhooks/standard", "application/json", string(body), hdr); a.status != http.StatusOK {
		d.t.Fatalf("dispute webhook: status=%d: %s", a.status, a.body)
	}
}

// refundByWebhook settles a refund the PSP reports with a signed standard
// webhook.
func (d *dashServer) refundByWebhook(id string) {
	d.t.Helper()
	evt := "evt_refund_" + id
	body := []byte(fmt.Sprintf(`{"id":%q,"type":"payment.refunded","created":%d,"data":{"payment_id":%q}}`, evt, d.clock.Now().Unix(), id))
	hdr := testkit.SignStandard(d.t, standardSecret, evt, d.clock.Now(), body)
	delete(hdr, "Authorization")
	if a := d.do("POST", "/webhooks/standard", "application/json", string(body), hdr); a.status != http.StatusOK {
		d.t.Fatalf("refund webhook: status=%d: %s", a.status, a.body)
	}
	if _, st := d.version(id, dashKey); st != "refunded" {
		d.t.Fatalf("payment %s is %s after the refund webhook, want refunded", id, st)
	}
}

func TestLedger_Revenue(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	day0 := d.clock.Now().Format(time.DateOnly)
	a := d.create(`{"order_id":"o-1","amount":1500,"currency":"EUR"}`)
	b := d.create(`{"order_id":"o-2","amount":2500,"currency":"EUR"}`)
	c := d.create(`{"order_id":"o-3","amount":700,"currency":"USD"}`)
	for _, id := range []string{a, b, c} {
		d.sync(id, `{"status":"captured","provider_ref":"psp_`+id+`"}`)
	}
	_ = d.create(`{"order_id":"o-4","amount":900,"currency":"EUR"}`) // never captured: no revenue
	// A dispute opened on day 0 holds money but loses none yet.
	d.dispute(b, "evt_dp_open", "payment.dispute.created", "needs_response", 800)
	d.clock.Add(24 * time.Hour)
	day1 := d.clock.Now().Format(time.DateOnly)
	d.refundByWebhook(a)
	// Day 1: the dispute is lost, and settlement reconciliation posts the
	// PSP's fees of b (with its payout, which is not revenue) and of c.
	d.dispute(b, "evt_dp_lost", "payment.dispute.closed", "lost", 800)
	err := d.db.Update(context.Background(), func(tx store.Tx) error {
		for pid, l := range map[string]pay.SettlementLine{
			b: {Line: 1, ID: "txn_b", Kind: pay.SettleCharge, ProviderRef: "psp_" + b, Amount: 2500, Fee: 75, Currency: "EUR", PayoutID: "po_1"},
			c: {Line: 2, ID: "txn_c", Kind: pay.SettleCharge, ProviderRef: "psp_" + c, Amount: 700, Fee: 21, Currency: "USD"},
		} {
			if _, err := finalize.PostSettlement(tx, "standard", "run_1", pid, l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Net is captured - refunded - dispute losses - fees, per day and
	// currency.
	both := []revenueDay{
		{day0, "EUR", 4000, 0, 0, 0, 4000},
		{day0, "USD", 700, 0, 0, 0, 700},
		{day1, "EUR", 0, 1500, 800, 75, -2375},
		{day1, "USD", 0, 0, 0, 21, -21},
	}
	from, to, got := d.revenue("?from=" + day0 + "&to=" + day1)
	if !slices.Equal(got, both) || from != day0 || to != day1 {
		t.Fatalf("%s..%s: %+v\nwant %s..%s: %+v", from, to, got, day0, day1, both)
	}
	// The default: the 30 days up to today.
	from, to, got = d.revenue("")
	if wantFrom := d.clock.Now().AddDate(0, 0, -29).Format(time.DateOnly); from != wantFrom || to != day1 || !slices.Equal(got, both) {
		t.Fatalf("default range %s..%s: %+v, want %s..%s: %+v", from, to, got, wantFrom, day1, both)
	}
	if _, _, got = d.revenue("?from=" + day1 + "&to=" + day1); !slices.Equal(got, both[2:]) {
		t.Fatalf("%s alone: %+v, want %+v", day1, got, both[2:])
	}
	if _, _, got = d.revenue("?to=" + day0); !slices.Equal(got, both[:2]) {
		t.Fatalf("up to %s: %+v, want %+v", day0, got, both[:2])
	}

	for q, param := range map[string]string{
		"?from=2025-13-01":               "from",
		"?to=yesterday":                  "to",
		"?from=" + day1 + "&to=" + day0:  "from",
		"?from=2020-01-01&to=2021-01-01": "from",
		"?from=" + day0 + "T00:00:00Z":   "from",
	} {
		a := d.do("GET", "/v1/ledger/revenue"+q, "", "", bearer())
		var e struct{ Error struct{ Code, Param string } }
		_ = json.Unmarshal([]byte(a.body), &e)
		if a.status != http.StatusBadRequest || e.Error.Param != param {
			t.Errorf("%s: status %d, param %q; want 400 naming %q: %s", q, a.status, e.Error.Param, param, a.body)
		}
	}
	if got, want := d.do("GET", "/v1/ledger/revenue", "", "", nil).status, http.StatusUnauthorized; got != want {
		t.Errorf("without the key: status=%d, want %d", got, want)
	}
}

// TestLedger_RevenuePages reads a journal longer than one page of the
// reader, with postings across the page boundaries: every posting counts
// once.
func TestLedger_RevenuePages(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, dashKey)
	at := d.clock.Now()
	const n = 2500
	err := d.db.Update(t.Context(), func(tx store.Tx) error {
		// Three lines first, so that later postings straddle the pages.
		odd := []pay.LedgerEntry{
			{EventID: "evt_odd", Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 2, At: at},
			{EventID: "evt_odd", Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1, At: at},
			{EventID: "evt_odd", Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1, At: at},
		}
		if err := tx.AppendLedger(odd); err != nil {
			return err
		}
		for i := range n {
			amount := int64(100)
			if i%5 == 0 {
				amount = -10 // a refund
			}
			evt := fmt.Sprintf("evt_%d", i)
			if err := tx.AppendLedger([]pay.LedgerEntry{
				{EventID: evt, Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: amount, At: at},
				{EventID: evt, Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -amount, At: at},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _, got := d.revenue("")
	want := []revenueDay{{at.Format(time.DateOnly), "EUR", 100 * n * 4 / 5, 10 * n / 5, 0, 0, 100*n*4/5 - 10*n/5}}
	if !slices.Equal(got, want) {
		t.Fatalf("revenue %+v, want %+v", got, want)
	}
}

// BenchmarkLedger_Revenue answers GET /v1/ledger/revenue over a journal
// of 200,000 lines (100,000 captures), and reports journal lines per
// second.
func BenchmarkLedger_Revenue(b *testing.B) {
	d := newDashServer(b, dashKey)
	const postings = 100000
	at := d.clock.Now()
	err := d.db.Update(context.Background(), func(tx store.Tx) error {
		for i := range postings {
			evt := fmt.Sprintf("evt_%d", i)
			if err := tx.AppendLedger([]pay.LedgerEntry{
				{EventID: evt, Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 100, At: at},
				{EventID: evt, Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -100, At: at},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, got := d.revenue(""); len(got) != 1 || got[0].Captured != 100*postings {
			b.Fatalf("revenue %+v", got)
		}
	}
	b.ReportMetric(float64(2*postings*b.N)/b.Elapsed().Seconds(), "lines/s")
}
