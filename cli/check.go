package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/paystate/paystate/config"
)

// runCheck is `paystate check -config FILE`: it validates the file and
// prints the effective configuration, secrets masked, and its warnings.
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
