package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/backoff"
	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// DefaultMaxConns is the default size of the connection pool. Fewer
// connections cost PostgreSQL less CPU per transaction on a small host
// shared with it, but fewer commits then share a WAL flush
// (docs/postgresql.md, "Connections", has both measured).
const DefaultMaxConns = 16

// maxAttempts bounds how often Update runs a function whose transaction
// failed to serialize (SQLSTATE 40001) or was chosen as a deadlock victim
// (40P01) before it gives up with EUNAVAILABLE.
const maxAttempts = 50

// Options configure Open. The zero value is ready to use.
type Options struct {
	// Now returns the current time. Each transaction reads it once, when
	// it begins (again on each retry), and converts it to UTC: Tx.Now. It
	// must be safe for concurrent use. Default time.Now.
	Now func() time.Time

	// MaxConns is the most connections the pool opens to PostgreSQL.
	// Default DefaultMaxConns.
	MaxConns int

	// Logger receives the migrations applied at Open and the retries of
	// Update. The zero value logs nothing.
	Logger zerolog.Logger

	// Tracer, if set, sees every statement of the pool's connections
	// (tests count a webhook's statements with it).
	Tracer pgx.QueryTracer
}

// DB is the PostgreSQL store: a pool of connections to one database (the
// first schema of the DSN's search_path), safe for concurrent use and for
// several processes on the same database. It implements store.Store.
type DB struct {
	pool     *pgxpool.Pool
	now      func() time.Time
	logger   zerolog.Logger
	migrated int
	fanOut   atomic.Pointer[fanOut]

	updates, attempts, retries, commits atomic.Int64
}

// Stats are counts of one DB's write transactions since Open.
type Stats struct {
	Updates  int64 // calls of Update
	Attempts int64 // transactions Update began: each call, and each retry
	Retries  int64 // attempts that PostgreSQL could not serialize or that lost a deadlock, run again
	Commits  int64 // attempts that committed
}

// Stats returns the counts of the DB's write transactions.
func (db *DB) Stats() Stats {
	return Stats{Updates: db.updates.Load(), Attempts: db.attempts.Load(), Retries: db.retries.Load(), Commits: db.commits.Load()}
}

// Counters of every DB of the process; the bbolt store's are
// paystate_store_*, these paystate_store_pg_*.
var (
	attemptsTotal = metrics.NewCounter(`paystate_store_pg_transactions_total`)
	retriesTotal  = metrics.NewCounter(`paystate_store_pg_retries_total`)
	commitsTotal  = metrics.NewCounter(`paystate_store_pg_commits_total`)
)

var _ store.Store = (*DB)(nil)

// Open connects to the database at dsn (a PostgreSQL URL or key=value
// string that pgx reads; a search_path parameter picks the schema), applies
// the migrations it lacks under an advisory lock (migrate) and returns the
// store. A database that cannot be reached is EUNAVAILABLE; one with a
// newer schema than SchemaVersion is refused. opts may be nil.
func Open(ctx context.Context, dsn string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Now = defaults.Clock(o.Now)
	o.MaxConns = defaults.Or(o.MaxConns, DefaultMaxConns)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err) // pgconn redacts the password
	}
	cfg.MaxConns = int32(min(o.MaxConns, 1<<30))
	if o.Tracer != nil {
		cfg.ConnConfig.Tracer = o.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", classify("connect", err, true))
	}
	found, applied, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: migrate: %w", err)
	}
	logger := o.Logger.With().Str("component", "store").Logger()
	if applied > 0 {
		logger.Info().Int("from", found).Int("to", found+applied).Msg("schema migrated")
	}
	return &DB{pool: pool, now: o.Now, logger: logger, migrated: applied}, nil
}

// Migrated returns how many migrations Open applied: 0 unless the
// database was older than SchemaVersion and this Open got the lock first.
func (db *DB) Migrated() int { return db.migrated }

// Close closes every connection of the pool, after the transactions in
// progress end. A closed DB refuses transactions with EUNAVAILABLE.
// Closing a closed DB does nothing.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// View runs fn in a REPEATABLE READ READ ONLY transaction: one snapshot
// for all its reads. Callbacks fn registers with Tx.OnCommit run after it
// returns nil, so code that registers them works the same in View and
// Update. fn's error is returned as it is.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return classify("begin read", err, true)
	}
	defer conn.Release()
	t := db.begin(ctx, conn.Conn(), false)
	defer t.end()
	fnErr := fn(t)
	if fnErr == nil && t.failed != nil {
		fnErr = t.failed
	}
	if fnErr != nil {
		return fnErr
	}
	if err := t.commit(); err != nil {
		return classify("end read", err, false)
	}
	for _, f := range t.onCommit {
		f()
	}
	return nil
}

// Update runs fn in a READ COMMITTED transaction and commits it if fn
// returns nil; fn's error is returned as it is and rolls everything back.
// Each Tx method that reads a record to be written locks it by its row,
// held until the transaction ends (a record that does not exist yet is
// decided by its unique key), so two Updates, of this process or another, that
// touch the same record take turns and the later one reads what the
// earlier one committed: callers that read a record and then write
// (compare-and-set, claiming an idempotency key, taking a lease,
// crediting points) need no locks of their own (doc.go, Transactions).
// The writes fn queued are sent in one round trip before the commit. When PostgreSQL picks the
// transaction as a deadlock's victim (40P01), or cannot serialize it
// (40001), whether while fn runs or at the commit, the transaction is
// rolled back and fn runs again on a new one, after a short random pause,
// up to maxAttempts times (then EUNAVAILABLE): fn may run more than once
// and must have no effect outside the transaction; use Tx.OnCommit. OnCommit callbacks run after the commit, in the order
// registered, only for the attempt that committed. A statement that failed
// aborts the transaction: later ones fail with the same error, and so
// does Update, even if fn returns nil. Failures to connect, begin or
// commit are EUNAVAILABLE (EDISKFULL for a full disk); a commit whose
// outcome is unknown (the connection broke during it) is EUNAVAILABLE and
// is not retried.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	db.updates.Add(1)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		db.attempts.Add(1)
		attemptsTotal.Inc()
		retry, err := db.try(ctx, fn)
		if !retry {
			return err
		}
		if attempt == maxAttempts {
			return &unavailableError{op: fmt.Sprintf("update: %d attempts deadlocked or did not serialize", attempt), err: err, busy: true}
		}
		db.retries.Add(1)
		retriesTotal.Inc()
		db.logger.Debug().Err(err).Int("attempt", attempt).Msg("transaction retried")
		// Back off for a random time below 0.25 ms · 2^attempt (at most
		// 32 ms), so that transactions that collided do not collide again.
		pause := time.Duration(rand.Int64N(int64(250*time.Microsecond) << min(attempt, 7)))
		if backoff.Sleep(ctx, pause) != nil {
			return ctx.Err()
		}
	}
}

// try runs fn once in a new transaction and reports whether it failed in a
// way that another attempt may not (retry).
func (db *DB) try(ctx context.Context, fn func(store.Tx) error) (retry bool, err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		err = classify("begin", err, true)
		return isRetryable(err), err
	}
	defer conn.Release()
	t := db.begin(ctx, conn.Conn(), true)
	defer t.end()
	fnErr := fn(t)
	if fnErr == nil {
		// The writes fn queued, and the commit, in one round trip.
		fnErr = t.commit()
	}
	if t.failed != nil && (fnErr == nil || isRetryable(t.failed)) {
		// A statement failed: the transaction is aborted. If PostgreSQL
		// could not serialize it, what fn made of the error does not
		// matter: run it again.
		fnErr = t.failed
	}
	if fnErr != nil {
		return isRetryable(fnErr) && t.failed != nil, fnErr
	}
	db.commits.Add(1)
	commitsTotal.Inc()
	for _, f := range t.onCommit {
		f()
	}
	return false, nil
}

// begin starts a transaction on conn; the clock is read here, once. The
// BEGIN is queued: it goes to PostgreSQL with the transaction's first
// statement, in one round trip.
func (db *DB) begin(ctx context.Context, conn *pgx.Conn, writable bool) *tx {
	t := &tx{ctx: ctx, conn: conn, now: db.now().UTC(), writable: writable}
	if writable {
		t.queued = []queuedWrite{{op: "begin", sql: `BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE`}}
		t.fanOut = db.fanOut.Load()
	} else {
		t.queued = []queuedWrite{{op: "begin read", sql: `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`}}
	}
	return t
}

// fanOut is what SetFanOut was given.
type fanOut struct {
	deliveries func(r pay.OutboxRecord, now time.Time) []pay.Delivery
	committed  func([]pay.Delivery)
}

// SetFanOut makes every later AppendOutbox write the deliveries that
// deliveries gives for the record (due at the transaction's time; their
// EventSeq is the record's) in the statement that appends it, and mark
// the record fanned out: the ripple workers then claim due deliveries,
// never the record. Once a transaction that wrote deliveries this way
// has committed, committed (if not nil) receives them, as stored but with
// EventSeq 0 (the Seq is the transaction's id, which the process does not
// read), on the goroutine that committed, before Update returns: the
// instance that wrote them claims them by id (ripple). The ripple service
// sets it (ripple.New): a record's targets are the configuration's.
// Records appended before, or by a process that did not set it, are
// fanned out by the workers (ClaimUnfanned). A nil deliveries turns it
// off.
func (db *DB) SetFanOut(deliveries func(r pay.OutboxRecord, now time.Time) []pay.Delivery, committed func([]pay.Delivery)) {
	if deliveries == nil {
		db.fanOut.Store(nil)
		return
	}
	db.fanOut.Store(&fanOut{deliveries: deliveries, committed: committed})
}

// retryableError is a transaction that PostgreSQL could not serialize or
// that lost a deadlock: Update runs its function again. Its code, should
// fn look, is ECONFLICT.
type retryableError struct {
	op  string
	err *pgconn.PgError
}

// Error returns the operation and PostgreSQL's message.
func (e *retryableError) Error() string { return e.op + ": " + e.err.Error() }

// Unwrap returns the PostgreSQL error and a *pay.Error with code
// ECONFLICT.
func (e *retryableError) Unwrap() []error {
	return []error{e.err, &pay.Error{Code: pay.ECONFLICT, Message: "a concurrent transaction conflicted; retry"}}
}

// isRetryable reports whether err is (or wraps) a retryableError.
func isRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

// conflictError is a write that a unique index refused because another
// transaction wrote the same key first: ECONFLICT, as the bbolt store
// answers a record that exists.
type conflictError struct {
	op  string
	err *pgconn.PgError
}

// Error returns the operation and PostgreSQL's message.
func (e *conflictError) Error() string { return e.op + ": " + e.err.Error() }

// Unwrap returns the PostgreSQL error and a *pay.Error with code
// ECONFLICT.
func (e *conflictError) Unwrap() []error {
	return []error{e.err, &pay.Error{Code: pay.ECONFLICT, Message: "the record exists already"}}
}

// unavailableError is a storage failure that is not the caller's fault:
// PostgreSQL cannot be reached or refuses work (shutting down, read-only,
// out of connections or disk), the pool is closed, or transactions keep
// conflicting (busy). Its code is EUNAVAILABLE (EDISKFULL for a full disk)
// and its client-safe message names no host, user or database.
type unavailableError struct {
	op   string
	err  error
	full bool // the disk is full: EDISKFULL
	busy bool // Update gave up after maxAttempts
}

// Error returns the operation and the cause.
func (e *unavailableError) Error() string { return e.op + ": " + e.err.Error() }

// Unwrap returns the cause and the *pay.Error of the code.
func (e *unavailableError) Unwrap() []error {
	switch {
	case e.full:
		return []error{e.err, &pay.Error{Code: pay.EDISKFULL, Message: "storage is full; retry later"}}
	case e.busy:
		return []error{e.err, &pay.Error{Code: pay.EUNAVAILABLE, Message: "storage is busy; retry later"}}
	}
	return []error{e.err, &pay.Error{Code: pay.EUNAVAILABLE, Message: "storage is unavailable"}}
}

// classify turns an error of pgx into the error a caller sees: the
// context's own error as it is; a serialization failure or a deadlock as a
// retryableError; a PostgreSQL error that says the server cannot do the
// work now, or any error of the connection (connect, network, closed
// pool), as an unavailableError; bad text as EINVALID; anything else as an
// internal error wrapped with op. conn says that err came from connecting,
// beginning or committing, where a failure that is not PostgreSQL's answer
// is the connection's.
func classify(op string, err error, conn bool) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01",
			// Two appends to one timeline that took the same Seq: the
			// later one runs again and takes the next.
			pe.Code == "23505" && pe.ConstraintName == "timeline_pkey":
			return &retryableError{op: op, err: pe}
		case pe.Code == "23505": // unique_violation
			return &conflictError{op: op, err: pe}
		case pe.Code == "53100": // disk_full
			return &unavailableError{op: op, err: err, full: true}
		case pe.Code[:2] == "08", pe.Code[:2] == "53", pe.Code[:2] == "57", // connection, resources, operator
			pe.Code == "25006",                                         // read_only_sql_transaction: a standby
			pe.Code == "3D000", pe.Code == "28000", pe.Code == "28P01": // no such database, authentication
			return &unavailableError{op: op, err: err}
		case pe.Code == "22021" || pe.Code == "22P05" || pe.Code == "54000":
			return pay.Errorf(pay.EINVALID, "a value cannot be stored: %s", pe.Message)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	switch {
	case conn, errors.As(err, &ne), errors.As(err, &ce), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), pgconn.Timeout(err):
		return &unavailableError{op: op, err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}
