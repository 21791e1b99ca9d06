package httpd

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// Reconciliation is what the settlement reconciliation routes call
// (reconcile.Runs).
type Reconciliation interface {
	// List returns up to limit runs older than the run beforeID ("" =
	// from the newest), newest first.
	List(ctx context.Context, beforeID string, limit int) ([]pay.ReconRun, error)
	// Get returns one run with its unmatched items, or ENOTFOUND.
	Get(ctx context.Context, id string) (pay.ReconRun, error)
}

// reconRunJSON is a reconciliation run on the wire; Items only in the
// answer about one run.
type reconRunJSON struct {
	ID             string          `json:"id"`
	Provider       string          `json:"provider"`
	Source         string          `json:"source"`
	Lines          int             `json:"lines"`
	Matched        int             `json:"matched"`
	Mismatched     int             `json:"mismatched"`
	MissingLocally int             `json:"missing_locally"`
	MissingAtPSP   int             `json:"missing_at_psp"`
	Posted         int             `json:"posted"`
	OK             bool            `json:"ok"`
	CreatedAt      string          `json:"created_at"`
	Items          []reconItemJSON `json:"items,omitempty"`
}

// reconItemJSON is one unmatched line (or payment) of a run.
type reconItemJSON struct {
	Kind        string `json:"kind"`
	Line        int    `json:"line,omitempty"`
	LineID      string `json:"line_id,omitempty"`
	ProviderRef string `json:"provider_ref,omitempty"`
	PaymentID   string `json:"payment_id,omitempty"`
	Amount      int64  `json:"amount"`
	Expected    *int64 `json:"expected,omitempty"`
	Currency    string `json:"currency"`
	Note        string `json:"note,omitempty"`
}

func reconRunToJSON(r pay.ReconRun) reconRunJSON {
	return reconRunJSON{
		ID: r.ID, Provider: r.Provider, Source: r.Source, Lines: r.Lines, Matched: r.Matched, Mismatched: r.Mismatched,
		MissingLocally: r.MissingLocally, MissingAtPSP: r.MissingAtPSP, Posted: r.Posted, OK: r.OK(), CreatedAt: rfc3339(r.CreatedAt),
	}
}

// handleListReconRuns answers GET /v1/reconciliation/runs?limit=&cursor=:
// the runs, newest first, without their items.
func (s *Server) handleListReconRuns(rc *fasthttp.RequestCtx, _ []string) error {
	if s.Reconciliation == nil {
		return notImplemented(rc)
	}
	limit, err := parseLimit(rc, 20, pay.MaxListLimit)
	if err != nil {
		return err
	}
	cursor := string(rc.QueryArgs().Peek("cursor"))
	if err := pay.ValidateText("cursor", cursor, pay.MaxStoredPart); err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	runs, err := s.Reconciliation.List(ctx, cursor, limit)
	if err != nil {
		return err
	}
	var next []string
	if len(runs) == limit {
		next = append(next, runs[len(runs)-1].ID)
	}
	writeList(rc, runs, reconRunToJSON, next...)
	return nil
}

// handleGetReconRun answers GET /v1/reconciliation/runs/{id}: one run
// with its unmatched lines.
func (s *Server) handleGetReconRun(rc *fasthttp.RequestCtx, params []string) error {
	if s.Reconciliation == nil {
		return notImplemented(rc)
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	r, err := s.Reconciliation.Get(ctx, params[0])
	if err != nil {
		return err
	}
	out := reconRunToJSON(r)
	out.Items = make([]reconItemJSON, 0, len(r.Items))
	for _, it := range r.Items {
		j := reconItemJSON{Kind: it.Kind, Line: it.Line, LineID: it.LineID, ProviderRef: it.ProviderRef, PaymentID: it.PaymentID,
			Amount: it.Amount, Currency: it.Currency, Note: it.Note}
		if it.Kind == pay.ReconAmountMismatch {
			j.Expected = &it.Expected
		}
		out.Items = append(out.Items, j)
	}
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}
