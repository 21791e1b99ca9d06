// Command paystate keeps the truth about a merchant's payments while the
// PSP answers on two racing paths. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "paystate:", err)
		os.Exit(exitCode(err))
	}
}

// Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error,
// 3 verify found a problem.
const (
	exitFailure = 1
	exitUsage   = 2
	exitVerify  = 3
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
	return &exitError{code: exitUsage, err: err}
}

// exitCode is the process exit code for err.
func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailure
}

const usage = `usage: paystate <command> [flags]

commands:
  serve [-config FILE]     run the daemon (the default command)
  check -config FILE       validate a config file and print the effective config, secrets masked
  version                  print version and build information
  verify -db FILE          replay every payment's history and check it; non-zero exit on a mismatch
  backup -db FILE -o OUT   write a consistent copy of the database (stopped, or -url of a running server)
  simulate [-n 1000] [-concurrency 32]
                           run a paystate against the mock PSP in chaos mode and check its invariants
  review list|resolve      the review queue of a running server (-url, -api-key or PAYSTATE_API_KEY)
`

// run dispatches a subcommand.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "TOML config file (default: embedded defaults)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return usageError(err)
	}
	logger, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		logger.Warn().Msg(w)
	}
	m := daemon.New(cfg, logger)
	if err := m.Open(); err != nil {
		return err
	}

	// Wait for SIGINT/SIGTERM; a second signal exits at once.
	<-ctx.Done()
	logger.Info().Dur("timeout", cfg.Server.ShutdownTimeout.Duration).Msg("shutting down")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		logger.Warn().Msg("second signal: exiting now")
		os.Exit(1)
	}()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	if err := m.Close(sctx); err != nil {
		return err
	}
	logger.Info().Msg("stopped")
	return nil
}

func runCheck(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "TOML config file to check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return usageError(errors.New("check: -config FILE is required"))
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return usageError(err)
	}
	b, err := cfg.Masked().TOML()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# %s is valid; effective configuration, secrets masked:\n", *path)
	_, err = stdout.Write(b)
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return err
}

func runVersion(stdout io.Writer) error {
	fmt.Fprintf(stdout, "paystate %s\n", version)
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprintf(stdout, "go %s\n", bi.GoVersion)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH":
				fmt.Fprintf(stdout, "%s %s\n", s.Key, s.Value)
			}
		}
	}
	return nil
}

// newLogger builds the logger of log.level and log.format.
func newLogger(c config.Log, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("log.level: %w", err)
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	out := w
	if c.Format == "console" {
		cw := zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: true}
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			cw.NoColor = false
		}
		out = cw
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}
