package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
)

// timeFlag parses RFC 3339 or a bare date (YYYY-MM-DD, UTC). As --until it
// includes the whole of the unit it was given in: a date includes its whole
// day, a time to the second its whole second (2026-03-31T23:59:59Z includes
// 23:59:59.999999), so that the window people write is the window read.
type timeFlag struct {
	t     time.Time
	until bool
}

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

func (f *timeFlag) Set(s string) error {
	s = rfc3339Canonical(s)
	if t, err := time.Parse("2006-01-02", s); err == nil {
		f.t = t.UTC()
		if f.until {
			f.t = f.t.Add(24*time.Hour - time.Nanosecond)
		}
		return nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		f.t = t.UTC()
		if f.until && t.Nanosecond() == 0 && !strings.Contains(s, ".") {
			f.t = f.t.Add(time.Second - time.Nanosecond)
		}
		return nil
	}
	return fmt.Errorf("%q is not a time: use RFC 3339 (2026-03-01T00:00:00Z) or a date (2026-03-01)", s)
}

// rfc3339Canonical writes the forms RFC 3339 also allows (section 5.6: a
// lower-case "t" and "z", a space between date and time) as Go's parser
// takes them: "2026-03-01 10:00:00z" as "2026-03-01T10:00:00Z".
func rfc3339Canonical(s string) string {
	if len(s) <= len("2006-01-02") {
		return s
	}
	b := []byte(s)
	if b[10] == 't' || b[10] == ' ' {
		b[10] = 'T'
	}
	if b[len(b)-1] == 'z' {
		b[len(b)-1] = 'Z'
	}
	return string(b)
}

func runBackfill(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("backfill", flag.ContinueOnError)
	form := onceString(fs, "form", "`id` of the form to re-read (required)")
	since, until := timeFlag{}, timeFlag{until: true}
	fs.Var(&since, "since", "re-read submissions created at or after this time (RFC 3339 or YYYY-MM-DD)")
	fs.Var(&until, "until", "re-read submissions created at or before this time; a date includes its whole day, a time in seconds its whole second")
	dry := fs.Bool("dry-run", false, "locate the window and say what would be read, without reading or writing")
	checkpoint := fs.Int("checkpoint-rows", 0, fmt.Sprintf("commit (and record progress) every this many rows (default %d into SQLite, %d into BigQuery or for submissions without ids; into SQLite those also wait for %.0f s of reading, or %d rows)",
		worker.DefaultPartRows, worker.DefaultCheckpointRows, worker.CheckpointInterval.Seconds(), worker.MaxCheckpointRows))
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	configured := e.cfg.Forms
	var problems []string
	if msg := flagFormProblem(*form, "to backfill"); msg != "" {
		problems = append(problems, msg)
	}
	if *checkpoint < 0 {
		problems = append(problems, "--checkpoint-rows must not be negative (0, or leaving it out, means the default)")
	}
	if !since.t.IsZero() && !until.t.IsZero() && until.t.Before(since.t) {
		problems = append(problems, "--until is before --since")
	}
	e.cfg.Forms = []string{*form}
	if err := e.cfg.Validate(needs("backfill")); err != nil {
		problems = append(problems, configProblems(err)...)
	}
	if len(problems) > 0 {
		return configError(e, &ConfigError{Problems: problems})
	}
	if code, ok := checkFormKnown(ctx, e, configured, *form); !ok {
		return code
	}
	defer prepareTmpDir(e)()
	m := metrics.New()
	open := openSink
	if *dry {
		open = openDryRunSink
	}
	prog := startProgress(e, "backfill")
	p, err := wireSink(ctx, e, []string{*form}, m, open) // a backfill names its form: no sharding
	if err != nil {
		return wireFailed(e, err)
	}
	defer p.Close()
	rep, err := p.engine.Backfill(ctx, *form, worker.BackfillOptions{
		Window: worker.Window{Since: since.t, Until: until.t}, DryRun: *dry, CheckpointRows: *checkpoint, Progress: prog.update,
	})
	prog.done()
	if rep != nil && *dry && err == nil {
		printDryRun(ctx, e, p.engine, rep, worker.Window{Since: since.t, Until: until.t})
	}
	if err != nil && errors.Is(err, formsapi.ErrFormNotFound) {
		// The client's words name FORMSYNC_FORMS; a backfill read --form.
		err = fmt.Errorf("form %q not found (HTTP 404): it does not exist or was deleted; check the id given to --form", *form)
	}
	if err != nil {
		attrs := []any{"form", *form, "error", err.Error()}
		if rep != nil && rep.Checkpoints > 0 {
			attrs = append(attrs, "rows_committed", rep.Staged, "hint", "run the same command again to resume")
		}
		switch {
		case ctx.Err() != nil && rep != nil && rep.Checkpoints > 0:
			e.log.Warn("backfill interrupted by a shutdown signal: the checkpoints committed stay; run the same command again to resume", attrs...)
		case ctx.Err() != nil:
			e.log.Warn("backfill interrupted by a shutdown signal before this run committed a checkpoint: run the same command again (it goes on from the last checkpoint an earlier run committed, if any)", attrs...)
		default:
			e.log.Error("backfill failed", attrs...)
		}
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

// printDryRun says what a backfill of the window would read. The engine's
// estimate counts whole pages (a window inside one page is "one page of
// submissions"), so the located end pages are read again here and their
// submissions inside the window counted: at most two requests, and an
// empty window is said to be empty.
func printDryRun(ctx context.Context, e *env, eng *worker.Engine, rep *worker.BackfillReport, win worker.Window) {
	if !rep.ResumedFrom.IsZero() {
		// The estimate below is of what is left.
		fmt.Fprintf(e.stdout, "Dry run: an interrupted backfill of this window got down to %s; run, it resumes there. What is left:\n",
			rep.ResumedFrom.UTC().Format(time.RFC3339Nano))
	}
	pages := rep.PagesToRead()
	if pages == 0 {
		what := "has no submissions in the window"
		if win.Since.IsZero() && win.Until.IsZero() {
			what = "has no submissions"
		}
		fmt.Fprintf(e.stdout, "Dry run: form %s %s: a backfill would make %d requests, to find that out, and load nothing.\n", rep.FormID, what, rep.RequestsEstimate)
		return
	}
	rows, ok := eng.CountWindow(ctx, rep, win)
	switch {
	case ok && rows == 0:
		fmt.Fprintf(e.stdout, "Dry run: form %s (%s) has no submissions in the window: a backfill would make %d requests and load nothing.\n",
			rep.FormID, rep.Order, rep.RequestsEstimate)
		return
	case !ok:
		rows = rep.RowsEstimate
	}
	// The requests that located the window are made again, before the
	// window's pages: a form that moves meanwhile costs more.
	reqs := rep.RequestsEstimate
	finding := ""
	if n := reqs - pages; n > 0 {
		finding = fmt.Sprintf(" (%d of them to find the window)", n)
	}
	fmt.Fprintf(e.stdout, "Dry run: form %s (%s) would be read from page %d to page %d: about %d submissions in about %d requests%s, about %s at %g requests/s.\n",
		rep.FormID, rep.Order, rep.FirstPage, rep.LastPage, rows, reqs, finding,
		(time.Duration(float64(reqs) / e.cfg.RateLimit * float64(time.Second))).Round(time.Second), e.cfg.RateLimit)
}
