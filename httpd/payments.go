package httpd

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/payments"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

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
	req := payments.CreateRequest{
		OrderID: body.OrderID, Amount: body.Amount, Currency: body.Currency,
		Provider: body.Provider, ReturnURL: body.ReturnURL,
	}
	if body.Customer != nil {
		req.Customer = pay.Customer{ID: body.Customer.ID, Email: body.Customer.Email}
	}
	if err := s.Payments.Check(req); err != nil {
		return err
	}
	return s.idempotent(rc, "create", fasthttp.StatusCreated, func(ctx context.Context, state idemState, rec pay.IdemRecord, link func(pay.Tx, pay.Payment) error) (pay.Payment, bool, error) {
		if state == idemResume && rec.PaymentID != "" {
			p, err := s.Payments.Resume(ctx, rec.PaymentID)
			return p, false, err
		}
		p, err := s.Payments.Create(ctx, req, link)
		return p, false, err
	})
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
	res, err := s.Payments.Report(ctx, id, payments.ReportRequest{
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
	return s.idempotent(rc, "refund", fasthttp.StatusOK, func(ctx context.Context, _ idemState, _ pay.IdemRecord, _ func(pay.Tx, pay.Payment) error) (pay.Payment, bool, error) {
		p, err := s.Payments.Refund(ctx, id)
		return p, false, err
	})
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
	var list []pay.Payment
	var next string
	err = s.Store.View(ctx, func(tx pay.Tx) error {
		var err error
		list, next, err = tx.ListPayments(f)
		return err
	})
	if err != nil {
		return err
	}
	out := struct {
		Data       []paymentJSON `json:"data"`
		NextCursor string        `json:"next_cursor"`
	}{Data: make([]paymentJSON, 0, len(list)), NextCursor: next}
	for _, p := range list {
		out.Data = append(out.Data, viewJSON(p))
	}
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}

func (s *Server) handlePaymentEvents(rc *fasthttp.RequestCtx, params []string) error {
	id, err := paymentID(params[0])
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	var steps []pay.Step
	err = s.Store.View(ctx, func(tx pay.Tx) error {
		if _, err := tx.Payment(id); err != nil {
			return err
		}
		var err error
		steps, err = tx.Steps(id)
		return err
	})
	if err != nil {
		return err
	}
	out := struct {
		Data []stepJSON `json:"data"`
	}{Data: make([]stepJSON, 0, len(steps))}
	for _, st := range steps {
		out.Data = append(out.Data, stepToJSON(st))
	}
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}
