package httpd

import (
	"context"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
)

// Payments is what the payment routes call (finalize.Payments): the
// merchant operations and the reads of payments.
type Payments interface {
	// Check validates a create request and returns it ready for Create.
	Check(req finalize.CreateRequest) (finalize.CreateRequest, error)
	// CreateOnce stores, charges and finalizes a payment under an
	// idempotency key, claimed with the payment's insert and finished
	// with the PSP answer's finalize; it resumes a create that stopped
	// midway and answers a replay with the key's record.
	CreateOnce(ctx context.Context, req finalize.CreateRequest, key finalize.IdemKey) (finalize.Created, error)
	Report(ctx context.Context, paymentID string, r finalize.ReportRequest) (pay.Result, error)
	// RefundOnce refunds a payment under an idempotency key, claimed in
	// one transaction and finished with the PSP answer's finalize; it
	// resumes a refund that stopped midway and answers a replay with the
	// key's record.
	RefundOnce(ctx context.Context, paymentID string, key finalize.IdemKey) (finalize.Refunded, error)
	Get(ctx context.Context, id string) (pay.Payment, error)
	List(ctx context.Context, f pay.PaymentFilter) ([]pay.Payment, string, error)
}

// Events is what GET /v1/payments/{id}/events calls (finalize.Payments).
type Events interface {
	// Timeline returns a payment's timeline; ENOTFOUND for an unknown one.
	Timeline(ctx context.Context, paymentID string) ([]pay.Step, error)
}

// createPaymentRequest is the body of POST /v1/payments.
type createPaymentRequest struct {
	OrderID   string        `json:"order_id"`
	Amount    int64         `json:"amount"`
	Currency  string        `json:"currency"`
	Customer  *customerJSON `json:"customer"`
	Provider  string        `json:"provider"`
	ReturnURL string        `json:"return_url"`
}

func (s *Server) handleCreatePayment(rc *fasthttp.RequestCtx, _ []string) error {
	var body createPaymentRequest
	if err := decodeJSON(rc, &body); err != nil {
		return err
	}
	req := finalize.CreateRequest{
		OrderID: body.OrderID, Amount: body.Amount, Currency: body.Currency,
		Provider: body.Provider, ReturnURL: body.ReturnURL,
	}
	if body.Customer != nil {
		req.Customer = pay.Customer{ID: body.Customer.ID, Email: body.Customer.Email}
	}
	// Checked before the key is claimed: a request that cannot run
	// consumes no key.
	req, err := s.Payments.Check(req)
	if err != nil {
		return err
	}
	key, err := idemKey(rc)
	if err != nil {
		return err
	}
	scoped, fingerprint := s.scopedKey(rc, "create", key)
	ctx, cancel := s.requestContext()
	defer cancel()
	c, err := s.Payments.CreateOnce(ctx, req, finalize.IdemKey{Key: scoped, Fingerprint: fingerprint, Status: fasthttp.StatusCreated})
	switch {
	case err != nil && c.Held:
		return s.failed(ctx, scoped, err)
	case err != nil:
		return keyRefused(rc, err)
	case c.Claim == finalize.ClaimReplay:
		return s.replay(ctx, rc, c.Record)
	}
	writeJSON(rc, fasthttp.StatusCreated, viewJSON(c.Payment))
	return nil
}

// paymentID checks a payment id from the path.
func paymentID(s string) (string, error) {
	if !ids.ValidPayment(s) {
		return "", pay.Errorf(pay.ENOTFOUND, "payment %q not found", truncate(s, 64))
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func (s *Server) handleGetPayment(rc *fasthttp.RequestCtx, params []string) error {
	id, err := paymentID(params[0])
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	p, err := s.Payments.Get(ctx, id)
	if err != nil {
		return err
	}
	etag := `"` + strconv.FormatUint(p.Version, 10) + `"`
	rc.Response.Header.Set("ETag", etag)
	if inm := string(rc.Request.Header.Peek("If-None-Match")); inm != "" && inm == etag {
		rc.SetStatusCode(fasthttp.StatusNotModified)
		return nil
	}
	writeJSON(rc, fasthttp.StatusOK, viewJSON(p))
	return nil
}

// syncRequest is the body of POST /v1/payments/{id}/sync.
type syncRequest struct {
	Status          string  `json:"status"`
	ProviderRef     string  `json:"provider_ref"`
	ClientSecret    string  `json:"client_secret"`
	RedirectURL     string  `json:"redirect_url"`
	ExpectedVersion *uint64 `json:"expected_version"`
}

func (s *Server) handleSyncPayment(rc *fasthttp.RequestCtx, params []string) error {
	id, err := paymentID(params[0])
	if err != nil {
		return err
	}
	var body syncRequest
	if err := decodeJSON(rc, &body); err != nil {
		return err
	}
	st, err := pay.ParseStatus(body.Status)
	if err != nil {
		return pay.Errorf(pay.EINVALID, "field status: %s", pay.ErrorMessage(err))
	}
	var expected uint64
	if body.ExpectedVersion != nil {
		if *body.ExpectedVersion == 0 {
			return pay.Errorf(pay.EINVALID, "field expected_version: versions start at 1")
		}
		expected = *body.ExpectedVersion
	}
	if im := rc.Request.Header.Peek("If-Match"); len(im) > 0 {
		v, err := strconv.ParseUint(strings.Trim(string(im), `"`), 10, 64)
		if err != nil || v == 0 {
			return pay.Errorf(pay.EINVALID, `If-Match must be a quoted version, e.g. "3"`)
		}
		if expected != 0 && expected != v {
			return pay.Errorf(pay.EINVALID, "If-Match and expected_version disagree")
		}
		expected = v
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.Payments.Report(ctx, id, finalize.ReportRequest{
		Status: st, ProviderRef: body.ProviderRef, ClientSecret: body.ClientSecret,
		RedirectURL: body.RedirectURL, ExpectedVersion: expected,
	})
	if err != nil {
		return err
	}
	out := viewJSON(res.Payment)
	out.Conflict = res.Conflict
	rc.Response.Header.Set("ETag", `"`+strconv.FormatUint(res.Payment.Version, 10)+`"`)
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}

func (s *Server) handleRefundPayment(rc *fasthttp.RequestCtx, params []string) error {
	id, err := paymentID(params[0])
	if err != nil {
		return err
	}
	if len(rc.PostBody()) > 0 {
		var body struct{}
		if err := decodeJSON(rc, &body); err != nil {
			return err
		}
	}
	key, err := idemKey(rc)
	if err != nil {
		return err
	}
	scoped, fingerprint := s.scopedKey(rc, "refund", key)
	ctx, cancel := s.requestContext()
	defer cancel()
	r, err := s.Payments.RefundOnce(ctx, id, finalize.IdemKey{Key: scoped, Fingerprint: fingerprint, Status: fasthttp.StatusOK})
	return s.once(ctx, rc, scoped, fasthttp.StatusOK, r, err)
}

func (s *Server) handleListPayments(rc *fasthttp.RequestCtx, _ []string) error {
	q := rc.QueryArgs()
	f := pay.PaymentFilter{OrderID: string(q.Peek("order_id")), Cursor: string(q.Peek("cursor"))}
	if st := string(q.Peek("status")); st != "" {
		var err error
		if f.Status, err = pay.ParseStatus(st); err != nil {
			return pay.Errorf(pay.EINVALID, "query status: %s", pay.ErrorMessage(err))
		}
	}
	if f.OrderID != "" {
		if err := pay.ValidateOrderID(f.OrderID); err != nil {
			return err
		}
	}
	var err error
	if f.Limit, err = parseLimit(rc, 50, 500); err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	list, next, err := s.Payments.List(ctx, f)
	if err != nil {
		return err
	}
	writeList(rc, list, viewJSON, next)
	return nil
}

func (s *Server) handlePaymentEvents(rc *fasthttp.RequestCtx, params []string) error {
	id, err := paymentID(params[0])
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	steps, err := s.Events.Timeline(ctx, id)
	if err != nil {
		return err
	}
	writeList(rc, steps, stepToJSON)
	return nil
}
