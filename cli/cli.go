// Package cli is paystate's command line: one file per subcommand (serve,
// check, version, verify, backup, simulate, review), each a function of
// its arguments and output streams, so that tests run a command without a
// process. main.go owns the process around it: the signals, and the exit
// code, which it takes from ExitCode. The engines behind verify and
// simulate are internal/verify and internal/simulate; review and backup
// reach a running paystate through httpd.Client.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit codes of the paystate command, besides 0.
const (
	ExitFailure = 1 // a runtime failure
	ExitUsage   = 2 // a usage or configuration error
	ExitVerify  = 3 // verify found a problem (ErrMismatch)
)

// exitError is an error that ends the process with a code other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a usage or configuration error (exit 2).
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitUsage, err: err}
}

// ExitCode is the process exit code for an error of Run: 0 for nil,
// ExitUsage for flag.ErrHelp (the flags' usage was printed) and usage or
// configuration errors, ExitVerify for ErrMismatch, else ExitFailure.
func ExitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return ExitUsage
	case errors.As(err, &e):
		return e.code
	}
	return ExitFailure
}

const usage = `usage: paystate <command> [flags]

commands:
  serve [-config FILE]     run the daemon (the default command)
  check -config FILE       validate a config file and print the effective config, secrets masked
  version                  print version and build information
  verify -db FILE | -config FILE
                           replay every payment's history and check it; non-zero exit on a mismatch
  backup -db FILE -o OUT   write a consistent copy of the database (stopped, or -url of a running server)
  migrate -config FILE     bring the configured database (bbolt or PostgreSQL) to this binary's schema
  simulate [-n 1000] [-concurrency 32]
                           run a paystate against the mock PSP in chaos mode and check its invariants
  review list|resolve      the review queue of a running server (-url, -api-key or PAYSTATE_API_KEY)
`

// Run runs the subcommand args[0] (serve if args is empty or starts with
// a flag) with the rest of args. It returns when the command is done;
// serve, when ctx ends (the first SIGINT or SIGTERM) and it has shut down.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stderr)
	case "check":
		return runCheck(args, stdout, stderr)
	case "version":
		return runVersion(stdout)
	case "verify":
		return runVerify(ctx, args, stdout, stderr)
	case "backup":
		return runBackup(ctx, args, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, args, stdout, stderr)
	case "simulate":
		return runSimulate(ctx, args, stdout, stderr)
	case "review":
		return runReview(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError(fmt.Errorf("unknown command %q", cmd))
}
