package httpd

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
)

// refundRequest is the body of POST /v1/payments/{id}/refund; an empty
// body, or one without the amount key, refunds whatever is left.
type refundRequest struct {
	Amount refundAmount `json:"amount"`
	Reason string       `json:"reason"`
}

// refundAmount is the amount key of a refund request as sent: Set says
// whether the key was there at all, which a *int64 cannot tell from null.
// Only an absent key means "the rest" (SPEC §1); null, 0, a string or a
// fraction is refused naming the key.
type refundAmount struct {
	Set   bool
	Value int64
	raw   string // the value as sent, when it is not a positive integer
}

// UnmarshalJSON records the key's presence; encoding/json calls it for a
// literal null too.
func (a *refundAmount) UnmarshalJSON(b []byte) error {
	a.Set = true
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n <= 0 {
		a.raw = truncate(string(b), 32)
		return nil
	}
	a.Value = n
	return nil
}

// amount returns the amount to refund in minor units, 0 for the rest.
func (a refundAmount) amount() (int64, error) {
	switch {
	case !a.Set:
		return 0, nil
	case a.raw != "":
		return 0, pay.Invalidf("amount", "amount must be an integer of at least 1 (minor units), got %s; leave the key out to refund what is left", a.raw)
	}
	return a.Value, nil
}

// refundJSON is a refund on the wire.
type refundJSON struct {
	ID          string `json:"id"`
	PaymentID   string `json:"payment_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Reason      string `json:"reason,omitempty"`
	Status      string `json:"status"`
	ProviderRef string `json:"provider_ref"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

func refundToJSON(r pay.Refund) refundJSON {
	return refundJSON{
		ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency, Reason: r.Reason,
		Status: string(r.Status), ProviderRef: r.ProviderRef, CreatedAt: rfc3339(r.CreatedAt), UpdatedAt: rfc3339(r.UpdatedAt),
	}
}

// handleRefundPayment refunds part or all of a payment under the
// request's Idempotency-Key and answers 201 with the refund (pending,
// succeeded or failed, as the PSP answered). A refund that does not fit
// in what is left is 409 refund_exceeds_amount.
func (s *Server) handleRefundPayment(rc *fasthttp.RequestCtx, params []string) error {
	id, err := paymentID(params[0])
	if err != nil {
		return err
	}
	var body refundRequest
	if len(rc.PostBody()) > 0 {
		if err := decodeJSON(rc, &body); err != nil {
			return err
		}
	}
	amount, err := body.Amount.amount()
	if err != nil {
		return err
	}
	req := finalize.RefundRequest{Amount: amount, Reason: body.Reason}
	if err := req.Validate(); err != nil {
		return err
	}
	key, err := idemKey(rc)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	r, err := s.Payments.RefundOnce(ctx, id, req, idemKeyOf(rc, "refund", key, fasthttp.StatusCreated))
	switch {
	case err != nil:
		return refused(rc, err)
	case r.Claim == finalize.ClaimReplay && r.Refund.ID == "":
		return replayed(rc, r.Record, nil)
	case r.Claim == finalize.ClaimReplay:
		return replayed(rc, r.Record, func() (any, error) { return refundToJSON(r.Refund), nil })
	}
	writeJSON(rc, fasthttp.StatusCreated, refundToJSON(r.Refund))
	return nil
}

// handleListRefunds answers a payment's refunds, oldest first.
func (s *Server) handleListRefunds(rc *fasthttp.RequestCtx, params []string) error {
	return writePaymentList(s, rc, params[0], s.Payments.Refunds, refundToJSON)
}
