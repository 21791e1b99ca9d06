package reconcile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/paystate/paystate/pay"
)

// MaxLines bounds the lines of one report file.
const MaxLines = 1_000_000

// row is one record of a CSV file, read through its header.
type row struct {
	line   int
	cols   map[string]int
	record []string
}

// get returns the value of column name, "" if the file has no such column.
func (r row) get(name string) string {
	i, ok := r.cols[name]
	if !ok {
		return ""
	}
	return strings.TrimSpace(r.record[i])
}

// errorf is an error about the row, with its line number and column.
func (r row) errorf(col, format string, args ...any) error {
	return pay.Invalidf(col, "line %d: %s: %s", r.line, col, fmt.Sprintf(format, args...))
}

// readCSV reads a CSV file with a header row naming its columns (any
// order, case and surrounding space ignored; a byte order mark before
// the first is skipped), checks that the required columns are there, and
// calls fn with every record. Every error names its line.
func readCSV(r io.Reader, required []string, fn func(row) error) error {
	br := &bomSkipper{r: r}
	cr := csv.NewReader(br)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return pay.Invalidf("header", "line 1: the file is empty: a header row is required")
	} else if err != nil {
		return csvError(err)
	}
	cols := make(map[string]int, len(header))
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		if _, dup := cols[h]; dup {
			return pay.Invalidf("header", "line 1: column %q appears twice", h)
		}
		cols[h] = i
	}
	for _, c := range required {
		if _, ok := cols[c]; !ok {
			return pay.Invalidf("header", "line 1: column %q is missing", c)
		}
	}
	return eachRecord(cr, func(line int, rec []string) error {
		return fn(row{line: line, cols: cols, record: rec})
	})
}

// eachRecord calls fn with every record left in cr and its line number,
// at most MaxLines of them.
func eachRecord(cr *csv.Reader, fn func(line int, rec []string) error) error {
	for n := 0; ; n++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return csvError(err)
		}
		line, _ := cr.FieldPos(0)
		if n >= MaxLines {
			return pay.Invalidf("lines", "line %d: more than %d lines", line, MaxLines)
		}
		if err := fn(line, rec); err != nil {
			return err
		}
	}
}

// csvError is a CSV syntax error with its line.
func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pay.Invalidf("csv", "line %d: %v", pe.Line, pe.Err)
	}
	return fmt.Errorf("read csv: %w", err)
}

// bomSkipper drops a UTF-8 byte order mark at the start of a stream.
type bomSkipper struct {
	r    io.Reader
	done bool
	buf  []byte
}

func (b *bomSkipper) Read(p []byte) (int, error) {
	if !b.done {
		b.done = true
		head := make([]byte, 3)
		n, err := io.ReadFull(b.r, head)
		head = head[:n]
		if !bytes.HasPrefix(head, []byte("\xef\xbb\xbf")) {
			b.buf = head
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return 0, err
		}
	}
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	}
	return b.r.Read(p)
}

// parseCurrency checks a three-letter currency code and returns it upper
// case.
func parseCurrency(r row, col string) (string, error) {
	c := strings.ToUpper(r.get(col))
	if len(c) != 3 || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return "", r.errorf(col, "%q is not a three-letter currency code", r.get(col))
	}
	return c, nil
}

// parseAmount reads a decimal amount in major units ("-12.50") of a
// currency as minor units (-1250), exactly: no floating point, no more
// decimals than the currency has (trailing zeros aside). An empty value
// is 0 when optional.
func parseAmount(r row, col, currency string, optional bool) (int64, error) {
	s := r.get(col)
	if s == "" {
		if optional {
			return 0, nil
		}
		return 0, r.errorf(col, "an amount is required")
	}
	v, err := ParseAmount(s, currency)
	if err != nil {
		return 0, r.errorf(col, "%v", err)
	}
	return v, nil
}

// ParseAmount reads a decimal amount in major units of currency ("12.50",
// "-4", "1500" for JPY) as minor units, exactly (pay.ParseAmount).
func ParseAmount(s, currency string) (int64, error) { return pay.ParseAmount(s, currency) }

// parseTime reads an optional time: RFC 3339, "2006-01-02 15:04:05"
// (UTC, as Stripe's reports write it) or a date.
func parseTime(r row, col string) (time.Time, error) {
	s := r.get(col)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, r.errorf(col, "%q is not a time (RFC 3339, 2006-01-02 15:04:05 or 2006-01-02)", s)
}

// checkText refuses a value too long to store, or one that is not
// printable text (a control, format or bidirectional character): the
// message says which character, never the value.
func checkText(r row, col string) (string, error) {
	s := r.get(col)
	if len(s) > pay.MaxStoredPart {
		return "", r.errorf(col, "longer than %d bytes", pay.MaxStoredPart)
	}
	if err := pay.ValidateText(col, s, pay.MaxStoredPart); err != nil {
		return "", r.errorf(col, "%s", strings.TrimPrefix(pay.ErrorMessage(err), col+" "))
	}
	return s, nil
}

// scanLines reads a settlement CSV whose header has the required
// columns, one line at a time through parse, and calls fn with each; it
// stops at the first fault of the file or error of fn.
func scanLines(r io.Reader, required []string, parse func(row) (pay.SettlementLine, error), fn func(pay.SettlementLine) error) error {
	return readCSV(r, required, func(rw row) error {
		l, err := parse(rw)
		if err != nil {
			return err
		}
		return fn(l)
	})
}

// readLines reads a whole settlement report in format scan (ScanGeneric,
// ScanPayPal, ...) into memory and checks it (CheckLines): every line, or
// the first fault (nothing of a malformed file).
func readLines(r io.Reader, scan func(io.Reader, func(pay.SettlementLine) error) error) ([]pay.SettlementLine, error) {
	var out []pay.SettlementLine
	err := scan(r, func(l pay.SettlementLine) error {
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := CheckLines(SliceLines(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// FileLines is the report in file f, in format scan (ScanGeneric,
// ScanStripe), read from its start at each pass.
func FileLines(f io.ReadSeeker, scan func(io.Reader, func(pay.SettlementLine) error) error) Lines {
	return func(fn func(pay.SettlementLine) error) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("read report: %w", err)
		}
		return scan(bufio.NewReaderSize(f, 64<<10), fn)
	}
}

// lineKey is what CheckLines keeps of a line: hashes of its id and of
// its figures, and its number.
type lineKey struct {
	id, figures uint64
	line        int
}

// CheckLines reads a report whole and returns its count of lines, or the
// first fault of the file, or an error naming both lines of a balance
// transaction that appears twice with other figures (the PSP cannot have
// moved one balance transaction two ways; which line is right is for a
// human to say). The same line twice (the same figures) is accepted: it
// posts once. Its memory is a fixed-size key per line (24 bytes, at
// most MaxLines of them), not the lines.
func CheckLines(lines Lines) (int, error) {
	seed := maphash.MakeSeed()
	var keys []lineKey
	err := lines(func(l pay.SettlementLine) error {
		keys = append(keys, lineKey{id: maphash.String(seed, l.ID), figures: figuresHash(seed, l), line: l.Line})
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := len(keys)
	slices.SortFunc(keys, func(a, b lineKey) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.line, b.line)
	})
	// Pairs of lines whose ids hash alike with other figures; the ids
	// themselves are compared on a second read of those lines only (two
	// ids may share a hash).
	type pair struct{ a, b int }
	var pairs []pair
	want := map[int]bool{}
	for i := 0; i < len(keys) && len(pairs) < 16; {
		j := i + 1
		for j < len(keys) && keys[j].id == keys[i].id {
			if keys[j].figures != keys[i].figures {
				pairs = append(pairs, pair{keys[i].line, keys[j].line})
				want[keys[i].line], want[keys[j].line] = true, true
				break
			}
			j++
		}
		for j < len(keys) && keys[j].id == keys[i].id {
			j++
		}
		i = j
	}
	keys = nil
	if len(pairs) == 0 {
		return n, nil
	}
	got := map[int]pay.SettlementLine{}
	if err := lines(func(l pay.SettlementLine) error {
		if want[l.Line] {
			got[l.Line] = l
		}
		return nil
	}); err != nil {
		return 0, err
	}
	slices.SortFunc(pairs, func(x, y pair) int { return cmp.Compare(x.b, y.b) })
	for _, p := range pairs {
		a, b := got[p.a], got[p.b]
		if a.ID == b.ID && figuresHash(seed, a) != figuresHash(seed, b) {
			return 0, pay.Invalidf("id", "line %d: balance transaction %q is also on line %d, with other figures: the report is refused, nothing was posted",
				b.Line, b.ID, a.Line)
		}
	}
	return n, nil
}

// figuresHash hashes what a line says of its balance transaction (its
// number and available_on aside): two lines of one id with one hash are
// the same line twice.
func figuresHash(seed maphash.Seed, l pay.SettlementLine) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	for _, s := range []string{string(l.Kind), l.Category, l.ProviderRef, l.Currency, l.PayoutID} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(l.Amount))
	binary.LittleEndian.PutUint64(b[8:], uint64(l.Fee))
	h.Write(b[:])
	return h.Sum64()
}
