package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/storetest"
)

// readyz is GET /readyz, without the API key, as a probe sends it.
func readyz(in *daemontest.Instance) (daemontest.Response, map[string]any) {
	r := in.Do("GET", "/readyz", nil, map[string]string{"Authorization": ""})
	checks, _ := r.JSON["checks"].(map[string]any)
	return r, checks
}

// errMessage is the message of an error answer.
func errMessage(r daemontest.Response) string {
	e, _ := r.JSON["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

// TestE2E_Readyz: a booted paystate is ready; a worker that made no
// progress within three of its intervals (on the injected clock) makes
// /readyz answer 503 naming it, while the inbox and ripple loops, which
// go on turning, come back by themselves; a storage that does not commit
// a write makes it 503 naming storage until the write goes through; the
// NATS relay, away, is reported without failing the check.
func TestE2E_Readyz(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Now().UTC())
	in := daemontest.BootMain(t, func(c *config.Config) {
		c.Sweeper.Interval = config.Duration{Duration: time.Hour}
		c.Relay.NATS.URL = "nats://127.0.0.1:1" // nothing listens there
	}, func(m *daemon.Main) { m.Now = clock.Now })
	m := in.Main

	r, checks := readyz(in)
	if r.Status != 200 || r.Str("status") != "ready" {
		t.Fatalf("after boot: %d %s, want 200 ready", r.Status, r.Body)
	}
	for _, part := range []string{"storage", "inbox", "ripple", "sweeper"} {
		if checks[part] != "ok" {
			t.Errorf("after boot: checks[%s]=%v, want ok", part, checks[part])
		}
	}
	if relay, _ := checks["relay"].(string); !strings.Contains(relay, "not connected to NATS") {
		t.Errorf("checks[relay]=%q, want it reported as not connected", relay)
	}
	if m := in.Do("GET", "/metrics", nil, nil); !strings.Contains(string(m.Body), "\npaystate_relay_nats_connected 0\n") {
		t.Errorf("/metrics has no paystate_relay_nats_connected 0 for the relay that is away")
	}

	// The sweeper's first pass ran at boot; its next is an hour away.
	testkit.WaitFor(t, 10*time.Second, func() error {
		if last, _ := m.Sweeper.Heartbeat(); last.IsZero() {
			return fmt.Errorf("the sweeper has not finished its first pass")
		}
		return nil
	})
	clock.Add(3*time.Hour + time.Minute)
	r, _ = readyz(in)
	if r.Status != 503 || r.ErrCode() != "unavailable" || !strings.Contains(errMessage(r), "sweeper: last turn 3h1m0s ago, more than three intervals of 1h0m0s") {
		t.Fatalf("three sweeper intervals later: %d %s, want 503 naming the sweeper", r.Status, r.Body)
	}
	// The inbox and ripple loops turn every second: their heartbeats
	// catch up with the clock, the sweeper's does not.
	testkit.WaitFor(t, 10*time.Second, func() error {
		r, checks := readyz(in)
		if r.Status != 503 || checks["inbox"] != "ok" || checks["ripple"] != "ok" || checks["sweeper"] == "ok" {
			return fmt.Errorf("%d %s, want 503 with only the sweeper failing", r.Status, r.Body)
		}
		return nil
	})

	// A write that does not end holds every write after it: the probe's
	// does not commit in time.
	release := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	writing := make(chan error, 1)
	go func() {
		writing <- m.Store.Update(context.Background(), func(store.Tx) error {
			once.Do(func() { close(held) })
			<-release
			return nil
		})
	}()
	<-held
	r, checks = readyz(in)
	if storage, _ := checks["storage"].(string); r.Status != 503 || !strings.Contains(errMessage(r), "storage: a write transaction did not commit within") || storage == "ok" {
		close(release)
		t.Fatalf("storage stuck: %d %s, want 503 naming storage", r.Status, r.Body)
	}
	close(release)
	if err := <-writing; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if _, checks := readyz(in); checks["storage"] != "ok" {
			return fmt.Errorf("checks[storage]=%v, want ok once the write went through", checks["storage"])
		}
		return nil
	})
}
