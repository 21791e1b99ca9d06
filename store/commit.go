package store

import (
	"errors"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	bolt "go.etcd.io/bbolt"
)

// committer groups the write transactions of concurrent Updates without a
// fixed delay (bbolt's DB.Batch waits MaxBatchDelay for company; a lone
// write here commits at once). A write that finds the committer idle
// commits in its own goroutine, alone, in one bbolt transaction. Writes
// that arrive while a commit runs queue up and form the next group: when
// the commit ends, the first of them leads that group, running every
// function of it in one transaction with one commit (one fsync of pages,
// one of the meta page), and the others wait for its result. A function
// that fails (or panics) does not fail the others: the group's
// transaction rolls back, the failing write gets its own error, and the
// transaction runs again without it — so a function may run more than
// once, as under DB.Batch. A write's caller learns the outcome only once
// the commit holding it has returned, that is once it is durable.
type committer struct {
	bolt *bolt.DB

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
	fn       func(*bolt.Tx) error
	err      error
	panicked bool // fn panicked with panicVal
	panicVal any
	lead     []*write // set before done is closed: lead this group
	done     chan struct{}
}

// do runs fn in a write transaction, grouped with the writes that arrive
// while a commit is running, and returns fn's error, or the error of the
// begin or commit of its transaction. A panic of fn is raised again here.
func (c *committer) do(fn func(*bolt.Tx) error) error {
	w := &write{fn: fn, done: make(chan struct{})}
	writesTotal.Inc()
	c.mu.Lock()
	c.stats.Writes++
	group := []*write{w}
	if c.busy {
		c.stats.Queued++
		c.next = append(c.next, w)
		c.mu.Unlock()
		<-w.done
		if w.lead == nil {
			return w.outcome()
		}
		group = w.lead
	} else {
		c.busy = true
		c.mu.Unlock()
	}

	c.commit(group)

	// Hand the next group to its first write, then wake this group.
	c.mu.Lock()
	next := c.next
	c.next = nil
	c.busy = len(next) > 0
	c.mu.Unlock()
	if len(next) > 0 {
		next[0].lead = next
		close(next[0].done)
	}
	for _, o := range group {
		if o != w {
			close(o.done)
		}
	}
	return w.outcome()
}

// commit runs the functions of group in one transaction and sets the
// outcome of each write; a failing function is taken out and the rest run
// again.
func (c *committer) commit(group []*write) {
	for len(group) > 0 {
		failed := -1
		err := c.bolt.Update(func(btx *bolt.Tx) error {
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

// call runs the write's function, turning a panic into an error.
func (w *write) call(btx *bolt.Tx) (err error) {
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
