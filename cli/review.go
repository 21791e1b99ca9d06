package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
)

// The review command's synopses, by subcommand, and what it does.
var (
	reviewSynopsis = map[string]string{
		"list":    "review list    [-url URL] [-config FILE] [-api-key KEY] [-json]",
		"resolve": "review resolve -id ID -status STATUS -note TEXT [-url URL] [-config FILE] [-api-key KEY] [-json]",
	}
	reviewAbout = `The review queue of a running paystate, over its HTTP API (GET /v1/review,
POST /v1/review/{id}/resolve). The server is -url (http://host:port or
host:port), else the server.listen of -config (default: the embedded
defaults, 127.0.0.1:8080; a wildcard address such as 0.0.0.0 is reached
on loopback). The API key is -api-key, else PAYSTATE_API_KEY; it is not
read from the config file.

resolve -id is the review item's id: the payment id, or orphan_<provider>_<event>
for a PSP event paystate could not place. A payment is resolved with the
status a human has established (captured, failed, refunded, ...), which goes
through finalize like any other observation; an orphan can only be resolved
with -status ` + finalize.StatusDismissed + `. -note is required: it is kept in the timeline.
`
	reviewUsage = "usage:\n  paystate " + reviewSynopsis["list"] + "\n  paystate " + reviewSynopsis["resolve"] + "\n\n" + reviewAbout
)

// runReview is `paystate review list|resolve`.
func runReview(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			fmt.Fprint(stdout, reviewUsage)
			return nil
		}
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "resolve") {
		fmt.Fprint(stderr, reviewUsage)
		if len(args) == 0 {
			return usageError(errors.New("review: list or resolve?"))
		}
		return usageError(fmt.Errorf("review: unknown subcommand %q", args[0]))
	}
	sub := args[0]
	fs := newFlags("review "+sub, reviewSynopsis[sub], reviewAbout)
	base := fs.String("url", "", "address of the running paystate, http://host:port or host:port (default: server.listen of -config)")
	cfgPath := fs.String("config", "", "config of the running paystate (for its server.listen)")
	key := fs.String("api-key", "", "API key (default: PAYSTATE_API_KEY)")
	asJSON := fs.Bool("json", false, "print the server's answer as JSON")
	var id, status, note *string
	if sub == "resolve" {
		id = fs.String("id", "", "review item id: the payment id, or orphan_<provider>_<event> (required)")
		status = fs.String("status", "", `the established status (captured, failed, refunded, ...), or "`+finalize.StatusDismissed+`" for an orphan (required)`)
		note = fs.String("note", "", "why: kept in the payment's timeline (required)")
	}
	if err := fs.parse(args[1:], stdout, stderr); err != nil {
		return err
	}
	if sub == "resolve" {
		switch {
		case *id == "":
			return usageError(errors.New("review resolve: -id is required"))
		case *status == "":
			return usageError(errors.New("review resolve: -status is required"))
		case *note == "":
			return usageError(errors.New("review resolve: -note is required: say why"))
		}
	}
	c, err := newClient(*base, *cfgPath, *key)
	if err != nil {
		return fmt.Errorf("review %s: %w", sub, err)
	}
	c.HTTP = &http.Client{Timeout: 60 * time.Second}

	if sub == "list" {
		list, err := c.ListReview(ctx)
		if err != nil {
			return fmt.Errorf("review list: %w", printable(err))
		}
		if *asJSON {
			return writeIndented(stdout, list)
		}
		return printReviewList(stdout, list.Data)
	}

	p, err := c.Resolve(ctx, *id, *status, *note)
	if err != nil {
		return fmt.Errorf("review resolve %s: %w", *id, printable(err))
	}
	if *asJSON {
		return writeIndented(stdout, p)
	}
	if p.Version == 0 { // an orphan, dismissed
		fmt.Fprintf(stdout, "%s %s\n", clean(p.ID), clean(p.Status))
	} else {
		fmt.Fprintf(stdout, "%s resolved: %s (version %d)\n", clean(p.ID), clean(p.Status), p.Version)
	}
	return nil
}

// newClient is the client of a running paystate: at base, else at the
// server.listen of the config at cfgPath (serverAddr), with the API key of
// apiKey. A bad -url or config is a usage error.
func newClient(base, cfgPath, key string) (*httpd.Client, error) {
	if base != "" {
		if _, err := serverURL(base); err != nil {
			return nil, err
		}
	} else {
		var cfg config.Config
		if cfgPath != "" {
			var err error
			if cfg, _, err = loadConfig(cfgPath); err != nil {
				return nil, err
			}
		}
		base = serverAddr(cfgPath, cfg)
	}
	return &httpd.Client{BaseURL: base, APIKey: apiKey(key)}, nil
}

// serverAddr is the address a command dials to reach the paystate of the
// config cfg read from cfgPath ("": the embedded defaults with the
// environment, or their listen address if those do not validate): its
// server.listen, with a wildcard host (0.0.0.0, [::], none) replaced by
// loopback. The Host header is then that loopback address, which the
// server always serves, whatever server.allowed_hosts says.
func serverAddr(cfgPath string, cfg config.Config) string {
	listen := cfg.Server.Listen
	if cfgPath == "" {
		listen = config.DefaultConfig().Server.Listen
		if c, _, err := loadConfig(""); err == nil {
			listen = c.Server.Listen
		}
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		if ip.Is6() {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return listen
}

// apiKey returns the API key for a running paystate: the flag's, else
// PAYSTATE_API_KEY ("" if neither: a loopback-only server). It is never
// taken from a config file: keys belong in the environment, and the
// server's own PAYSTATE_AUTH_API_KEYS may list several.
func apiKey(flagKey string) string {
	if flagKey != "" {
		return flagKey
	}
	return os.Getenv("PAYSTATE_API_KEY")
}

// printReviewList prints the queue as a table, oldest first.
func printReviewList(w io.Writer, items []httpd.ReviewItem) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, "the review queue is empty")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREASON\tSTATUS\tPROVIDER\tSINCE\tSTEPS\tWEBHOOKS\tLAST PSP ANSWER\tNOTE")
	for _, it := range items {
		status := "-"
		if p := it.Evidence.Payment; p != nil {
			status = fmt.Sprintf("%s v%d", p.Status, p.Version)
		}
		psp := "-"
		if a := it.Evidence.LastPSPStatus; a != nil {
			psp = a.Raw
			if a.Error != "" {
				psp = "error: " + a.Error
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n",
			clean(it.ID), clean(it.Reason), clean(status), clean(it.Provider), clean(it.CreatedAt),
			len(it.Evidence.Timeline), len(it.Evidence.Webhooks), clean(psp), clean(it.Note))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d item(s); `paystate review list -json` shows the evidence\n", len(items))
	return err
}

// writeIndented writes v as indented JSON, with a final newline.
func writeIndented(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// printable is err with the server's code and message cleaned (see
// clean): an error is printed on the operator's terminal. A 401 says
// where the command takes its key from.
func printable(err error) error {
	var e *httpd.APIError
	if !errors.As(err, &e) {
		return err
	}
	if e.Status == http.StatusUnauthorized {
		return &keyError{e}
	}
	c := *e
	c.Code, c.Message = clean(e.Code), clean(e.Message)
	return &c
}

// keyError is a 401 of a running paystate, told in the command's terms:
// where it takes the key from. It unwraps to the server's answer.
type keyError struct{ api *httpd.APIError }

func (e *keyError) Error() string {
	return "the server refused the API key (unauthorized, HTTP 401): pass the key with -api-key KEY or in the environment as PAYSTATE_API_KEY"
}
func (e *keyError) Unwrap() error { return e.api }

// clean makes text from the server (which may come from a PSP's webhook)
// safe to print on a terminal: control and format characters (escape
// sequences, bidirectional overrides) become '?', and tabs a space.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return '?'
		}
		return r
	}, s)
}
