// Package ids makes paystate's identifiers: a prefix and a ULID, so ids sort
// by creation time and carry no meaning a client could guess from.
package ids

import (
	"crypto/rand"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefixes of paystate's identifiers.
const (
	PaymentPrefix  = "pay_"
	EventPrefix    = "evt_"
	DeliveryPrefix = "dlv_"
	RefundPrefix   = "re_"
)

var (
	mu      sync.Mutex
	entropy io.Reader = ulid.Monotonic(rand.Reader, 0)
)

// New returns prefix + a 26-character ULID for time t.
func New(prefix string, t time.Time) string {
	mu.Lock()
	defer mu.Unlock()
	return prefix + ulid.MustNew(ulid.Timestamp(t), entropy).String()
}

// Payment returns a new payment id.
func Payment(t time.Time) string { return New(PaymentPrefix, t) }

// Event returns a new event id.
func Event(t time.Time) string { return New(EventPrefix, t) }

// Refund returns a new refund id.
func Refund(t time.Time) string { return New(RefundPrefix, t) }

// ValidRefund reports whether s has the form of a refund id.
func ValidRefund(s string) bool {
	if len(s) != len(RefundPrefix)+ulid.EncodedSize || s[:len(RefundPrefix)] != RefundPrefix {
		return false
	}
	_, err := ulid.ParseStrict(s[len(RefundPrefix):])
	return err == nil
}

// ValidPayment reports whether s has the form of a payment id.
func ValidPayment(s string) bool {
	if len(s) != len(PaymentPrefix)+ulid.EncodedSize || s[:len(PaymentPrefix)] != PaymentPrefix {
		return false
	}
	_, err := ulid.ParseStrict(s[len(PaymentPrefix):])
	return err == nil
}

// Time returns the time that id, prefix and a ULID made by New, was made
// for (to the millisecond), and false if id is not of that form.
func Time(prefix, id string) (time.Time, bool) {
	if !strings.HasPrefix(id, prefix) {
		return time.Time{}, false
	}
	u, err := ulid.ParseStrict(id[len(prefix):])
	if err != nil {
		return time.Time{}, false
	}
	return ulid.Time(u.Time()), true
}
