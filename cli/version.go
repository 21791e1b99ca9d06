package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/paystate/paystate/internal/buildinfo"
)

// version is paystate's release version. A release build sets it:
//
//	go build -ldflags "-X github.com/paystate/paystate/cli.version=v1.2.3"
//
// Left empty (any other build), `paystate version` reports the module
// version instead: the one `go install github.com/paystate/paystate@v1.2.3`
// records, or, for a build from a git checkout, the pseudo-version that
// names its commit (with "+dirty" for uncommitted changes), and the VCS
// revision from the build info.
var version string

// buildInfo is what `paystate version` prints.
type buildInfo struct {
	Version   string // the release, module or pseudo-version; "devel" if none is known
	Revision  string // the VCS commit, "" if not built from a checkout
	Time      string // the commit's time, RFC 3339
	Modified  bool   // the checkout had uncommitted changes
	GoVersion string // the Go toolchain, "go1.26.8"
	Platform  string // GOOS/GOARCH
}

// readBuildInfo describes the build from the injected version and the
// build info (nil if the binary has none). The version is the one
// internal/buildinfo reports, which /metrics exports too.
func readBuildInfo(injected string, bi *debug.BuildInfo) buildInfo {
	in := buildinfo.From(injected, bi)
	b := buildInfo{Version: in.Version, GoVersion: in.GoVersion, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return b
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		b.Platform = goos + "/" + goarch
	}
	return b
}

// print writes b as `paystate version` shows it:
//
//	paystate v1.2.3
//	revision 1f0c3e9d2b7a... (modified)
//	time     2025-06-01T10:00:00Z
//	go       go1.26.8 linux/amd64
func (b buildInfo) print(w io.Writer) {
	fmt.Fprintf(w, "paystate %s\n", b.Version)
	if b.Revision != "" {
		rev := b.Revision
		if b.Modified {
			rev += " (modified)"
		}
		fmt.Fprintf(w, "revision %s\n", rev)
		if b.Time != "" {
			fmt.Fprintf(w, "time     %s\n", b.Time)
		}
	}
	fmt.Fprintf(w, "go       %s %s\n", b.GoVersion, b.Platform)
}

// shareVersion hands the injected version to internal/buildinfo, for the
// daemon's paystate_build_info, when a release build set only this one.
var shareVersion = sync.OnceFunc(func() {
	if version != "" && buildinfo.Injected == "" {
		buildinfo.Injected = version
	}
})

// runVersion is `paystate version` (and `paystate --version`).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", "Print paystate's version, the commit it was built from and the Go version.")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	readBuildInfo(version, bi).print(stdout)
	return nil
}
