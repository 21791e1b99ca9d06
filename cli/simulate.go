package cli

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/simulate"
)

// runSimulate is `paystate simulate [-mode mock|checkout] [-n 1000]
// [-concurrency 32]`: a complete paystate on a temporary database against
// the mock PSP in chaos mode, or with Stripe Checkout Sessions against an
// in-process Stripe API; it prints the invariant table and fails (exit 3)
// if an invariant broke.
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("simulate", "simulate [-mode mock|checkout] [-n 1000] [-concurrency 32] [-seed N] [-v]", `Run a complete paystate on a temporary database against the mock PSP in
chaos mode (duplicate, reordered and early webhooks, racing clients), then
check its invariants and print them. Exit 3 if one broke. Progress is
shown on stderr.

-mode checkout runs the stripe provider in flow checkout against a Stripe
API inside the process (no network): sessions completed paid, completed
unpaid then async success or failure, expired by event or left to the
sweeper, their session and PaymentIntent events signed, duplicated and
reordered.`)
	mode := fs.String("mode", simulate.ModeMock, "mock or checkout")
	n := fs.Int("n", 1000, "payments")
	conc := fs.Int("concurrency", 32, "concurrent clients")
	seed := fs.Int64("seed", 0, "random seed (0: random)")
	verbose := fs.Bool("v", false, "log warnings of the simulated paystate")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	if *mode != simulate.ModeMock && *mode != simulate.ModeCheckout {
		return usageError(fmt.Errorf("simulate: -mode %q: want %s or %s", *mode, simulate.ModeMock, simulate.ModeCheckout))
	}
	logger := zerolog.Nop()
	if *verbose {
		logger = zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	}
	stages := newStages(stderr, "simulate")
	defer stages.finish()
	rep, err := simulate.Run(ctx, simulate.Options{Mode: *mode, N: *n, Concurrency: *conc, Seed: *seed, Logger: logger, Progress: stages.report})
	stages.finish()
	if err != nil {
		return err
	}
	rep.Print(stdout)
	if !rep.OK() {
		return &exitError{code: ExitVerify, err: simulate.ErrInvariant}
	}
	return nil
}

// stages is a progress per stage of an engine that reports
// (stage, done, total), such as simulate.Options.Progress: a new stage
// finishes the progress of the one before.
type stages struct {
	mu    sync.Mutex
	w     io.Writer
	desc  string
	stage string
	done  int
	p     *progress
}

// newStages returns stages that show progress on w, each line starting
// with desc and the stage.
func newStages(w io.Writer, desc string) *stages {
	return &stages{w: w, desc: desc}
}

// report is the engine's callback.
func (s *stages) report(stage string, done, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stage != s.stage || s.p == nil {
		s.p.finish()
		s.stage = stage
		s.p = newProgress(s.w, progressOptions{Desc: s.desc + " " + stage, Unit: "payments", Total: int64(total)})
		s.done = 0
	}
	// Callbacks from several goroutines may arrive out of order.
	if done > s.done {
		s.done = done
		s.p.set(int64(done))
	}
}

// finish ends the stage in progress.
func (s *stages) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p.finish()
}
