package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/pay"
)

// ErrLocked is wrapped by the error Open returns when another process
// holds a store that only one process may use (a bbolt file) for longer
// than Config.Timeout.
var ErrLocked = errors.New("database is locked by another process")

// Config says which backend Open uses and how. A backend reads the
// fields it needs and ignores the others.
type Config struct {
	// Backend is the name a backend registered (Register): "bolt" or
	// "postgres" in paystate's build.
	Backend string
	// Path is the database file of a backend that keeps one (bolt).
	Path string
	// DSN is the connection string of a database server (postgres).
	DSN string
	// MaxConns caps a server backend's connections; 0 is its default.
	MaxConns int
	// ReadOnly opens a file for reading only, with a lock shared with
	// other readers (verify, backup, the source of a copy); a server
	// backend ignores it.
	ReadOnly bool
	// Timeout is how long Open waits for a file that another process
	// holds; 0 is the backend's default.
	Timeout time.Duration
	// Now is the clock of the store's transactions; default time.Now.
	Now func() time.Time
	// Logger receives what the backend logs (migrations, retries).
	Logger zerolog.Logger
	// OnFatal is called once when a commit failed in a way that may have
	// lost data (an fsync error): the caller exits. nil: the store only
	// refuses further transactions.
	OnFatal func(error)
}

// Backend is an open store and what its backend can do. A capability is
// declared, never found by type assertion: a nil field is one the
// backend does not have, and the caller says so (river's riverdriver).
type Backend struct {
	// Store is the storage every component uses.
	Store Store
	// Name is the backend's registered name.
	Name string
	// Migration says, in one line, what Open did to the schema: `paystate
	// migrate` prints it.
	Migration string

	// Shared reports that several paystate processes may use the store
	// at once (PostgreSQL). When false, this process is its only user
	// (bbolt holds a lock on its file): a lease in force or a key in
	// flight found at start is a dead process's.
	Shared bool
	// CheapEmptyCommit reports that a write transaction that wrote
	// nothing costs no flush (PostgreSQL), so a path may go straight to
	// its write transaction instead of reading first; bbolt's write
	// transactions queue behind one writer, and read first.
	CheapEmptyCommit bool

	// FanOut makes every later Outbox.AppendOutbox write the deliveries
	// that fanOut gives for the record, in the transaction that appends
	// it, and mark the record fanned out (PostgreSQL), and hands the
	// deliveries a transaction wrote, as stored (but their EventSeq, 0),
	// to committed once it has committed, on the committing goroutine:
	// ripple sets it, several instances then share no fan-out cursor, and
	// each instance delivers what its own transitions wrote. nil: the
	// ripple workers fan out from the cursor (bbolt).
	FanOut func(fanOut func(rec pay.OutboxRecord, now time.Time) []pay.Delivery, committed func([]pay.Delivery))
	// EndLeases ends every lease in force and reports how many: for a
	// store this process alone uses, at start, since leases in force are
	// then a dead process's. nil when Shared.
	EndLeases func(ctx context.Context) (int, error)
	// Backup takes a consistent copy of the database to a local file and
	// returns it open, with its size; closing it removes the file. nil
	// when the backend is backed up with its own tools (Driver.NoBackup).
	Backup Snapshotter
	// Check checks the database's pages and indexes: nil, a joined list
	// of findings (errors.Join), or another error when it could not run.
	// nil when the database server checks its own (PostgreSQL).
	Check func() error
	// CheckLedger sums every journal line per currency and returns the
	// currencies whose lines do not sum to zero. nil when the backend's
	// constraints keep the journal (verify still re-sums the balances).
	CheckLedger func(ctx context.Context) ([]LedgerImbalance, error)
	// Export reads every record for a copy into another backend; nil if
	// the backend cannot be copied from.
	Export Exporter
	// Import makes a sink that writes an export's records into this
	// store; nil if the backend cannot be copied into.
	Import func(ctx context.Context, opts ImportOptions) (Importer, error)
}

// Snapshotter takes a consistent copy of a database to a local file
// (Backend.Backup).
type Snapshotter interface {
	Snapshot() (io.ReadCloser, int64, error)
}

// LedgerImbalance is a currency whose journal lines do not sum to zero
// (Backend.CheckLedger).
type LedgerImbalance struct {
	Currency string
	Sum      int64 // what the lines sum to; meaningless when Overflow
	Overflow bool  // the sum left the int64 range on the way
	Lines    int   // journal lines in this currency
	// Problem, when set, is a journal line that does not decode (its
	// currency unknown): it is left out of the sums, which go on.
	Problem string
}

// String describes the imbalance for a report.
func (i LedgerImbalance) String() string {
	if i.Problem != "" {
		return i.Problem
	}
	if i.Overflow {
		return fmt.Sprintf("ledger in %s: the sum of %d lines overflows", i.Currency, i.Lines)
	}
	return fmt.Sprintf("ledger in %s: %d lines sum to %s, want 0", i.Currency, i.Lines, pay.FormatAmount(i.Sum, i.Currency))
}

// Driver is a backend (Register): how to open its store, and what can be
// known of it without opening one.
type Driver struct {
	// Open opens the backend's store.
	Open func(ctx context.Context, cfg Config) (*Backend, error)
	// NoBackup, when set, says that the backend has no online backup
	// (Backend.Backup is nil) and how it is backed up instead.
	NoBackup string
	// File says that the store is one file, at Config.Path, which Open
	// creates when it is absent.
	File bool
	// CopyInto says that a copy of another store may be written into
	// the backend (Backend.Import is set).
	CopyInto bool
}

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// Register makes a backend available to Open under name. A backend
// registers itself in its package's init (database/sql's drivers), and
// a program has the backends whose packages it links: paystate's are
// named in one file, daemon/backends.go. Registering a name twice, or a
// nil driver, panics.
func Register(name string, d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if d.Open == nil {
		panic("store: Register driver without Open")
	}
	if _, dup := drivers[name]; dup {
		panic("store: Register called twice for backend " + name)
	}
	drivers[name] = d
}

// Backends returns the registered backends' names, sorted.
func Backends() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns the driver registered under name. An unknown backend is
// an error naming storage.backend and the backends of the build.
func Lookup(name string) (Driver, error) {
	driversMu.RLock()
	d, ok := drivers[name]
	driversMu.RUnlock()
	if !ok {
		return Driver{}, fmt.Errorf("storage.backend %q is not available in this build (it has %s)", name, strings.Join(Backends(), ", "))
	}
	return d, nil
}

// Open opens the store of cfg.Backend (Lookup).
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	d, err := Lookup(cfg.Backend)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	b, err := d.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.Name = cfg.Backend
	return b, nil
}
