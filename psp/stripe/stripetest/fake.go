package stripetest

import (
	"testing"

	"github.com/paystate/paystate/psp/stripe/stripefake"
)

// NewFake starts a stripefake.Fake, a Stripe API on 127.0.0.1 that keeps
// its PaymentIntents and sessions and enforces idempotency keys; it is
// closed at tb's cleanup.
func NewFake(tb testing.TB) *stripefake.Fake {
	tb.Helper()
	f := stripefake.Start()
	tb.Cleanup(f.Close)
	return f
}
