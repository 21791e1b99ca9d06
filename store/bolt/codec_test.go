package bolt

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
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
		sameBytes(t, s, got, want, func(data []byte) (string, error) {
			var back ident
			err := back.UnmarshalCBOR(data)
			return string(back), err
		})
	}
	// Malformed items are refused, not misread (the empty byte strings,
	// 0x40 and 0x58 0x00, were a panic once).
	for _, data := range [][]byte{
		{0x51, 9}, {0x51, byte(len(identPrefixes))}, {0x63, 'a', 0xff, 0xfe}, {0x01}, {},
		{0x40}, {0x58, 0x00}, {0x42, 0, 1},
	} {
		var back ident
		if err := back.UnmarshalCBOR(data); err == nil {
			t.Errorf("UnmarshalCBOR(% x) = %q, want an error", data, back)
		}
	}
}

// sameBytes checks that got, what a type's own MarshalCBOR wrote for s, is
// want, what the library writes, and that decode reads got back as s.
func sameBytes(t *testing.T, s string, got, want []byte, decode func([]byte) (string, error)) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("MarshalCBOR(%.30q) = % x..., want % x...", s, got[:min(len(got), 8)], want[:min(len(want), 8)])
	}
	if back, err := decode(got); err != nil || back != s {
		t.Errorf("UnmarshalCBOR(MarshalCBOR(%.30q)) = %.30q, %v", s, back, err)
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

// TestSymbol_Codes checks symbol's encoding: a string of the table is its
// code, a CBOR unsigned integer that the library reads as the same number
// (one byte for the first 24 codes, two after); any other string is the
// text the library writes; both read back as the string; a code beyond
// the table and malformed items are refused; an empty symbol is left out
// of its record.
func TestSymbol_Codes(t *testing.T) {
	t.Parallel()
	for code, s := range symbols {
		got, err := symbol(s).MarshalCBOR()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := cborMode.Marshal(uint64(code))
		if !bytes.Equal(got, want) || len(got) != 1+min(1, code/24) {
			t.Errorf("MarshalCBOR(%q) = % x, want % x (code %d)", s, got, want, code)
		}
		var back symbol
		if err := back.UnmarshalCBOR(got); err != nil || string(back) != s {
			t.Errorf("UnmarshalCBOR(% x) = %q, %v; want %q", got, back, err, s)
		}
	}
	for _, s := range []string{"eur", "payment.unknown", "captured ", "", strings.Repeat("x", 300), "ünïcode"} {
		got, err := symbol(s).MarshalCBOR()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := cborMode.Marshal(s)
		if !bytes.Equal(got, want) {
			t.Errorf("MarshalCBOR(%.20q) = % x, want the text % x", s, got, want)
		}
		var back symbol
		if err := back.UnmarshalCBOR(got); err != nil || string(back) != s {
			t.Errorf("UnmarshalCBOR(MarshalCBOR(%.20q)) = %.20q, %v", s, back, err)
		}
	}
	beyond, _ := cborMode.Marshal(uint64(len(symbols)))
	for _, data := range [][]byte{beyond, {0x19, 0x01, 0x00}, {0x18}, {0x63, 'a', 0xff, 0xfe}, {0x41, 'a'}, {}} {
		var back symbol
		if err := back.UnmarshalCBOR(data); err == nil {
			t.Errorf("UnmarshalCBOR(% x) = %q, want an error", data, back)
		}
	}
	if data, err := encode("payment", paymentRecord{Currency: "", Amount: 1}); err != nil || !bytes.Equal(data, []byte{0xa1, 0x03, 0x01}) {
		t.Errorf("a payment with only an amount encodes as % x (%v), want a1 03 01", data, err)
	}
}

// TestSymbol_Vocabulary checks that the strings every payment writes
// several times have one-byte codes, and that the other constants of
// package pay that records hold are in the table at all.
func TestSymbol_Vocabulary(t *testing.T) {
	t.Parallel()
	oneByte := []string{"EUR", pay.EffectLoyalty, pay.EffectRetention, pay.EffectWebhook, pay.EffectReceipt,
		pay.DeliveryPending, pay.DeliveryDone, pay.DeliveryDead, string(pay.SourceAPI), string(pay.SourceSync), string(pay.SourceWebhook),
		pay.StepTransition, pay.EventType(pay.Captured)}
	for _, s := range pay.Statuses {
		oneByte = append(oneByte, string(s))
	}
	for _, s := range oneByte {
		if code, ok := symbolCodes[s]; !ok || code >= 24 {
			t.Errorf("%q: code %d (listed %v), want one below 24", s, code, ok)
		}
	}
	for _, s := range []string{pay.StepCreated, pay.StepUpdate, pay.StepDuplicate, pay.StepStale, pay.StepConflict,
		pay.StepAnomaly, pay.StepFailedAttempt, pay.StepReview, pay.StepPSPError, pay.StepIgnoredEvent,
		pay.StepRefundRequested, pay.StepRefundSucceeded, pay.StepRefundFailed, pay.StepDisputeOpened,
		pay.StepDisputeUpdated, pay.StepDisputeClosed, string(pay.SourceReport), string(pay.SourceSweeper),
		string(pay.SourceReview), string(pay.SourceSettlement), pay.AccountPSPReceivable, pay.AccountMerchantRevenue,
		pay.AccountPSPFees, pay.AccountPayouts, pay.AccountDisputes, pay.AccountDisputeLosses, pay.IdemInFlight, pay.IdemDone,
		string(pay.RefundPending), string(pay.RefundSucceeded), string(pay.RefundFailed), string(pay.DisputeNeedsResponse),
		string(pay.DisputeUnderReview), string(pay.DisputeWon), string(pay.DisputeLost), pay.EventRefundSucceeded,
		pay.EventRefundFailed, pay.EventDisputeCreated, pay.EventDisputeClosed, pay.ReasonUnresolved,
		pay.ReasonConflictingTerminal, pay.ReasonOrphan, pay.ReasonAmountMismatch, pay.ReasonProviderRefConflict,
		pay.ReasonSyncContradicted, pay.ReasonInboxExhausted, pay.ReasonRefundUnresolved, pay.ReasonUnreconciled} {
		if _, ok := symbolCodes[s]; !ok {
			t.Errorf("%q is not a symbol", s)
		}
	}
	for _, s := range pay.Statuses {
		if _, ok := symbolCodes[pay.EventType(s)]; !ok && s != pay.FinalizePending && s != pay.Created {
			t.Errorf("event type %q is not a symbol", pay.EventType(s))
		}
	}
}

// TestStamp_SameBytesAsTheLibrary checks that stamp's hand-written CBOR
// integers are the bytes the library writes for the same int64 of
// nanoseconds, at every head length and sign, that they read back as the
// same instant, that a longer head than needed still reads (the library
// accepts it), and that what is not an int64 is refused.
func TestStamp_SameBytesAsTheLibrary(t *testing.T) {
	t.Parallel()
	var ns []int64
	for _, n := range []int64{1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxInt64} {
		ns = append(ns, n, -n)
	}
	ns = append(ns, math.MinInt64, time.Now().UnixNano())
	for _, n := range ns {
		s := stamp{time.Unix(0, n).UTC()}
		got, err := s.MarshalCBOR()
		if err != nil {
			t.Fatalf("MarshalCBOR(%d): %v", n, err)
		}
		want, err := cborMode.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("MarshalCBOR(%d) = % x, want % x", n, got, want)
		}
		var back stamp
		if err := back.UnmarshalCBOR(got); err != nil || !back.Equal(s.Time) || back.Location() != time.UTC {
			t.Errorf("UnmarshalCBOR(MarshalCBOR(%d)) = %v, %v", n, back.Time, err)
		}
	}
	if got, err := (stamp{}).MarshalCBOR(); err != nil || !bytes.Equal(got, []byte{0}) {
		t.Errorf("MarshalCBOR(zero) = % x, %v, want 00", got, err)
	}
	if _, err := at(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)).MarshalCBOR(); err == nil {
		t.Error("MarshalCBOR(2300) = nil error, want out of range")
	}
	// 1000 in a head of eight bytes: not the shortest, still an integer.
	var back stamp
	if err := back.UnmarshalCBOR([]byte{0x1b, 0, 0, 0, 0, 0, 0, 0x03, 0xe8}); err != nil || back.UnixNano() != 1000 {
		t.Errorf("UnmarshalCBOR(1000 in a long head) = %v, %v", back.Time, err)
	}
	for _, data := range [][]byte{
		{}, {0x18}, {0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x3b, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x40}, {0x61, 'a'}, {0x01, 0x02},
	} {
		var back stamp
		if err := back.UnmarshalCBOR(data); err == nil {
			t.Errorf("UnmarshalCBOR(% x) = %v, want an error", data, back.Time)
		}
	}
}

// TestHexBytes_SameBytesAsTheLibrary checks hexBytes' hand-written CBOR:
// lowercase hexadecimal is the byte string it spells, anything else the
// text, both as the library writes them, and both read back as the string.
func TestHexBytes_SameBytesAsTheLibrary(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "00", "ff", "0123456789abcdef", strings.Repeat("ab", 32), strings.Repeat("cd", 40000),
		"ABCD", "abc", "abcg", "x", strings.Repeat("z", 70000), "ünïcode",
	} {
		got, err := hexBytes(s).MarshalCBOR()
		if err != nil {
			t.Fatalf("MarshalCBOR(%.30q): %v", s, err)
		}
		// Canonical lower-case hex is stored as its bytes, anything else
		// as the text.
		var wantValue any = s
		if b, err := hex.DecodeString(s); err == nil && hex.EncodeToString(b) == s {
			wantValue = b
		}
		want, err := cborMode.Marshal(wantValue)
		if err != nil {
			t.Fatal(err)
		}
		sameBytes(t, s, got, want, func(data []byte) (string, error) {
			var back hexBytes
			err := back.UnmarshalCBOR(data)
			return string(back), err
		})
	}
	for _, data := range [][]byte{{}, {0x42, 1}, {0x62, 'a', 0xff}, {0x01}} {
		var back hexBytes
		if err := back.UnmarshalCBOR(data); err == nil {
			t.Errorf("UnmarshalCBOR(% x) = %q, want an error", data, back)
		}
	}
}

// TestIdemExpiry_ReadsTheRecordsExpiry checks that idemExpiry, which
// indexIdem decodes instead of the whole record, reads the ExpiresAt of a
// stored idemRecord (the same field number).
func TestIdemExpiry_ReadsTheRecordsExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 123, time.UTC)
	data, err := encode("idempotency key", fromIdem(pay.IdemRecord{
		Key: "k", Fingerprint: "ab12", State: pay.IdemDone, PaymentID: ids.Payment(now), StatusCode: 201,
		Body: []byte(`{"id":"x"}`), CreatedAt: now, LockedUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour),
	}))
	if err != nil {
		t.Fatal(err)
	}
	var got idemExpiry
	if err := decode("idempotency key", data, &got); err != nil || !got.ExpiresAt.Equal(now.Add(24*time.Hour)) {
		t.Errorf("decode into idemExpiry = %v, %v, want %v", got.ExpiresAt.Time, err, now.Add(24*time.Hour))
	}
}
