package httpd_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/store/storetest"
)

// readyBody is the answer of GET /readyz.
type readyBody struct {
	Status string
	Error  struct {
		Code, Message string
		RequestID     string `json:"request_id"`
	}
	Checks map[string]string
}

func getReady(t *testing.T, d *dashServer) (int, readyBody) {
	t.Helper()
	a := d.do("GET", "/readyz", "", "", nil)
	var b readyBody
	if err := json.Unmarshal([]byte(a.body), &b); err != nil {
		t.Fatalf("GET /readyz: %v: %s", err, a.body)
	}
	return a.status, b
}

// TestServer_Readyz: 200 while every part is ready; 503 with the error
// shape naming each part that is not; an advisory part is reported and
// never fails the check; a worker's heartbeat goes stale after three of
// its intervals on the injected clock.
func TestServer_Readyz(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	started := clock.Now()
	// The worker's heartbeat (zero: no turn yet) and the storage's
	// answer, set by the test and read by the server's goroutines.
	var last atomic.Pointer[time.Time]
	last.Store(&time.Time{})
	var storageErr atomic.Pointer[error]
	storageErr.Store(new(error))
	d := newDashServerWith(t, func(s *httpd.Server) {
		s.Ready = []httpd.ReadyCheck{
			{Name: "storage", Check: func(context.Context) error { return *storageErr.Load() }},
			httpd.WorkerCheck("sweeper", func() (time.Time, time.Duration) { return *last.Load(), time.Minute }, clock.Now, started),
			{Name: "relay", Advisory: true, Check: func(context.Context) error { return errors.New("not connected to NATS") }},
		}
	})

	// Before the first turn, counted from the start.
	clock.Add(3 * time.Minute)
	status, b := getReady(t, d)
	if status != http.StatusOK || b.Status != "ready" {
		t.Fatalf("three intervals after the start: %d %+v, want 200 ready", status, b)
	}
	if b.Checks["storage"] != "ok" || b.Checks["sweeper"] != "ok" || !strings.Contains(b.Checks["relay"], "not connected") {
		t.Fatalf("checks %v: want storage and sweeper ok, relay reported", b.Checks)
	}
	clock.Add(time.Second)
	status, b = getReady(t, d)
	if status != http.StatusServiceUnavailable || b.Error.Code != "unavailable" || !strings.Contains(b.Error.Message, "sweeper: started, no turn since 3m1s ago") {
		t.Fatalf("no turn in three intervals: %d %+v, want 503 naming the sweeper", status, b)
	}
	if strings.Contains(b.Error.Message, "storage") || strings.Contains(b.Error.Message, "relay") {
		t.Errorf("message %q names a part that is ready or advisory", b.Error.Message)
	}
	if b.Error.RequestID == "" {
		t.Error("503 without a request id")
	}

	// A turn: ready again until three intervals pass.
	now := clock.Now()
	last.Store(&now)
	clock.Add(2 * time.Minute)
	if status, b = getReady(t, d); status != http.StatusOK {
		t.Fatalf("a turn two intervals ago: %d %+v, want 200", status, b)
	}
	clock.Add(time.Minute + time.Millisecond)
	status, b = getReady(t, d)
	if status != http.StatusServiceUnavailable || !strings.Contains(b.Error.Message, "sweeper: last turn 3m0.001s ago, more than three intervals of 1m0s") {
		t.Fatalf("last turn three intervals ago: %d %+v, want 503 naming the sweeper", status, b)
	}

	// Two parts down: both named.
	full := errors.New("a write transaction failed: storage is full")
	storageErr.Store(&full)
	status, b = getReady(t, d)
	if status != http.StatusServiceUnavailable || !strings.Contains(b.Error.Message, "storage: a write transaction failed") || !strings.Contains(b.Error.Message, "sweeper: ") {
		t.Fatalf("storage and sweeper down: %d %+v, want 503 naming both", status, b)
	}
	if got := b.Checks["storage"]; !strings.Contains(got, "storage is full") {
		t.Errorf("checks[storage]=%q", got)
	}
}
