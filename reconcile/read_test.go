package reconcile_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
)

func TestParseAmount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, currency string
		want         int64
		err          bool
	}{
		{"12.50", "EUR", 1250, false},
		{"-4", "EUR", -400, false},
		{"+0.01", "EUR", 1, false},
		{"1500", "JPY", 1500, false},
		{"1500.00", "jpy", 1500, false},
		{"1.250", "BHD", 1250, false},
		{"0.10", "EUR", 10, false},
		{"92233720368547758.07", "EUR", 9223372036854775807, false},
		{"92233720368547758.08", "EUR", 0, true},
		{"1.005", "EUR", 0, true},
		{"1.5", "JPY", 0, true},
		{"1e3", "EUR", 0, true},
		{"", "EUR", 0, true},
		{"-", "EUR", 0, true},
		{".", "EUR", 0, true},
		{"1.", "EUR", 0, true},
		{"1,00", "EUR", 0, true},
		{" 1", "EUR", 0, true},
	} {
		got, err := reconcile.ParseAmount(c.in, c.currency)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseAmount(%q, %s)=%d, %v; want %d, error %v", c.in, c.currency, got, err, c.want, c.err)
		}
	}
}

func TestReadGeneric(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		// Any column order, upper-case headers, a byte order mark, extra columns.
		in := "\xef\xbb\xbfCurrency, Type ,ID,Amount,Provider_Ref,extra,fee\neur,refund,txn_1,-4.00,re_1,x,\n"
		ls, err := reconcile.ReadGeneric(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		want := pay.SettlementLine{Line: 2, ID: "txn_1", Kind: pay.SettleRefund, Category: "refund", ProviderRef: "re_1", Amount: -400, Currency: "EUR"}
		if len(ls) != 1 || ls[0] != want {
			t.Fatalf("lines=%+v, want %+v", ls, want)
		}
	})
	t.Run("File", func(t *testing.T) {
		t.Parallel()
		ls, err := reconcile.ReadGeneric(testdata(t, "generic.csv"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(ls), 8; got != want {
			t.Fatalf("%d lines, want %d", got, want)
		}
		if l := ls[3]; l.ID != "txn_dispute_one" || l.Amount != -5000 || l.Fee != 1500 || l.Net() != -6500 || l.PayoutID != "po_1" || l.Line != 5 {
			t.Fatalf("dispute line=%+v", l)
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()
		const head = "id,provider_ref,type,amount,fee,currency,payout_id,available_on\n"
		const ok = "txn_1,pi_1,charge,1.00,0.10,EUR,,\n"
		for _, c := range []struct{ name, in, want string }{
			{"Empty", "", "line 1: the file is empty"},
			{"MissingColumn", "id,type,amount\n", `line 1: column "currency" is missing`},
			{"DuplicateColumn", "id,type,amount,currency,ID\n", `line 1: column "id" appears twice`},
			{"Decimals", head + ok + "txn_2,pi_2,charge,200.001,3.20,EUR,po_1,2025-03-03\n", "line 3: amount: \"200.001\" has more decimals than EUR's 2"},
			{"Type", head + ok + ok + "txn_3,pi_3,transfer,1.00,0,EUR,,\n", `line 4: type: "transfer" is not one of`},
			{"NoRef", head + "txn_1,,charge,1.00,0,EUR,,\n", "line 2: provider_ref: required on a charge line"},
			{"NoID", head + ",pi_1,charge,1.00,0,EUR,,\n", "line 2: id:"},
			{"Currency", head + "txn_1,pi_1,charge,1.00,0,EURO,,\n", `line 2: currency: "EURO" is not a three-letter currency code`},
			{"Float", head + "txn_1,pi_1,charge,1e2,0,EUR,,\n", `line 2: amount: "1e2" is not a decimal amount`},
			{"Time", head + "txn_1,pi_1,charge,1.00,0,EUR,,yesterday\n", `line 2: available_on: "yesterday" is not a time`},
			{"FieldCount", head + ok + "txn_2,pi_2,charge,1.00\n", "line 3: wrong number of fields"},
			{"Quote", head + ok + ok + "txn_\"2,pi_2,charge,1.00,0,EUR,,\n", "line 4:"},
		} {
			t.Run(c.name, func(t *testing.T) {
				ls, err := reconcile.ReadGeneric(strings.NewReader(c.in))
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("ReadGeneric=%v, %v; want an error with %q", ls, err, c.want)
				}
				if ls != nil {
					t.Fatalf("ReadGeneric returned %d lines with its error", len(ls))
				}
				if pay.ErrorCode(err) != pay.EINVALID {
					t.Fatalf("error code %s, want %s", pay.ErrorCode(err), pay.EINVALID)
				}
			})
		}
	})
}

func TestReadStripe(t *testing.T) {
	t.Parallel()
	t.Run("File", func(t *testing.T) {
		t.Parallel()
		ls, err := reconcile.ReadStripe(testdata(t, "stripe.csv"))
		if err != nil {
			t.Fatal(err)
		}
		gen, err := reconcile.ReadGeneric(testdata(t, "generic.csv"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != len(gen) {
			t.Fatalf("%d lines, want %d", len(ls), len(gen))
		}
		// The two files say the same thing; the fee line's gross and fee
		// are split as each format writes them, its net the same, and
		// only Stripe names its source.
		for i := range ls {
			s, g := ls[i], gen[i]
			if s.Kind == pay.SettleFee {
				g.ProviderRef = s.ProviderRef
			}
			if s.ID != g.ID || s.Kind != g.Kind || s.ProviderRef != g.ProviderRef || s.Net() != g.Net() || s.Currency != g.Currency || s.PayoutID != g.PayoutID || s.Line != g.Line {
				t.Errorf("line %d: stripe %+v, generic %+v", i+2, s, g)
			}
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()
		const head = "balance_transaction_id,currency,gross,fee,net,reporting_category,source_id,payment_intent_id\n"
		for _, c := range []struct{ name, in, want string }{
			{"MissingColumn", "balance_transaction_id,currency,gross,fee,net,source_id\n", `line 1: column "reporting_category" is missing`},
			{"Net", head + "txn_1,eur,10.00,0.59,9.42,charge,ch_1,pi_1\n", "line 2: net: 9.42 is not gross 10.00 minus fee 0.59"},
			{"NoRef", head + "txn_1,eur,10.00,0.59,9.41,charge,,\n", "line 2: source_id: required on a charge line"},
			{"NoCategory", head + "txn_1,eur,10.00,0.59,9.41,,ch_1,pi_1\n", "line 2: reporting_category: required"},
			{"Gross", head + "txn_1,eur,ten,0.59,9.41,charge,ch_1,pi_1\n", `line 2: gross: "ten" is not a decimal amount`},
		} {
			t.Run(c.name, func(t *testing.T) {
				ls, err := reconcile.ReadStripe(strings.NewReader(c.in))
				if err == nil || !strings.Contains(err.Error(), c.want) || ls != nil {
					t.Fatalf("ReadStripe=%v, %v; want an error with %q", ls, err, c.want)
				}
			})
		}
	})
	t.Run("Categories", func(t *testing.T) {
		t.Parallel()
		in := "balance_transaction_id,currency,gross,fee,net,reporting_category,source_id,payment_intent_id,charge_id\n" +
			"txn_1,eur,10.00,0.59,9.41,charge,ch_1,,ch_1\n" +
			"txn_2,eur,-1.00,0,-1.00,transfer,tr_1,,\n"
		ls, err := reconcile.ReadStripe(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if ls[0].ProviderRef != "ch_1" || ls[0].Kind != pay.SettleCharge {
			t.Errorf("charge without a payment intent: %+v, want matched by charge_id", ls[0])
		}
		if ls[1].Kind != "" || ls[1].Category != "transfer" {
			t.Errorf("transfer: %+v, want no kind (left to a human)", ls[1])
		}
	})
}

// fuzzSeeds adds the test data files and their first lines as seeds.
func fuzzSeeds(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "reconcile", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if i := strings.IndexByte(string(b), '\n'); i > 0 {
			f.Add(b[:i+1])
		}
	}
}

// checkLines holds for every file a reader accepts.
func checkLines(t *testing.T, ls []pay.SettlementLine, err error, kindRequired bool) {
	if err != nil {
		if ls != nil {
			t.Fatalf("lines returned with error %v", err)
		}
		if !strings.Contains(err.Error(), "line ") {
			t.Fatalf("error without a line number: %v", err)
		}
		return
	}
	for _, l := range ls {
		switch {
		case l.ID == "" || l.Line < 2:
			t.Fatalf("line %+v: no id or line number", l)
		case len(l.Currency) != 3 || strings.ToUpper(l.Currency) != l.Currency:
			t.Fatalf("line %+v: currency", l)
		case kindRequired && !l.Kind.Valid():
			t.Fatalf("line %+v: kind", l)
		case (l.Kind == pay.SettleCharge || l.Kind == pay.SettleRefund || l.Kind == pay.SettleDispute) && l.ProviderRef == "":
			t.Fatalf("line %+v: no reference", l)
		}
	}
}

func FuzzReadGeneric(f *testing.F) {
	fuzzSeeds(f, "generic.csv", "malformed.csv")
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := reconcile.ReadGeneric(strings.NewReader(string(data)))
		checkLines(t, ls, err, true)
	})
}

func FuzzReadStripe(f *testing.F) {
	fuzzSeeds(f, "stripe.csv")
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := reconcile.ReadStripe(io.MultiReader(strings.NewReader(string(data))))
		checkLines(t, ls, err, false)
	})
}

func FuzzReadMollie(f *testing.F) {
	fuzzSeeds(f, "mollie.csv")
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := reconcile.ReadMollie(strings.NewReader(string(data)))
		checkLines(t, ls, err, false)
		for _, l := range ls {
			if l.Kind == pay.SettleFee && l.Amount != 0 {
				t.Fatalf("line %+v: a fee line with an amount", l)
			}
		}
	})
}

func TestReadMollie(t *testing.T) {
	t.Parallel()
	t.Run("File", func(t *testing.T) {
		t.Parallel()
		ls, err := reconcile.ReadMollie(testdata(t, "mollie.csv"))
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			id, ref, currency string
			kind              pay.SettlementKind
			amount, fee       int64
		}{
			{"tr_WDqYK6vllg", "tr_WDqYK6vllg", "EUR", pay.SettleCharge, 10000, 0},
			{"tr_7UhSN1zuXS", "tr_7UhSN1zuXS", "USD", pay.SettleCharge, 3000, 0},
			{"tr_Eq8xzWUPCF", "tr_Eq8xzWUPCF", "EUR", pay.SettleCharge, 20000, 0},
			{"tr_Gh0stGh0st", "tr_Gh0stGh0st", "EUR", pay.SettleCharge, 7000, 0},
			{"tr_s5Ksh7VnHq", "tr_s5Ksh7VnHq", "EUR", pay.SettleCharge, 4000, 0},
			{"cpt_mNepDkEtco", "cpt_mNepDkEtco", "EUR", "", 1200, 0},
			{"re_4qqhO89gsT", "re_4qqhO89gsT", "EUR", pay.SettleRefund, -4000, 0},
			{"chb_n9z0tp", "chb_n9z0tp", "EUR", pay.SettleDispute, -5000, 0},
			{"1234567.2503.01/Withheld transaction fees MOL-2025.03", "", "EUR", pay.SettleFee, 0, 254},
		}
		if len(ls) != len(want) {
			t.Fatalf("%d lines, want %d", len(ls), len(want))
		}
		for i, w := range want {
			l := ls[i]
			if l.ID != w.id || l.ProviderRef != w.ref || l.Kind != w.kind || l.Amount != w.amount || l.Fee != w.fee ||
				l.Currency != w.currency || l.PayoutID != "1234567.2503.01" || l.AvailableOn.IsZero() || l.Line != i+2 {
				t.Errorf("line %d: %+v, want %s %s %s %d fee %d", i+2, l, w.id, w.kind, w.currency, w.amount, w.fee)
			}
		}
	})
	t.Run("Reversals", func(t *testing.T) {
		t.Parallel()
		// Money back: a chargeback reversed, a refund returned, each
		// with a line id of its own beside the line it undoes.
		const in = "ID,Currency,Amount,Settlement currency,Settlement amount\n" +
			"chb_n9z0tp,EUR,-50.00,EUR,-50.00\nchb_n9z0tp,EUR,50.00,EUR,50.00\nre_4qqhO89gsT,EUR,40.00,EUR,40.00\n"
		ls, err := reconcile.ReadMollie(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if l := ls[1]; l.ID != "chb_n9z0tp/reversal" || l.ProviderRef != "chb_n9z0tp" || l.Kind != pay.SettleDispute || l.Amount != 5000 {
			t.Errorf("reversal %+v, want chb_n9z0tp/reversal, a dispute of +5000", l)
		}
		if l := ls[2]; l.ID != "re_4qqhO89gsT/returned" || l.ProviderRef != "re_4qqhO89gsT" || l.Kind != pay.SettleRefund || l.Category != "refund_failure" || l.Amount != 4000 {
			t.Errorf("returned refund %+v, want re_4qqhO89gsT/returned, a refund_failure of +4000", l)
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()
		const head = "Date,Currency,Amount,ID,Description,Settlement currency,Settlement amount,Settlement reference\n"
		for _, c := range []struct{ name, in, want string }{
			{"MissingColumn", "Date,Currency,ID\n", `line 1: column "amount" is missing`},
			{"NoIDNoDescription", head + "2025-03-03,EUR,10.00,,,EUR,10.00,T1\n", "line 2: ID: a transaction id, or on a line without one a description, is required"},
			{"Amount", head + "2025-03-03,EUR,ten,tr_1,,EUR,10.00,T1\n", `line 2: amount: "ten" is not a decimal amount`},
			{"Date", head + "3 March,EUR,10.00,tr_1,,EUR,10.00,T1\n", "line 2: date"},
			{"SignUnlikeSettlement", head + "2025-03-03,EUR,50.00,chb_1,,EUR,-50.00,T1\n", `line 2: settlement amount: -50.00 is signed unlike Amount 50.00`},
			{"SettlementAmount", head + "2025-03-03,EUR,50.00,tr_1,,EUR,fifty,T1\n", `line 2: settlement amount: "fifty" is not a decimal amount`},
		} {
			t.Run(c.name, func(t *testing.T) {
				ls, err := reconcile.ReadMollie(strings.NewReader(c.in))
				if err == nil || !strings.Contains(err.Error(), c.want) || ls != nil {
					t.Fatalf("ReadMollie=%v, %v; want an error with %q", ls, err, c.want)
				}
			})
		}
	})
}
