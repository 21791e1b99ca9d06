// Package stripefake is a Stripe API on 127.0.0.1 (Fake) for what
// stripe-mock cannot show: PaymentIntents and Checkout Sessions that keep
// their state, statuses scripted by the caller, idempotency keys enforced
// as at Stripe, and every request recorded (Request). Sign and Header sign
// webhook bodies with stripe-go's webhook.GenerateTestSignedPayload.
//
// It is not a test package: `paystate simulate -mode checkout` runs it
// inside the binary, so it imports no package testing (TestBinary_
// NoTestingPackage in the module root checks the binary). Tests start one
// with stripetest.NewFake, which closes it at cleanup.
package stripefake
