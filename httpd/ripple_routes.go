package httpd

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Deliveries is what the delivery routes need from the ripple workers
// (ripple.Service): listing deliveries and putting them back on the
// schedule.
type Deliveries interface {
	// Deliveries returns a page of deliveries in one state and the
	// cursor of the next page.
	Deliveries(ctx context.Context, f pay.DeliveryFilter) ([]pay.Delivery, string, error)
	// Retry makes one delivery due now; a dead letter starts over.
	Retry(ctx context.Context, id string) (pay.Delivery, error)
	// RetryDead retries every dead letter that died at or after since.
	RetryDead(ctx context.Context, since time.Time) (int, error)
}

// Customers is what GET /v1/customers/{id} needs from the ripple workers
// (ripple.Service), which keep the loyalty and retention accounts.
type Customers interface {
	// Customer returns a customer's account, or ENOTFOUND.
	Customer(ctx context.Context, id string) (store.CustomerAccount, error)
}

// Limits of GET /v1/deliveries.
const (
	defaultDeliveryPage = 100
	maxDeliveryPage     = 1000
)

// deliveryJSON is one ripple delivery on the wire. next_attempt_at is set
// while it is pending.
type deliveryJSON struct {
	ID            string `json:"id"`
	Effect        string `json:"effect"`
	Endpoint      string `json:"endpoint,omitempty"`
	EventID       string `json:"event_id"`
	EventType     string `json:"event_type"`
	PaymentID     string `json:"payment_id"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	Note          string `json:"note,omitempty"`
	EventAt       string `json:"event_at"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

func deliveryToJSON(d pay.Delivery) deliveryJSON {
	out := deliveryJSON{
		ID: d.ID, Effect: d.Effect, Endpoint: d.Endpoint, EventID: d.EventID, EventType: d.EventType,
		PaymentID: d.PaymentID, State: d.State, Attempts: d.Attempts, LastError: d.LastError, Note: d.Note,
		EventAt: rfc3339(d.EventAt), CreatedAt: rfc3339(d.CreatedAt), UpdatedAt: rfc3339(d.UpdatedAt),
	}
	if d.State == pay.DeliveryPending {
		out.NextAttemptAt = rfc3339(d.NextAttemptAt)
	}
	return out
}

// customerAccountJSON is a customer's loyalty and retention account on the
// wire; last_visit_at is null until a captured payment is recorded.
type customerAccountJSON struct {
	ID          string  `json:"id"`
	Points      int64   `json:"points"`
	LastVisitAt *string `json:"last_visit_at"`
}

// deliveryState reads the state query parameter, which is required.
func deliveryState(rc *fasthttp.RequestCtx) (string, error) {
	st := string(rc.QueryArgs().Peek("state"))
	if !pay.ValidDeliveryState(st) {
		return "", pay.Invalidf("state", "state must be one of pending, dead, done, got %q", st)
	}
	return st, nil
}

// sinceParam reads the since query parameter, an RFC 3339 time; zero if
// absent and not required.
func sinceParam(rc *fasthttp.RequestCtx, required bool) (time.Time, error) {
	v := string(rc.QueryArgs().Peek("since"))
	if v == "" {
		if required {
			return time.Time{}, pay.Invalidf("since", "since is required: an RFC 3339 time such as 2025-03-01T00:00:00Z")
		}
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, pay.Invalidf("since", "since must be an RFC 3339 time such as 2025-03-01T00:00:00Z, got %q", v)
	}
	return t.UTC(), nil
}

// handleListDeliveries lists deliveries in one state, oldest first by the
// time they entered it: GET /v1/deliveries?state=pending|dead|done
// [&since=RFC3339][&limit=][&cursor=].
func (s *Server) handleListDeliveries(rc *fasthttp.RequestCtx, _ []string) error {
	state, err := deliveryState(rc)
	if err != nil {
		return err
	}
	since, err := sinceParam(rc, false)
	if err != nil {
		return err
	}
	limit, err := parseLimit(rc, defaultDeliveryPage, maxDeliveryPage)
	if err != nil {
		return err
	}
	if s.Deliveries == nil {
		return notImplemented(rc)
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	ds, next, err := s.Deliveries.Deliveries(ctx, pay.DeliveryFilter{State: state, Since: since, Limit: limit, Cursor: string(rc.QueryArgs().Peek("cursor"))})
	if err != nil {
		return err
	}
	writeList(rc, ds, deliveryToJSON, next)
	return nil
}

// handleRetryDelivery makes one delivery due now: POST
// /v1/deliveries/{id}/retry. A dead letter starts over; a done delivery
// is 409.
func (s *Server) handleRetryDelivery(rc *fasthttp.RequestCtx, params []string) error {
	if s.Deliveries == nil {
		return notImplemented(rc)
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	d, err := s.Deliveries.Retry(ctx, params[0])
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, deliveryToJSON(d))
	return nil
}

// handleRetryDeliveries replays the dead letters that died at or after a
// time: POST /v1/deliveries/retry?state=dead&since=RFC3339. It answers
// {"retried": n}.
func (s *Server) handleRetryDeliveries(rc *fasthttp.RequestCtx, _ []string) error {
	if s.Deliveries == nil {
		return notImplemented(rc)
	}
	if st := string(rc.QueryArgs().Peek("state")); st != pay.DeliveryDead {
		return pay.Invalidf("state", "state must be dead: only dead letters are replayed, got %q", st)
	}
	since, err := sinceParam(rc, true)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	n, err := s.Deliveries.RetryDead(ctx, since)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, map[string]int{"retried": n})
	return nil
}

// handleGetCustomer answers a customer's loyalty points and last visit:
// GET /v1/customers/{id}.
func (s *Server) handleGetCustomer(rc *fasthttp.RequestCtx, params []string) error {
	if s.Customers == nil {
		return notImplemented(rc)
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	c, err := s.Customers.Customer(ctx, params[0])
	if err != nil {
		return err
	}
	out := customerAccountJSON{ID: c.ID, Points: c.Points}
	if !c.LastVisitAt.IsZero() {
		v := rfc3339(c.LastVisitAt)
		out.LastVisitAt = &v
	}
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}
