package httpd

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
)

// Review is what the review routes call (finalize.Review).
type Review interface {
	// Queue returns every review item with its evidence, oldest first.
	Queue(ctx context.Context) ([]finalize.ReviewCase, error)
	// Resolve settles an item with a status (finalize.StatusDismissed for
	// an orphan) and a human's note.
	Resolve(ctx context.Context, id, status, note string) (finalize.Resolution, error)
}

// reviewItemJSON is one review item with its evidence on the wire.
type reviewItemJSON struct {
	ID          string       `json:"id"`
	PaymentID   string       `json:"payment_id"`
	Reason      string       `json:"reason"`
	Provider    string       `json:"provider"`
	ProviderRef string       `json:"provider_ref"`
	EventID     string       `json:"event_id"`
	Observed    string       `json:"observed"`
	Note        string       `json:"note"`
	CreatedAt   string       `json:"created_at"`
	Evidence    evidenceJSON `json:"evidence"`
}

// evidenceJSON is what a human needs to decide: the payment as the client
// sees it (null for an orphan), its timeline, the raw webhooks received
// for it and the last answer of the PSP's status API (null if never asked).
type evidenceJSON struct {
	Payment       *paymentJSON   `json:"payment"`
	Timeline      []stepJSON     `json:"timeline"`
	Webhooks      []webhookJSON  `json:"webhooks"`
	LastPSPStatus *pspAnswerJSON `json:"last_psp_status"`
}

// webhookJSON is one archived webhook. Body is the body as received when
// it is JSON (with secret fields redacted, see rawBody), else a string.
type webhookJSON struct {
	Provider   string          `json:"provider"`
	EventID    string          `json:"event_id"`
	Type       string          `json:"type"`
	Status     string          `json:"status,omitempty"`
	OccurredAt string          `json:"occurred_at"`
	ReceivedAt string          `json:"received_at"`
	Processed  bool            `json:"processed"`
	Body       json.RawMessage `json:"body"`
}

// pspAnswerJSON is the last PSP status answer.
type pspAnswerJSON struct {
	At       string `json:"at,omitempty"`
	Provider string `json:"provider,omitempty"`
	Status   string `json:"status,omitempty"`
	Found    bool   `json:"found"`
	Raw      string `json:"raw"`
	Error    string `json:"error,omitempty"`
}

// handleListReview answers GET /v1/review: every review item, oldest
// first, each with its evidence (finalize.Review.Queue).
func (s *Server) handleListReview(rc *fasthttp.RequestCtx, _ []string) error {
	if s.Review == nil {
		return notImplemented(rc)
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	cases, err := s.Review.Queue(ctx)
	if err != nil {
		return err
	}
	writeList(rc, cases, s.reviewToJSON)
	return nil
}

// reviewToJSON is one item and its evidence on the wire.
func (s *Server) reviewToJSON(c finalize.ReviewCase) reviewItemJSON {
	it := c.Item
	j := reviewItemJSON{
		ID: it.ID, PaymentID: it.PaymentID, Reason: it.Reason, Provider: it.Provider, ProviderRef: it.ProviderRef,
		EventID: it.EventID, Observed: string(it.Observed), Note: it.Note, CreatedAt: rfc3339(it.CreatedAt),
		Evidence: evidenceJSON{Timeline: make([]stepJSON, 0, len(c.Timeline)), Webhooks: make([]webhookJSON, 0, len(c.Webhooks))},
	}
	if c.Payment != nil {
		v := s.viewJSON(*c.Payment)
		j.Evidence.Payment = &v
	}
	for _, st := range c.Timeline {
		j.Evidence.Timeline = append(j.Evidence.Timeline, stepToJSON(st))
	}
	if a := c.LastPSP; a != nil {
		j.Evidence.LastPSPStatus = &pspAnswerJSON{
			At: rfc3339(a.At), Provider: a.Provider, Status: string(a.Status), Found: a.Found, Raw: a.Raw, Error: a.Error,
		}
	}
	for _, e := range c.Webhooks {
		j.Evidence.Webhooks = append(j.Evidence.Webhooks, webhookJSON{
			Provider: e.Provider, EventID: e.EventID, Type: e.Type, Status: string(e.Status),
			OccurredAt: rfc3339(e.OccurredAt), ReceivedAt: rfc3339(e.ReceivedAt), Processed: e.Processed,
			Body: rawBody(e.Body),
		})
	}
	return j
}

// rawBody returns a webhook body for the evidence: the JSON with its
// secret fields redacted (finalize.Redact; the archive is stored redacted
// already, this holds for any body), or a JSON string if it is not JSON.
func rawBody(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage(`null`)
	}
	c := new(bytes.Buffer)
	if !json.Valid(b) || json.Compact(c, finalize.Redact(b)) != nil {
		s, _ := json.Marshal(string(b))
		return s
	}
	return c.Bytes()
}

// resolveRequest is the body of POST /v1/review/{id}/resolve.
type resolveRequest struct {
	Status string `json:"status"`
	Note   string `json:"note"`
}

// handleResolveReview answers POST /v1/review/{id}/resolve, where id is the
// review item's id (the payment id, or "orphan_<provider>_<event id>"),
// with finalize.Review.Resolve: a payment's item answers the payment's
// client view, an orphan's {"id", "status": "dismissed"}.
func (s *Server) handleResolveReview(rc *fasthttp.RequestCtx, params []string) error {
	if s.Review == nil {
		return notImplemented(rc)
	}
	id := params[0]
	if len(id) > 1024 {
		return pay.Errorf(pay.ENOTFOUND, "review item %q not found", truncate(id, 64))
	}
	var body resolveRequest
	if err := decodeJSON(rc, &body); err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	res, err := s.Review.Resolve(ctx, id, body.Status, body.Note)
	if err != nil {
		return err
	}
	if res.Dismissed {
		writeJSON(rc, fasthttp.StatusOK, map[string]string{"id": res.Item.ID, "status": finalize.StatusDismissed})
		return nil
	}
	writeJSON(rc, fasthttp.StatusOK, s.viewJSON(res.Payment))
	return nil
}
