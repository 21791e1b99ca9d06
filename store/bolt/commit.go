package bolt

import (
	"errors"
	"fmt"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	"go.etcd.io/bbolt"
)

// committer groups the write transactions of concurrent Updates without a
// fixed delay (bbolt's DB.Batch waits MaxBatchDelay for company; a lone
// write here commits at once). A write that finds the committer idle
// commits in its own goroutine, alone, in one bbolt transaction. Writes
// that arrive while a commit runs queue up and form the next group, one
// transaction with one commit (one fsync of pages, one of the meta page),
// and the others wait for its result. While groups keep forming, one
// goroutine (drain) commits them one after the other: the goroutine that
// found the committer idle starts it when its own commit ends with writes
// queued, and it ends when a commit ends with none. So under load the
// next group begins as soon as a commit returns, without waiting for a
// woken request goroutine to be scheduled. A function that fails (or
// panics) does not fail the others: the group's transaction rolls back,
// the failing write gets its own error, and the transaction runs again
// without it — so a function may run more than once, as under DB.Batch.
// A write's caller learns the outcome only once the commit holding it
// has returned, that is once it is durable.
type committer struct {
	bolt *bbolt.DB

	pagesWritten int64 // bbolt's count of page writes, as of the last commit

	mu    sync.Mutex
	busy  bool     // a group is being committed
	next  []*write // writes that arrived during that commit: the next group
	stats commitStats
}

// commitStats counts what the committer did (tests and benchmarks).
type commitStats struct {
	Writes  int // functions submitted
	Queued  int // writes that found a commit running and waited for it
	Txs     int // bbolt write transactions begun, rolled-back retries included
	Commits int // transactions committed: each is one durable commit
}

// write is one Update's function and, once done is closed, its outcome.
type write struct {
	fn       func(*bbolt.Tx) error
	err      error
	panicked bool // fn panicked with panicVal
	panicVal any
	done     chan struct{}
}

// do runs fn in a write transaction, grouped with the writes that arrive
// while a commit is running, and returns fn's error, or the error of the
// begin or commit of its transaction. A panic of fn is raised again here.
func (c *committer) do(fn func(*bbolt.Tx) error) error {
	w := &write{fn: fn}
	writesTotal.Inc()
	c.mu.Lock()
	c.stats.Writes++
	if c.busy {
		c.stats.Queued++
		w.done = make(chan struct{})
		c.next = append(c.next, w)
		c.mu.Unlock()
		<-w.done
		return w.outcome()
	}
	c.busy = true
	c.mu.Unlock()

	c.commit([]*write{w})
	if next := c.takeNext(); len(next) > 0 {
		go c.drain(next)
	}
	return w.outcome()
}

// drain commits group, wakes its writes, and goes on with the writes
// that queued meanwhile until a commit ends with none queued.
func (c *committer) drain(group []*write) {
	for len(group) > 0 {
		c.commit(group)
		next := c.takeNext()
		for _, w := range group {
			close(w.done)
		}
		group = next
	}
}

// takeNext returns the writes queued during the commit that just ended,
// and marks the committer idle if there are none.
func (c *committer) takeNext() []*write {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.next
	c.next = nil
	c.busy = len(next) > 0
	return next
}

// commit runs the functions of group in one transaction and sets the
// outcome of each write; a failing function is taken out and the rest run
// again.
func (c *committer) commit(group []*write) {
	for len(group) > 0 {
		failed := -1
		err := c.update(func(btx *bbolt.Tx) error {
			for i, w := range group {
				if err := w.call(btx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		c.mu.Lock()
		c.stats.Txs++
		if err == nil {
			c.stats.Commits++
			commitsTotal.Inc()
		}
		c.mu.Unlock()
		// One group commits at a time, so the growth of bbolt's count is
		// this transaction's.
		st := c.bolt.Stats()
		if w := st.TxStats.GetWrite(); w > c.pagesWritten {
			pagesWrittenTotal.Add(int(w - c.pagesWritten))
			c.pagesWritten = w
		}
		if failed < 0 {
			for _, w := range group {
				w.err = err
			}
			return
		}
		group[failed].err = err
		group = append(group[:failed:failed], group[failed+1:]...)
	}
}

// update is bbolt's Update, with a panic of bbolt's own (a damaged page
// met while writing; the functions' panics are caught by call) turned
// into an error, which stops the store (DB.commitFailed) rather than the
// process: the group's callers are waiting for their outcome, perhaps in
// drain's goroutine. bbolt's Update rolls the transaction back on the
// way out.
func (c *committer) update(fn func(*bbolt.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bbolt panicked during the write transaction: %v", p)
		}
	}()
	return c.bolt.Update(fn)
}

// call runs the write's function, turning a panic into an error.
func (w *write) call(btx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			w.panicked, w.panicVal = true, p
			err = errPanicked
		}
	}()
	return w.fn(btx)
}

// outcome returns the write's error, or raises its function's panic in
// the caller's goroutine.
func (w *write) outcome() error {
	if w.panicked {
		panic(w.panicVal)
	}
	return w.err
}

// snapshot returns the counts so far.
func (c *committer) snapshot() commitStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// The store's counters in /metrics: write transactions asked for (each
// Update), bbolt commits (each two fdatasyncs: the pages, then the meta
// page) and pages written by them. Writes ÷ commits is how many writes a
// commit carries.
var (
	writesTotal       = metrics.NewCounter(`paystate_store_write_transactions_total`)
	commitsTotal      = metrics.NewCounter(`paystate_store_commits_total`)
	pagesWrittenTotal = metrics.NewCounter(`paystate_store_pages_written_total`)
)

// errPanicked rolls back the transaction of a function that panicked.
var errPanicked = errors.New("the function panicked")
