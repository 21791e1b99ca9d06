package store

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/paystate/paystate/internal/ids"
)

// TestIdent_SameBytesAsTheLibrary checks that ident's hand-written CBOR
// heads are the bytes the library writes for the same value (the file
// format does not depend on which path wrote it) and that every shape
// reads back as the string it came from.
func TestIdent_SameBytesAsTheLibrary(t *testing.T) {
	t.Parallel()
	now := time.Now()
	payID := ids.Payment(now)
	for _, s := range []string{
		payID, ids.Event(now), ids.New("dlv_", now),
		strings.ToLower(payID),                  // not canonical: kept as text
		"pay_" + strings.Repeat("Z", 26),        // overflows a ULID: text
		"pay_01ARZ3NDEKTSV4RRFFQ69G5FA",         // 25 characters: text
		"re_" + payID[4:],                       // unknown prefix: text
		"evt_1PZ", "x", strings.Repeat("e", 23), // short texts
		strings.Repeat("e", 24), strings.Repeat("e", 255), strings.Repeat("e", 256), strings.Repeat("e", 70000),
		"ünïcode",
	} {
		got, err := ident(s).MarshalCBOR()
		if err != nil {
			t.Fatalf("MarshalCBOR(%.30q): %v", s, err)
		}
		var want []byte
		if u, ok := canonicalID(s); ok {
			want, err = cborMode.Marshal(u)
		} else {
			want, err = cborMode.Marshal(s)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("MarshalCBOR(%.30q) = % x..., want % x...", s, got[:min(len(got), 8)], want[:min(len(want), 8)])
		}
		var back ident
		if err := back.UnmarshalCBOR(got); err != nil || string(back) != s {
			t.Errorf("UnmarshalCBOR(MarshalCBOR(%.30q)) = %.30q, %v", s, back, err)
		}
	}
	// Malformed items are refused, not misread.
	for _, data := range [][]byte{
		{0x51, 9}, {0x51, byte(len(identPrefixes))}, {0x63, 'a', 0xff, 0xfe}, {0x01}, {},
	} {
		var back ident
		if err := back.UnmarshalCBOR(data); err == nil {
			t.Errorf("UnmarshalCBOR(% x) = %q, want an error", data, back)
		}
	}
}

// canonicalID is the byte string the library path wrote for a
// paystate id: its prefix code and its ULID's 16 bytes.
func canonicalID(s string) ([]byte, bool) {
	for code, prefix := range identPrefixes {
		if rest, ok := strings.CutPrefix(s, prefix); ok && len(rest) == 26 && rest == strings.ToUpper(rest) {
			if u, err := ulid.ParseStrict(rest); err == nil {
				return append([]byte{byte(code)}, u[:]...), true
			}
		}
	}
	return nil, false
}
