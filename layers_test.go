package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestLayers reads the imports with go list -deps and holds the rules of
// ARCHITECTURE.md's layers that the compiler does not: pay and receipt
// depend on the standard library alone, and config and reconcile take no
// domain fact from ripple (receipt settings come from receipt, money and
// event names from pay).
func TestLayers(t *testing.T) {
	t.Parallel()
	const mod = "github.com/paystate/paystate/"
	for _, l := range []struct {
		pkg     string
		stdOnly bool     // nothing outside the standard library but itself
		bans    []string // import paths it must not depend on, or their prefixes
	}{
		{pkg: "pay", stdOnly: true},
		{pkg: "receipt", stdOnly: true},
		{pkg: "config", bans: []string{mod + "ripple"}},
		{pkg: "reconcile", bans: []string{mod + "ripple"}},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./"+l.pkg).Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Errorf("go list -deps ./%s: %v\n%s", l.pkg, err, stderr)
			continue
		}
		for _, dep := range strings.Fields(string(out)) {
			if l.stdOnly && dep != mod+l.pkg {
				t.Errorf("%s depends on %s: it may import the standard library only", l.pkg, dep)
			}
			for _, ban := range l.bans {
				if strings.HasPrefix(dep, ban) {
					t.Errorf("%s depends on %s (go list -deps ./%s)", l.pkg, dep, l.pkg)
				}
			}
		}
	}
}
