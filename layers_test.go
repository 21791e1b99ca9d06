package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestLayers reads the imports with go list -deps and holds the rules of
// ARCHITECTURE.md's layers that the compiler does not: pay and receipt
// depend on the standard library alone, config and reconcile take no
// domain fact from ripple (receipt settings come from receipt, money and
// event names from pay), only store/bolt depends on bbolt and only
// store/postgres on pgx, and no package above the storage contract
// depends on a backend.
func TestLayers(t *testing.T) {
	t.Parallel()
	const (
		mod   = "github.com/paystate/paystate/"
		bbolt = "go.etcd.io/bbolt"
		pgx   = "github.com/jackc/pgx"
	)
	for _, l := range []struct {
		pkg     string
		stdOnly bool     // nothing outside the standard library but itself
		bans    []string // import paths it must not depend on, or their prefixes
	}{
		{pkg: "pay", stdOnly: true},
		{pkg: "receipt", stdOnly: true},
		{pkg: "config", bans: []string{mod + "ripple"}},
		{pkg: "reconcile", bans: []string{mod + "ripple", bbolt, pgx, mod + "store/"}},
		// The storage contract names no backend; the backends are
		// siblings; the layers above see the contract alone.
		{pkg: "store", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "store/bolt", bans: []string{pgx, mod + "store/postgres"}},
		{pkg: "store/postgres", bans: []string{bbolt, mod + "store/bolt"}},
		{pkg: "finalize", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "ripple", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "sweeper", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "httpd", bans: []string{bbolt, pgx, mod + "store/"}},
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
