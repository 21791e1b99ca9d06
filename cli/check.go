package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/paystate/paystate/config"
)

// runCheck is `paystate check -config FILE`: it validates the file with
// the environment applied and prints the effective configuration, secrets
// masked, each value that came from the environment marked with a
// trailing "# from PAYSTATE_..." comment; then its warnings on stderr,
// PAYSTATE_ variables that set nothing among them.
func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "check -config FILE", `Validate a config file, with the PAYSTATE_<TABLE>_<KEY> environment
variables applied, and print the effective configuration, secrets masked.
A value that came from the environment is marked "# from PAYSTATE_...".
Exit 2 if the configuration is not valid.`)
	path := fs.String("config", "", "TOML config file to check (required)")
	if err := fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	if *path == "" {
		fs.usage(stderr)
		return usageError(errors.New("check: -config FILE is required"))
	}
	cfg, origins, err := loadConfig(*path)
	if err != nil {
		return err
	}
	b, err := cfg.Masked().TOML()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# %s is valid; effective configuration, secrets masked:\n", *path)
	_, err = stdout.Write(config.Annotate(b, origins))
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	for _, w := range config.EnvWarnings(cfg, os.Environ()) {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return err
}
