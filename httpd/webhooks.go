package httpd

import (
	"context"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// Webhooks is what the webhook route calls (finalize.Inbox).
type Webhooks interface {
	// Accept verifies and stores one webhook of the named provider and
	// reports whether it was a redelivery.
	Accept(ctx context.Context, provider string, body []byte, h http.Header) (pay.WebhookEvent, bool, error)
}

// handleWebhook takes a PSP webhook. It answers 2xx only once the event is
// durably stored; a redelivery is answered 2xx and changes nothing; a
// webhook that fails verification or parsing stores nothing.
func (s *Server) handleWebhook(rc *fasthttp.RequestCtx, params []string) error {
	h := make(http.Header)
	for k, v := range rc.Request.Header.All() {
		h.Add(string(k), string(v))
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	ev, dup, err := s.Webhooks.Accept(ctx, params[0], rc.PostBody(), h)
	if err != nil {
		return err
	}
	s.Logger.Debug().Str("request_id", requestID(rc)).Str("provider", params[0]).Str("event_id", ev.EventID).Bool("duplicate", dup).Msg("webhook accepted")
	writeJSON(rc, fasthttp.StatusOK, struct {
		Received  bool   `json:"received"`
		EventID   string `json:"event_id"`
		Duplicate bool   `json:"duplicate"`
	}{true, ev.EventID, dup})
	return nil
}
