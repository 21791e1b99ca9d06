package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestProgress_Plain: off a terminal, a line at most every progressEvery
// by the clock, and one at the end with the time taken.
func TestProgress_Plain(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)}
	var w bytes.Buffer
	p := newProgress(&w, progressOptions{Desc: "verify", Unit: "payments", Total: 5000, Now: clock.Now})
	for i := range 5000 {
		p.add(1)
		if i%1000 == 999 {
			clock.Advance(time.Second) // a line every other thousand
		}
	}
	p.finish()
	p.add(1) // after finish: nothing
	p.finish()
	want := "verify: 2001/5000 payments (40%)\n" +
		"verify: 4001/5000 payments (80%)\n" +
		"verify: 5000/5000 payments (100%) in 5s\n"
	if got := w.String(); got != want {
		t.Fatalf("plain progress:\n%s\nwant\n%s", got, want)
	}
}

func TestProgress_PlainUnknownTotalAndBytes(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)}
	var w bytes.Buffer
	p := newProgress(&w, progressOptions{Desc: "verify", Unit: "payments", Now: clock.Now})
	p.set(10)
	clock.Advance(3 * time.Second)
	p.set(1200)
	p.finish()
	if got, want := w.String(), "verify: 1200 payments\nverify: 1200 payments in 3s\n"; got != want {
		t.Fatalf("unknown total:\n%s\nwant\n%s", got, want)
	}

	w.Reset()
	b := newProgress(&w, progressOptions{Desc: "backup", Bytes: true, Total: 50_000_000, Now: clock.Now})
	out := b.writer(&bytes.Buffer{})
	chunk := make([]byte, 1_000_000)
	for range 12 {
		out.Write(chunk)
	}
	clock.Advance(2 * time.Second)
	out.Write(chunk)
	b.finish()
	if got, want := w.String(), "backup: 13 MB / 50 MB (26%)\nbackup: 13 MB / 50 MB (26%) in 2s\n"; got != want {
		t.Fatalf("bytes:\n%s\nwant\n%s", got, want)
	}
}

// TestProgress_Bar: on a terminal, the bar of progressbar (forced here, a
// buffer being no terminal).
func TestProgress_Bar(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	p := newProgress(&w, progressOptions{Desc: "simulate payments", Unit: "payments", Total: 40, Mode: progressBar})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				p.add(1)
			}
		})
	}
	wg.Wait()
	p.finish()
	out := w.String()
	for _, want := range []string{"simulate payments", "100%", "(40/40", "\r"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar lacks %q: %q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("bar does not end its line: %q", out)
	}

	// Unknown total: a spinner that ends at the count.
	w.Reset()
	p = newProgress(&w, progressOptions{Desc: "verify", Unit: "payments", Mode: progressBar})
	p.set(7)
	p.finish()
	if out := w.String(); !strings.Contains(out, "verify") || !strings.Contains(out, "7/7") {
		t.Errorf("spinner: %q", out)
	}

	// Auto off a terminal: plain.
	w.Reset()
	p = newProgress(&w, progressOptions{Desc: "verify", Unit: "payments"})
	p.set(3)
	p.finish()
	if out := w.String(); strings.Contains(out, "\r") || !strings.HasPrefix(out, "verify: 3 payments in ") {
		t.Errorf("auto on a buffer is not plain: %q", out)
	}

	// A nil progress does nothing.
	var none *progress
	none.add(1)
	none.set(2)
	none.finish()
	if got := none.writer(&w); got != &w {
		t.Error("nil progress wraps the writer")
	}
}

// TestStages: one progress per stage of an engine's callback, lines
// in order even when callbacks of one stage arrive out of order.
func TestStages(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	s := newStages(&w, "simulate")
	s.report("payments", 2, 3)
	s.report("payments", 3, 3)
	s.report("payments", 1, 3) // late: it does not move the count back
	s.report("settle", 3, 3)
	s.finish()
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "simulate payments: 3/3 payments (100%) in ") || !strings.HasPrefix(lines[1], "simulate settle: 3/3 payments (100%) in ") {
		t.Fatalf("stages:\n%s", w.String())
	}
}
