// Package daemontest boots a whole paystate (a daemon.Main) for a test, on
// 127.0.0.1:0 with a database in the test's temporary directory, and
// drives it over HTTP only (WTF's cmd/wtfd end-to-end tests). It is
// apart from package testkit because it imports daemon, which imports
// nearly everything: testkit stays importable from any package's tests.
package daemontest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
)

// APIKey is the API key of a booted paystate; Do sends it.
const APIKey = "test-api-key-0123456789abcdef"

// TestProviders sets c's mock and standard providers up for a test with
// an API key, which is production (config.Config.Production): the mock
// allowed, and each on a secret of its own (MockSecret, StandardSecret)
// instead of the refused development secret.
func TestProviders(c *config.Config) {
	if c.Providers.Mock != nil {
		c.Providers.Mock.AllowPublic = true
		c.Providers.Mock.WebhookSecret = MockSecret
	}
	if c.Providers.Standard != nil {
		c.Providers.Standard.WebhookSecret = StandardSecret
	}
}

// The webhook secrets of an Instance's mock and standard providers (with
// an API key paystate is in production, which refuses the development
// secret).
const (
	MockSecret     = "whsec_dGVzdC1tb2NrLXNlY3JldC10ZXN0LW1vY2stc2VjcmV0"
	StandardSecret = "whsec_dGVzdC1zdGFuZGFyZC1zZWNyZXQtdGVzdC1zdGFuZGFyZA=="
)

// client is the HTTP client of an Instance without one: it uses
// http.DefaultTransport, whose idle connections the leak checks of the
// daemon's tests close.
var client = &http.Client{Timeout: 30 * time.Second}

// Instance is a paystate booted for a test. Send needs only Base (and
// HTTP), so an Instance also drives a paystate in another process.
type Instance struct {
	T    testing.TB // a *testing.F only before its Fuzz: Do and Create report to it
	Main *daemon.Main
	Base string       // base URL, http://127.0.0.1:port
	HTTP *http.Client // nil: a client with a 30 s timeout

	closeOnce sync.Once
}

// Boot starts a whole paystate with the test's defaults — the address
// 127.0.0.1:0, a database in t.TempDir(), APIKey, the mock PSP without
// its webhook delay, warnings logged to the test — changed by mutate if
// it is not nil. The test's cleanup stops it.
func Boot(t testing.TB, mutate func(*config.Config)) *Instance {
	t.Helper()
	return BootMain(t, mutate, nil)
}

// BootMain is Boot with the daemon's clock and knobs set by setup, if it
// is not nil, before Open. A fuzz target (t a *testing.F, which takes no
// log lines once its Fuzz runs) sets m.Logger in setup.
func BootMain(t testing.TB, mutate func(*config.Config), setup func(*daemon.Main)) *Instance {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Path = filepath.Join(t.TempDir(), "paystate.db")
	cfg.Auth.APIKeys = []string{APIKey}
	cfg.Providers.Mock.WebhookDelay = config.Duration{}
	TestProviders(&cfg)
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	m := daemon.New(cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if setup != nil {
		setup(m)
	}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	in := &Instance{T: t, Main: m, Base: m.Server.URL()}
	t.Cleanup(in.Close)
	return in
}

// Close stops the paystate now (a test that restarts it on the same
// database); a second Close does nothing.
func (in *Instance) Close() {
	in.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := in.Main.Close(ctx); err != nil {
			in.T.Errorf("close: %v", err)
		}
	})
}

// Response is a decoded answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any // the body decoded, if it is a JSON object
}

// Str is the string field k of the answer ("" if absent).
func (r Response) Str(k string) string { s, _ := r.JSON[k].(string); return s }

// Num is the number field k of the answer (0 if absent).
func (r Response) Num(k string) float64 { f, _ := r.JSON[k].(float64); return f }

// ErrCode is the code of an error answer ("" if it is none).
func (r Response) ErrCode() string {
	if e, ok := r.JSON["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

// Do is Send, failing the test if there is no answer.
func (in *Instance) Do(method, path string, body []byte, hdr map[string]string) Response {
	in.T.Helper()
	r, err := in.Send(method, path, body, hdr)
	if err != nil {
		in.T.Fatal(err)
	}
	return r
}

// DoJSON is Do with the answer decoded into v, failing the test if it is
// not JSON; it returns the status.
func (in *Instance) DoJSON(method, path string, body []byte, hdr map[string]string, v any) int {
	in.T.Helper()
	r := in.Do(method, path, body, hdr)
	if err := json.Unmarshal(r.Body, v); err != nil {
		in.T.Fatalf("%s %s: %v in %s", method, path, err, r.Body)
	}
	return r.Status
}

// Send sends a request and reads the answer; it may be called from any
// goroutine. hdr holds extra headers; Authorization (Bearer APIKey) is
// sent unless hdr gives it as "", and so is any header hdr gives as "".
func (in *Instance) Send(method, path string, body []byte, hdr map[string]string) (Response, error) {
	req, err := http.NewRequest(method, in.Base+path, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	hc := in.HTTP
	if hc == nil {
		hc = client
	}
	res, err := hc.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, err
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Body: b}
	_ = json.Unmarshal(b, &r.JSON)
	return r, nil
}

// Create is POST /v1/payments with body under the idempotency key.
func (in *Instance) Create(body, key string) Response {
	in.T.Helper()
	return in.Do("POST", "/v1/payments", []byte(body), map[string]string{"Idempotency-Key": key})
}

// History fills a new database at dbPath and closes it: 20 mock payments,
// five of each outcome (captured; failed; requires_action, then captured;
// processing, then captured), and the mock's 30 webhooks about them. It
// is a database with a history for the tools that read one (verify,
// backup).
func History(t *testing.T, dbPath string) {
	t.Helper()
	in := Boot(t, func(c *config.Config) { c.Storage.Path = dbPath })
	for i := range 20 {
		body := fmt.Sprintf(`{"order_id":"h-%d","amount":%d,"currency":"EUR"}`, i, 1000+i%4)
		if r := in.Create(body, fmt.Sprintf("h-%d", i)); r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if n := in.Main.Mock.Stats().WebhooksSent; n < 30 {
			return fmt.Errorf("the mock sent %d of its 30 webhooks", n)
		}
		return nil
	})
	in.Close()
}
