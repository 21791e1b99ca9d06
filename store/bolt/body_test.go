package bolt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestBodyDict_Unchanged: dictionary 1 is the file every stored frame of
// it was made with.
func TestBodyDict_Unchanged(t *testing.T) {
	t.Parallel()
	if got, want := sha256.Sum256(bodyDict1), bodyDict1SHA256; hex.EncodeToString(got[:]) != want {
		t.Fatalf("bodydict/1.txt has SHA-256 %x, want %s: frames stored with it would not unpack", got, want)
	}
}

// TestPackBody: every body of testdata packs smaller and unpacks to
// itself; a body that does not pack smaller is not packed, and a cut
// frame is an error.
func TestPackBody(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata bodies: %v", err)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		z := packBody(body, bodyRefs{})
		if z == nil || len(z) >= len(body) {
			t.Errorf("%s: %d bytes packed to %d", f, len(body), len(z))
			continue
		}
		if got, err := unpackBody(z, bodyRefs{}); err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: unpacked to %q, %v", f, got, err)
		}
	}

	noise := make([]byte, 300)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(noise)
	if z := packBody(noise, bodyRefs{}); z != nil {
		t.Errorf("300 random bytes packed to %d bytes, want them kept as they are", len(z))
	}
	if z := packBody(nil, bodyRefs{}); z != nil {
		t.Errorf("an empty body packed to %x", z)
	}

	z := packBody([]byte(`{"id":"evt_1","type":"payment.captured","data":{"payment_id":"pay_1","amount":1000,"currency":"EUR"}}`), bodyRefs{})
	if got, err := unpackBody(z[:len(z)-3], bodyRefs{}); err == nil {
		t.Errorf("a frame cut short unpacked to %q without an error", got)
	}
}

// TestPackBody_Refs: the ids a body shares with its record are stored as
// marks, which makes a body of the mock PSP smaller still, and unpack to
// the body as it came, also where one id stands inside another or right
// after a mark; a body with a NUL byte is not packed, and a frame unpacked
// without the ids it refers to is an error.
func TestPackBody_Refs(t *testing.T) {
	t.Parallel()
	refs := bodyRefs{event: "evt_mock_ffc2ab43e1e36bbf2b532307", payment: "pay_01KBA7Y3M0000000000000007", ref: "mock_pi_75569034f7a035060a936dd2"}
	body := []byte(`{"id":"evt_mock_ffc2ab43e1e36bbf2b532307","type":"payment.captured","created":1796460808,"data":{"payment_id":"pay_01KBA7Y3M0000000000000007","provider_ref":"mock_pi_75569034f7a035060a936dd2","amount":3700,"currency":"EUR"}}`)
	plain, marked := packBody(body, bodyRefs{}), packBody(body, refs)
	if marked == nil || len(marked) >= len(plain) {
		t.Fatalf("with its ids as marks the body packs to %d bytes, without to %d", len(marked), len(plain))
	}
	if got, err := unpackBody(marked, refs); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("unpacked to %q, %v", got, err)
	}
	if _, err := unpackBody(marked, bodyRefs{}); err == nil {
		t.Fatal("a frame with marks unpacked without the ids it refers to")
	}
	if z := packBody(append(bytes.Clone(body), 0), refs); z != nil {
		t.Fatal("a body with a NUL byte was packed")
	}

	// Random bodies made of the ids, pieces of them and other bytes: the
	// marks come off as they went on.
	tricky := bodyRefs{event: "evt_1e123", payment: "e123", ref: "123x"}
	pieces := []string{tricky.event, tricky.payment, tricky.ref, "e", "1", "23", "x", `"`, "evt_", "\\u0000", "\x01", "\x02\x03"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		var b []byte
		for range r.IntN(20) {
			if r.IntN(4) == 0 {
				b = append(b, byte(1+r.IntN(255)))
			} else {
				b = append(b, pieces[r.IntN(len(pieces))]...)
			}
		}
		for _, refs := range []bodyRefs{tricky, {event: "e", payment: "1", ref: "\x01"}, {event: "x\x02", payment: "3"}, {}} {
			if got, err := unmarkRefs(markRefs(b, refs), refs); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("body %d %q with %+v unmarked to %q, %v", i, b, refs, got, err)
			}
		}
	}
}
