package sweeper_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/sweeper"
)

// blockingPSP is the mock PSP whose Status calls wait until release is
// closed, counting how many are in flight at once. entered receives one
// value per call that started.
type blockingPSP struct {
	*mock.Provider
	release chan struct{}
	entered chan struct{}

	mu       sync.Mutex
	inFlight int
	maxIn    int
	calls    int
}

func newBlockingPSP(m *mock.Provider, calls int) *blockingPSP {
	return &blockingPSP{Provider: m, release: make(chan struct{}), entered: make(chan struct{}, calls)}
}

func (b *blockingPSP) Status(ctx context.Context, p pay.Payment) (pay.PSPResult, error) {
	b.mu.Lock()
	b.inFlight++
	b.calls++
	b.maxIn = max(b.maxIn, b.inFlight)
	b.mu.Unlock()
	b.entered <- struct{}{}
	defer func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}()
	select {
	case <-b.release:
	case <-ctx.Done():
		return pay.PSPResult{}, ctx.Err()
	}
	return b.Provider.Status(ctx, p)
}

// TestSweeper_Parallel checks that a pass asks the PSP about several
// candidates at once, never more than Parallel, each under its own lease,
// and that the corrections it makes are the same as one at a time: every
// payment captured once, a second pass changes nothing.
func TestSweeper_Parallel(t *testing.T) {
	t.Parallel()
	const (
		candidates = 8
		parallel   = 4
	)
	e := newEnv(t, 0)
	var lost []pay.Payment
	for i := range candidates {
		lost = append(lost, e.create("mock", int64(1000*(i+1)+4))) // ...04: the answer is lost
	}
	psp := newBlockingPSP(e.mock, candidates)
	e.sw.Providers = map[string]pay.Provider{"mock": psp}
	e.sw.Parallel = parallel
	e.clock.Add(minAge + time.Second)

	type result struct {
		rep sweeper.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, err := e.sw.RunOnce(e.ctx)
		done <- result{e.sw.LastReport(), err}
	}()

	// Wait until parallel calls are blocked in Status at once, then let
	// them all go. The guard only keeps a sequential sweeper (one call in
	// flight, the next never starts) from hanging the test; it asserts no
	// timing.
	guard := time.NewTimer(10 * time.Second) // less than the lease TTL (30s)
	defer guard.Stop()
wait:
	for range parallel {
		select {
		case <-psp.entered:
		case <-guard.C:
			break wait
		}
	}
	psp.mu.Lock()
	inFlight := psp.inFlight
	psp.mu.Unlock()
	close(psp.release)
	res := <-done
	if res.err != nil {
		t.Fatalf("RunOnce: %v", res.err)
	}
	if got, want := inFlight, parallel; got != want {
		t.Fatalf("Status calls in flight at once=%d, want %d (Parallel)", got, want)
	}
	if got, want := psp.maxIn, parallel; got != want {
		t.Fatalf("most Status calls in flight=%d, want %d (never more than Parallel)", got, want)
	}
	if got, want := psp.calls, candidates; got != want {
		t.Fatalf("Status calls=%d, want %d (one per candidate)", got, want)
	}
	if got, want := res.rep.Corrected, candidates; got != want {
		t.Fatalf("Corrected=%d, want %d (report %+v)", got, want, res.rep)
	}
	if got, want := res.rep.Candidates, candidates; got != want {
		t.Fatalf("Candidates=%d, want %d", got, want)
	}
	for _, p := range lost {
		got := e.snapshot(p.ID)
		if got, want := got.payment.Status, pay.Captured; got != want {
			t.Fatalf("Status of %s=%s, want %s", p.ID, got, want)
		}
		var captured int
		for _, r := range got.outbox {
			if r.Type == "payment.captured" {
				captured++
			}
		}
		if captured != 1 {
			t.Fatalf("payment.captured outbox records of %s=%d, want 1", p.ID, captured)
		}
		var (
			l pay.Lease
			a pay.PSPAnswer
		)
		e.view(func(tx store.Tx) (err error) {
			if a, err = tx.PSPAnswer(p.ID); err != nil {
				return err
			}
			l, err = tx.Lease(p.ID)
			return err
		})
		if !a.Found || a.Status != pay.Captured {
			t.Fatalf("last PSP answer of %s=%+v, want found and captured", p.ID, a)
		}
		if l.Held(e.clock.Now()) {
			t.Fatalf("lease of %s still held after the pass: %+v", p.ID, l)
		}
	}

	// A second pass over the same records changes nothing.
	e.clock.Add(minAge)
	if n, err := e.sw.RunOnce(e.ctx); err != nil || n != 0 {
		t.Fatalf("second pass: changed %d records, err=%v; want 0, nil", n, err)
	}
	e.verify()
}

// countingStore is a store.Store that counts the write transactions that
// committed.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	updates int
}

func (c *countingStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	err := c.Store.Update(ctx, fn)
	if err == nil {
		c.mu.Lock()
		c.updates++
		c.mu.Unlock()
	}
	return err
}

// TestSweeper_CorrectionWrites checks that a correction costs three write
// transactions: take the lease, finalize with the PSP's answer, release
// the lease (the answer is not stored in a transaction of its own), and
// that a second pass writes nothing for the payments it corrected.
func TestSweeper_CorrectionWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	const candidates = 5
	var lost []pay.Payment
	for i := range candidates {
		lost = append(lost, e.create("mock", int64(1000*(i+1)+4)))
	}
	cs := &countingStore{Store: e.db}
	e.sw.Store, e.sw.Leases.Store = cs, cs
	e.sw.Finalizer = &finalize.Finalizer{Store: cs}

	// A pass with nothing to correct (younger than min_age): what the
	// housekeeping writes whatever the candidates.
	if rep := e.pass(); rep.Corrected != 0 {
		t.Fatalf("report=%+v, want nothing corrected before min_age", rep)
	}
	idle := cs.updates
	cs.updates = 0
	e.clock.Add(minAge + time.Second)
	if rep := e.pass(); rep.Corrected != candidates {
		t.Fatalf("report=%+v, want %d corrected", rep, candidates)
	}
	if got, want := cs.updates-idle, 3*candidates; got != want {
		t.Fatalf("write transactions of the corrections=%d, want %d (3 per correction)", got, want)
	}
	for _, p := range lost {
		var a pay.PSPAnswer
		e.view(func(tx store.Tx) (err error) { a, err = tx.PSPAnswer(p.ID); return err })
		if !a.Found || a.Status != pay.Captured {
			t.Fatalf("last PSP answer of %s=%+v, want found and captured", p.ID, a)
		}
	}
	// A second pass writes nothing but the housekeeping's.
	cs.updates = 0
	e.clock.Add(minAge)
	e.pass()
	if got, want := cs.updates, idle; got != want {
		t.Fatalf("write transactions of the second pass=%d, want %d (the housekeeping's)", got, want)
	}
}
