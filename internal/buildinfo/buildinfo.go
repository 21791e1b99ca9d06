// Package buildinfo says which build of paystate is running: the release
// version, the VCS revision and the Go toolchain, from the version
// injected at release and runtime/debug.ReadBuildInfo. /metrics exports
// it as paystate_build_info; packages that cannot import the command
// (the daemon, the HTTP server) read it here.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Injected is the release version, set at build time:
//
//	go build -ldflags "-X github.com/paystate/paystate/internal/buildinfo.Injected=v1.2.3"
//
// The command may also set it from its own injected version before it
// starts the daemon. Empty, Get reports the module version of the build
// info instead.
var Injected string

// Info describes one build.
type Info struct {
	// Version is Injected, else the module version the build info records
	// (a release tag for `go install ...@v1.2.3`, a pseudo-version for a
	// build from a checkout), else "devel".
	Version string
	// Revision is the VCS commit the binary was built from, with
	// "-modified" when the checkout had uncommitted changes; "" when it
	// was not built from a checkout.
	Revision string
	// GoVersion is the Go toolchain that built the binary ("go1.26.0").
	GoVersion string
}

var (
	readOnce sync.Once
	read     *debug.BuildInfo
)

// Get returns the running binary's build.
func Get() Info {
	readOnce.Do(func() {
		if bi, ok := debug.ReadBuildInfo(); ok {
			read = bi
		}
	})
	return From(Injected, read)
}

// From describes the build of injected and bi (nil: the binary has no
// build info).
func From(injected string, bi *debug.BuildInfo) Info {
	in := Info{Version: injected, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && in.Revision != "" {
			in.Revision += "-modified"
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	return in
}
