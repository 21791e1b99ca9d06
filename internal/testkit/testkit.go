// Package testkit holds the small helpers that tests across paystate
// share: polling for an asynchronous outcome (nats' checkFor), signing
// a webhook as a Standard Webhooks sender does, through the svix library
// (the reference implementation, not paystate's own code), and, on Linux,
// a small tmpfs to fill for the disk-fault tests. It imports no
// paystate package, so any package's tests may use it, internal tests
// included; booting a whole daemon is in testkit/daemontest.
package testkit

import (
	"bytes"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

// WaitFor polls fn every 10 ms until it returns nil, and fails the test
// with fn's last error once timeout has passed. It is the tests' one way
// to wait for something asynchronous: no bare time.Sleep.
func WaitFor(tb testing.TB, timeout time.Duration, fn func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after %s: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StandardHeader signs body with secret (whsec_...) for webhook id at ts,
// as a PSP or bridge speaking Standard Webhooks would, and returns the
// webhook-id, webhook-timestamp and webhook-signature headers.
func StandardHeader(tb testing.TB, secret, id string, ts time.Time, body []byte) http.Header {
	tb.Helper()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		tb.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

// SignStandard is StandardHeader as the headers of a request sent with
// daemontest's Instance.Do, keyed in lower case as the specification
// writes them: a PSP sends no API key, so Authorization is given as "",
// which Do leaves out.
func SignStandard(tb testing.TB, secret, id string, ts time.Time, body []byte) map[string]string {
	tb.Helper()
	h := StandardHeader(tb, secret, id, ts, body)
	return map[string]string{
		"webhook-id": id, "webhook-timestamp": h.Get("webhook-timestamp"), "webhook-signature": h.Get("webhook-signature"),
		"Authorization": "",
	}
}

// CopyFile copies the file from to the file to (a database to damage, a
// fixture to change).
func CopyFile(tb testing.TB, from, to string) {
	tb.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// SyncBuffer is a bytes.Buffer that goroutines may write at once: the log
// sink of a server under test, read by the test with String.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
