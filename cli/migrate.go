package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/postgres"
)

// runMigrate is `paystate migrate -config FILE`: it brings the configured
// database to this binary's schema and prints the version. On PostgreSQL
// it applies the embedded migrations under the advisory lock that
// starting instances take too; on bbolt it opens the file for writing,
// which migrates an older file (store/migrate.go). `serve` does the same
// at start, so migrate is for doing it ahead of a roll-out.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", "migrate [-config FILE]", `Bring the configured database (bbolt storage.path or PostgreSQL
storage.dsn) to this binary's schema and print its version. serve does
the same at start; migrate does it ahead of a roll-out.`)
	path := fs.String("config", "", "TOML config file (default: embedded defaults)")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	cfg, _, err := loadConfig(*path)
	if err != nil {
		return err
	}
	switch cfg.Storage.Backend {
	case "postgres":
		from, to, err := postgres.Migrate(ctx, cfg.Storage.DSN)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if from == to {
			fmt.Fprintf(stdout, "postgres: schema version %d, nothing to migrate\n", to)
		} else {
			fmt.Fprintf(stdout, "postgres: schema version %d, migrated from %d\n", to, from)
		}
	default:
		db, err := store.Open(cfg.Storage.Path, nil)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		n := db.Migrated()
		if err := db.Close(); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		fmt.Fprintf(stdout, "bolt %s: schema version %d, %d values migrated\n", cfg.Storage.Path, store.SchemaVersion, n)
	}
	return nil
}
