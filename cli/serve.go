package cli

import (
	"context"
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

// runServe is `paystate serve [-config FILE] [-listen ADDR]`: the daemon,
// until ctx ends; then it shuts down within server.shutdown_timeout, and a
// second signal exits at once.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [-config FILE] [-listen ADDR]", `Run the daemon until SIGINT or SIGTERM. The configuration is the file's
(default: the embedded defaults), then the PAYSTATE_<TABLE>_<KEY>
environment variables, then the flags.`)
	path := fs.String("config", "", "TOML config file (default: embedded defaults)")
	listen := fs.String("listen", "", "host:port to listen on: server.listen, winning over the file and PAYSTATE_SERVER_LISTEN")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	var over []config.Flag
	if fs.set("listen") {
		over = append(over, config.Flag{Name: "-listen", Key: "server.listen", Value: *listen})
	}
	cfg, _, err := loadConfig(*path, over...)
	if err != nil {
		return err
	}
	logger, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		logger.Warn().Msg(w)
	}
	for _, w := range config.EnvWarnings(cfg, os.Environ()) {
		logger.Warn().Msg(w)
	}
	gogc, memLimit := tuneGC(os.Getenv)
	logger.Debug().Str("gogc", gogc).Str("gomemlimit", memLimit).Msg("garbage collector")
	m := daemon.New(cfg, logger)
	if err := m.Open(); err != nil {
		return err
	}

	// Wait for SIGINT/SIGTERM; a second signal exits at once.
	<-ctx.Done()
	logger.Info().Stringer("timeout", cfg.Server.ShutdownTimeout.Duration).Msg("shutting down")
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
