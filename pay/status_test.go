package pay_test

import (
	"testing"

	"github.com/paystate/paystate/pay"
)

// TestDecide walks every (current, observed) pair against the rules of the
// specification, written out by hand so the table and the code can disagree.
func TestDecide(t *testing.T) {
	t.Parallel()
	const (
		A = pay.Apply
		D = pay.Duplicate
		S = pay.Stale
		C = pay.ConflictingTerminal
	)
	cols := []pay.Status{pay.Created, pay.Processing, pay.RequiresAction, pay.FinalizePending, pay.Expired, pay.Captured, pay.Failed, pay.Refunded}
	// rows: current status; columns: observed status, in the order of cols.
	want := map[pay.Status][]pay.Decision{
		//                     cre proc req fin exp cap fail ref
		pay.Created:         {D, A, A, A, A, A, A, A},
		pay.Processing:      {S, D, A, A, A, A, A, A},
		pay.RequiresAction:  {S, A, D, A, A, A, A, A},
		pay.FinalizePending: {S, S, S, D, A, A, A, A},
		pay.Expired:         {A, A, A, A, D, A, A, A},
		pay.Captured:        {S, S, S, S, S, D, C, A},
		pay.Failed:          {S, S, S, S, S, C, D, C},
		pay.Refunded:        {S, S, S, S, S, S, C, D},
	}
	n := 0
	for _, cur := range pay.Statuses {
		row, ok := want[cur]
		if !ok {
			t.Fatalf("no row for %s", cur)
		}
		for i, obs := range cols {
			n++
			if got, want := pay.Decide(cur, obs), row[i]; got != want {
				t.Errorf("Decide(%s, %s)=%s, want %s", cur, obs, got, want)
			}
			if got, want := pay.CanTransition(cur, obs), row[i] == A; got != want {
				t.Errorf("CanTransition(%s, %s)=%v, want %v", cur, obs, got, want)
			}
		}
	}
	if got, want := n, 64; got != want {
		t.Fatalf("pairs=%d, want %d", got, want)
	}
}

func TestStatus_Terminal(t *testing.T) {
	t.Parallel()
	for _, s := range pay.Statuses {
		term := s == pay.Captured || s == pay.Failed || s == pay.Refunded
		if got := s.Terminal(); got != term {
			t.Errorf("%s.Terminal()=%v, want %v", s, got, term)
		}
		secrets := s == pay.Created || s == pay.Processing || s == pay.RequiresAction
		if got := s.ShowsSecrets(); got != secrets {
			t.Errorf("%s.ShowsSecrets()=%v, want %v", s, got, secrets)
		}
	}
	if _, err := pay.ParseStatus("captured "); pay.ErrorCode(err) != pay.EINVALID {
		t.Fatalf("ParseStatus(\"captured \") err=%v, want invalid", err)
	}
}

func TestValidateOrderID(t *testing.T) {
	t.Parallel()
	long := make([]byte, pay.MaxOrderIDLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"order-1", true},
		{"Bestellung Nr. 42 – Müller", true},
		{string(long[:pay.MaxOrderIDLen]), true},
		{"", false},
		{string(long), false},
		{"a\nb", false},
		{"a\x00b", false},
		{"evil\u202Eexe.txt", false}, // right-to-left override
		{"zero\u200Bwidth", false},
		{"bad\xffutf8", false},
	} {
		err := pay.ValidateOrderID(tc.in)
		if got := err == nil; got != tc.ok {
			t.Errorf("ValidateOrderID(%q) err=%v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestValidateCurrencyAmount(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"eur", "EURO", "E1R", "", "€UR"} {
		if err := pay.ValidateCurrency(c); pay.ErrorCode(err) != pay.EINVALID {
			t.Errorf("ValidateCurrency(%q)=%v, want invalid", c, err)
		}
	}
	if err := pay.ValidateCurrency("EUR"); err != nil {
		t.Errorf("ValidateCurrency(EUR)=%v", err)
	}
	for _, a := range []int64{0, -1} {
		if err := pay.ValidateAmount(a); pay.ErrorCode(err) != pay.EINVALID {
			t.Errorf("ValidateAmount(%d)=%v, want invalid", a, err)
		}
	}
}
