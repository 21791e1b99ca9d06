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
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "paystate:", err)
	}
	os.Exit(cli.ExitCode(err))
}
