package cli

import (
	"fmt"
	"io"
	"runtime/debug"
)

// Version is paystate's version, printed by `paystate version`; main sets
// it from its own, stamped at build time (-ldflags "-X main.version=...").
var Version = "dev"

// runVersion is `paystate version`: the version and the build's Go
// version and VCS stamps.
func runVersion(stdout io.Writer) error {
	fmt.Fprintf(stdout, "paystate %s\n", Version)
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprintf(stdout, "go %s\n", bi.GoVersion)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH":
				fmt.Fprintf(stdout, "%s %s\n", s.Key, s.Value)
			}
		}
	}
	return nil
}
