package metriccache

import (
	"fmt"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// TestCache: one metric per key, the registry's own, made once per key
// when calls come one after the other, and the same one from goroutines
// that ask at once.
func TestCache(t *testing.T) {
	made := map[string]int{}
	var mu sync.Mutex
	c := Cache[string, *metrics.Counter]{New: func(k string) *metrics.Counter {
		mu.Lock()
		made[k]++
		mu.Unlock()
		return metrics.GetOrCreateCounter(fmt.Sprintf(`metriccache_test_total{k=%q}`, k))
	}}
	a, b := c.Get("a"), c.Get("b")
	if a == b {
		t.Fatal("two keys share a counter")
	}
	if c.Get("a") != a || made["a"] != 1 {
		t.Fatalf("second Get of a: made %d times", made["a"])
	}
	if a != metrics.GetOrCreateCounter(`metriccache_test_total{k="a"}`) {
		t.Fatal("the cached counter is not the registry's")
	}
	var wg sync.WaitGroup
	got := make([]*metrics.Counter, 16)
	for i := range got {
		wg.Go(func() { got[i] = c.Get("c"); got[i].Inc() })
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] {
			t.Fatal("goroutines got different counters for one key")
		}
	}
	if n := got[0].Get(); n != 16 {
		t.Fatalf("counter c=%d, want 16", n)
	}
}
