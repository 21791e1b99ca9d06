package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/paystate/paystate/pay"
)

// DefaultTimeout is how long Open waits by default for a database file that
// another process holds.
const DefaultTimeout = time.Second

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
}

// DB is the bbolt store: one file, safe for concurrent use. It implements
// pay.Store.
type DB struct {
	bolt *bolt.DB
	path string
	now  func() time.Time
}

var _ pay.Store = (*DB)(nil)

// Open opens (or creates) the database file at path, creates every bucket
// and checks the schema version. Another process holding the file makes it
// fail after Options.Timeout with an error saying the database is locked
// (it wraps go.etcd.io/bbolt/errors.ErrTimeout). opts may be nil.
func Open(path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}

	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: o.Timeout, ReadOnly: o.ReadOnly,
		// As etcd does: the freelist is rebuilt at open instead of being
		// written on every commit, and kept as a hashmap.
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: database is locked by another process (waited %s): %w", path, o.Timeout, err)
	} else if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	bdb.MaxBatchDelay = 2 * time.Millisecond
	if o.ReadOnly {
		err = bdb.View(checkSchema)
	} else {
		err = bdb.Update(initSchema)
	}
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &DB{bolt: bdb, path: path, now: o.Now}, nil
}

// initSchema checks the schema version of an existing database, then
// creates every bucket that is missing and records the version.
func initSchema(btx *bolt.Tx) error {
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
	return nil
}

// checkSchema is initSchema for a read-only database: everything must be
// there already.
func checkSchema(btx *bolt.Tx) error {
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
		return fmt.Errorf("database schema version %d has no migration to %d", n, SchemaVersion)
	}
	return nil
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// Close closes the database file. Transactions still running finish first.
func (db *DB) Close() error {
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("close db: %w", err)
	}
	return nil
}

// View runs fn in a read-only transaction. Callbacks fn registers with
// Tx.OnCommit run after it returns nil (nothing commits, but nothing failed
// either), so code that registers them works the same in View and Update.
func (db *DB) View(ctx context.Context, fn func(pay.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		t     *tx
		fnErr error
	)
	err := db.bolt.View(func(btx *bolt.Tx) error {
		t = db.begin(btx)
		fnErr = fn(t)
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
// transaction begins (a bbolt transaction cannot be interrupted). OnCommit callbacks run after the
// commit, in the order registered; if fn fails or the commit fails they
// never run. A failure to begin or commit (disk full, read-only file or
// file system, closed database) is an EUNAVAILABLE error that wraps the
// cause.
//
// fn has no effect outside the transaction except through OnCommit, so
// Update may later group commits with bbolt's DB.Batch, which can run fn
// more than once.
func (db *DB) Update(ctx context.Context, fn func(pay.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		callbacks []func()
		began     bool
		fnErr     error
	)
	err := db.bolt.Batch(func(btx *bolt.Tx) error {
		began = true
		t := db.begin(btx)
		if fnErr = fn(t); fnErr != nil {
			return fnErr
		}
		callbacks = t.onCommit
		return nil
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil && !began:
		return unavailable("begin", err)
	case err != nil:
		return unavailable("commit", err)
	}
	for _, f := range callbacks {
		f()
	}
	return nil
}

// begin wraps a bbolt transaction; the clock is read here, once.
func (db *DB) begin(btx *bolt.Tx) *tx {
	return &tx{btx: btx, now: db.now().UTC()}
}

// WriteTo writes a consistent copy of the whole database to w, from one
// read transaction, while writers go on. The copy is a bbolt file that Open
// accepts.
func (db *DB) WriteTo(w io.Writer) (int64, error) {
	var n int64
	err := db.bolt.View(func(btx *bolt.Tx) error {
		var err error
		n, err = btx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}

// unavailableError is a storage failure that is not the caller's fault:
// the disk is full, the file or file system is read-only, the database is
// closed. Its code is EUNAVAILABLE and its message keeps the cause.
type unavailableError struct {
	op  string
	err error
}

func unavailable(op string, err error) error { return &unavailableError{op: op, err: err} }

// Error returns the operation and the cause.
func (e *unavailableError) Error() string { return e.op + ": " + e.err.Error() }

// Unwrap returns the cause and a *pay.Error with code EUNAVAILABLE, so that
// both errors.Is(err, syscall.ENOSPC) and pay.ErrorCode(err) work. The
// pay.Error's client-safe message names no file or device.
func (e *unavailableError) Unwrap() []error {
	return []error{e.err, &pay.Error{Code: pay.EUNAVAILABLE, Message: "storage is unavailable"}}
}
