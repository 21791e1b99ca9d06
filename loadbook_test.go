package main

import (
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

// observation is one answer about a payment, with when it was asked.
type observation struct {
	start, end time.Time
	version    int
	status     string
}

// book is what a load test (the crash loop, the scale-out test) knows of
// the payments it made: their providers, the webhooks acknowledged for
// them and every answer with its time window, so that the test can check
// afterwards that no answer went back to an older version. Its mutex also
// guards the other maps of the test's client.
type book struct {
	mu       sync.Mutex
	payments map[string]string // payment id → provider
	acked    map[string]string // acknowledged standard webhook event id → payment id
	obs      map[string][]observation
}

func newBook() book {
	return book{payments: map[string]string{}, acked: map[string]string{}, obs: map[string][]observation{}}
}

// observe records the view m of a payment, answered for a request that
// started at start.
func (b *book) observe(start time.Time, m map[string]any) {
	id, _ := m["id"].(string)
	v, _ := m["version"].(float64)
	st, _ := m["status"].(string)
	if id == "" {
		return
	}
	b.mu.Lock()
	b.obs[id] = append(b.obs[id], observation{start: start, end: time.Now(), version: int(v), status: st})
	b.mu.Unlock()
}

// pick returns a known payment of the provider ("" any), or "".
func (b *book) pick(rnd *rand.Rand, provider string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for id, p := range b.payments {
		if provider == "" || p == provider {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	sort.Strings(ids)
	return ids[rnd.IntN(len(ids))]
}

// checkVersions fails t for every payment of which an answer that started
// after another ended shows an older version, and returns the number of
// answers checked.
func (b *book) checkVersions(t *testing.T) int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for id, obs := range b.obs {
		n += len(obs)
		sort.Slice(obs, func(i, j int) bool { return obs[i].start.Before(obs[j].start) })
		for i, later := range obs {
			for _, earlier := range obs[:i] {
				if earlier.end.Before(later.start) && later.version < earlier.version {
					t.Errorf("%s: version %d seen after version %d", id, later.version, earlier.version)
				}
			}
		}
	}
	return n
}
