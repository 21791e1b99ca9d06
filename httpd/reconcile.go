package httpd

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net"
	"time"

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
	// Import matches a settlement report in format ("stripe",
	// "generic") of provider, read from body, stores the run of source
	// and returns it; a malformed report is EINVALID with its line.
	Import(ctx context.Context, format, provider, source string, body io.Reader) (pay.ReconRun, error)
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
	writeJSON(rc, fasthttp.StatusOK, reconRunDetail(r))
	return nil
}

// reconRunDetail is a run with its unmatched items on the wire.
func reconRunDetail(r pay.ReconRun) reconRunJSON {
	out := reconRunToJSON(r)
	out.Items = make([]reconItemJSON, 0, len(r.Items))
	for _, it := range r.Items {
		j := reconItemJSON{Kind: it.Kind, Line: it.Line, LineID: it.LineID, ProviderRef: it.ProviderRef, PaymentID: it.PaymentID,
			Amount: it.Amount, Currency: it.Currency, Note: it.Note}
		if it.Kind == pay.ReconAmountMismatch || it.Kind == pay.ReconChangedSincePosted {
			j.Expected = &it.Expected
		}
		out.Items = append(out.Items, j)
	}
	return out
}

// reportTypes are the Content-Types of an uploaded settlement report.
var reportTypes = map[string]bool{"text/csv": true, "application/octet-stream": true, "text/plain": true}

// handleImportReconRun answers POST
// /v1/reconciliation/runs?format=stripe|paypal|mollie|generic&provider=&name=: the
// body is the settlement report itself (Content-Type text/csv), as
// `paystate reconcile import` sends it when a running paystate holds the
// bbolt file, and the dashboard's Reconciliation page. It is the one
// route whose body is not bounded by server.max_body: it is streamed to a
// temporary file (Reconciliation.Import), the read deadline moved on at
// every read, and matched as the command would. 201 with the run and its
// unmatched lines. The import runs under the server's context, not the
// request timeout (a report of a million lines takes minutes): at
// shutdown it stops between two transactions (503).
func (s *Server) handleImportReconRun(rc *fasthttp.RequestCtx, _ []string) error {
	if s.Reconciliation == nil {
		return notImplemented(rc)
	}
	if ct := string(rc.Request.Header.ContentType()); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || !reportTypes[mt] {
			return pay.Errorf(CodeMediaType, "Content-Type must be text/csv (the settlement report itself), got %q", truncate(ct, 64))
		}
	}
	q := rc.QueryArgs()
	format, provider, name := string(q.Peek("format")), string(q.Peek("provider")), string(q.Peek("name"))
	if format == "" {
		return pay.Invalidf("format", "format is required: stripe, paypal, mollie or generic")
	}
	if name == "" {
		name = "upload"
	}
	for _, f := range []struct{ name, v string }{{"format", format}, {"provider", provider}, {"name", name}} {
		if err := pay.ValidateText(f.name, f.v, pay.MaxStoredPart/2); err != nil {
			return err
		}
	}
	var body io.Reader = bytes.NewReader(rc.PostBody())
	if rc.Request.IsBodyStream() {
		body = &stallReader{r: rc.RequestBodyStream(), conn: rc.Conn(), stall: s.ReadTimeout}
	}
	run, err := s.Reconciliation.Import(s.ctx, format, provider, "upload:"+format+":"+name, body)
	if err != nil {
		rc.SetConnectionClose() // the rest of the body, if any, is not read
		return err
	}
	s.log(rc).Info().Str("run_id", run.ID).Int("lines", run.Lines).Int("posted", run.Posted).Msg("settlement report imported")
	rc.Response.Header.Set("Location", "/v1/reconciliation/runs/"+run.ID)
	writeJSON(rc, fasthttp.StatusCreated, reconRunDetail(run))
	return nil
}

// stallReader reads a streamed request body, moving the connection's
// read deadline on at every read: only a client that sends nothing for
// stall is cut off, however long the whole upload takes.
type stallReader struct {
	r     io.Reader
	conn  net.Conn
	stall time.Duration
}

func (b *stallReader) Read(p []byte) (int, error) {
	_ = b.conn.SetReadDeadline(time.Now().Add(b.stall))
	return b.r.Read(p)
}
