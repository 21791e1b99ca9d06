package ripple

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store"
)

// maxResponseBody is how much of an endpoint's answer is read (and
// dropped) so the connection can be reused.
const maxResponseBody = 64 << 10

// EndpointID names a merchant endpoint by its URL: "we_" and the first 16
// hex digits of the URL's SHA-256. It keys the endpoint's stored state and
// its deliveries' target, and is what logs and the API show instead of the
// URL (which may carry a token).
func EndpointID(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return "we_" + hex.EncodeToString(sum[:8])
}

// newHTTPClient returns the client of one merchant endpoint: at most
// conns connections, redirects not followed (a 3xx is a failure), its own
// transport so that one endpoint's connections are not another's and
// Close releases them. Each request's context carries the endpoint's
// timeout.
func newHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost = conns, conns
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// webhook posts events to one merchant endpoint.
type webhook struct {
	s           *Service
	id          string
	url         string
	host        string
	events      map[string]bool
	signer      *stdwebhook.Signer
	timeout     time.Duration
	maxInFlight int
	client      *http.Client
}

func newWebhook(s *Service, cfg EndpointConfig) (*webhook, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("url must be an absolute http or https URL")
	}
	signer, err := stdwebhook.NewSigner(cfg.Secrets...)
	if err != nil {
		return nil, err
	}
	if len(cfg.Events) == 0 {
		return nil, errors.New("no event types to send")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultWebhookTimeout
	}
	if timeout < MinWebhookTimeout || timeout > MaxWebhookTimeout {
		return nil, fmt.Errorf("timeout must be from %s to %s (Standard Webhooks counts a 2xx within 15s), got %s", MinWebhookTimeout, MaxWebhookTimeout, cfg.Timeout)
	}
	inFlight := cfg.MaxInFlight
	if inFlight == 0 {
		inFlight = DefaultMaxInFlight
	}
	if inFlight < 1 || inFlight > MaxInFlightLimit {
		return nil, fmt.Errorf("max_in_flight must be from 1 to %d, got %d", MaxInFlightLimit, cfg.MaxInFlight)
	}
	w := &webhook{
		s: s, id: EndpointID(cfg.URL), url: cfg.URL, host: u.Host, events: map[string]bool{}, signer: signer,
		timeout: timeout, maxInFlight: inFlight, client: newHTTPClient(inFlight),
	}
	for _, e := range cfg.Events {
		w.events[e] = true
	}
	return w, nil
}

func (*webhook) name() string                      { return pay.EffectWebhook }
func (w *webhook) endpoint() string                { return w.id }
func (w *webhook) wants(rec pay.OutboxRecord) bool { return w.events[rec.Type] }

// Event is the body of a merchant webhook.
type Event struct {
	ID      string    `json:"id"`      // the outbox event id, also webhook-id
	Type    string    `json:"type"`    // "payment.captured", ...
	Created int64     `json:"created"` // Unix seconds of the transition
	Data    EventData `json:"data"`
}

// EventData is the payment an Event is about, as of the transition.
type EventData struct {
	PaymentID string        `json:"payment_id"`
	OrderID   string        `json:"order_id"`
	Amount    int64         `json:"amount"`
	Currency  string        `json:"currency"`
	Status    string        `json:"status"`
	Version   uint64        `json:"version"`
	Customer  EventCustomer `json:"customer"`
	// AmountRefunded is the payment's after the event; Refund and
	// Dispute are set on the events of a refund (payment.refund.*) or a
	// dispute (payment.dispute.*).
	AmountRefunded int64         `json:"amount_refunded"`
	Refund         *EventRefund  `json:"refund,omitempty"`
	Dispute        *EventDispute `json:"dispute,omitempty"`
}

// EventRefund is the refund an Event is about.
type EventRefund struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Status string `json:"status"`
}

// EventDispute is the dispute an Event is about.
type EventDispute struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Status string `json:"status"`
}

// EventCustomer is the payment's customer in an Event.
type EventCustomer struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// NewEvent returns the merchant webhook body of an outbox record.
func NewEvent(rec pay.OutboxRecord) Event {
	e := Event{
		ID: rec.ID, Type: rec.Type, Created: rec.CreatedAt.Unix(),
		Data: EventData{
			PaymentID: rec.PaymentID, OrderID: rec.OrderID, Amount: rec.Amount, Currency: rec.Currency,
			Status: string(rec.Status), Version: rec.Version,
			Customer:       EventCustomer{ID: rec.Customer.ID, Email: rec.Customer.Email},
			AmountRefunded: rec.AmountRefunded,
		},
	}
	if rec.RefundID != "" {
		e.Data.Refund = &EventRefund{ID: rec.RefundID, Amount: rec.ObjectAmount, Status: rec.ObjectStatus}
	}
	if rec.DisputeID != "" {
		e.Data.Dispute = &EventDispute{ID: rec.DisputeID, Amount: rec.ObjectAmount, Status: rec.ObjectStatus}
	}
	return e
}

func (w *webhook) deliver(ctx context.Context, d pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	// A disabled endpoint gets nothing; the delivery waits as a dead letter.
	var ep store.WebhookEndpoint
	err := store.View(ctx, w.s.Store, asRippleTx, func(tx rippleTx) error {
		var err error
		ep, err = tx.WebhookEndpoint(w.id)
		return err
	})
	if err != nil {
		return outcome{}, fmt.Errorf("webhook endpoint %s: %w", w.id, err)
	}
	if ep.Disabled {
		return outcome{permanent: true}, fmt.Errorf("endpoint %s is disabled since %s: %s", w.id, ep.DisabledAt.Format(time.RFC3339), ep.DisabledReason)
	}

	body, err := json.Marshal(NewEvent(rec))
	if err != nil {
		return outcome{permanent: true}, fmt.Errorf("encode webhook: %w", err)
	}
	now := w.s.now()
	h, err := w.signer.Header(rec.ID, now, body)
	if err != nil {
		return outcome{permanent: true}, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return outcome{permanent: true}, fmt.Errorf("webhook request to %s: %w", w.id, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "paystate")

	res, err := w.client.Do(req)
	if err != nil {
		// The url.Error names the URL, which may carry a token: keep the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.Canceled) {
			return outcome{}, err // shutting down: not the endpoint's failure
		}
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", w.timeout)
		}
		return w.failed(now, outcome{}, fmt.Errorf("POST to %s (%s): %w", w.id, w.host, err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxResponseBody))
	_ = res.Body.Close()

	switch code := res.StatusCode; {
	case code >= 200 && code < 300:
		// The delivery names its endpoint (Delivery.Endpoint): the note
		// need not, once per delivery on disk.
		return outcome{note: fmt.Sprintf("answered %d", code), health: w.succeeded(now)}, nil
	case code == http.StatusGone:
		reason := "answered 410 Gone"
		return outcome{permanent: true, health: w.disable(now, reason)}, fmt.Errorf("endpoint %s (%s) %s: disabled", w.id, w.host, reason)
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		out := outcome{retryAt: retryAfter(res.Header.Get("Retry-After"), now)}
		return w.failed(now, out, fmt.Errorf("endpoint %s (%s) answered %d", w.id, w.host, code))
	default:
		return w.failed(now, outcome{}, fmt.Errorf("endpoint %s (%s) answered %d", w.id, w.host, code))
	}
}

// healthRefresh is how stale a healthy endpoint's stored LastSuccessAt
// may grow: a success writes the endpoint only if it changes its health
// (it was failing, or never stored) or LastSuccessAt is older than this.
const healthRefresh = time.Minute

// succeeded returns the health write of a delivery the endpoint took: it
// is healthy again. It writes only on a change (see healthRefresh); a
// failure to write it is logged and the delivery recorded as done.
func (w *webhook) succeeded(now time.Time) func(rippleTx) (bool, error) {
	return func(tx rippleTx) (bool, error) {
		ep, err := tx.WebhookEndpoint(w.id)
		if err != nil {
			return false, err
		}
		if ep.URL == w.url && ep.FailingSince.IsZero() && !ep.LastSuccessAt.IsZero() && now.Sub(ep.LastSuccessAt) < healthRefresh {
			return false, nil // healthy and recently said so: nothing changes
		}
		ep.URL, ep.FailingSince, ep.LastSuccessAt = w.url, time.Time{}, now
		return false, tx.PutWebhookEndpoint(ep)
	}
}

// failed returns cause with the health write of a failed delivery. An
// endpoint that has failed every delivery for DisableAfter is disabled,
// and the delivery becomes a dead letter.
func (w *webhook) failed(now time.Time, out outcome, cause error) (outcome, error) {
	out.health = func(tx rippleTx) (bool, error) {
		ep, err := tx.WebhookEndpoint(w.id)
		if err != nil {
			return false, err
		}
		disabled := false
		ep.URL = w.url
		switch {
		case ep.Disabled:
		case ep.FailingSince.IsZero():
			ep.FailingSince = now
		case now.Sub(ep.FailingSince) >= DisableAfter:
			ep.Disabled, ep.DisabledAt, disabled = true, now, true
			ep.DisabledReason = fmt.Sprintf("failed every delivery since %s", ep.FailingSince.Format(time.RFC3339))
		}
		if disabled {
			reason := ep.DisabledReason
			tx.OnCommit(func() { w.logDisabled(reason) })
		}
		if err := tx.PutWebhookEndpoint(ep); err != nil {
			return false, err
		}
		return disabled, nil
	}
	return out, cause
}

// disable returns the health write that stores the endpoint as disabled.
func (w *webhook) disable(now time.Time, reason string) func(rippleTx) (bool, error) {
	return func(tx rippleTx) (bool, error) {
		ep, err := tx.WebhookEndpoint(w.id)
		if err != nil {
			return false, err
		}
		ep.URL, ep.Disabled, ep.DisabledAt, ep.DisabledReason = w.url, true, now, reason
		tx.OnCommit(func() { w.logDisabled(reason) })
		return false, tx.PutWebhookEndpoint(ep)
	}
}

func (w *webhook) logDisabled(reason string) {
	w.s.Logger.Warn().Str("endpoint", w.id).Str("host", w.host).Str("reason", reason).
		Msg("webhook endpoint disabled: its deliveries become dead letters until one is retried")
}

// retryAfter parses a Retry-After header, delay-seconds or an HTTP date,
// relative to now; the zero time if there is none or it is malformed.
func retryAfter(v string, now time.Time) time.Time {
	if v == "" {
		return time.Time{}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		if n > int64(365*24*time.Hour/time.Second) {
			n = int64(365 * 24 * time.Hour / time.Second)
		}
		return now.Add(time.Duration(n) * time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.UTC()
	}
	return time.Time{}
}
