package cli

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: serve's settings apply when the environment sets none, and
// GOGC and GOMEMLIMIT win when set.
func TestTuneGC(t *testing.T) {
	oldPercent, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(oldPercent); debug.SetMemoryLimit(oldLimit) })

	gogc, limit := tuneGC(func(string) string { return "" })
	if gogc != "400" || limit != "128MiB" {
		t.Errorf("defaults: gogc=%s gomemlimit=%s, want 400 and 128MiB", gogc, limit)
	}
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Errorf("GC percent in force %d, want %d", got, serveGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != serveMemoryLimit {
		t.Errorf("memory limit in force %d, want %d", got, serveMemoryLimit)
	}

	debug.SetMemoryLimit(1 << 40)
	env := map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}
	gogc, limit = tuneGC(func(k string) string { return env[k] })
	if gogc != "150" || limit != "1GiB" {
		t.Errorf("from the environment: gogc=%s gomemlimit=%s, want 150 and 1GiB", gogc, limit)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d changed although GOGC is set", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("memory limit %d changed although GOMEMLIMIT is set", got)
	}
}
