package cli

import (
	"context"
	"flag"
	"io"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/simulate"
)

// runSimulate is `paystate simulate [-n 1000] [-concurrency 32]`: a
// complete paystate on a temporary database against the mock PSP in chaos
// mode; it prints the invariant table and fails if an invariant broke.
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1000, "payments")
	conc := fs.Int("concurrency", 32, "concurrent clients")
	seed := fs.Int64("seed", 0, "random seed (0: random)")
	verbose := fs.Bool("v", false, "log warnings of the simulated paystate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := zerolog.Nop()
	if *verbose {
		logger = zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	}
	rep, err := simulate.Run(ctx, simulate.Options{N: *n, Concurrency: *conc, Seed: *seed, Logger: logger})
	if err != nil {
		return err
	}
	rep.Print(stdout)
	if !rep.OK() {
		return simulate.ErrInvariant
	}
	return nil
}
