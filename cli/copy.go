package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/store"
)

// runCopy is `paystate copy -from-db FILE -config FILE`: it moves a bbolt
// database into the PostgreSQL database of the config (storage.backend =
// "postgres"), the path of a merchant whose paystate outgrew one machine.
// The file is opened read-only (a running paystate's lock refuses that:
// stop it first) and checked (DB.Check) before anything is written; the
// target is migrated and must be empty. The source's Backend.Export reads
// every record in one read transaction and the target's Backend.Import writes them,
// BatchSize per transaction, keeping ids, versions, Seq numbers, fencing
// tokens and times, then the counters. Leases are copied as they are: the
// next acquisition gets a higher token than any before, and a lease still
// in force (the bbolt paystate was killed) runs out at its expiry, as
// every lease on PostgreSQL does. A copy that stopped part-way
// (Ctrl-C, a crash, a lost connection) is resumed by running the same
// command on the unchanged file; the target remembers which file it is a
// copy of until the copy ends. Progress goes to stderr, the summary to
// stdout. Exit 2 for a config that is not PostgreSQL's or a target that
// holds anything else.
func runCopy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("copy", "copy -from-db FILE -config FILE [-batch N]", `Copy a bbolt database into the PostgreSQL database of a config whose
storage.backend is "postgres" (storage.dsn or PAYSTATE_STORAGE_DSN):
every payment with its versions, timelines, the inbox and processed event
ids, idempotency keys, leases with their fencing tokens, the outbox and
its sequence, deliveries, the ledger, customers, the review queue, endpoint
health, refunds, disputes and the mock PSP's charges. Stop the paystate
that uses FILE first, and start the instances on PostgreSQL only once the
copy is done. The target must be empty; a copy that stopped part-way is
resumed by running the same command again on the unchanged file.`)
	from := fs.String("from-db", "", "the bbolt database file to copy (required)")
	cfgPath := fs.String("config", "", "config whose storage names the PostgreSQL database to fill (required)")
	batch := fs.Int("batch", store.DefaultImportBatch, "records per PostgreSQL transaction")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	switch {
	case *from == "" || *cfgPath == "":
		fs.usage(stderr)
		return usageError(errors.New("copy: -from-db FILE and -config FILE are required"))
	case *batch < 1:
		return usageError(fmt.Errorf("copy: -batch must be at least 1, got %d", *batch))
	}
	cfg, _, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if d, err := store.Lookup(cfg.Storage.Backend); err != nil || !d.CopyInto {
		return usageError(fmt.Errorf("copy: storage.backend of %s is %q, which cannot be copied into; set storage.backend = \"postgres\" and storage.dsn", *cfgPath, cfg.Storage.Backend))
	}

	src, err := store.Open(ctx, store.Config{Backend: config.DefaultConfig().Storage.Backend, Path: *from, ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("copy: %w (a running paystate holds the file: stop it first)", err)
	} else if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer src.Store.Close()
	if err := src.Check(); err != nil {
		return fmt.Errorf("copy: %s does not pass its check (paystate verify -db shows the findings); nothing was copied: %w", *from, err)
	}
	total, err := src.Export.ExportSize(ctx)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}

	dst, err := store.Open(ctx, cfg.Storage.StoreConfig(store.Config{}))
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer dst.Store.Close()
	p := newProgress(stderr, progressOptions{Desc: "copy", Unit: "records", Total: int64(total)})
	im, err := dst.Import(ctx, store.ImportOptions{BatchSize: *batch, Progress: func(n int) { p.set(int64(n)) }})
	if err != nil {
		p.finish()
		return err
	}
	defer im.Close()
	err = src.Export.Export(ctx, im)
	if err == nil {
		err = im.Finish()
	}
	p.finish()
	switch {
	case errors.Is(err, store.ErrTargetNotEmpty):
		return usageError(err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("copy: stopped; run the same command again to resume: %w", err)
	case err != nil:
		return fmt.Errorf("%w; once the cause is fixed, the same command resumes the copy", err)
	}
	return printCopied(stdout, *from, *cfgPath, im.Counts())
}

// printCopied prints what a copy wrote, table by table.
func printCopied(w io.Writer, from, cfgPath string, counts []store.ImportCount) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	offered, written := 0, 0
	fmt.Fprintln(tw, "table\trecords")
	for _, c := range counts {
		fmt.Fprintf(tw, "%s\t%d\n", c.Table, c.Offered)
		offered, written = offered+c.Offered, written+c.Written
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "copied %d records from %s into PostgreSQL", offered, from)
	if skipped := offered - written; skipped > 0 {
		fmt.Fprintf(w, " (%d of them were there from the run that stopped)", skipped)
	}
	_, err := fmt.Fprintf(w, "\ncheck the copy: paystate verify -config %s\n", cfgPath)
	return err
}
