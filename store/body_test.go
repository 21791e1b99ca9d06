package store

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
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata bodies: %v", err)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		z := packBody(body)
		if z == nil || len(z) >= len(body) {
			t.Errorf("%s: %d bytes packed to %d", f, len(body), len(z))
			continue
		}
		if got, err := unpackBody(z); err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: unpacked to %q, %v", f, got, err)
		}
	}

	noise := make([]byte, 300)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(noise)
	if z := packBody(noise); z != nil {
		t.Errorf("300 random bytes packed to %d bytes, want them kept as they are", len(z))
	}
	if z := packBody(nil); z != nil {
		t.Errorf("an empty body packed to %x", z)
	}

	z := packBody([]byte(`{"id":"evt_1","type":"payment.captured","data":{"payment_id":"pay_1","amount":1000,"currency":"EUR"}}`))
	if got, err := unpackBody(z[:len(z)-3]); err == nil {
		t.Errorf("a frame cut short unpacked to %q without an error", got)
	}
}
