package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// DefaultTimeout is how long Open waits by default for a database file that
// another process holds.
const DefaultTimeout = time.Second

// DefaultSnapshotTimeout bounds by default how long Snapshot may hold its
// read transaction while it copies the database to a local file.
const DefaultSnapshotTimeout = time.Minute

// Options configure Open. The zero value is ready to use.
type Options struct {
	// Now returns the current time. Each transaction reads it once, when it
	// begins, and converts it to UTC. It must be safe for concurrent use.
	// Default time.Now.
	Now func() time.Time

	// Timeout is how long Open waits for the file lock before it fails
	// with a "database is locked" error. Default DefaultTimeout.
	Timeout time.Duration

	// ReadOnly opens the file with a shared lock and no writes (tools such
	// as verify). Update then fails with EUNAVAILABLE. The database must
	// already exist with every bucket.
	ReadOnly bool

	// OnFatal is called once, with the cause, when a commit fails in a way
	// that may leave the file out of step with what this process has seen:
	// a failed fsync (whatever its errno: after one, the kernel may have
	// dropped the pages it could not write), an I/O error, anything but a
	// write refused for want of space or on a read-only file system. From
	// then on every transaction fails with EUNAVAILABLE. The caller should
	// log the error and exit non-zero, as etcd and PostgreSQL do; a restart
	// reads what is really on disk. It runs in the goroutine whose commit
	// failed, after its transaction ended. Default: none (the store only
	// refuses further transactions).
	OnFatal func(error)

	// SnapshotTimeout bounds how long Snapshot (and WriteTo) may hold the
	// read transaction of its copy. Default DefaultSnapshotTimeout.
	SnapshotTimeout time.Duration
}

// DB is the bbolt store: one file, safe for concurrent use. It implements
// store.Store.
type DB struct {
	bolt    *bbolt.DB
	commits committer
	path    string
	now     func() time.Time

	snapshotTimeout time.Duration
	checkedPages    int // pages checkFile read at open
	migrated        int // values Open rewrote to the current schema
	onFatal         func(error)
	fatalOnce       sync.Once
	fatal           atomic.Pointer[error] // the commit failure that stopped the store
}

var _ store.Store = (*DB)(nil)

// Open opens (or creates) the database file at path, creates every bucket
// and checks the schema version. Another process holding the file makes it
// fail after Options.Timeout with an error that wraps store.ErrLocked. A damaged
// file (truncated, a bad meta page, a page that does not hold what points
// to it) is refused with an error that wraps ErrDamaged and says to
// restore from a backup; the file is read before bbolt maps it
// (checkFile), so that such a file never crashes the process. After a
// clean Close that read is a few pages, whatever the file's size; after a
// crash it is every page in use. Every error names the file once, in its
// prefix "open database <path>: ". opts may be nil.
func Open(path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Now = defaults.Clock(o.Now)
	o.Timeout = defaults.Or(o.Timeout, DefaultTimeout)
	o.SnapshotTimeout = defaults.Or(o.SnapshotTimeout, DefaultSnapshotTimeout)
	bdb, checked, migrated, err := openBolt(path, o)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db := &DB{bolt: bdb, path: path, now: o.Now, snapshotTimeout: o.SnapshotTimeout, checkedPages: checked, migrated: migrated, onFatal: o.OnFatal}
	db.commits.bolt = bdb
	return db, nil
}

// openBolt checks the file, opens it with bbolt and checks or creates the
// schema. Should bbolt still fault on the file (it changed after the
// check), the fault becomes a panic (debug.SetPanicOnFault), and a panic
// of bbolt's here becomes ErrDamaged: a bad file is one line, never a
// stack dump.
func openBolt(path string, o Options) (bdb *bbolt.DB, checked, migrated int, err error) {
	if checked, err = checkFile(path, o.ReadOnly, o.Timeout); err != nil {
		return nil, checked, 0, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if bdb != nil {
				_ = bdb.Close()
			}
			bdb, err = nil, damaged("bbolt failed reading it: %v", r)
		}
	}()

	bdb, err = bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout: o.Timeout, ReadOnly: o.ReadOnly,
		// As etcd does: the freelist is not written on every commit, and
		// kept as a hashmap. Close writes it (markClean), so that the next
		// open reads it; after a crash bbolt rebuilds it from every page.
		NoFreelistSync: true, FreelistType: bbolt.FreelistMapType,
	})
	var pe *fs.PathError
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, checked, 0, fmt.Errorf("%w (waited %s): %w", store.ErrLocked, o.Timeout, err)
	case errors.As(err, &pe) && pe.Path == path:
		return nil, checked, 0, pe.Err // the prefix names the file already
	case err != nil:
		return nil, checked, 0, err
	}

	if o.ReadOnly {
		err = bdb.View(checkSchema)
	} else if migrated, err = migrate(bdb, o.Now); err == nil {
		err = bdb.Update(func(btx *bbolt.Tx) error {
			if err := initSchema(btx); err != nil {
				return err
			}
			return fillPaymentDisputes(btx)
		})
	}
	if err != nil {
		_ = bdb.Close()
		return nil, checked, 0, err
	}
	return bdb, checked, migrated, nil
}

// initSchema checks the schema version of an existing database, then
// creates every bucket that is missing and records the version. It
// removes the record of a clean shutdown: from now on only the next clean
// Close may skip the check at open.
func initSchema(btx *bbolt.Tx) error {
	if meta := btx.Bucket(bucketMeta); meta != nil {
		if err := checkVersion(meta.Get(keySchemaVersion)); err != nil {
			return err
		}
	} else if k, _ := btx.Cursor().First(); k != nil {
		return fmt.Errorf("not a paystate database: it has buckets but no %s bucket", bucketMeta)
	}
	for _, name := range allBuckets {
		if _, err := btx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	meta := btx.Bucket(bucketMeta)
	if meta.Get(keySchemaVersion) == nil {
		if err := meta.Put(keySchemaVersion, be64(SchemaVersion)); err != nil {
			return fmt.Errorf("put schema version: %w", err)
		}
	}
	if err := meta.Delete(keyCleanShutdown); err != nil {
		return fmt.Errorf("delete clean shutdown: %w", err)
	}
	return nil
}

// checkSchema is initSchema for a read-only database: everything must be
// there already.
func checkSchema(btx *bbolt.Tx) error {
	meta := btx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("not a paystate database: no %s bucket", bucketMeta)
	}
	if err := checkVersion(meta.Get(keySchemaVersion)); err != nil {
		return err
	}
	for _, name := range allBuckets {
		if btx.Bucket(name) == nil {
			return fmt.Errorf("bucket %s is missing", name)
		}
	}
	return nil
}

// checkVersion checks a stored schema version; nil means a new database.
func checkVersion(v []byte) error {
	if v == nil {
		return nil
	}
	if len(v) != 8 {
		return fmt.Errorf("schema version: %d bytes, want 8", len(v))
	}
	switch n := binary.BigEndian.Uint64(v); {
	case n > SchemaVersion:
		return fmt.Errorf("database schema version %d is newer than this binary knows (%d): run a newer paystate", n, SchemaVersion)
	case n < SchemaVersion:
		return fmt.Errorf("database schema version %d is older than this binary's (%d): open it once for writing (paystate serve) to migrate it", n, SchemaVersion)
	}
	return nil
}

// Migrated returns how many stored values and keys Open rewrote from an
// older schema to SchemaVersion: 0 unless the file was older.
func (db *DB) Migrated() int { return db.migrated }

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// Close closes the database file. Transactions still running finish
// first. A writable store that has not stopped ends with one more write
// transaction that records a clean shutdown (markClean), so that the next
// Open checks a few pages instead of all of them. Should that write be
// refused (a full disk, a read-only file system), the next Open checks
// every page, as after a crash; should its commit fail in a way that
// stops the store (Options.OnFatal), Close still closes the file and
// returns that error. Closing a closed DB does nothing.
func (db *DB) Close() error {
	var (
		mtime   time.Time
		markErr error
	)
	if !db.bolt.IsReadOnly() && db.stopped() == nil {
		if mtime, markErr = db.markClean(); db.stopped() == nil {
			markErr = nil // refused, nothing written, or closed already
		}
	}
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("close db: %w", errors.Join(markErr, err))
	}
	if markErr != nil {
		return fmt.Errorf("close db: record a clean shutdown: %w", markErr)
	}
	if !mtime.IsZero() {
		// Should this fail, the next Open finds another time and checks
		// every page, as after a crash.
		_ = os.Chtimes(db.path, mtime, mtime)
	}
	return nil
}

// markClean is Close's last transaction: it writes bbolt's freelist (so
// that the next open reads it instead of walking every page) and records
// meta "clean_shutdown" (see checkFile): its own transaction id and the
// modification time Close gives the file once closed, which it returns.
func (db *DB) markClean() (time.Time, error) {
	mtime := time.Now().Round(0)
	err := db.update(context.Background(), nil, func(t *tx) error {
		btx := t.btx
		// Read by bbolt only while committing, under the write lock that
		// this transaction holds.
		db.bolt.NoFreelistSync = false
		v := append(be64(uint64(btx.ID())), be64(uint64(mtime.UnixNano()))...)
		return btx.Bucket(bucketMeta).Put(keyCleanShutdown, v)
	})
	if err != nil {
		return time.Time{}, err
	}
	return mtime, nil
}

// View runs fn in a read-only transaction. Callbacks fn registers with
// Tx.OnCommit run after it returns nil (nothing commits, but nothing failed
// either), so code that registers them works the same in View and Update.
// After a fatal commit failure (Options.OnFatal) View fails with
// EUNAVAILABLE: what bbolt would read may not be on disk.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	return db.view(ctx, fn, nil)
}

// view is View of fn, or of own: a function of this package, which uses
// the transaction's own methods. Only one is set.
func (db *DB) view(ctx context.Context, fn func(store.Tx) error, own func(*tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.stopped(); err != nil {
		return err
	}
	var (
		t     *tx
		fnErr error
	)
	err := db.bolt.View(func(btx *bbolt.Tx) error {
		t = db.begin(btx)
		if own != nil {
			fnErr = own(t)
		} else {
			fnErr = fn(t)
		}
		return fnErr
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil:
		return unavailable("begin read", err)
	}
	for _, f := range t.onCommit {
		f()
	}
	return nil
}

// Update runs fn in a read-write transaction and commits it if fn returns
// nil; fn's error is returned as it is. ctx is checked before the
// transaction begins (a bbolt transaction cannot be interrupted).
// OnCommit callbacks run after the commit, in the order registered; if fn fails or the commit fails they
// never run. A failure to begin or commit is an error that wraps the
// cause: EDISKFULL when a write was refused for want of space (nothing of
// the transaction is in force, and a retry succeeds once space is freed),
// EUNAVAILABLE otherwise (read-only file or file system, closed database).
// Any other commit failure (a failed fsync, an I/O error) stops the store:
// Options.OnFatal is called and every later transaction fails with
// EUNAVAILABLE.
//
// Concurrent Updates share commits (see committer): one that finds no
// commit running commits at once; those that arrive during a commit are
// committed together in the next one. Update returns once the commit
// holding fn's writes is durable. fn has no effect outside the
// transaction except through OnCommit, for it may run more than once:
// when another function of its group fails, the group's transaction rolls
// back and runs again without that one, whose error goes to its caller
// only.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	return db.update(ctx, fn, nil)
}

// update is Update of fn, or of own (view).
func (db *DB) update(ctx context.Context, fn func(store.Tx) error, own func(*tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.stopped(); err != nil {
		return err
	}
	// What the write's function shares with this call, in one object: the
	// function may run in the committer's goroutine, so what it sets
	// lives on the heap, and one allocation costs less than one a
	// variable.
	r := &updateRun{}
	err := db.commits.do(func(btx *bbolt.Tx) error {
		r.began = true
		t := db.begin(btx)
		if own != nil {
			r.fnErr = own(t)
		} else {
			r.fnErr = fn(t)
		}
		if r.fnErr != nil {
			return r.fnErr
		}
		r.callbacks = t.onCommit
		return nil
	})
	switch {
	case r.fnErr != nil:
		return r.fnErr
	case err != nil && !r.began:
		return unavailable("begin", err)
	case err != nil:
		return db.commitFailed(err)
	}
	for _, f := range r.callbacks {
		f()
	}
	return nil
}

// updateRun is what one update's function reports to it.
type updateRun struct {
	callbacks []func() // the transaction's OnCommit callbacks
	began     bool     // the function ran: a transaction began
	fnErr     error
}

// commitFailed classifies a failed commit (see Update) and returns its
// error.
func (db *DB) commitFailed(err error) error {
	refused, full := refusedWrite(err)
	switch {
	case full:
		return &unavailableError{op: "commit", err: err, code: pay.EDISKFULL}
	case refused || errors.Is(err, berrors.ErrDatabaseNotOpen) || errors.Is(err, berrors.ErrDatabaseReadOnly):
		return unavailable("commit", err)
	}
	db.fatalOnce.Do(func() {
		db.fatal.Store(&err)
		if db.onFatal != nil {
			cause := err
			if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == db.path {
				cause = fmt.Errorf("%s: %w", pe.Op, pe.Err)
			}
			db.onFatal(fmt.Errorf("commit to database %s failed, the file may not hold what was committed: %w", db.path, cause))
		}
	})
	return unavailable("commit", err)
}

// stopped returns the error of every transaction after a fatal commit
// failure, nil before.
func (db *DB) stopped() error {
	if cause := db.fatal.Load(); cause != nil {
		return unavailable("stopped after a failed commit", *cause)
	}
	return nil
}

// refusedWrite reports whether a commit failed because a write or an
// extension of the file was refused before anything reached the disk, and
// whether for want of space (ENOSPC, EDQUOT, EFBIG) rather than a
// read-only file system (EROFS). bbolt writes its pages with WriteAt (an
// *fs.PathError "write") and grows the file with Truncate, whose error it
// formats with %s ("file resize error: truncate ...: <errno text>"). A
// failed fsync is never one of these, whatever its errno: bbolt returns
// fdatasync's bare errno, or "file sync error: ...".
func refusedWrite(err error) (refused, full bool) {
	var errno syscall.Errno
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && (pe.Op == "write" || pe.Op == "truncate") && errors.As(pe.Err, &errno):
	case strings.HasPrefix(err.Error(), "file resize error: "):
		for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EROFS} {
			if strings.HasSuffix(err.Error(), e.Error()) {
				errno = e
			}
		}
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return true, true
	case syscall.EROFS:
		return true, false
	}
	return false, false
}

// begin wraps a bbolt transaction; the clock is read here, once.
func (db *DB) begin(btx *bbolt.Tx) *tx {
	return &tx{btx: btx, now: db.now().UTC()}
}

// Snapshot writes a consistent copy of the whole database, a bbolt file
// that Open accepts, to a temporary file and returns the copy open for
// reading, with its size. The read transaction of the copy ends as soon as
// the copy is written, within Options.SnapshotTimeout (else the copy
// fails), so streaming the copy to a slow client holds no transaction: a
// writer that grows the file, which must wait until every read transaction
// has ended before bbolt maps the file again, is not held up by the
// client. The file is made in the database's directory (os.TempDir() if
// that cannot be written) and is removed when the reader is closed; on
// Linux and other Unix systems its name is removed as soon as it is made,
// so a crash leaves nothing behind. No room for the copy is EDISKFULL.
func (db *DB) Snapshot() (io.ReadCloser, int64, error) {
	if err := db.stopped(); err != nil {
		return nil, 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(db.path), filepath.Base(db.path)+".snapshot-*")
	if err != nil {
		if f, err = os.CreateTemp("", "paystate-snapshot-*"); err != nil {
			return nil, 0, fmt.Errorf("snapshot: %w", err)
		}
	}
	s := &snapshot{f: f}
	if runtime.GOOS != "windows" && os.Remove(f.Name()) == nil {
		s.removed = true
	}
	var n int64
	err = db.bolt.View(func(btx *bbolt.Tx) error {
		var err error
		n, err = btx.WriteTo(&deadlineWriter{w: f, deadline: time.Now().Add(db.snapshotTimeout)})
		return err
	})
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = s.Close()
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return nil, 0, &unavailableError{op: "snapshot", err: err, code: pay.EDISKFULL}
		}
		return nil, 0, fmt.Errorf("snapshot: %w", err)
	}
	return s, n, nil
}

// WriteTo writes a consistent copy of the whole database to w: a Snapshot,
// then the copy, so no read transaction is held while w takes it. The copy
// is a bbolt file that Open accepts.
func (db *DB) WriteTo(w io.Writer) (int64, error) {
	r, _, err := db.Snapshot()
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer r.Close()
	n, err := io.Copy(w, r)
	if err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}

// snapshot is the copy Snapshot returns: its Close removes the file.
type snapshot struct {
	f       *os.File
	removed bool
}

// Read reads the copy.
func (s *snapshot) Read(p []byte) (int, error) { return s.f.Read(p) }

// Close closes the copy and removes its file.
func (s *snapshot) Close() error {
	err := s.f.Close()
	if !s.removed {
		if rerr := os.Remove(s.f.Name()); err == nil {
			err = rerr
		}
		s.removed = true
	}
	return err
}

// errSnapshotTimeout ends a copy that holds its read transaction too long.
var errSnapshotTimeout = errors.New("the copy took longer than its timeout; writers that grow the file wait for it")

// deadlineWriter fails every write after its deadline.
type deadlineWriter struct {
	w        io.Writer
	deadline time.Time
}

// Write writes p, or fails once the deadline has passed.
func (d *deadlineWriter) Write(p []byte) (int, error) {
	if time.Now().After(d.deadline) {
		return 0, errSnapshotTimeout
	}
	return d.w.Write(p)
}

// unavailableError is a storage failure that is not the caller's fault:
// the disk is full, the file or file system is read-only, the database is
// closed or stopped. Its code is EUNAVAILABLE (EDISKFULL for a full disk)
// and its message keeps the cause.
type unavailableError struct {
	op   string
	err  error
	code string // "" means EUNAVAILABLE
}

func unavailable(op string, err error) error { return &unavailableError{op: op, err: err} }

// Error returns the operation and the cause.
func (e *unavailableError) Error() string { return e.op + ": " + e.err.Error() }

// Unwrap returns the cause and a *pay.Error with code EUNAVAILABLE (or
// EDISKFULL), so that both errors.Is(err, syscall.ENOSPC) and
// pay.ErrorCode(err) work. The pay.Error's client-safe message names no
// file or device.
func (e *unavailableError) Unwrap() []error {
	if e.code == pay.EDISKFULL {
		return []error{e.err, &pay.Error{Code: pay.EDISKFULL, Message: "storage is full; retry later"}}
	}
	return []error{e.err, &pay.Error{Code: pay.EUNAVAILABLE, Message: "storage is unavailable"}}
}
