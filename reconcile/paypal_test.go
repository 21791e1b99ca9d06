package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
)

// stl writes a PayPal Settlement Report (STL) with the record types and
// CH column names of PayPal's specification, around the SB rows given.
func stl(rows ...string) string {
	var b strings.Builder
	b.WriteString("\"RH\",2025/03/09 12:00:00 -0800,\"A\",\"MERCHANTACCT1\",011\n")
	b.WriteString("\"FH\",01\n")
	b.WriteString("\"SH\",2025/03/08 00:00:00 -0800,2025/03/08 23:59:59 -0800,\"MERCHANTACCT1\",\"\"\n")
	// PayPal's own header, the double space of "Transaction  Debit or
	// Credit" included.
	b.WriteString("\"CH\",\"Transaction ID\",\"Invoice ID\",\"PayPal Reference ID\",\"PayPal Reference ID Type\",\"Transaction Event Code\",\"Transaction Initiation Date\",\"Transaction Completion Date\",\"Transaction  Debit or Credit\",\"Gross Transaction Amount\",\"Gross Transaction Currency\",\"Fee Debit or Credit\",\"Fee Amount\",\"Fee Currency\",\"Custom Field\",\"Consumer ID\"\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	fmt.Fprintf(&b, "\"SF\",%d\n\"SC\",%d\n\"RF\",%d\n\"RC\",%d\n\"FF\",%d\n", len(rows), len(rows), len(rows), len(rows), len(rows))
	return b.String()
}

func sb(txn, code, dc string, gross int64, fee int64, custom string) string {
	feeDC := "DR"
	if fee < 0 {
		feeDC, fee = "CR", -fee
	}
	return fmt.Sprintf("\"SB\",%q,\"o-x\",\"\",\"\",%q,2025/03/08 10:00:00 -0800,2025/03/08 10:00:05 -0800,%q,%d,\"EUR\",%q,%d,\"EUR\",%q,\"buyer@example.com\"", txn, code, dc, gross, feeDC, fee, custom)
}

// TestEngine_PayPal: a PayPal settlement report matched against the
// ledger: a capture by its Custom Field (the payment id paystate sent as
// custom_id), a refund by its transaction id, a withdrawal as a payout;
// an unknown custom id and a chargeback are left to a human.
func TestEngine_PayPal(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open)
			report := stl(
				sb("3C679366HH908993F", "T0006", "CR", 10000, 175, e.pays["one"].ID),
				sb("3C679366HH908993G", "T0006", "CR", 20000, 320, e.pays["two"].ID),
				sb("re_one", "T1107", "DR", 4000, -0, e.pays["one"].ID),
				sb("3C679366HH908993H", "T0006", "CR", 7000, 130, "pay_01JNGHOSTGHOSTGHOSTGHOST00"),
				sb("3C679366HH908993J", "T0006", "CR", 4000, 90, e.pays["five"].ID),
				sb("9WD17374BB281513K", "T1201", "DR", 5000, 0, ""),
				sb("8BA60102NX2519014", "T0400", "DR", 25305, 0, ""),
			)
			lines, err := reconcile.ReadPayPal(strings.NewReader(report))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(lines), 7; got != want {
				t.Fatalf("lines=%d, want %d", got, want)
			}
			if l := lines[0]; l.Kind != pay.SettleCharge || l.Amount != 10000 || l.Fee != 175 || l.PaymentID != e.pays["one"].ID || l.Line != 5 {
				t.Fatalf("first line %+v, want a charge of 10000, fee 175, payment one, line 5", l)
			}
			if l := lines[2]; l.Kind != pay.SettleRefund || l.Amount != -4000 || l.ProviderRef != "re_one" {
				t.Fatalf("refund line %+v, want -4000 re_one", l)
			}
			eng := &reconcile.Engine{Store: e.db, SettleWithin: 7 * 24 * time.Hour, Now: e.clock.Now}
			before := e.balances()
			run, err := eng.Run(context.Background(), "standard", "import:paypal:stl.csv", lines)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name      string
				got, want int
			}{
				{"Matched", run.Matched, 4}, {"Mismatched", run.Mismatched, 1}, {"MissingLocally", run.MissingLocally, 2},
			} {
				if c.got != c.want {
					t.Errorf("%s=%d, want %d (%+v)", c.name, c.got, c.want, run.Items)
				}
			}
			if got, want := e.balances()[pay.AccountPSPFees]-before[pay.AccountPSPFees], int64(175+320); got != want {
				t.Errorf("psp_fees=%d, want %d", got, want)
			}
		})
	}
}

func TestReadPayPal_Errors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ report, want string }{
		"NoCH":        {"\"RH\",x\n\"SB\",\"t\"\n", "SB row before the CH row"},
		"Empty":       {"", "no CH row"},
		"MissingCol":  {"\"CH\",\"Transaction ID\"\n", `column "transaction event code" is missing`},
		"Amount":      {stl(sb("t1", "T0006", "CR", 1, 0, "p")[:0] + `"SB","t1","","","","T0006","","","CR","12.50","EUR","DR","0","EUR","p",""`), `line 5: gross transaction amount: "12.50" is not an amount in minor units`},
		"ShortRow":    {stl(`"SB","t1","","","","T0006"`), `line 5: gross transaction currency: "" is not a three-letter currency code`},
		"DebitCredit": {stl(`"SB","t1","","","","T0006","","","XX","1250","EUR","DR","0","EUR","p",""`), `transaction debit or credit: "XX": want CR or DR`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := reconcile.ReadPayPal(strings.NewReader(tc.report))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err=%v, want one saying %q", err, tc.want)
			}
		})
	}
}
