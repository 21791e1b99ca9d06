package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/paystate/paystate/internal/buildinfo"
)

func TestFrom(t *testing.T) {
	t.Parallel()
	checkout := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/paystate/paystate", Version: "v0.0.0-20260101000000-abcdef012345+dirty"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}},
	}
	for _, tt := range []struct {
		name     string
		injected string
		bi       *debug.BuildInfo
		want     buildinfo.Info
	}{
		{"Injected", "v1.2.3", checkout, buildinfo.Info{Version: "v1.2.3", Revision: "abcdef0123456789-modified", GoVersion: "go1.26.0"}},
		{"Checkout", "", checkout, buildinfo.Info{Version: "v0.0.0-20260101000000-abcdef012345+dirty", Revision: "abcdef0123456789-modified", GoVersion: "go1.26.0"}},
		{"GoInstall", "", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.4.0"}}, buildinfo.Info{Version: "v1.4.0", GoVersion: "go1.26.1"}},
		{"Devel", "", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}}, buildinfo.Info{Version: "devel", GoVersion: "go1.26.1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := buildinfo.From(tt.injected, tt.bi); got != tt.want {
				t.Fatalf("From=%+v, want %+v", got, tt.want)
			}
		})
	}
	if got := buildinfo.From("", nil); got.Version != "devel" || got.GoVersion == "" {
		t.Fatalf("From without build info=%+v, want version devel and the runtime's Go version", got)
	}
}
