package httpd

import (
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// disputeJSON is a dispute on the wire.
type disputeJSON struct {
	ID            string `json:"id"`
	Provider      string `json:"provider"`
	PaymentID     string `json:"payment_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	Reason        string `json:"reason,omitempty"`
	Status        string `json:"status"`
	EvidenceDueBy string `json:"evidence_due_by,omitempty"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

func disputeToJSON(d pay.Dispute) disputeJSON {
	return disputeJSON{
		ID: d.ID, Provider: d.Provider, PaymentID: d.PaymentID, Amount: d.Amount, Currency: d.Currency, Reason: d.Reason,
		Status: string(d.Status), EvidenceDueBy: rfc3339(d.EvidenceDueBy), CreatedAt: rfc3339(d.CreatedAt), UpdatedAt: rfc3339(d.UpdatedAt),
	}
}

// handleListDisputes answers GET /v1/disputes?status=&limit=: disputes in
// a status (any when absent), soonest evidence deadline first.
func (s *Server) handleListDisputes(rc *fasthttp.RequestCtx, _ []string) error {
	var st pay.DisputeStatus
	if v := string(rc.QueryArgs().Peek("status")); v != "" {
		var err error
		if st, err = pay.ParseDisputeStatus(v); err != nil {
			return pay.Invalidf("status", "query status: %s", pay.ErrorMessage(err))
		}
	}
	limit, err := parseLimit(rc, 50, 500)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	ds, err := s.Payments.Disputes(ctx, st, limit)
	if err != nil {
		return err
	}
	writeList(rc, ds, disputeToJSON)
	return nil
}
