package daemon_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

// TestE2E_OnlyConfiguredProviders: a config file without [providers.mock]
// runs no mock, whatever the defaults say: a create naming it is 400
// unknown_provider, its webhook route 404, and the one configured provider
// is the default.
func TestE2E_OnlyConfiguredProviders(t *testing.T) {
	t.Parallel()
	file := "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" + filepath.Join(t.TempDir(), "p.db") + "\"\n" +
		"[auth]\napi_keys = [\"" + daemontest.APIKey + "\"]\n" +
		"[providers.standard]\nwebhook_secret = \"whsec_c3RhbmRhcmQtcHJvdmlkZXItc2VjcmV0LTAwMDAwMDA=\"\n"
	cfg, err := config.Parse([]byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := daemon.New(cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	in := &daemontest.Instance{T: t, Main: m, Base: m.Server.URL()}

	if _, ok := m.Providers["mock"]; ok {
		t.Fatal("the mock provider runs although the config file has no [providers.mock]")
	}
	r := in.Create(`{"order_id":"o-1","amount":1000,"currency":"EUR","provider":"mock"}`, "k-mock")
	if got, want := r.Status, 400; got != want {
		t.Fatalf("create with provider mock: status %d, want %d: %s", got, want, r.Body)
	}
	if got, want := r.ErrCode(), "unknown_provider"; got != want {
		t.Fatalf("create with provider mock: code %q, want %q", got, want)
	}
	body := eventBody("evt_m1", "payment.captured", "pay_01ARZ3NDEKTSV4RRFFQ69G5FAV", "")
	if got, want := in.Do("POST", "/webhooks/mock", body, nil).Status, 404; got != want {
		t.Fatalf("POST /webhooks/mock: status %d, want %d", got, want)
	}
	r = in.Create(`{"order_id":"o-2","amount":1000,"currency":"EUR"}`, "k-default")
	if got, want := r.Status, 201; got != want {
		t.Fatalf("create with the default provider: status %d, want %d: %s", got, want, r.Body)
	}
	if got, want := r.Str("provider"), "standard"; got != want {
		t.Fatalf("default provider %q, want %q", got, want)
	}
}
