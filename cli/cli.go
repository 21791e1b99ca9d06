// Package cli is paystate's command line: one file per subcommand (serve,
// check, version, verify, backup, migrate, simulate, review, reconcile),
// each a function of its arguments and output streams, so that tests run a
// command without a process. main.go owns the process around it: the
// signals, and the exit code, which it takes from ExitCode. The engines
// behind verify and simulate are internal/verify and internal/simulate;
// review and backup reach a running paystate through httpd.Client.
//
// The streams: a command's result goes to stdout (a report, a table,
// JSON), and everything about how it goes (progress, warnings, the
// daemon's log, usage after a mistake) to stderr, so stdout can be piped.
// Help asked for (-h, --help, help) is printed on stdout.
//
// Exit codes (ExitCode): 0 ok, 1 a runtime failure, 2 a usage or
// configuration error (a -config file that is missing or unreadable
// included: a restart does not fix it), 3 a check found a problem
// (verify's mismatch, simulate's broken invariant).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/paystate/paystate/config"
)

// Exit codes of the paystate command, besides 0.
const (
	ExitFailure = 1 // a runtime failure
	ExitUsage   = 2 // a usage or configuration error
	ExitVerify  = 3 // a check found a problem: verify (ErrMismatch), simulate
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

// errHelp is a command's answer to -h or --help once it has printed its
// usage on stdout; Run returns nil for it.
var errHelp = errors.New("help printed")

// ExitCode is the process exit code for an error of Run: 0 for nil, the
// code an error carries (ExitUsage for a usage or configuration error,
// ExitVerify for ErrMismatch), else ExitFailure.
func ExitCode(err error) int {
	var e *exitError
	switch {
	case err == nil, errors.Is(err, errHelp), errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &e):
		return e.code
	}
	var in *Interrupted
	if errors.As(err, &in) {
		if n, ok := in.Signal.(syscall.Signal); ok {
			return 128 + int(n)
		}
	}
	return ExitFailure
}

// Interrupted is the cause main gives the context of a command when the
// process receives SIGINT or SIGTERM. A command that stops early for it
// and returns it (wrapped) exits 128 + the signal's number: 130 for
// SIGINT, 143 for SIGTERM, as a shell reports a process the signal
// ended.
type Interrupted struct {
	Signal os.Signal
}

func (e *Interrupted) Error() string { return "interrupted by " + e.Signal.String() }

const usage = `usage: paystate <command> [flags]

commands:
  serve [-config FILE] [-listen ADDR]
                           run the daemon (the default command)
  check -config FILE       validate a config file and print the effective config, secrets masked
  version                  print version and build information (also: paystate --version)
  verify -db FILE | -config FILE
                           replay every payment's history and check it; exit 3 on a mismatch
  backup -db FILE | -config FILE -o OUT
                           write a consistent copy of the database (stopped, or through the running server)
  migrate -config FILE     bring the configured database (bbolt or PostgreSQL) to this binary's schema
  copy -from-db FILE -config FILE
                           move a bbolt database into the config's (empty) PostgreSQL database
  simulate [-n 1000] [-concurrency 32]
                           run a paystate against the mock PSP in chaos mode and check its invariants
  review list|resolve      the review queue of a running server (-url, -api-key or PAYSTATE_API_KEY)
  reconcile import -format stripe|paypal|mollie|generic FILE | reconcile stripe -since DATE
                           match the PSP's settlement report against the ledger; exit 3 if something did not match
  help [COMMAND]           print this, or a command's flags (also: paystate COMMAND -h)

Every configuration key can also be set in the environment as
PAYSTATE_<TABLE>_<KEY> (PAYSTATE_SERVER_LISTEN, PAYSTATE_STORAGE_DSN, ...),
which wins over the file. Exit codes: 0 ok, 1 failure, 2 usage or
configuration error, 3 a check (verify, simulate) found a problem.
`

// commands are the subcommands, by name.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"serve":     runServe,
	"check":     runCheck,
	"version":   runVersion,
	"verify":    runVerify,
	"backup":    runBackup,
	"migrate":   runMigrate,
	"copy":      runCopy,
	"simulate":  runSimulate,
	"review":    runReview,
	"reconcile": runReconcile,
}

// Run runs the subcommand args[0] (serve if args is empty or starts with
// a flag other than the help and version flags) with the rest of args. It
// returns when the command is done; serve, when ctx ends (the first
// SIGINT or SIGTERM) and it has shut down. Help asked for is printed on
// stdout and is no error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	shareVersion()
	err := run(ctx, args, stdout, stderr)
	if errors.Is(err, errHelp) || errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			if len(args) > 1 && args[0] == "help" {
				if _, ok := commands[args[1]]; ok {
					return run(ctx, []string{args[1], "-h"}, stdout, stderr)
				}
				fmt.Fprint(stderr, usage)
				return usageError(fmt.Errorf("help: unknown command %q", args[1]))
			}
			fmt.Fprint(stdout, usage)
			return nil
		case "-version", "--version":
			return runVersion(ctx, args[1:], stdout, stderr)
		}
		if args[0] != "" && args[0][0] != '-' {
			cmd, args = args[0], args[1:]
		}
	}
	fn, ok := commands[cmd]
	if !ok {
		fmt.Fprint(stderr, usage)
		return usageError(fmt.Errorf("unknown command %q (paystate help lists them)", cmd))
	}
	return fn(ctx, args, stdout, stderr)
}

// flags is a command's flag set and its usage.
type flags struct {
	*flag.FlagSet
	synopsis string // after "usage: paystate "
	about    string // what the command does, a paragraph or two
}

// newFlags returns the flag set of command name.
func newFlags(name, synopsis, about string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, synopsis: synopsis, about: about}
}

// usage prints the command's usage and flags on w.
func (f *flags) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: paystate %s\n", f.synopsis)
	if f.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(f.about, "\n"))
	}
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

// parse parses args. -h or --help prints the usage on stdout and returns
// errHelp; a flag that is not defined or does not parse, or an argument
// left over, prints the usage on stderr and returns a usage error (exit 2)
// that names the command: main prints it, once.
func (f *flags) parse(args []string, stdout, stderr io.Writer) error {
	err := f.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.usage(stdout)
		return errHelp
	case err != nil:
		f.usage(stderr)
		return usageError(fmt.Errorf("%s: %w", f.Name(), err))
	case f.NArg() > 0:
		f.usage(stderr)
		return usageError(fmt.Errorf("%s: unexpected argument %q", f.Name(), f.Arg(0)))
	}
	return nil
}

// set reports whether the flag name was given.
func (f *flags) set(name string) bool {
	found := false
	f.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

// dbConfig is the configuration of a command that takes -db and -config:
// the embedded defaults without -config, else the file's, whose
// storage.path replaces *path unless -db was given.
func (f *flags) dbConfig(cfgPath string, path *string) (config.Config, error) {
	if cfgPath == "" {
		return config.DefaultConfig(), nil
	}
	cfg, _, err := loadConfig(cfgPath)
	if err != nil {
		return config.Config{}, err
	}
	if !f.set("db") {
		*path = cfg.Storage.Path
	}
	return cfg, nil
}

// loadConfig reads the configuration of path ("" for the embedded
// defaults) with the process environment and the flags applied; an error
// is a configuration error (exit 2).
func loadConfig(path string, fl ...config.Flag) (config.Config, config.Origins, error) {
	cfg, origins, err := config.Read(config.Source{Path: path, Getenv: os.Getenv, Flags: fl})
	if err != nil {
		return config.Config{}, nil, usageError(err)
	}
	return cfg, origins, nil
}

// serverURL checks a -url flag, http://host:port, https://host:port or
// host:port, and returns it; a bad one is a usage error naming the flag.
func serverURL(s string) (string, error) {
	full := s
	if !strings.Contains(full, "://") {
		full = "http://" + full
	}
	u, err := url.Parse(full)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", usageError(fmt.Errorf("-url %q: want http://host:port, https://host:port or host:port", s))
	}
	return s, nil
}
