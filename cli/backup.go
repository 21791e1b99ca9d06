package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/store"
)

// runBackup is `paystate backup -db FILE -o OUT`: a consistent copy of the
// database. A stopped database is copied directly: store.DB.WriteTo takes
// the copy to a local file (a read transaction as short as the copy) and
// then writes it out. A running paystate holds the file's lock; then the
// copy is streamed from its GET /admin/backup, which takes its copy the
// same way before it streams, at -url or at the server.listen of -config
// (default: the embedded defaults), with the API key from -api-key,
// PAYSTATE_API_KEY or the config's first key. The copy is written to a
// temporary file, checked to open as a paystate database and to pass
// DB.Check, and renamed. A damaged database file is refused in one line.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backup", "backup [-db FILE] -o OUT [-url URL] [-config FILE] [-api-key KEY]", `Write a consistent copy of a bbolt database to OUT: of the file itself
when no paystate runs on it, else streamed from the running paystate's
GET /admin/backup (-url, or the server.listen of -config). The copy is
checked before it replaces OUT. Progress is shown on stderr.`)
	path := fs.String("db", "./paystate.db", "database file")
	out := fs.String("o", "", "output file (required)")
	url := fs.String("url", "", "address of a running paystate to back up over HTTP, http://host:port or host:port")
	cfgPath := fs.String("config", "", "config of the running paystate (for its address and API key)")
	key := fs.String("api-key", "", "API key for -url (default: PAYSTATE_API_KEY or the config's first key)")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	if *cfgPath != "" {
		cfg, _, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		if cfg.Storage.Backend == "postgres" {
			return usageError(errors.New("backup: storage.backend is \"postgres\": back the database up with PostgreSQL's own tools, e.g. pg_dump -Fc -f paystate.dump \"$PAYSTATE_STORAGE_DSN\" (or continuous archiving); paystate backup copies bbolt files only"))
		}
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
	tmp, err := os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".*.tmp")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())

	n, err := int64(0), error(nil)
	if *url == "" {
		var db *store.DB
		db, err = store.Open(*path, &store.Options{ReadOnly: true, Timeout: time.Second})
		if err == nil {
			n, err = copySnapshot(db, tmp, stderr)
			db.Close()
		} else if errors.Is(err, store.ErrLocked) {
			// A running paystate has the file: ask it.
			cfg, _, cerr := loadConfig(*cfgPath)
			if cerr != nil {
				return cerr
			}
			*url, *key = cfg.Server.Listen, apiKey(*key, cfg)
			fmt.Fprintf(stderr, "backup: %s is in use by a running paystate; fetching /admin/backup of %s\n", *path, *url)
			err = nil
		}
	}
	if err == nil && *url != "" {
		c := &httpd.Client{BaseURL: *url, APIKey: apiKey(*key, config.Config{})}
		p := newProgress(stderr, progressOptions{Desc: "backup", Bytes: true})
		n, err = c.Backup(ctx, p.writer(tmp))
		p.finish()
		err = printable(err)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}

	// The copy must open as a paystate database before it replaces OUT.
	check, err := store.Open(tmp.Name(), &store.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("backup: the copy does not open: %w", err)
	}
	err = check.Check()
	check.Close()
	if err != nil {
		// Check joins its problems with newlines: one line here.
		return fmt.Errorf("backup: the copy is damaged: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "backup written to %s (%d bytes)\n", *out, n)
	return nil
}

// copySnapshot writes a consistent copy of db to w (store.DB.Snapshot),
// its progress in bytes on stderr.
func copySnapshot(db *store.DB, w io.Writer, stderr io.Writer) (int64, error) {
	r, size, err := db.Snapshot()
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer r.Close()
	p := newProgress(stderr, progressOptions{Desc: "backup", Bytes: true, Total: size})
	defer p.finish()
	n, err := io.Copy(p.writer(w), r)
	if err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}
