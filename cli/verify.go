package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/store"
)

// ErrMismatch is Run's error when verify found a problem: the process
// exits ExitVerify (3) for it (SPEC §4), and 1 for a database it could not
// read at all.
var ErrMismatch = errors.New("verify: the database does not match its own history")

// runVerify is `paystate verify -db FILE`: it checks the file's pages and
// indexes where the backend has such a check (store.Backend.Check), replays every payment's timeline against the
// stored record and sums the journal, prints every mismatch and returns
// ErrMismatch if there is one. A damaged file is refused at open, as serve
// refuses it: one line, and not ErrMismatch. The database must not be open
// in a running paystate (bbolt allows one process); verify a backup of a
// running one.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", "verify [-db FILE | -config FILE]", `Check a database against its own history: the file's pages and indexes,
every payment's timeline replayed against the stored record, the outbox
and the journal. Every mismatch is printed; exit 3 if there is one, 1 if
the database cannot be read. Progress is shown on stderr.`)
	path := fs.String("db", "./paystate.db", "database file (bbolt)")
	cfgPath := fs.String("config", "", "config file: verify its storage (bbolt storage.path or PostgreSQL storage.dsn)")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	cfg, err := fs.dbConfig(*cfgPath, path)
	if err != nil {
		return err
	}
	b, err := store.Open(ctx, cfg.Storage.StoreConfig(store.Config{Path: *path, ReadOnly: true}))
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w (a running paystate holds the file: verify a backup)", err)
	} else if err != nil {
		return err // it names the database already
	}
	defer b.Store.Close()

	// Pages and indexes first, where the backend has a check of its own:
	// a damaged index is a finding, and the replay below may stop on it.
	var mismatches []verify.Mismatch
	if b.Check != nil {
		if err := b.Check(); err != nil {
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok {
				return err // the check could not run
			}
			for _, e := range joined.Unwrap() {
				mismatches = append(mismatches, verify.Mismatch{Problem: e.Error()})
			}
		}
	}
	rep, err := replay(ctx, b.Store, stderr)
	if err != nil && len(mismatches) == 0 {
		return err
	} else if err != nil {
		rep.Mismatches = append(rep.Mismatches, verify.Mismatch{Problem: "the replay stopped: " + err.Error()})
	}
	rep.Mismatches = append(mismatches, rep.Mismatches...)
	// The journal itself, line by line (verify.Run checks the running
	// balances that the API reports).
	if b.CheckLedger != nil {
		imbalances, err := b.CheckLedger(ctx)
		if err != nil {
			return err
		}
		for _, im := range imbalances {
			rep.Mismatches = append(rep.Mismatches, verify.Mismatch{Problem: im.String()})
		}
	}
	return printReport(rep, stdout)
}

// replay is verify.Run with its progress on stderr, payment by payment.
func replay(ctx context.Context, db store.Store, stderr io.Writer) (verify.Report, error) {
	var p *progress
	defer func() { p.finish() }()
	return verify.RunWith(ctx, db, verify.Options{Progress: func(done, total int) {
		if p == nil {
			p = newProgress(stderr, progressOptions{Desc: "verify", Unit: "payments", Total: int64(total)})
		}
		p.set(int64(done))
	}})
}

// printReport prints verify's findings and returns ErrMismatch (exit 3)
// if there is one.
func printReport(rep verify.Report, stdout io.Writer) error {
	for _, m := range rep.Mismatches {
		fmt.Fprintln(stdout, "MISMATCH", m)
	}
	fmt.Fprintf(stdout, "%d payments, %d timeline steps, %d transitions, %d mismatches\n", rep.Payments, rep.Steps, rep.Transitions, len(rep.Mismatches))
	if !rep.OK() {
		return &exitError{code: ExitVerify, err: ErrMismatch}
	}
	return nil
}
