package postgres

import (
	"context"
	"fmt"

	"github.com/paystate/paystate/store"
)

// Name is the backend's name in storage.backend.
const Name = "postgres"

func init() {
	store.Register(Name, store.Driver{
		Open:     open,
		CopyInto: true,
		NoBackup: `back the database up with PostgreSQL's own tools, e.g. pg_dump -Fc -f paystate.dump "$PAYSTATE_STORAGE_DSN" (or continuous archiving)`,
	})
}

// open is the backend's store.Driver: one database that several
// instances share, a target of `paystate copy`, backed up and checked by
// PostgreSQL's own tools.
func open(ctx context.Context, cfg store.Config) (*store.Backend, error) {
	db, err := Open(ctx, cfg.DSN, &Options{Now: cfg.Now, MaxConns: cfg.MaxConns, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	migration := fmt.Sprintf("postgres: schema version %d, nothing to migrate", SchemaVersion)
	if n := db.Migrated(); n > 0 {
		migration = fmt.Sprintf("postgres: schema version %d, migrated from %d", SchemaVersion, SchemaVersion-n)
	}
	return &store.Backend{
		Store:            db,
		Migration:        migration,
		Shared:           true,
		CheapEmptyCommit: true,
		FanOut:           db.SetFanOut,
		Import: func(ctx context.Context, opts store.ImportOptions) (store.Importer, error) {
			return db.NewImporter(ctx, opts)
		},
	}, nil
}
