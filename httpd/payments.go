package httpd

import (
	"context"
	"strconv"
	"strings"
	"time"

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
	// RefundOnce refunds part or all of a payment under an idempotency
	// key, claimed with the refund's creation and finished with the PSP
	// answer's finalize; it resumes a refund that stopped midway and
	// answers a replay with the key's record and its refund.
	RefundOnce(ctx context.Context, paymentID string, req finalize.RefundRequest, key finalize.IdemKey) (finalize.Refunded, error)
	// Refunds returns a payment's refunds, oldest first.
	Refunds(ctx context.Context, paymentID string) ([]pay.Refund, error)
	// Disputes returns disputes in a status ("" = any), soonest evidence
	// deadline first.
	Disputes(ctx context.Context, status pay.DisputeStatus, limit int) ([]pay.Dispute, error)
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
	Amount    *int64        `json:"amount"` // nil: absent, which is not 0
	Currency  string        `json:"currency"`
	Customer  *customerJSON `json:"customer"`
	Provider  string        `json:"provider"`
	ReturnURL string        `json:"return_url"`
	// Flow and Description: see finalize.CreateRequest.
	Flow        string `json:"flow"`
	Description string `json:"description"`
}

func (s *Server) handleCreatePayment(rc *fasthttp.RequestCtx, _ []string) error {
	var body createPaymentRequest
	if err := decodeJSON(rc, &body); err != nil {
		return err
	}
	if body.Amount == nil {
		return pay.Invalidf("amount", "amount is required: a positive number of minor units (1000 for 10.00 EUR)")
	}
	req := finalize.CreateRequest{
		OrderID: body.OrderID, Amount: *body.Amount, Currency: body.Currency,
		Provider: body.Provider, ReturnURL: body.ReturnURL,
		Flow: body.Flow, Description: body.Description,
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
	ctx, cancel := s.requestContext()
	defer cancel()
	c, err := s.Payments.CreateOnce(ctx, req, idemKeyOf(rc, "create", key, fasthttp.StatusCreated))
	switch {
	case err != nil:
		return refused(rc, err)
	case c.Claim == finalize.ClaimReplay:
		return replayed(rc, c.Record, func() (any, error) {
			p, err := s.Payments.Get(ctx, c.Record.PaymentID)
			return s.viewJSON(p), err
		})
	}
	writeJSON(rc, fasthttp.StatusCreated, s.viewJSON(c.Payment))
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
	if notModified(rc, etag) {
		return nil
	}
	writeJSON(rc, fasthttp.StatusOK, s.viewJSON(p))
	return nil
}

// syncRequest is the body of POST /v1/payments/{id}/sync.
type syncRequest struct {
	Status          string `json:"status"`
	ProviderRef     string `json:"provider_ref"`
	ClientSecret    string `json:"client_secret"`
	RedirectURL     string `json:"redirect_url"`
	ExpectedVersion *int64 `json:"expected_version"` // signed, so that -1 is refused as a version, not as a type
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
		return pay.Invalidf("status", "field status: %s", pay.ErrorMessage(err))
	}
	var expected uint64
	if body.ExpectedVersion != nil {
		if *body.ExpectedVersion < 1 {
			return pay.Invalidf("expected_version", "expected_version must be a version the payment had: a positive integer (a payment starts at version 1), got %d", *body.ExpectedVersion)
		}
		expected = uint64(*body.ExpectedVersion)
	}
	if im := rc.Request.Header.Peek("If-Match"); len(im) > 0 {
		v, err := strconv.ParseUint(strings.Trim(string(im), `"`), 10, 64)
		if err != nil || v == 0 {
			return pay.Errorf(pay.EINVALID, `If-Match must be a quoted version, e.g. "3"`)
		}
		if expected != 0 && expected != v {
			return pay.Invalidf("expected_version", "If-Match and expected_version disagree")
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
	out := s.viewJSON(res.Payment)
	out.Conflict = res.Conflict
	rc.Response.Header.Set("ETag", `"`+strconv.FormatUint(res.Payment.Version, 10)+`"`)
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}

// handleListPayments answers one page of the list as JSON, or with
// Accept: text/csv every matching payment as CSV (csv.go).
func (s *Server) handleListPayments(rc *fasthttp.RequestCtx, _ []string) error {
	f, err := listFilter(rc)
	if err != nil {
		return err
	}
	rc.Response.Header.Set("Vary", "Accept")
	if wantsCSV(rc) {
		return s.writePaymentsCSV(rc, f)
	}
	if f.Limit, err = parseLimit(rc, 50, 500); err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	list, next, err := s.Payments.List(ctx, f)
	if err != nil {
		return err
	}
	writeList(rc, list, s.viewJSON, next)
	return nil
}

// listFilter reads the filters of GET /v1/payments: status, order_id,
// customer_id, customer_email (ASCII letters in any case), created_from
// (inclusive) and created_before (exclusive), each an RFC 3339 time or a
// UTC day (YYYY-MM-DD), and cursor.
func listFilter(rc *fasthttp.RequestCtx) (pay.PaymentFilter, error) {
	q := rc.QueryArgs()
	f := pay.PaymentFilter{
		OrderID: string(q.Peek("order_id")), Cursor: string(q.Peek("cursor")),
		CustomerID: string(q.Peek("customer_id")), CustomerEmail: string(q.Peek("customer_email")),
	}
	if st := string(q.Peek("status")); st != "" {
		var err error
		if f.Status, err = pay.ParseStatus(st); err != nil {
			return f, pay.Invalidf("status", "query status: %s", pay.ErrorMessage(err))
		}
	}
	if f.OrderID != "" {
		if err := pay.ValidateOrderID(f.OrderID); err != nil {
			return f, err
		}
	}
	if err := pay.ValidateText("customer_id", f.CustomerID, 128); err != nil {
		return f, err
	}
	if err := pay.ValidateText("customer_email", f.CustomerEmail, 254); err != nil {
		return f, err
	}
	var err error
	if f.CreatedFrom, err = queryTime(rc, "created_from"); err != nil {
		return f, err
	}
	if f.CreatedBefore, err = queryTime(rc, "created_before"); err != nil {
		return f, err
	}
	return f, nil
}

// queryTime reads the query parameter param as an RFC 3339 time or a UTC
// day (its midnight); zero when absent.
func queryTime(rc *fasthttp.RequestCtx, param string) (time.Time, error) {
	v := string(rc.QueryArgs().Peek(param))
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, pay.Invalidf(param, "%s must be an RFC 3339 time or a date like 2025-03-01, got %q", param, truncate(v, 64))
}

func (s *Server) handlePaymentEvents(rc *fasthttp.RequestCtx, params []string) error {
	return writePaymentList(s, rc, params[0], s.Events.Timeline, stepToJSON)
}
