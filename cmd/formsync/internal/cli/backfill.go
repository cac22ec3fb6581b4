package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/metrics"
)

// timeFlag parses RFC 3339 or a bare date (YYYY-MM-DD, UTC midnight).
type timeFlag struct{ t time.Time }

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			f.t = t.UTC()
			return nil
		}
	}
	return fmt.Errorf("%q is not a time: use RFC 3339 (2026-03-01T00:00:00Z) or a date (2026-03-01)", s)
}

func runBackfill(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("backfill", flag.ContinueOnError)
	form := fs.String("form", "", "form id to re-read (required)")
	var since, until timeFlag
	fs.Var(&since, "since", "re-read submissions created at or after this time (RFC 3339 or YYYY-MM-DD)")
	fs.Var(&until, "until", "re-read submissions created at or before this time")
	dry := fs.Bool("dry-run", false, "locate the window and say what would be read, without reading or writing")
	checkpoint := fs.Int("checkpoint-rows", 50_000, "commit (and record progress) every this many rows")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	var problems []string
	if *form == "" {
		problems = append(problems, "--form is required: the id of the form to backfill")
	}
	if *checkpoint < 1 {
		problems = append(problems, "--checkpoint-rows must be at least 1")
	}
	if !since.t.IsZero() && !until.t.IsZero() && until.t.Before(since.t) {
		problems = append(problems, "--until is before --since")
	}
	e.cfg.Forms = []string{*form}
	if err := e.cfg.Validate(Need{API: true, Sink: true}); err != nil {
		problems = append(problems, err.(*ConfigError).Problems...)
	}
	if len(problems) > 0 {
		return configError(e, &ConfigError{Problems: problems})
	}
	m := metrics.New()
	p, err := wire(ctx, e, []string{*form}, m) // a backfill names its form: no sharding
	if err != nil {
		return wireFailed(e, err)
	}
	defer p.Close()
	prog := newProgressPrinter(e)
	rep, err := p.engine.Backfill(ctx, *form, worker.BackfillOptions{
		Window: worker.Window{Since: since.t, Until: until.t}, DryRun: *dry, CheckpointRows: *checkpoint, Progress: prog.update,
	})
	prog.done()
	if rep != nil && *dry {
		fmt.Fprintf(e.stdout, "Dry run: form %s (%s) would be read from page %d to page %d: about %d submissions in %d requests, about %s at %g requests/s.\n",
			rep.FormID, rep.Order, rep.FirstPage, rep.LastPage, rep.RowsEstimate, rep.PagesToRead(),
			(time.Duration(float64(rep.PagesToRead()) / e.cfg.RateLimit * float64(time.Second))).Round(time.Second), e.cfg.RateLimit)
	}
	if err != nil {
		attrs := []any{"form", *form, "error", err.Error()}
		if rep != nil && rep.Checkpoints > 0 {
			attrs = append(attrs, "rows_committed", rep.Staged, "hint", "run the same command again to resume")
		}
		e.log.Error("backfill failed", attrs...)
		pushMetrics(ctx, e, m)
		return exitFailed
	}
	if !*dry {
		e.log.Info("backfill finished", "form", rep.FormID, "new", rep.Inserted, "updated", rep.Updated, "read", rep.Staged,
			"pages", rep.Pages, "requests", rep.Requests, "checkpoints", rep.Checkpoints, "duration_seconds", rep.Duration.Seconds())
		fmt.Fprintf(e.stdout, "Backfill of form %s: %d rows read, %d new, %d updated, %d requests, %s.\n",
			rep.FormID, rep.Staged, rep.Inserted, rep.Updated, rep.Requests, rep.Duration.Round(time.Millisecond))
	}
	pushMetrics(ctx, e, m)
	return exitOK
}

// progressPrinter shows backfill progress: a bar redrawn in place on a
// terminal, a log line every 10 s otherwise (a Kubernetes Job's log).
type progressPrinter struct {
	e     *env
	tty   io.Writer
	last  time.Time
	drawn bool
}

func newProgressPrinter(e *env) *progressPrinter {
	p := &progressPrinter{e: e}
	if f, ok := e.stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = f
		}
	}
	return p
}

func (p *progressPrinter) update(pr worker.Progress) {
	now := time.Now()
	if p.tty != nil {
		if now.Sub(p.last) < 100*time.Millisecond && pr.Pages < pr.PagesTotal {
			return
		}
		p.last, p.drawn = now, true
		const width = 30
		filled := width * pr.Pages / max(pr.PagesTotal, 1)
		rate := float64(pr.Pages) / max(pr.Elapsed.Seconds(), 1e-9)
		fmt.Fprintf(p.tty, "\r%s [%s%s] %d/%d pages  %d rows  %.1f pages/s  ETA %s   ", pr.FormID,
			strings.Repeat("=", filled), strings.Repeat(" ", width-filled), pr.Pages, pr.PagesTotal, pr.Rows, rate, pr.ETA.Round(time.Second))
		return
	}
	if now.Sub(p.last) < 10*time.Second {
		return
	}
	p.last = now
	p.e.log.Info("backfill progress", "form", pr.FormID, "pages", pr.Pages, "pages_total", pr.PagesTotal, "rows", pr.Rows,
		"pages_per_second", float64(pr.Pages)/max(pr.Elapsed.Seconds(), 1e-9), "eta", pr.ETA.Round(time.Second).String())
}

func (p *progressPrinter) done() {
	if p.drawn {
		fmt.Fprintln(p.tty)
	}
}
