package httpd

import (
	"context"
	"encoding/csv"
	"io"
	"math"
	"mime"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
)

// CSV export of the payment list.
//
// GET /v1/payments with Accept: text/csv answers the list with the same
// filters as CSV (RFC 4180, written with encoding/csv): a header row
// (csvColumns), then one row per payment, newest first in the order of
// the JSON list, with Content-Type "text/csv; charset=utf-8;
// header=present" and a Content-Disposition naming a file.
//
// Paging: the answer is every matching payment, not one page. paystate
// walks the list itself with its cursor, pay.MaxListLimit payments per
// read transaction, and streams each page as it is read, so an export of
// any size holds no transaction while the client downloads and keeps no
// more than a page in memory. `cursor` starts the walk where a JSON page
// ended; `limit`, when given, caps the number of rows (any positive
// number); there is no next cursor. A payment created during the export
// is not in it (the walk goes from newest to oldest); with a status filter
// alone the list is in order of update, so a payment that changes status
// during the export may be missed or listed twice, as in the JSON list.
//
// Errors: a bad filter or a first page that cannot be read is the usual
// JSON error answer. Once rows are streaming the status line is sent; a
// later page that cannot be read ends the response without its final
// chunk, so the client sees a broken transfer rather than a short file
// that looks complete, and the error is logged with the request id.
//
// The view decides what is exported (finalize.View): never a client
// secret or redirect URL. Amounts are in minor units, times RFC 3339 UTC.
// Text that a spreadsheet would run as a formula (a cell of merchant or
// customer input starting with =, +, -, @, a tab or a carriage return) is
// prefixed with a single quote, as OWASP recommends against CSV injection.

// csvColumns is the header row of the CSV export.
var csvColumns = []string{
	"id", "order_id", "amount", "currency", "status", "terminal", "version",
	"provider", "provider_ref", "customer_id", "customer_email", "created_at", "updated_at",
}

// csvContentType is the media type of the CSV export.
const csvContentType = "text/csv; charset=utf-8; header=present"

// wantsCSV reports whether the request's Accept header prefers text/csv to
// application/json. A type named in the header outranks one only reached
// through a wildcard; at equal weight JSON wins.
func wantsCSV(rc *fasthttp.RequestCtx) bool {
	csvQ, jsonQ := 0.0, 0.0
	for _, part := range strings.Split(string(rc.Request.Header.Peek("Accept")), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil || q < 0 || q > 1 {
				continue
			}
		}
		switch mt {
		case "text/csv":
			csvQ = max(csvQ, q)
		case "application/json":
			jsonQ = max(jsonQ, q)
		}
	}
	return csvQ > 0 && csvQ > jsonQ
}

// writePaymentsCSV answers the CSV export of the payments that match f.
func (s *Server) writePaymentsCSV(rc *fasthttp.RequestCtx, f pay.PaymentFilter) error {
	maxRows := math.MaxInt
	if v := rc.QueryArgs().Peek("limit"); len(v) > 0 {
		n, err := fasthttp.ParseUint(v)
		if err != nil || n < 1 {
			return pay.Invalidf("limit", "limit must be a positive integer (the most rows to export), got %q", truncate(string(v), 32))
		}
		maxRows = n
	}
	// The first page is read before the answer starts, so that a cursor
	// or a store that fails is an error answer.
	f.Limit = min(maxRows, pay.MaxListLimit)
	ctx, cancel := s.requestContext()
	first, next, err := s.Payments.List(ctx, f)
	cancel()
	if err != nil {
		return err
	}

	name := "payments-" + s.Now().UTC().Format("20060102T150405Z") + ".csv"
	rc.Response.Header.SetContentType(csvContentType)
	rc.Response.Header.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetStatusCode(fasthttp.StatusOK)
	if rc.IsHead() {
		return nil
	}
	pr, pw := io.Pipe()
	export := &csvExport{
		list: s.Payments.List, ctx: s.requestContext, f: f, first: first, next: next, left: maxRows,
		log: s.Logger.With().Str("request_id", requestID(rc)).Logger(),
	}
	go export.run(pw)
	rc.SetBodyStream(&csvStream{r: pr, conn: rc.Conn(), stall: s.RequestTimeout + 5*time.Second}, -1)
	return nil
}

// csvExport walks the list page by page and writes it as CSV.
type csvExport struct {
	list  func(ctx context.Context, f pay.PaymentFilter) ([]pay.Payment, string, error)
	ctx   func() (context.Context, context.CancelFunc)
	f     pay.PaymentFilter
	first []pay.Payment
	next  string
	left  int // rows still allowed
	log   zerolog.Logger
}

// run writes the export into pw and closes it: cleanly at the end, with
// the error when a page cannot be read or the client went away.
func (e *csvExport) run(pw *io.PipeWriter) {
	out := &countingWriter{w: pw}
	w := csv.NewWriter(out)
	rows, err := e.write(w)
	if err == nil {
		w.Flush()
		err = w.Error()
	}
	if err != nil {
		e.log.Error().Err(err).Int("rows", rows).Int64("bytes", out.n).Msg("payments CSV export ended early")
		_ = pw.CloseWithError(err)
		return
	}
	// The access line was written when the stream started (streamed=true):
	// this line, at the same level, says what was sent.
	e.log.Info().Int("rows", rows).Int64("bytes", out.n).Msg("payments CSV export sent")
	_ = pw.Close()
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// write writes the header and every page, flushing each page.
func (e *csvExport) write(w *csv.Writer) (rows int, err error) {
	if err := w.Write(csvColumns); err != nil {
		return 0, err
	}
	page, next := e.first, e.next
	row := make([]string, len(csvColumns))
	for {
		for _, p := range page {
			if e.left == 0 {
				return rows, nil
			}
			if err := w.Write(csvRow(row, finalize.NewView(p))); err != nil {
				return rows, err
			}
			rows++
			e.left--
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return rows, err
		}
		if next == "" || e.left == 0 {
			return rows, nil
		}
		e.f.Cursor, e.f.Limit = next, min(e.left, pay.MaxListLimit)
		ctx, cancel := e.ctx()
		page, next, err = e.list(ctx, e.f)
		cancel()
		if err != nil {
			return rows, err
		}
	}
}

// csvRow fills row with the columns of csvColumns for one payment view.
func csvRow(row []string, v finalize.View) []string {
	row[0] = v.ID
	row[1] = csvText(v.OrderID)
	row[2] = strconv.FormatInt(v.Amount, 10)
	row[3] = v.Currency
	row[4] = string(v.Status)
	row[5] = strconv.FormatBool(v.Terminal)
	row[6] = strconv.FormatUint(v.Version, 10)
	row[7] = v.Provider
	row[8] = csvText(v.ProviderRef)
	row[9] = csvText(v.Customer.ID)
	row[10] = csvText(v.Customer.Email)
	row[11] = rfc3339(v.CreatedAt)
	row[12] = rfc3339(v.UpdatedAt)
	return row
}

// csvText is a cell of outside input, with a leading single quote when a
// spreadsheet would take it for a formula.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// csvStream is the export's body. Each read moves the connection's write
// deadline on, so the server's write timeout cuts only a client that takes
// nothing for that long, not a long download; Close (fasthttp closes the
// body when it is sent or the connection fails) stops the export.
type csvStream struct {
	r     *io.PipeReader
	conn  net.Conn
	stall time.Duration
}

// Read reads the export on.
func (c *csvStream) Read(p []byte) (int, error) {
	if c.conn != nil {
		_ = c.conn.SetWriteDeadline(time.Now().Add(c.stall))
	}
	return c.r.Read(p)
}

// Close stops the export: its next write fails.
func (c *csvStream) Close() error { return c.r.Close() }
