package bolt

import (
	"context"
	"fmt"

	"github.com/paystate/paystate/store"
)

// Name is the backend's name in storage.backend.
const Name = "bolt"

func init() { store.Register(Name, store.Driver{Open: open, File: true}) }

// open is the backend's store.Driver: one file, that this process alone
// uses (Open locks it), backed up, checked and exported by this package.
func open(_ context.Context, cfg store.Config) (*store.Backend, error) {
	db, err := Open(cfg.Path, &Options{Now: cfg.Now, ReadOnly: cfg.ReadOnly, Timeout: cfg.Timeout, OnFatal: cfg.OnFatal})
	if err != nil {
		return nil, err // it names the file already
	}
	b := &store.Backend{
		Store:       db,
		Migration:   fmt.Sprintf("bolt %s: schema version %d, %d values migrated", cfg.Path, SchemaVersion, db.Migrated()),
		Backup:      db,
		Check:       db.Check,
		CheckLedger: db.CheckLedger,
		Export:      db,
	}
	if !cfg.ReadOnly {
		b.EndLeases = db.EndLeases
	}
	return b, nil
}
