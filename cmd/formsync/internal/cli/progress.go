package cli

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/formsync/formsync/worker"
)

// progressPrinter shows how far a long command (sync, reconcile,
// backfill) got: a bar redrawn in place on a terminal, with the rate and
// the time left; a log line every progressLogEvery otherwise (a Kubernetes
// Job's log), the first one progressLogEvery after the reading starts: a
// rate from the first page or two says nothing, and a run done sooner
// logs only its end. Forms read at once are shown together.
type progressPrinter struct {
	e     *env
	what  string // the command: "sync", "reconcile", "backfill"
	tty   io.Writer
	now   func() time.Time
	every time.Duration
	// mu guards what follows: the forms' reads report concurrently, and
	// a checkpoint's commit logs while the walk draws the bar.
	mu    sync.Mutex
	last  time.Time
	drawn bool // the bar is on the terminal's current line
	forms map[string]worker.Progress
}

// progressLogEvery is how often a command without a terminal logs its
// progress.
const progressLogEvery = 10 * time.Second

// rateAfter is how long a read goes before the bar shows its rate and the
// time left.
const rateAfter = 2 * time.Second

// startProgress returns the progress printer of command what. On a
// terminal, e's log lines then clear the bar's line before they are
// written (lineClearer), so that bar and lines do not run into each other.
func startProgress(e *env, what string) *progressPrinter {
	p := newProgressPrinter(e)
	p.what = what
	if p.tty != nil {
		e.log = e.logTo(lineClearer{p})
		// The BigQuery sink's warnings clear the bar too.
		e.cfg.bqLogger = e.log
	}
	return p
}

func newProgressPrinter(e *env) *progressPrinter {
	p := &progressPrinter{e: e, what: "backfill", now: time.Now, every: cmp.Or(e.progressEvery, progressLogEvery)}
	if isTerminal(e.stderr) {
		p.tty = e.stderr
	}
	return p
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	switch w := w.(type) {
	case lineClearer:
		return true
	case *os.File:
		fi, err := w.Stat()
		return err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return false
}

// lineClearer writes a log line under a progress bar: it clears the bar's
// line first, so that the line does not run on after the bar; the next
// update draws the bar again below it.
type lineClearer struct{ p *progressPrinter }

func (c lineClearer) Write(b []byte) (int, error) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.p.drawn {
		io.WriteString(c.p.tty, "\r\033[K")
		c.p.drawn = false
	}
	return c.p.tty.Write(b)
}

// total is the progress of every form read so far, together: pages and
// rows added up, the longest elapsed time and time left; the pages in all
// are known only when each form's are.
func (p *progressPrinter) total() (all worker.Progress, label string) {
	known := true
	for id, f := range p.forms {
		label = id
		all.Pages += f.Pages
		all.PagesTotal += f.PagesTotal
		all.Rows += f.Rows
		all.Elapsed = max(all.Elapsed, f.Elapsed)
		all.ETA = max(all.ETA, f.ETA)
		known = known && f.PagesTotal > 0
	}
	if !known {
		all.PagesTotal, all.ETA = 0, 0
	}
	if len(p.forms) > 1 {
		label = fmt.Sprintf("%d forms", len(p.forms))
	}
	return all, label
}

func (p *progressPrinter) update(pr worker.Progress) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.forms == nil {
		p.forms = map[string]worker.Progress{}
	}
	p.forms[pr.FormID] = pr
	all, label := p.total()
	now := p.now()
	if p.tty != nil {
		if now.Sub(p.last) < 100*time.Millisecond && (all.PagesTotal == 0 || all.Pages < all.PagesTotal) {
			return
		}
		p.last, p.drawn = now, true
		secs := max(all.Elapsed.Seconds(), 1e-9)
		rate, eta := fmt.Sprintf("%.1f pages/s  %.0f rows/s", float64(all.Pages)/secs, float64(all.Rows)/secs), humanDuration(all.ETA)
		if all.Elapsed < rateAfter {
			// The first page or two come at once: their rate says nothing.
			rate, eta = "-- pages/s", "--"
		}
		if all.PagesTotal == 0 {
			fmt.Fprintf(p.tty, "\r%s %d pages  %d rows  %s   ", label, all.Pages, all.Rows, rate)
			return
		}
		const width = 30
		filled := width * min(all.Pages, all.PagesTotal) / all.PagesTotal
		fmt.Fprintf(p.tty, "\r%s [%s%s] %d/%d pages  %d rows  %s  ETA %s   ", label,
			strings.Repeat("=", filled), strings.Repeat(" ", width-filled), all.Pages, all.PagesTotal, all.Rows, rate, eta)
		return
	}
	if p.last.IsZero() {
		p.last = now
		return
	}
	if now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	attrs := []any{"form", label}
	if len(p.forms) > 1 {
		attrs = []any{"forms", len(p.forms)}
	}
	attrs = append(attrs, "pages", all.Pages)
	if all.PagesTotal > 0 {
		attrs = append(attrs, "pages_total", all.PagesTotal)
	}
	attrs = append(attrs, "rows", all.Rows, "pages_per_second", float64(all.Pages)/max(all.Elapsed.Seconds(), 1e-9))
	if all.ETA > 0 {
		attrs = append(attrs, "eta", all.ETA.Round(time.Second).String())
	}
	p.e.log.Info(p.what+" progress", attrs...)
}

// done ends the bar's line; the printer starts afresh (the next sync of
// formsync run).
func (p *progressPrinter) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.tty)
	}
	p.drawn, p.last, p.forms = false, time.Time{}, nil
}

// humanDuration says d the way a person reads it, in its two largest
// units: "329d 3h", "2h 5m", "4m 10s", "12s".
func humanDuration(d time.Duration) string {
	return humanSeconds(d.Seconds())
}

// humanSeconds says a span of s seconds as humanDuration does, from a
// float: a span between two times the store can hold (years 1 to 9999)
// goes far beyond what a time.Duration holds (292 years), and any value,
// negative or not, is said without overflowing. Beyond a year it says
// years (of 365.25 days) and days: "1725y 120d".
func humanSeconds(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case s < 0:
		return "-" + humanSeconds(-s)
	case math.IsInf(s, 0) || s >= 1e15:
		return "forever"
	}
	secs := int64(math.Round(s))
	const day, year = 24 * 3600, 36525 * 24 * 36
	years, days, h, m, sec := secs/year, secs/day, secs/3600%24, secs/60%60, secs%60
	switch {
	case years > 0:
		return fmt.Sprintf("%dy %dd", years, secs%year/day)
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, h)
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, sec)
	}
	return fmt.Sprintf("%ds", sec)
}
