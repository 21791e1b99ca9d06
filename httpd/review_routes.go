package httpd

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/inbox"
	"github.com/paystate/paystate/pay"
)

// StatusDismissed is the resolution of an orphan review item (a PSP event
// for a payment paystate does not know): there is no local payment to
// finalize, so the item can only be dismissed, with a note. A review item
// of a payment is resolved with a payment status instead.
const StatusDismissed = "dismissed"

// maxReviewNote bounds the note of a resolution, in bytes.
const maxReviewNote = 1000

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
// first, each with its evidence. The queue is meant to stay short (it is
// what a human works through), so it is not paged.
func (s *Server) handleListReview(rc *fasthttp.RequestCtx, _ []string) error {
	ctx, cancel := s.requestContext()
	defer cancel()
	out := struct {
		Data []reviewItemJSON `json:"data"`
	}{Data: []reviewItemJSON{}}
	err := s.Store.View(ctx, func(tx pay.Tx) error {
		items, err := tx.ListReview()
		if err != nil {
			return err
		}
		for _, it := range items {
			j, err := reviewToJSON(tx, it)
			if err != nil {
				return err
			}
			out.Data = append(out.Data, j)
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}

// reviewToJSON builds one item and its evidence inside tx.
func reviewToJSON(tx pay.Tx, it pay.ReviewItem) (reviewItemJSON, error) {
	j := reviewItemJSON{
		ID: it.ID, PaymentID: it.PaymentID, Reason: it.Reason, Provider: it.Provider, ProviderRef: it.ProviderRef,
		EventID: it.EventID, Observed: string(it.Observed), Note: it.Note, CreatedAt: rfc3339(it.CreatedAt),
		Evidence: evidenceJSON{Timeline: []stepJSON{}, Webhooks: []webhookJSON{}},
	}
	var webhooks []pay.InboxEvent
	if it.PaymentID != "" {
		p, err := tx.Payment(it.PaymentID)
		switch {
		case err == nil:
			v := viewJSON(p)
			j.Evidence.Payment = &v
		case pay.ErrorCode(err) != pay.ENOTFOUND:
			return j, err
		}
		steps, err := tx.Steps(it.PaymentID)
		if err != nil {
			return j, err
		}
		for _, st := range steps {
			j.Evidence.Timeline = append(j.Evidence.Timeline, stepToJSON(st))
		}
		if webhooks, err = tx.InboxForPayment(it.PaymentID); err != nil {
			return j, err
		}
		a, err := tx.PSPAnswer(it.PaymentID)
		switch {
		case err == nil:
			j.Evidence.LastPSPStatus = &pspAnswerJSON{
				At: rfc3339(a.At), Provider: a.Provider, Status: string(a.Status), Found: a.Found, Raw: a.Raw, Error: a.Error,
			}
		case pay.ErrorCode(err) != pay.ENOTFOUND:
			return j, err
		}
	} else if it.EventID != "" && it.Provider != "" {
		// An orphan: the event that nobody could place is the evidence.
		e, err := tx.InboxEvent(it.Provider, it.EventID)
		switch {
		case err == nil:
			webhooks = append(webhooks, e)
		case pay.ErrorCode(err) != pay.ENOTFOUND:
			return j, err
		}
	}
	if j.Evidence.LastPSPStatus == nil && it.LastPSP != "" {
		j.Evidence.LastPSPStatus = &pspAnswerJSON{Raw: it.LastPSP, Found: true}
	}
	for _, e := range webhooks {
		j.Evidence.Webhooks = append(j.Evidence.Webhooks, webhookJSON{
			Provider: e.Provider, EventID: e.EventID, Type: e.Type, Status: string(e.Status),
			OccurredAt: rfc3339(e.OccurredAt), ReceivedAt: rfc3339(e.ReceivedAt), Processed: e.Processed,
			Body: rawBody(e.Body),
		})
	}
	return j, nil
}

// rawBody returns a webhook body for the evidence: the JSON with its
// secret fields redacted (inbox.Redact; the archive is stored redacted
// already, this holds for any body), or a JSON string if it is not JSON.
func rawBody(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage(`null`)
	}
	c := new(bytes.Buffer)
	if !json.Valid(b) || json.Compact(c, inbox.Redact(b)) != nil {
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
// review item's id (the payment id, or "orphan_<provider>_<event id>").
//
// A payment's item: under the payment's lease (holder review), the status
// is finalized with source review and the note, like any other
// observation, and the item is removed; the answer is the payment's client
// view. The state machine still holds: a status it would ignore (older
// than the stored one) or refuse (another final outcome than the stored
// one) is a 409 conflict and changes nothing. Resolving with the current
// status keeps it and takes the item off the queue (the sweeper queues a
// payment again if the PSP still cannot settle it).
//
// An orphan item has no payment: status must be "dismissed", the item is
// removed and the answer is {"id", "status": "dismissed"}.
//
// note is required (1..1000 bytes): it is the human's reason, kept in the
// timeline.
func (s *Server) handleResolveReview(rc *fasthttp.RequestCtx, params []string) error {
	if s.Finalizer == nil || s.ReviewLeases == nil {
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
	if body.Note == "" {
		return pay.Errorf(pay.EINVALID, "field note: required, say why")
	}
	if err := pay.ValidateText("note", body.Note, maxReviewNote); err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()

	var it pay.ReviewItem
	if err := s.Store.View(ctx, func(tx pay.Tx) (err error) { it, err = tx.Review(id); return err }); err != nil {
		return err
	}

	if it.PaymentID == "" {
		if body.Status != StatusDismissed {
			return pay.Errorf(pay.EINVALID, "field status: review item %s is an orphan (no payment here): it can only be %q", it.ID, StatusDismissed)
		}
		if err := s.Store.Update(ctx, func(tx pay.Tx) error { return tx.DeleteReview(it.ID) }); err != nil {
			return err
		}
		s.Logger.Info().Str("review_id", it.ID).Str("provider", it.Provider).Str("event_id", it.EventID).
			Str("provider_ref", it.ProviderRef).Str("note", body.Note).Msg("orphan review item dismissed")
		writeJSON(rc, fasthttp.StatusOK, map[string]string{"id": it.ID, "status": StatusDismissed})
		return nil
	}

	if body.Status == StatusDismissed {
		return pay.Errorf(pay.EINVALID, "field status: %q is only for orphan items; resolve payment %s with its status", StatusDismissed, it.PaymentID)
	}
	st, err := pay.ParseStatus(body.Status)
	if err != nil {
		return pay.Errorf(pay.EINVALID, "field status: %s", pay.ErrorMessage(err))
	}
	var res pay.Result
	err = s.ReviewLeases.Do(ctx, it.PaymentID, func(ctx context.Context, token uint64) error {
		var cur pay.Payment
		if err := s.Store.View(ctx, func(tx pay.Tx) (err error) { cur, err = tx.Payment(it.PaymentID); return err }); err != nil {
			return err
		}
		switch pay.Decide(cur.Status, st) {
		case pay.Stale:
			return pay.Errorf(pay.ECONFLICT, "payment %s is %s: %s is an older status and would be ignored; resolve with a final status", cur.ID, cur.Status, st)
		case pay.ConflictingTerminal:
			return pay.Errorf(pay.ECONFLICT, "payment %s is %s: the state machine does not move a final payment to %s", cur.ID, cur.Status, st)
		}
		var err error
		res, err = s.Finalizer.Finalize(ctx, pay.Observation{
			PaymentID: cur.ID, Source: pay.SourceReview, Status: st, ExpectedVersion: cur.Version,
			LeaseToken: token, Note: "review: " + body.Note,
		})
		if err != nil {
			return err
		}
		if res.Anomaly {
			// Another writer made it final meanwhile: the item stays, now
			// as the conflict it is.
			return pay.Errorf(pay.ECONFLICT, "payment %s became %s meanwhile: still on the review queue", cur.ID, res.Payment.Status)
		}
		return s.Store.Update(ctx, func(tx pay.Tx) error {
			if err := tx.DeleteReview(it.ID); pay.ErrorCode(err) != pay.ENOTFOUND {
				return err
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	s.Logger.Info().Str("payment_id", it.PaymentID).Str("review_id", it.ID).Str("reason", it.Reason).
		Str("status", string(res.Payment.Status)).Uint64("version", res.Payment.Version).Str("note", body.Note).
		Msg("review item resolved")
	writeJSON(rc, fasthttp.StatusOK, viewJSON(res.Payment))
	return nil
}
