// Command paystate keeps the truth about a merchant's payments while the
// PSP answers on two racing paths. See README.md; the subcommands are in
// package cli, which also holds the version a release build injects
// (-ldflags "-X github.com/paystate/paystate/cli.version=v1.2.3").
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/paystate/paystate/cli"
)

// main runs the subcommand until it is done or the first SIGINT or
// SIGTERM, prints its error (once) and exits with its code: 0 ok, 1
// failure, 2 usage or configuration error, 3 a check found a problem.
//
// The first signal cancels the command's context with cli.Interrupted
// as its cause: a command that stops for it (reconcile import, between
// two transactions) exits 128 + the signal's number (130, 143). A
// second signal, once the first has been taken, ends the process at
// once (the default action), unless the command listens for signals
// itself (serve).
func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s, ok := <-sig
		if !ok {
			return
		}
		signal.Stop(sig)
		cancel(&cli.Interrupted{Signal: s})
	}()
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sig)
	cancel(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "paystate:", err)
	}
	os.Exit(cli.ExitCode(err))
}
