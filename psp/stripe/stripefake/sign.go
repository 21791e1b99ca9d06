package stripefake

import (
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"
)

// Sign returns the Stripe-Signature header value of body signed with secret
// at time at, made by stripe-go's webhook.GenerateTestSignedPayload.
func Sign(secret string, body []byte, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: body, Secret: secret, Timestamp: at,
	}).Header
}

// Header returns an http.Header with body's Stripe-Signature (see Sign).
func Header(secret string, body []byte, at time.Time) http.Header {
	h := http.Header{}
	h.Set("Stripe-Signature", Sign(secret, body, at))
	return h
}
