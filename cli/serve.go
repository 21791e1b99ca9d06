package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
)

// runServe is `paystate serve [-config FILE]`: the daemon, until ctx ends;
// then it shuts down within server.shutdown_timeout, and a second signal
// exits at once.
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
