package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/paystate/paystate/config"
)

const reviewUsage = `usage:
  paystate review list    [-url URL] [-config FILE] [-api-key KEY] [-json]
  paystate review resolve -id ID -status STATUS -note TEXT [-url URL] [-config FILE] [-api-key KEY] [-json]

The review queue of a running paystate, over its HTTP API (GET /v1/review,
POST /v1/review/{id}/resolve). The server is -url, else the server.listen of
-config (default: the embedded defaults, http://127.0.0.1:8080). The API key
is -api-key, else PAYSTATE_API_KEY, else the first auth.api_keys of -config.

resolve -id is the review item's id: the payment id, or orphan_<provider>_<event>
for a PSP event paystate could not place. A payment is resolved with the
status a human has established (captured, failed, refunded, ...), which goes
through finalize like any other observation; an orphan can only be resolved
with -status dismissed. -note is required: it is kept in the timeline.
`

// reviewClient talks to one paystate's review API.
type reviewClient struct {
	base   string
	apiKey string
	hc     *http.Client
}

// runReview is `paystate review list|resolve`.
func runReview(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "resolve") {
		fmt.Fprint(stderr, reviewUsage)
		if len(args) == 0 {
			return errors.New("review: list or resolve?")
		}
		return fmt.Errorf("review: unknown subcommand %q", args[0])
	}
	sub := args[0]
	fs := flag.NewFlagSet("review "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, reviewUsage) }
	base := fs.String("url", "", "base URL of the running paystate (default: server.listen of -config)")
	cfgPath := fs.String("config", "", "config of the running paystate (for its address and API key)")
	apiKey := fs.String("api-key", "", "API key (default: PAYSTATE_API_KEY or the config's first key)")
	asJSON := fs.Bool("json", false, "print the server's JSON answer")
	var id, status, note *string
	if sub == "resolve" {
		id = fs.String("id", "", "review item id: the payment id, or orphan_<provider>_<event> (required)")
		status = fs.String("status", "", `the established status (captured, failed, refunded, ...), or "dismissed" for an orphan (required)`)
		note = fs.String("note", "", "why: kept in the payment's timeline (required)")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("review %s: unexpected argument %q", sub, fs.Arg(0))
	}
	c, err := newReviewClient(*base, *cfgPath, *apiKey)
	if err != nil {
		return fmt.Errorf("review %s: %w", sub, err)
	}

	if sub == "list" {
		body, err := c.do(ctx, "GET", "/v1/review", nil)
		if err != nil {
			return fmt.Errorf("review list: %w", err)
		}
		if *asJSON {
			return writeIndented(stdout, body)
		}
		return printReviewList(stdout, body)
	}

	switch {
	case *id == "":
		return errors.New("review resolve: -id is required")
	case *status == "":
		return errors.New("review resolve: -status is required")
	case *note == "":
		return errors.New("review resolve: -note is required: say why")
	}
	req, err := json.Marshal(map[string]string{"status": *status, "note": *note})
	if err != nil {
		return err
	}
	body, err := c.do(ctx, "POST", "/v1/review/"+url.PathEscape(*id)+"/resolve", req)
	if err != nil {
		return fmt.Errorf("review resolve %s: %w", *id, err)
	}
	if *asJSON {
		return writeIndented(stdout, body)
	}
	var res struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return fmt.Errorf("review resolve %s: malformed answer: %w", *id, err)
	}
	if res.Version == 0 {
		fmt.Fprintf(stdout, "%s %s\n", clean(res.ID), clean(res.Status))
	} else {
		fmt.Fprintf(stdout, "%s resolved: %s (version %d)\n", clean(res.ID), clean(res.Status), res.Version)
	}
	return nil
}

// newReviewClient finds the server and the API key: flags first, then
// the environment, then the config.
func newReviewClient(base, cfgPath, apiKey string) (*reviewClient, error) {
	if base == "" || apiKey == "" {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return nil, err
		}
		if base == "" {
			base = "http://" + cfg.Server.Listen
		}
		apiKey = reviewAPIKey(apiKey, cfg)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-url must be an http or https URL, got %q", base)
	}
	return &reviewClient{base: strings.TrimRight(base, "/"), apiKey: apiKey, hc: &http.Client{Timeout: 60 * time.Second}}, nil
}

// reviewAPIKey returns the API key: the flag's, else PAYSTATE_API_KEY,
// else the config's first one ("" if none: a loopback-only server).
func reviewAPIKey(flagKey string, cfg config.Config) string {
	if flagKey != "" {
		return flagKey
	}
	if k := os.Getenv("PAYSTATE_API_KEY"); k != "" {
		return k
	}
	if len(cfg.Auth.APIKeys) > 0 {
		return cfg.Auth.APIKeys[0]
	}
	return ""
}

// do sends one request and returns the body of a 2xx answer; any other
// answer is an error with the server's code and message.
func (c *reviewClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return nil, fmt.Errorf("%s (%s, HTTP %d)", clean(e.Error.Message), clean(e.Error.Code), res.StatusCode)
		}
		return nil, fmt.Errorf("%s %s answered %s", method, c.base+path, res.Status)
	}
	return b, nil
}

// printReviewList prints the queue as a table, oldest first.
func printReviewList(w io.Writer, body []byte) error {
	var list struct {
		Data []struct {
			ID        string `json:"id"`
			Reason    string `json:"reason"`
			Provider  string `json:"provider"`
			Observed  string `json:"observed"`
			Note      string `json:"note"`
			CreatedAt string `json:"created_at"`
			Evidence  struct {
				Payment *struct {
					Status  string `json:"status"`
					Version uint64 `json:"version"`
				} `json:"payment"`
				Timeline      []json.RawMessage `json:"timeline"`
				Webhooks      []json.RawMessage `json:"webhooks"`
				LastPSPStatus *struct {
					Raw   string `json:"raw"`
					Error string `json:"error"`
				} `json:"last_psp_status"`
			} `json:"evidence"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("review list: malformed answer: %w", err)
	}
	if len(list.Data) == 0 {
		_, err := fmt.Fprintln(w, "the review queue is empty")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREASON\tSTATUS\tPROVIDER\tSINCE\tSTEPS\tWEBHOOKS\tLAST PSP ANSWER\tNOTE")
	for _, it := range list.Data {
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
	_, err := fmt.Fprintf(w, "%d item(s); `paystate review list -json` shows the evidence\n", len(list.Data))
	return err
}

// writeIndented writes a JSON answer indented, with a final newline.
func writeIndented(w io.Writer, body []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		return fmt.Errorf("malformed answer: %w", err)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

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
