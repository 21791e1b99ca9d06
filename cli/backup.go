package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/store"
)

// runBackup is `paystate backup -db FILE -o OUT`: a consistent copy of the
// database. The database is -db, else the storage.path of -config, else
// ./paystate.db. A stopped database is copied directly: store.Backend.Backup
// takes the copy (a read transaction as short as the copy) and then
// writes it out. A running paystate holds the file's lock; then the copy
// is streamed from its GET /admin/backup, which takes its copy the same
// way before it streams, at -url or at the server.listen of -config
// (default: the embedded defaults; a wildcard address is reached on
// loopback), with the API key from -api-key or PAYSTATE_API_KEY.
//
// OUT is checked before anything is written (checkBackupTarget): absent
// or a regular file, neither the database being copied nor the database
// of a running paystate. The copy goes to a new temporary file beside
// OUT, is synced, checked to open as a paystate database and to pass
// DB.Check, and only then renamed over OUT. A damaged database file is
// refused in one line.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backup", "backup [-db FILE | -config FILE] -o OUT [-url URL] [-api-key KEY]", `Write a consistent copy of a bbolt database to OUT: of the file itself
when no paystate runs on it, else streamed from the running paystate's
GET /admin/backup (-url, or the server.listen of -config). The database is
-db, else the storage.path of -config. The copy is written to a temporary
file beside OUT and replaces OUT only once it is complete and checked; OUT
must be absent or a regular file, and not a database in use. Progress is
shown on stderr.`)
	path := fs.String("db", "./paystate.db", "database file (default: the storage.path of -config, else ./paystate.db)")
	out := fs.String("o", "", "output file (required): absent or a regular file")
	url := fs.String("url", "", "address of a running paystate to back up over HTTP, http://host:port or host:port")
	cfgPath := fs.String("config", "", "config of the paystate: its storage.path, server.listen")
	key := fs.String("api-key", "", "API key of the running paystate (default: PAYSTATE_API_KEY)")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	cfg, err := fs.dbConfig(*cfgPath, path)
	if err != nil {
		return err
	}
	d, err := store.Lookup(cfg.Storage.Backend)
	if err != nil {
		return usageError(fmt.Errorf("backup: %w", err))
	}
	if d.NoBackup != "" {
		return usageError(fmt.Errorf("backup: storage.backend is %q: %s; paystate backup copies database files only", cfg.Storage.Backend, d.NoBackup))
	}
	if *out == "" {
		fs.usage(stderr)
		return usageError(errors.New("backup: -o OUT is required"))
	}
	if *url != "" {
		if _, err := serverURL(*url); err != nil {
			return err
		}
	}
	live := []string{*path}
	if *cfgPath != "" && cfg.Storage.Path != *path {
		live = append(live, cfg.Storage.Path)
	}
	if err := checkBackupTarget(*out, live); err != nil {
		return usageError(fmt.Errorf("backup: %w; nothing was written", err))
	}

	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*.tmp")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())

	open := func(path string) (*store.Backend, error) {
		return store.Open(ctx, cfg.Storage.StoreConfig(store.Config{Path: path, ReadOnly: true, Timeout: time.Second}))
	}
	n := int64(0)
	if *url == "" {
		var b *store.Backend
		b, err = open(*path)
		if err == nil {
			n, err = copySnapshot(b.Backup, tmp, stderr)
			b.Store.Close()
		} else if errors.Is(err, store.ErrLocked) {
			// A running paystate has the file: ask it.
			*url = serverAddr(*cfgPath, cfg)
			fmt.Fprintf(stderr, "backup: %s is in use by a running paystate; fetching /admin/backup of %s\n", *path, *url)
			err = nil
		}
	}
	if err == nil && *url != "" {
		c := &httpd.Client{BaseURL: *url, APIKey: apiKey(*key)}
		p := newProgress(stderr, progressOptions{Desc: "backup", Bytes: true})
		n, err = c.Backup(ctx, p.writer(tmp))
		if err != nil {
			p.abort()
		}
		p.finish()
		err = printable(err)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}

	// The copy must open as a paystate database before it replaces OUT.
	check, err := open(tmp.Name())
	if err != nil {
		return fmt.Errorf("backup: the copy does not open: %w", err)
	}
	err = check.Check()
	check.Store.Close()
	if err != nil {
		// Check joins its problems with newlines: one line here.
		return fmt.Errorf("backup: the copy is damaged: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	// OUT may have changed while the copy was made: check it again.
	if err := checkBackupTarget(*out, live); err != nil {
		return usageError(fmt.Errorf("backup: %w; nothing was written", err))
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	syncDir(filepath.Dir(*out))
	fmt.Fprintf(stdout, "backup written to %s (%d bytes)\n", *out, n)
	return nil
}

// checkBackupTarget refuses an -o that backup must not replace: anything
// but a regular file or nothing (a symlink, a FIFO, a device, a
// directory), one of the databases in live (-db, the config's
// storage.path), and the database of a running paystate, found by the
// lock bbolt holds on it.
func checkBackupTarget(out string, live []string) error {
	fi, err := os.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("-o %s: %w", out, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("-o %s is %s, not a regular file: name a new file (or a regular one to replace)", out, fileKind(fi.Mode()))
	}
	for _, db := range live {
		if dfi, err := os.Stat(db); err == nil && os.SameFile(fi, dfi) {
			return fmt.Errorf("-o %s is the database being backed up (%s)", out, db)
		}
	}
	held, err := lockedByOther(out)
	if err != nil {
		return fmt.Errorf("-o %s: %w", out, err)
	}
	if held {
		return fmt.Errorf("-o %s is the database of a running paystate (another process holds its lock)", out)
	}
	return nil
}

// fileKind names a file type that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file"
}

// syncDir makes a rename in dir durable; a failure only loses that.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// copySnapshot writes a consistent copy of db to w (store.Backend.Backup),
// its progress in bytes on stderr.
func copySnapshot(db store.Snapshotter, w io.Writer, stderr io.Writer) (int64, error) {
	r, size, err := db.Snapshot()
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer r.Close()
	p := newProgress(stderr, progressOptions{Desc: "backup", Bytes: true, Total: size})
	defer p.finish()
	n, err := io.Copy(p.writer(w), r)
	if err != nil {
		p.abort()
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}
