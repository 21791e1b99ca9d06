package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
	"github.com/paystate/paystate/store"
)

// ErrUnreconciled is reconcile's error when a line or a payment did not
// match: the process exits ExitVerify (3).
var ErrUnreconciled = errors.New("reconcile: the settlement report does not match")

// runReconcile is `paystate reconcile import|stripe`: settlement
// reconciliation of a report file or of Stripe's balance transactions
// against the database (reconcile.Engine), with a table of the run.
func runReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const about = `Match the PSP's settlement report line by line against the database:
a charge by the payment's provider reference, a refund by the refund's,
a dispute by its id. A matched line posts its fee (psp_fees) and payout
(payouts) once, keyed by the PSP's balance-transaction id; a report read
twice posts nothing new. Lines for nothing known here go to the review
queue (unreconciled); payments captured longer ago than
reconcile.settle_within and in no report are listed. Exit 3 when
something did not match.

  reconcile import -format stripe|paypal|mollie|generic [-provider NAME] FILE
  reconcile stripe -since DATE

The report is read as a stream (checked whole, then posted a batch of
lines per transaction), with its progress on stderr; SIGINT or SIGTERM
stops it between two transactions (exit 130 or 143): what was posted
stays posted, and importing the report again finishes it. When a running
paystate holds the bbolt file, the report is sent to it (POST
/v1/reconciliation/runs at -url or the server.listen of -config, with
-api-key or PAYSTATE_API_KEY), which imports it the same way.`
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		fmt.Fprintf(w, "usage: paystate reconcile import|stripe [flags]\n\n%s\n", about)
		if len(args) == 0 {
			return usageError(errors.New("reconcile: import or stripe is required"))
		}
		return errHelp
	}
	switch args[0] {
	case "import":
		return reconcileImport(ctx, args[1:], stdout, stderr)
	case "stripe":
		return reconcileStripe(ctx, args[1:], stdout, stderr)
	}
	return usageError(fmt.Errorf("reconcile: unknown subcommand %q, want import or stripe", args[0]))
}

// reconcileFlags are the flags both subcommands share.
type reconcileFlags struct {
	fs      *flags
	db      *string
	cfgPath *string
}

func newReconcileFlags(name, synopsis, about string) reconcileFlags {
	fs := newFlags(name, synopsis, about)
	return reconcileFlags{
		fs:      fs,
		db:      fs.String("db", "./paystate.db", "database file (bbolt)"),
		cfgPath: fs.String("config", "", "config file: its storage (bbolt storage.path or PostgreSQL storage.dsn), reconcile.settle_within and providers.stripe"),
	}
}

// open loads the config and opens its store; close closes it.
func (rf reconcileFlags) open(ctx context.Context) (store.Store, config.Config, error) {
	cfg, _, err := loadConfig(*rf.cfgPath)
	if err != nil {
		return nil, cfg, err
	}
	sc := cfg.Storage.StoreConfig(store.Config{})
	if *rf.cfgPath == "" || rf.fs.set("db") {
		sc.Path = *rf.db
	}
	d, err := store.Lookup(sc.Backend)
	if err != nil {
		return nil, cfg, usageError(fmt.Errorf("reconcile: %w", err))
	}
	if d.File {
		if _, err := os.Stat(sc.Path); err != nil {
			return nil, cfg, fmt.Errorf("reconcile: database %s: %w", sc.Path, err)
		}
	}
	b, err := store.Open(ctx, sc)
	if errors.Is(err, store.ErrLocked) {
		return nil, cfg, fmt.Errorf("%w (a running paystate holds the file: stop it first)", err)
	} else if err != nil {
		return nil, cfg, fmt.Errorf("reconcile: %w", err)
	}
	return b.Store, cfg, nil
}

// parseWithFile parses args that end in one FILE argument.
func parseWithFile(fs *flags, args []string, stdout, stderr io.Writer) (string, error) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.usage(stdout)
		return "", errHelp
	case err != nil:
		fs.usage(stderr)
		return "", usageError(fmt.Errorf("%s: %w", fs.Name(), err))
	case fs.NArg() != 1:
		fs.usage(stderr)
		return "", usageError(fmt.Errorf("%s: one FILE is required, got %d arguments", fs.Name(), fs.NArg()))
	}
	return fs.Arg(0), nil
}

// reconcileImport is `paystate reconcile import -format F FILE`.
func reconcileImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rf := newReconcileFlags("reconcile import", "reconcile import -format stripe|paypal|mollie|generic [-provider NAME] [-db FILE | -config FILE] FILE",
		`Read a settlement report (Stripe's itemized balance change or payout
reconciliation CSV, or the generic CSV: id, provider_ref, type, amount,
fee, currency, payout_id, available_on; amounts in major units) and match
it. A malformed file is refused with its line number; nothing is posted.`)
	format := rf.fs.String("format", "", "stripe, paypal, mollie or generic (required)")
	provider := rf.fs.String("provider", "", "the provider whose payments the report settles (default: stripe for -format stripe, paypal for -format paypal, mollie for -format mollie; required for generic)")
	url := rf.fs.String("url", "", "address of a running paystate to send the report to, http://host:port or host:port (default: when a running paystate holds the bbolt file, the server.listen of -config)")
	key := rf.fs.String("api-key", "", "API key of the running paystate (default: PAYSTATE_API_KEY)")
	file, err := parseWithFile(rf.fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if *url != "" {
		if _, err := serverURL(*url); err != nil {
			return err
		}
	}
	// A provider's own format names its provider; a generic file names none.
	scan, ok := map[string]func(io.Reader, func(pay.SettlementLine) error) error{
		"stripe": reconcile.ScanStripe, "paypal": reconcile.ScanPayPal, "mollie": reconcile.ScanMollie, "generic": reconcile.ScanGeneric,
	}[*format]
	switch {
	case !ok:
		return usageError(fmt.Errorf("reconcile import: -format %q: want stripe, paypal, mollie or generic", *format))
	case *provider == "" && *format == "generic":
		return usageError(errors.New("reconcile import: -provider is required with -format generic"))
	case *provider == "":
		*provider = *format
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("reconcile import: %w", err)
	}
	defer f.Close()
	if *url != "" {
		return reconcileUpload(ctx, f, file, *format, *provider, *url, apiKey(*key), stdout, stderr)
	}
	db, cfg, err := rf.open(ctx)
	if errors.Is(err, store.ErrLocked) {
		// A running paystate holds the bbolt file: it imports the report.
		cfg, _, cerr := loadConfig(*rf.cfgPath)
		if cerr != nil {
			return cerr
		}
		addr := serverAddr(*rf.cfgPath, cfg)
		fmt.Fprintf(stderr, "reconcile import: the database is in use by a running paystate; sending the report to %s\n", addr)
		return reconcileUpload(ctx, f, file, *format, *provider, addr, apiKey(*key), stdout, stderr)
	} else if err != nil {
		return err
	}
	defer db.Close()
	// The engine reads the file twice: whole, to refuse a malformed file
	// before anything is posted, then a batch of lines per transaction.
	var p *progress
	defer func() { p.finish() }()
	eng := &reconcile.Engine{Store: db, SettleWithin: cfg.Reconcile.SettleWithin.Duration, Progress: func(done, total int) {
		if p == nil {
			p = newProgress(stderr, progressOptions{Desc: "reconcile import", Unit: "lines", Total: int64(total)})
		}
		p.set(int64(done))
	}}
	run, err := eng.Import(ctx, *provider, "import:"+*format+":"+file, reconcile.FileLines(f, scan))
	if err != nil {
		return reconcileError("reconcile import: "+clean(file), err)
	}
	p.finish()
	return printRun(stdout, run)
}

// reconcileUpload sends the report in f to the running paystate at
// addr (POST /v1/reconciliation/runs, streamed as it is read, its
// progress in bytes on stderr), which imports it as `reconcile import`
// would, and prints the run it answers.
func reconcileUpload(ctx context.Context, f *os.File, file, format, provider, addr, key string, stdout, stderr io.Writer) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reconcile import: %w", err)
	}
	c := &httpd.Client{BaseURL: addr, APIKey: key}
	p := newProgress(stderr, progressOptions{Desc: "reconcile import: sending", Bytes: true, Total: st.Size()})
	run, err := c.ImportReport(ctx, format, provider, filepath.Base(file), io.TeeReader(f, p.writer(io.Discard)), st.Size())
	p.finish()
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted: a report cut off while it was sent posts
			// nothing; one the server received whole, it imports.
			err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
		}
		return reconcileError("reconcile import: "+clean(file), printable(err))
	}
	return printRun(stdout, run)
}

// reconcileError is err of a reconciliation as the command prints it:
// the message of a *pay.Error (not its internal form), characters of
// the report that are not printable text replaced (clean), and the exit
// code of the signal that interrupted it.
func reconcileError(prefix string, err error) error {
	msg := err.Error()
	var (
		pe *pay.Error
		ke *keyError
	)
	if errors.As(err, &ke) {
		msg = ke.Error() // where the key comes from, not the server's words
	} else if errors.As(err, &pe) && !errors.Is(err, reconcile.ErrInterrupted) {
		msg = pe.Message
		if code := pay.ErrorCode(err); code != pay.EINVALID {
			msg += " (" + code + ")"
		}
	}
	out := fmt.Errorf("%s: %s", prefix, clean(msg))
	if in := (*Interrupted)(nil); errors.As(err, &in) {
		return &interruptedError{err: out, in: in}
	}
	return out
}

// interruptedError is a command's error when a signal stopped it: its
// exit code is the signal's (ExitCode).
type interruptedError struct {
	err error
	in  *Interrupted
}

func (e *interruptedError) Error() string   { return e.err.Error() }
func (e *interruptedError) Unwrap() []error { return []error{e.err, e.in} }

// reconcileStripe is `paystate reconcile stripe -since DATE`.
func reconcileStripe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rf := newReconcileFlags("reconcile stripe", "reconcile stripe -since DATE [-db FILE | -config FILE]",
		`Read Stripe's balance transactions created since DATE (paged, through
the API at providers.stripe.api_base with providers.stripe.secret_key)
and match them. Balance transactions name no payout: their fees are
posted, their payouts when a payout reconciliation report is imported.`)
	since := rf.fs.String("since", "", "the first day (2006-01-02, UTC) or time (RFC 3339) of the balance transactions (required)")
	if err := rf.fs.parse(args, stdout, stderr); err != nil {
		return err
	}
	from, err := parseSince(*since)
	if err != nil {
		return usageError(err)
	}
	cfg, _, err := loadConfig(*rf.cfgPath)
	if err != nil {
		return err
	}
	st := cfg.Providers.Stripe
	if st == nil || st.SecretKey == "" {
		return usageError(errors.New("reconcile stripe: providers.stripe.secret_key is required (config file or PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY)"))
	}
	lines, err := reconcile.Stripe{SecretKey: st.SecretKey, APIBase: st.APIBase}.Lines(ctx, from)
	if err != nil {
		return fmt.Errorf("reconcile stripe: %w", err)
	}
	db, cfg, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	eng := &reconcile.Engine{Store: db, SettleWithin: cfg.Reconcile.SettleWithin.Duration}
	run, err := eng.Run(ctx, "stripe", "api:stripe:since "+from.Format(time.RFC3339), lines)
	if err != nil {
		return reconcileError("reconcile stripe", err)
	}
	return printRun(stdout, run)
}

// parseSince reads -since: a date or an RFC 3339 time.
func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("reconcile stripe: -since is required")
	}
	for _, layout := range []string{"2006-01-02", time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("reconcile stripe: -since %q: want a date (2006-01-02) or an RFC 3339 time", s)
}

// printRun prints a run as a table and returns ErrUnreconciled (exit 3)
// if something did not match.
func printRun(w io.Writer, run pay.ReconRun) error {
	fmt.Fprintf(w, "run %s  provider %s  source %s\n", run.ID, run.Provider, clean(run.Source))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "lines\tmatched\tposted\tmismatched\tmissing_locally\tmissing_at_psp")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\n", run.Lines, run.Matched, run.Posted, run.Mismatched, run.MissingLocally, run.MissingAtPSP)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(run.Items) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tLINE\tID\tREFERENCE\tPAYMENT\tAMOUNT\tEXPECTED\tNOTE")
		for _, it := range run.Items {
			line, expected := "-", "-"
			if it.Line > 0 {
				line = fmt.Sprint(it.Line)
			}
			if it.Kind == pay.ReconAmountMismatch || it.Kind == pay.ReconChangedSincePosted {
				expected = pay.FormatAmount(it.Expected, it.Currency)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Kind, line, dash(clean(it.LineID)), dash(clean(it.ProviderRef)), dash(it.PaymentID),
				pay.FormatAmount(it.Amount, it.Currency), expected, clean(it.Note))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if n := run.Mismatched + run.MissingLocally + run.MissingAtPSP; n > len(run.Items) {
			fmt.Fprintf(w, "(%d more not listed)\n", n-len(run.Items))
		}
	}
	if !run.OK() {
		return &exitError{code: ExitVerify, err: fmt.Errorf("%w: %d mismatched (amount_mismatch or changed_since_posted), %d missing locally, %d missing at the PSP",
			ErrUnreconciled, run.Mismatched, run.MissingLocally, run.MissingAtPSP)}
	}
	return nil
}

// dash is s, or "-" when it is empty.
func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
