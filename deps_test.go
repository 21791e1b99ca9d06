package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinary_NoTestingPackage: the paystate binary links no package
// testing (a test helper imported by a command would drag it in, with its
// flags). It was linked while internal/simulate imported
// psp/stripe/stripetest for the Stripe API it runs in checkout mode; that
// API is psp/stripe/stripefake now.
func TestBinary_NoTestingPackage(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
	for _, p := range deps {
		if p == "testing" || strings.HasSuffix(p, "test") && strings.HasPrefix(p, "github.com/paystate/paystate/") {
			t.Errorf("the binary links %s", p)
		}
	}
}
