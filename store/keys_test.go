package store

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
)

func TestKeyTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 12, 0, 0, 1, time.UTC)
	for _, tt := range []struct {
		name string
		in   time.Time
		want uint64
	}{
		{"Zero", time.Time{}, 0},
		{"Before1970", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), 0},
		{"Epoch", time.Unix(0, 0), 0},
		{"Now", at, uint64(at.UnixNano())},
		{"OtherZone", at.In(time.FixedZone("X", 7200)), uint64(at.UnixNano())},
		{"After2262", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
	} {
		if got := keyTime(tt.in); got != tt.want {
			t.Fatalf("%s: keyTime=%d, want %d", tt.name, got, tt.want)
		}
	}
	// Byte order is time order.
	a, b := createdKey(at, "pay_b"), createdKey(at.Add(time.Nanosecond), "pay_a")
	if bytes.Compare(a, b) >= 0 {
		t.Fatalf("createdKey(t) >= createdKey(t+1ns): %x, %x", a, b)
	}
}

func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
		{nil, nil},
	} {
		if got := prefixEnd(tt.in); !bytes.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Fatalf("prefixEnd(%x)=%x, want %x", tt.in, got, tt.want)
		}
	}
}

func TestKeys_RoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	prefix := statusPrefix(pay.Processing)
	ns, id, ok := splitTimeID(statusKey(pay.Processing, at, "pay_1"), len(prefix))
	if !ok || ns != keyTime(at) || id != "pay_1" {
		t.Fatalf("splitTimeID(statusKey)=%d, %q, %t", ns, id, ok)
	}
	if k := statusKey(pay.Processing, at, "pay_1"); bytes.Compare(k, statusBound(pay.Processing, at)) <= 0 ||
		bytes.Compare(k, statusBound(pay.Processing, at.Add(time.Nanosecond))) >= 0 {
		t.Fatalf("statusKey at t is not between the bounds t and t+1ns")
	}

	ns, ev, ok := splitPendingKey(pendingKey(at, "mock", "evt_1"))
	if !ok || ns != keyTime(at) || !bytes.Equal(ev, eventKey("mock", "evt_1")) {
		t.Fatalf("splitPendingKey=%d, %x, %t", ns, ev, ok)
	}

	account, currency, ok := splitBalanceKey(balanceKey(pay.AccountPSPReceivable, "EUR"))
	if !ok || account != pay.AccountPSPReceivable || currency != "EUR" {
		t.Fatalf("splitBalanceKey=%q, %q, %t", account, currency, ok)
	}

	// Length prefixes keep parts apart: ("ab", "c") and ("a", "bc") differ.
	if bytes.Equal(eventKey("ab", "c"), eventKey("a", "bc")) {
		t.Fatal("eventKey(ab, c) == eventKey(a, bc)")
	}
	if bytes.HasPrefix(stepKey("pay_ab", 1), paymentPrefix("pay_a")) {
		t.Fatal("a step of pay_ab has the prefix of pay_a")
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	prefix := statusPrefix(pay.Created)
	k := statusKey(pay.Created, time.Unix(1700000000, 0), "pay_1")
	c := encodeCursor(cursorStatus, k)
	got, err := decodeCursor(c, cursorStatus, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, k) {
		t.Fatalf("decodeCursor=%x, want %x", got, k)
	}
	for name, tt := range map[string]struct {
		s      string
		kind   byte
		prefix []byte
	}{
		"OtherKind":   {c, cursorCreated, nil},
		"OtherPrefix": {c, cursorStatus, statusPrefix(pay.Failed)},
		"NotBase64":   {"%%%", cursorStatus, prefix},
		"Empty":       {"", cursorCreated, nil},
		"NoID":        {encodeCursor(cursorStatus, statusBound(pay.Created, time.Unix(1, 0))), cursorStatus, prefix},
	} {
		_, err := decodeCursor(tt.s, tt.kind, tt.prefix)
		if got, want := pay.ErrorCode(err), pay.EINVALID; got != want {
			t.Fatalf("%s: error %v: code=%q, want %q", name, err, got, want)
		}
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(cursorCreated, createdKey(time.Unix(1700000000, 0), "pay_1")))
	f.Add(encodeCursor(cursorStatus, statusKey(pay.Created, time.Unix(1700000000, 0), "pay_1")))
	f.Add("")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, s string) {
		for _, kind := range []byte{cursorCreated, cursorStatus, cursorOrder} {
			k, err := decodeCursor(s, kind, statusPrefix(pay.Created))
			if err == nil && (len(k) < len(statusPrefix(pay.Created))+9 || !bytes.HasPrefix(k, statusPrefix(pay.Created))) {
				t.Fatalf("decodeCursor(%q) accepted a key without prefix and id: %x", s, k)
			}
		}
	})
}
