package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"

	"github.com/paystate/paystate/internal/defaults"
)

// progressEvery is how often a plain progress line is printed.
const progressEvery = 2 * time.Second

// progressMode is how a progress shows itself.
type progressMode int

const (
	progressAuto  progressMode = iota // a bar on a terminal, else plain lines
	progressBar                       // always the bar
	progressPlain                     // always plain lines
)

// progressOptions configure newProgress.
type progressOptions struct {
	// Desc starts every line: the command, "verify".
	Desc string
	// Unit names what is counted, "payments"; Bytes counts bytes instead.
	Unit  string
	Bytes bool
	// Total is the count at the end; 0 or less if unknown.
	Total int64
	// Mode is progressAuto unless a test says otherwise.
	Mode progressMode
	// Now is the clock of plain lines (default time.Now); Every their
	// period (default progressEvery).
	Now   func() time.Time
	Every time.Duration
}

// progress shows how far a long command has got (verify, backup, simulate;
// copy and reconcile use it too), always on the command's stderr, so that
// its stdout holds the result alone and can be piped:
//
//   - when stderr is a terminal, a progress bar drawn by
//     github.com/schollz/progressbar/v3: count (or bytes), percentage,
//     rate and time left when the total is known, a spinner otherwise;
//   - otherwise (a pipe, a log file, CI), a plain line such as
//     "verify: 1200/5000 payments (24%)" at most every progressEvery by
//     the injected clock, and a last one from finish with the time taken.
//
// A command creates one per phase with newProgress, reports with add, set
// (a running total, as from an engine's callback) or the io.Writer of
// writer (bytes), and calls finish once at the end, also on failure. The
// methods are safe for concurrent use, and do nothing on a nil *progress.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	opts    progressOptions
	bar     *progressbar.ProgressBar
	start   time.Time
	last    time.Time // of the last plain line
	n       int64
	ended   bool
	aborted bool // abort: the work failed
}

// newProgress starts a progress on w (the command's stderr).
func newProgress(w io.Writer, opts progressOptions) *progress {
	opts.Now = defaults.Clock(opts.Now)
	opts.Every = defaults.Or(opts.Every, progressEvery)
	if opts.Unit == "" && !opts.Bytes {
		opts.Unit = "items"
	}
	p := &progress{w: w, opts: opts, start: opts.Now()}
	p.last = p.start
	bar := opts.Mode == progressBar || (opts.Mode == progressAuto && isTerminal(w))
	if bar {
		max := opts.Total
		if max <= 0 {
			max = -1 // a spinner
		}
		o := []progressbar.Option{
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(opts.Desc),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(65 * time.Millisecond),
			progressbar.OptionSpinnerType(14),
			// No spinner goroutine: the bar moves when the work does.
			progressbar.OptionSetSpinnerChangeInterval(0),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(max > 0),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		}
		if opts.Bytes {
			o = append(o, progressbar.OptionShowBytes(true))
		} else {
			o = append(o, progressbar.OptionShowIts(), progressbar.OptionSetItsString(opts.Unit))
		}
		p.bar = progressbar.NewOptions64(max, o...)
	}
	return p
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// add counts n more.
func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.update(p.n + n)
}

// set sets the count to n (a running total; it may go back).
func (p *progress) set(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.update(n)
}

// update records n and shows it; p.mu is held.
func (p *progress) update(n int64) {
	if p.ended {
		return
	}
	p.n = n
	if p.opts.Total > 0 && n > p.opts.Total {
		// More than counted at the start (the work grew): the total
		// follows.
		p.opts.Total = n
		if p.bar != nil {
			p.bar.ChangeMax64(n)
		}
	}
	if p.bar != nil {
		p.bar.Set64(n)
		return
	}
	if now := p.opts.Now(); now.Sub(p.last) >= p.opts.Every {
		p.last = now
		fmt.Fprintf(p.w, "%s: %s\n", p.opts.Desc, p.count())
	}
}

// count formats the count for a plain line: "1200/5000 payments (24%)",
// "12 MB / 50 MB (24%)", "1200 payments".
func (p *progress) count() string {
	done, total := fmt.Sprint(p.n), fmt.Sprint(p.opts.Total)
	unit := " " + p.opts.Unit
	if p.opts.Bytes {
		done, total, unit = humanize.Bytes(uint64(max(p.n, 0))), " "+humanize.Bytes(uint64(max(p.opts.Total, 0))), ""
	}
	if p.opts.Total <= 0 {
		return done + unit
	}
	sep := "/"
	if p.opts.Bytes {
		sep = " /"
	}
	return fmt.Sprintf("%s%s%s%s (%d%%)", done, sep, total, unit, p.n*100/p.opts.Total)
}

// writer returns a writer that passes every write on to w and counts its
// bytes.
func (p *progress) writer(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return &progressWriter{w: w, p: p}
}

type progressWriter struct {
	w io.Writer
	p *progress
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.p.add(int64(n))
	return n, err
}

// abort marks the progress as failed: finish then leaves a bar as it is
// and prints no last line, which would read like a result.
func (p *progress) abort() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.aborted = true
}

// finish ends the progress: the bar is drawn a last time and left on its
// line, or the last plain line is printed, with the time taken. A second
// call does nothing.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	if p.bar != nil {
		switch {
		case p.aborted:
			p.bar.Exit()
		case p.opts.Total > 0 && p.n >= p.opts.Total:
			p.bar.Finish()
		case p.opts.Total <= 0 && p.n > 0:
			p.bar.ChangeMax64(p.n) // done: what was counted was all
			p.bar.Finish()
		default:
			p.bar.Exit() // stopped short: left as it is
		}
		return
	}
	if p.aborted {
		return
	}
	took := p.opts.Now().Sub(p.start).Round(time.Millisecond)
	fmt.Fprintf(p.w, "%s: %s in %s\n", p.opts.Desc, p.count(), took)
}
