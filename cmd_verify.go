package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/verify"
)

// runVerify is `paystate verify -db FILE`: it replays every payment's
// timeline against the stored record and exits non-zero on any mismatch.
// The database must not be open in a running paystate (bbolt allows one
// process); verify a backup of a running one.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("db", "./paystate.db", "database file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := store.Open(*path, &store.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("open %s: %w (a running paystate holds the file: verify a backup)", *path, err)
	}
	defer db.Close()
	rep, err := verify.Run(ctx, db)
	if err != nil {
		return err
	}
	// The journal itself, line by line (verify.Run checks the running
	// balances that the API reports).
	imbalances, err := db.CheckLedger(ctx)
	if err != nil {
		return err
	}
	for _, im := range imbalances {
		rep.Mismatches = append(rep.Mismatches, verify.Mismatch{Problem: im.String()})
	}
	for _, m := range rep.Mismatches {
		fmt.Fprintln(stdout, "MISMATCH", m)
	}
	fmt.Fprintf(stdout, "%d payments, %d timeline steps, %d transitions, %d mismatches\n", rep.Payments, rep.Steps, rep.Transitions, len(rep.Mismatches))
	if !rep.OK() {
		return errors.New("verify: the database does not match its own history")
	}
	return nil
}
