// Command paystate keeps the truth about a merchant's payments while the
// PSP answers on two racing paths. See README.md; the subcommands are in
// package cli.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/paystate/paystate/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// main runs the subcommand until it is done or the first SIGINT or
// SIGTERM, and exits with its code: 0 ok, 1 failure, 2 usage or
// configuration error, 3 verify found a problem.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cli.Version = version
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "paystate:", err)
	}
	os.Exit(cli.ExitCode(err))
}
