// Package metriccache keeps the metrics of a family by their label values,
// so that a hot path looks a metric up instead of formatting its name and
// taking the metrics registry's lock on every call.
package metriccache

import "sync"

// Cache holds one metric per key, made by New on first use. The keys must
// come from a small, fixed set (route names, statuses, configured
// providers): a metric made is kept for the life of the process, as the
// registry keeps it anyway. Safe for concurrent use; two first calls at
// once may both call New, which must therefore return the same metric for
// the same key (metrics.GetOrCreate* does).
type Cache[K comparable, V any] struct {
	New func(K) V
	m   sync.Map // K → V
}

// Get returns the metric of k.
func (c *Cache[K, V]) Get(k K) V {
	if v, ok := c.m.Load(k); ok {
		return v.(V)
	}
	v := c.New(k)
	c.m.Store(k, v)
	return v
}
