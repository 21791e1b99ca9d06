package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/paystate/paystate/store"
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
	b, err := store.Open(ctx, cfg.Storage.StoreConfig(store.Config{}))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := b.Store.Close(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintln(stdout, b.Migration)
	return nil
}
