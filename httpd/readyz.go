package httpd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// ReadyTimeout bounds the checks of one GET /readyz: a part that has not
// answered by then is not ready. It is below the 1 s a Kubernetes probe
// waits by default, so that a probe gets the answer naming the part
// rather than a timeout.
const ReadyTimeout = 900 * time.Millisecond

// ReadyCheck is one part of what GET /readyz checks: storage, a worker.
type ReadyCheck struct {
	// Name names the part in the answer ("storage", "inbox", ...).
	Name string
	// Check returns nil when the part is ready, else what is wrong, in
	// words an operator can act on. It returns by ctx's deadline.
	Check func(ctx context.Context) error
	// Advisory parts are reported in the answer but never make it 503:
	// an outside service whose absence paystate rides out (the NATS
	// relay: its deliveries wait in the outbox), which would take every
	// instance out of its load balancer at once and help nothing.
	Advisory bool
}

// readyAnswer is the body of GET /readyz: "ok" or what is wrong, per
// part; a 503 also has the error shape, its message naming the parts
// that are not ready.
type readyAnswer struct {
	Status string            `json:"status,omitempty"`
	Error  *errorDetail      `json:"error,omitempty"`
	Checks map[string]string `json:"checks"`
}

// handleReadyz answers 200 when every part in Ready is ready, else 503
// naming the parts that are not. A change between the two is logged once.
func (s *Server) handleReadyz(rc *fasthttp.RequestCtx, _ []string) error {
	ctx, cancel := context.WithTimeout(s.ctx, ReadyTimeout)
	defer cancel()
	ans := readyAnswer{Checks: make(map[string]string, len(s.Ready))}
	var failing []string
	for _, c := range s.Ready {
		err := c.Check(ctx)
		if err == nil {
			ans.Checks[c.Name] = "ok"
			continue
		}
		ans.Checks[c.Name] = err.Error()
		if !c.Advisory {
			failing = append(failing, c.Name+": "+err.Error())
		}
	}
	ready := len(failing) == 0
	if was := s.wasReady.Swap(ready); was != ready {
		if ready {
			s.log(rc).Info().Msg("ready")
		} else {
			s.log(rc).Warn().Strs("not_ready", failing).Msg("not ready")
		}
	}
	if ready {
		ans.Status = "ready"
		writeJSON(rc, fasthttp.StatusOK, ans)
		return nil
	}
	ans.Error = &errorDetail{Code: pay.EUNAVAILABLE, Message: "not ready: " + strings.Join(failing, "; "), RequestID: requestID(rc)}
	writeJSON(rc, HTTPStatus(pay.EUNAVAILABLE), ans)
	return nil
}

// WorkerCheck is the ReadyCheck of a worker loop: ready while its last
// turn, as heartbeat reports it with the loop's interval, is at most
// three intervals old on now's clock. Before the first turn the three
// intervals count from since, when the worker was started.
func WorkerCheck(name string, heartbeat func() (time.Time, time.Duration), now func() time.Time, since time.Time) ReadyCheck {
	return ReadyCheck{Name: name, Check: func(context.Context) error {
		last, interval := heartbeat()
		what := "last turn"
		if last.IsZero() {
			last, what = since, "started, no turn since"
		}
		if age := now().Sub(last); age > 3*interval {
			return fmt.Errorf("%s %s ago, more than three intervals of %s", what, age.Round(time.Millisecond), interval)
		}
		return nil
	}}
}
