package cli

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadBuildInfo(t *testing.T) {
	t.Parallel()
	checkout := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/paystate/paystate", Version: "v0.0.0-20250601100000-1f0c3e9d2b7a+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs.revision", Value: "1f0c3e9d2b7a5c4d3e2f1a0b9c8d7e6f5a4b3c2d"},
			{Key: "vcs.time", Value: "2025-06-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tt := range []struct {
		name     string
		injected string
		bi       *debug.BuildInfo
		want     string
	}{
		{"Release", "v1.2.3", checkout, "paystate v1.2.3\nrevision 1f0c3e9d2b7a5c4d3e2f1a0b9c8d7e6f5a4b3c2d (modified)\ntime     2025-06-01T10:00:00Z\ngo       go1.26.8 linux/arm64\n"},
		{"Checkout", "", checkout, "paystate v0.0.0-20250601100000-1f0c3e9d2b7a+dirty\nrevision 1f0c3e9d2b7a5c4d3e2f1a0b9c8d7e6f5a4b3c2d (modified)\ntime     2025-06-01T10:00:00Z\ngo       go1.26.8 linux/arm64\n"},
		{"GoInstall", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}, "paystate v1.4.0\ngo       go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{"DevelNoVCS", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "paystate devel\ngo       go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{"CleanCheckoutNoModuleVersion", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}}, "paystate devel\nrevision abc123\ngo       go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{"NoBuildInfo", "", nil, "paystate devel\ngo       " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
	} {
		var w bytes.Buffer
		readBuildInfo(tt.injected, tt.bi).print(&w)
		if got := w.String(); got != tt.want {
			t.Errorf("%s:\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}

func TestRun_Version(t *testing.T) {
	t.Parallel()
	a, _, err := runSplit("version")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := runSplit("--version")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !strings.HasPrefix(a, "paystate ") || !strings.Contains(a, "go       "+runtime.Version()) {
		t.Fatalf("version:\n%s\n--version:\n%s", a, b)
	}
}
