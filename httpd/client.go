package httpd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paystate/paystate/pay"
)

// Client talks to a running paystate over the API this package serves,
// in its wire format: the CLI's commands that reach a server (review,
// backup) use it, so the wire structs are declared once, here.
type Client struct {
	// BaseURL is the server: http://host:port, https://host:port or
	// host:port (http).
	BaseURL string
	// APIKey is sent as a bearer token; "" sends none (a loopback-only
	// server without keys).
	APIKey string
	// HTTP sends the requests; nil is http.DefaultClient, which has no
	// timeout (a backup may take long): bound a call with its context.
	HTTP *http.Client
}

// ReviewItem is a review item with its evidence, as GET /v1/review
// answers it.
type ReviewItem = reviewItemJSON

// ReviewList is the answer of GET /v1/review: the queue, oldest first.
type ReviewList struct {
	Data []ReviewItem `json:"data"`
}

// Payment is a payment's client view, as the API answers it.
type Payment = paymentJSON

// APIError is an answer other than 2xx. The server's error body gives
// Code (its wire error.code), Message and Param; an answer without that
// shape (a proxy's) has no Code and the start of its body as Message.
type APIError struct {
	Status    int // HTTP status
	Code      string
	Message   string
	Param     string // the request field at fault, for invalid_request
	RequestID string
}

// Error is the message with its code and HTTP status.
func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// Unwrap is the answer as a *pay.Error, so that pay.ErrorCode(err) is the
// server's code as pay names it (DomainCode); nil if the answer had none.
func (e *APIError) Unwrap() error {
	if e.Code == "" {
		return nil
	}
	return &pay.Error{Code: DomainCode(e.Code), Message: e.Message, Param: e.Param}
}

// ListReview returns the review queue with each item's evidence.
func (c *Client) ListReview(ctx context.Context) (ReviewList, error) {
	var out ReviewList
	err := c.call(ctx, "GET", "/v1/review", nil, &out)
	return out, err
}

// Resolve resolves review item id (a payment id, or an orphan's
// orphan_<provider>_<event>) with status and the human's note. It returns
// the payment as resolved; for an orphan, which can only be dismissed
// (finalize.StatusDismissed), only ID and Status are set.
func (c *Client) Resolve(ctx context.Context, id, status, note string) (Payment, error) {
	var out Payment
	err := c.call(ctx, "POST", "/v1/review/"+url.PathEscape(id)+"/resolve", resolveRequest{Status: status, Note: note}, &out)
	return out, err
}

// Backup writes a consistent copy of the server's database (GET
// /admin/backup) to w and returns its size.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	res, err := c.send(ctx, "GET", "/admin/backup", nil)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	return io.Copy(w, res.Body)
}

// ImportReport sends a settlement report, read from body (size bytes, or
// -1 if unknown), to POST /v1/reconciliation/runs as it is read, and
// returns the run the server stored: what `paystate reconcile import`
// does when a running paystate holds the bbolt file. name names the
// report in the run's source.
func (c *Client) ImportReport(ctx context.Context, format, provider, name string, body io.Reader, size int64) (pay.ReconRun, error) {
	q := url.Values{"format": {format}, "name": {name}}
	if provider != "" {
		q.Set("provider", provider)
	}
	res, err := c.do(ctx, "POST", "/v1/reconciliation/runs?"+q.Encode(), "text/csv", body, size)
	if err != nil {
		return pay.ReconRun{}, err
	}
	defer res.Body.Close()
	var out reconRunJSON
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<20)).Decode(&out); err != nil {
		return pay.ReconRun{}, fmt.Errorf("POST /v1/reconciliation/runs: malformed answer: %w", err)
	}
	return out.run(), nil
}

// run is a run as the API answered it.
func (j reconRunJSON) run() pay.ReconRun {
	created, _ := time.Parse(time.RFC3339Nano, j.CreatedAt)
	r := pay.ReconRun{
		ID: j.ID, Provider: j.Provider, Source: j.Source, Lines: j.Lines, Matched: j.Matched, Mismatched: j.Mismatched,
		MissingLocally: j.MissingLocally, MissingAtPSP: j.MissingAtPSP, Posted: j.Posted, CreatedAt: created,
	}
	for _, it := range j.Items {
		ri := pay.ReconItem{Kind: it.Kind, Line: it.Line, LineID: it.LineID, ProviderRef: it.ProviderRef, PaymentID: it.PaymentID,
			Amount: it.Amount, Currency: it.Currency, Note: it.Note}
		if it.Expected != nil {
			ri.Expected = *it.Expected
		}
		r.Items = append(r.Items, ri)
	}
	return r
}

// call sends in (if not nil) as JSON and decodes the answer into out.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	res, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: malformed answer: %w", method, path, err)
	}
	return nil
}

// send sends one request and returns a 2xx answer; any other answer is an
// *APIError.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	if body == nil {
		return c.do(ctx, method, path, "", nil, 0)
	}
	return c.do(ctx, method, path, "application/json", bytes.NewReader(body), int64(len(body)))
}

// do sends one request with a body of contentType read from body (size
// bytes, -1 if unknown: sent chunked) and returns a 2xx answer; any other
// answer is an *APIError.
func (c *Client) do(ctx context.Context, method, path, contentType string, body io.Reader, size int64) (*http.Response, error) {
	base, err := c.base()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", contentType)
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			// Nothing listens there, or the name does not resolve: say
			// which address was tried and how to give another.
			return nil, fmt.Errorf("cannot reach paystate at %s (is it running there? -url sets the address): %w", base, err)
		}
		return nil, err
	}
	if res.StatusCode/100 == 2 {
		return res, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var e errorBody
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		return nil, &APIError{Status: res.StatusCode, Code: e.Error.Code, Message: e.Error.Message, Param: e.Error.Param, RequestID: e.Error.RequestID}
	}
	return nil, &APIError{Status: res.StatusCode, Message: truncate(strings.TrimSpace(string(b)), 200)}
}

// base is BaseURL with its scheme (http if it has none) and without a
// trailing slash.
func (c *Client) base() (string, error) {
	s := strings.TrimRight(c.BaseURL, "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("server address %q: want http://host:port, https://host:port or host:port", c.BaseURL)
	}
	return s, nil
}
