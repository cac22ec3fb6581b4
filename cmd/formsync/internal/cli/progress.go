package cli

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
	// line is the bar's line last drawn, drawn again when the terminal
	// is resized; width measures the terminal (nil: defaultTermWidth).
	line  progressLine
	width func() int
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
		if f, ok := e.stderr.(*os.File); ok {
			p.width = func() int { return termWidth(f) }
			onResize(p.resized)
		}
	}
	return p
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	switch w := w.(type) {
	case lineClearer:
		return true
	case interface{ Terminal() bool }:
		// A writer that says it is one (a test's).
		return w.Terminal()
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
		all.Files += f.Files
		all.FileBytes += f.FileBytes
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
	if pr.Files > 0 || pr.FileBytes > 0 {
		// The files phase: its counts beside the form's read.
		f := p.forms[pr.FormID]
		f.FormID, f.Files, f.FileBytes = pr.FormID, pr.Files, pr.FileBytes
		pr = f
	}
	p.forms[pr.FormID] = pr
	all, label := p.total()
	now := p.now()
	if p.tty != nil {
		if now.Sub(p.last) < 100*time.Millisecond && (all.PagesTotal == 0 || all.Pages < all.PagesTotal) {
			return
		}
		p.last, p.drawn = now, true
		p.line = barLine(all, label)
		p.drawLocked()
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
	// Two decimals: 5.097341792384847 says no more than 5.1 to a reader.
	rate := math.Round(float64(all.Pages)/max(all.Elapsed.Seconds(), 1e-9)*100) / 100
	attrs = append(attrs, "rows", all.Rows, "pages_per_second", rate)
	if all.Files > 0 {
		attrs = append(attrs, "files", all.Files, "file_bytes", all.FileBytes)
	}
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
	p.drawn, p.last, p.forms, p.line = false, time.Time{}, nil, progressLine{}
}

// progressLine is what the bar's line shows, laid out for a width by fit.
type progressLine struct {
	label       string
	pages, of   int    // of is 0 when the pages in all are not known
	counts      string // "20/60 pages  2000 rows" or "20 pages  2000 rows"
	rate, rows  string // "2.0 pages/s", "200 rows/s" (rows "" before the rate means anything)
	eta         string // "ETA 30s", "" without a bar
	initialized bool
}

// barLine is the line of the progress all of the forms labelled label.
func barLine(all worker.Progress, label string) progressLine {
	l := progressLine{label: label, pages: all.Pages, of: all.PagesTotal, initialized: true}
	secs := max(all.Elapsed.Seconds(), 1e-9)
	l.rate, l.rows = fmt.Sprintf("%.1f pages/s", float64(all.Pages)/secs), fmt.Sprintf("%.0f rows/s", float64(all.Rows)/secs)
	eta := humanDuration(all.ETA)
	if all.Elapsed < rateAfter {
		// The first page or two come at once: their rate says nothing.
		l.rate, l.rows, eta = "-- pages/s", "", "--"
	}
	files := ""
	if all.Files > 0 {
		files = fmt.Sprintf("  %d files %s", all.Files, humanBytes(all.FileBytes))
	}
	if all.PagesTotal == 0 {
		l.counts = fmt.Sprintf("%d pages  %d rows", all.Pages, all.Rows) + files
		return l
	}
	l.counts = fmt.Sprintf("%d/%d pages  %d rows", all.Pages, all.PagesTotal, all.Rows) + files
	l.eta = "ETA " + eta
	return l
}

// Widths of the bar: at most barWidth, at least minBar before it is left
// out; a form id is cut to minLabel before the bar narrows.
const (
	barWidth = 30
	minBar   = 10
	minLabel = 16
)

// fit lays the line out in width columns, one less than the terminal's so
// that the cursor never wraps: the bar at its full width when there is
// room; else the form id (or "N forms") cut first (to minLabel), then the
// bar narrowed, then the rows a second left out, then the bar and the
// rate, then the id cut further; what still does not fit is cut at the
// end.
func (l progressLine) fit(width int) string {
	width--
	tail := []string{l.counts, l.rate}
	if l.rows != "" {
		tail = append(tail, l.rows)
	}
	if l.eta != "" {
		tail = append(tail, l.eta)
	}
	rest := func() string { return strings.Join(tail, "  ") }
	label := []rune(l.label)
	cut := func(n int) string {
		if len(label) <= n {
			return string(label)
		}
		if n <= 1 {
			return string(label[:max(n, 0)])
		}
		return string(label[:n-1]) + "…"
	}
	if l.of == 0 {
		line := cut(max(minLabel, width-utf8.RuneCountInString(rest())-1)) + " " + rest()
		return cutRunes(line, width)
	}
	bar := func(w int) string {
		filled := w * min(l.pages, l.of) / l.of
		return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", w-filled) + "]"
	}
	for {
		// Room for the id and the bar: width less the rest and three
		// spaces and brackets' worth of separators.
		room := width - utf8.RuneCountInString(rest()) - 4
		labelW := min(len(label), max(minLabel, room-barWidth))
		if w := min(barWidth, room-labelW); w >= minBar {
			return cut(labelW) + " " + bar(w) + " " + rest()
		}
		if l.rows != "" && len(tail) > 3 {
			// The rows a second go before the bar does.
			tail = slices.Delete(tail, 2, 3)
			l.rows = ""
			continue
		}
		// No room for a bar: the counts and the time left.
		tail = []string{l.counts}
		if l.eta != "" {
			tail = append(tail, l.eta)
		}
		return cutRunes(cut(max(4, width-utf8.RuneCountInString(rest())-1))+" "+rest(), width)
	}
}

// cutRunes cuts s to n runes.
func cutRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:max(n, 0)])
	}
	return s
}

// drawLocked draws the line again at the terminal's width: from the start
// of the line, and clearing what a longer line before it left.
func (p *progressPrinter) drawLocked() {
	if !p.line.initialized {
		return
	}
	w := 0
	if p.width != nil {
		w = p.width()
	}
	if w <= 0 {
		w = defaultTermWidth
	}
	fmt.Fprintf(p.tty, "\r%s\033[K", p.line.fit(w))
}

// defaultTermWidth is the width assumed of a terminal whose size cannot be
// read.
const defaultTermWidth = 80

// resized draws the bar again at the terminal's new width (SIGWINCH).
func (p *progressPrinter) resized() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		p.drawLocked()
	}
}

// humanDuration says d the way a person reads it, in its two largest
// units: "329d 3h", "2h 5m", "4m 10s", "12s".
// humanBytes is n bytes as "512 B", "1.5 MB" (decimal units).
func humanBytes(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	f, unit := float64(n), "B"
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		if f < 1000 {
			break
		}
		f, unit = f/1000, u
	}
	return fmt.Sprintf("%.1f %s", f, unit)
}

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
