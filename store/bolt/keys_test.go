package bolt

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/ids"
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
	ns, id, ok := splitTimeKeyID(statusKey(pay.Processing, at, "pay_1"), len(prefix))
	if !ok || ns != keyTime(at) || id != "pay_1" {
		t.Fatalf("splitTimeKeyID(statusKey)=%d, %q, %t", ns, id, ok)
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
	if bytes.HasPrefix(outboxPaymentKey("pay_ab", 1), paymentPrefix("pay_a")) {
		t.Fatal("an outbox entry of pay_ab has the prefix of pay_a")
	}
}

// TestKeyID: ids paystate makes are 17 bytes in keys, other ids 0xff and
// their text; both read back, keep the order of their ids (among ids of
// the same prefix), and are told apart from the text of a schema 2 key.
// Effect keys with an event id paystate made shrink the same way.
func TestKeyID(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	a, b := ids.Payment(now), ids.Payment(now.Add(time.Millisecond))
	for _, id := range []string{a, ids.Event(now), ids.New("dlv_", now), "pay_1", "re_" + a[4:], strings.ToLower(a), "x"} {
		k := keyID(id)
		_, _, compact := compactID(id)
		if compact && len(k) != 17 || !compact && (k[0] != keyIDText || string(k[1:]) != id) {
			t.Errorf("keyID(%q) = %x", id, k)
		}
		if got, ok := parseKeyID(k); !ok || got != id {
			t.Errorf("parseKeyID(keyID(%q)) = %q, %t", id, got, ok)
		}
		if !isKeyID(k) || isKeyID([]byte(id)) {
			t.Errorf("isKeyID(keyID(%q)) = %t, isKeyID(%q) = %t", id, isKeyID(k), id, isKeyID([]byte(id)))
		}
		got, rest, ok := readStrID(append(appendStrID(nil, id), 7))
		if !ok || got != id || !bytes.Equal(rest, []byte{7}) {
			t.Errorf("readStrID(appendStrID(%q) ‖ 7) = %q, %x, %t", id, got, rest, ok)
		}
	}
	if bytes.Compare(keyID(a), keyID(b)) >= 0 || bytes.Compare(createdKey(now, a), createdKey(now, b)) >= 0 {
		t.Error("the key ids of two payment ids do not sort as the ids do")
	}
	for _, k := range [][]byte{nil, {0}, {3, 1}, {0xff}, append([]byte{0}, make([]byte, 17)...)} {
		if id, ok := parseKeyID(k); ok {
			t.Errorf("parseKeyID(%x) = %q, want not ok", k, id)
		}
	}
	for _, key := range []string{"loyalty:" + ids.Event(now), "retention:" + ids.Event(now), "loyalty_payment:" + a, "loyalty:evt_1", "a:b:" + ids.Event(now), "plain"} {
		k := effectKey(key)
		if got, ok := parseEffectKey(k); !ok || got != key {
			t.Errorf("parseEffectKey(effectKey(%q)) = %q, %t", key, got, ok)
		}
		effect, id, _ := strings.Cut(key, ":")
		switch {
		case symbolCodes[effect] > 0 && id != "evt_1" && len(k) != 2+17: // a symbol and an id paystate made
			t.Errorf("effectKey(%q) is %d bytes, want 2 and the id in 17", key, len(k))
		case strings.HasPrefix(key, "a:b:") && len(k) != len(key)-len(ids.Event(now))+17:
			t.Errorf("effectKey(%q) is %d bytes, want the id in 17", key, len(k))
		}
	}
}

// TestIdemKey: a scoped key of a known operation and a lower-case hash is
// 14 bytes shorter in keys and reads back; any other key stays text.
func TestIdemKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		scoped string
		coded  bool
	}{
		{"create:e3b0c44298fc1c14:order-1", true},
		{"refund:0123456789abcdef:", true},
		{"refund:0123456789abcdef:a:b:c", true},
		{"create:E3B0C44298FC1C14:order-1", false}, // upper case would not read back
		{"create:e3b0c44298fc1c1:order-1", false},
		{"delete:e3b0c44298fc1c14:order-1", false},
		{"create:e3b0c44298fc1c14", false},
		{"create:e3b0c44298fc1cxx:order-1", false},
		{"plain", false},
	} {
		k := idemKey(tt.scoped)
		if got, ok := parseIdemKey(k); !ok || got != tt.scoped {
			t.Errorf("parseIdemKey(idemKey(%q)) = %q, %t", tt.scoped, got, ok)
		}
		if coded := k[0] == keyCoded; coded != tt.coded || coded && len(k) != len(tt.scoped)-14 {
			t.Errorf("idemKey(%q) = %x: %d bytes, coded %t, want coded %t", tt.scoped, k, len(k), coded, tt.coded)
		}
	}
	if _, ok := parseIdemKey([]byte{keyCoded, 0, 1}); ok {
		t.Error("parseIdemKey read a coded key without its hash")
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
