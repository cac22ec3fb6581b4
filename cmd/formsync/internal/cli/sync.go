package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/metrics"
)

func runSync(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if err := e.cfg.Validate(needs("sync")); err != nil {
		return configError(e, err)
	}
	e.progress = startProgress(e, "sync")
	m := metrics.New()
	rep, code := syncOnce(ctx, e, m)
	pushMetrics(ctx, e, m)
	if isTerminal(e.stdout) || isTerminal(e.stderr) {
		// A person ran it: the log lines above are for machines.
		var b strings.Builder
		printSyncSummary(&b, e.cfg, rep, code)
		width := 0
		if f, ok := e.stdout.(*os.File); ok && isTerminal(f) {
			width = termWidth(f)
		}
		io.WriteString(e.stdout, wrapWords(b.String(), width))
	}
	return code
}

// wrapWords wraps each line of s at spaces to fit width columns (one
// less, so that the cursor never wraps), its continuation indented two
// more than the line; width 0 leaves s as it is. A word longer than a
// line stays whole.
func wrapWords(s string, width int) string {
	if width <= 0 {
		return s
	}
	var out strings.Builder
	for line := range strings.Lines(s) {
		line = strings.TrimSuffix(line, "\n")
		indent := strings.Repeat(" ", len(line)-len(strings.TrimLeft(line, " "))+2)
		col := 0
		for i, word := range strings.Split(line, " ") {
			n := utf8.RuneCountInString(word)
			switch {
			case i == 0:
			case col+1+n >= width && col > len(indent):
				out.WriteString("\n" + indent)
				col = len(indent)
			default:
				out.WriteByte(' ')
				col++
			}
			out.WriteString(word)
			col += n
		}
		out.WriteByte('\n')
	}
	return out.String()
}

// printSyncSummary ends a sync run on a terminal with what a person reads,
// as backfill, reconcile, forget and remove do: the forms, the rows new
// and updated, where they went, which forms failed and what to do.
func printSyncSummary(w io.Writer, cfg Config, rep *worker.Report, code int) {
	if rep == nil {
		if code != exitOK {
			fmt.Fprintln(w, "\nSync failed before reading any form: the error is above. Fix it and run 'formsync sync' again.")
		}
		return
	}
	var inserted, updated int64
	var failed []worker.FormReport
	for _, f := range rep.Forms {
		inserted += f.Inserted
		updated += f.Updated
		if f.Err != nil {
			failed = append(failed, f)
		}
	}
	where := "SQLite file " + cfg.SQLitePath
	if cfg.Sink == "bigquery" {
		where = "BigQuery dataset " + cfg.BQProject + "." + cfg.BQDataset
	}
	ok := len(rep.Forms) - len(failed)
	if rep.CommitErr != nil {
		fmt.Fprintf(w, "\nSync of %s read, but its commit to %s failed: nothing of this run was stored, every watermark stays.\n  %v\nRun 'formsync sync' again once the error above is fixed.\n",
			plural(len(rep.Forms), "form"), where, rep.CommitErr)
		return
	}
	fmt.Fprintf(w, "\nSynced %d of %s into %s: %s new, %d updated, in %s.\n",
		ok, plural(len(rep.Forms), "form"), where, plural(int(inserted), "row"), updated, humanDuration(rep.Duration))
	printFilesSummary(w, cfg, rep)
	if len(failed) == 0 {
		fmt.Fprintln(w, "'formsync status' shows each form's watermark and lag.")
		return
	}
	fmt.Fprintf(w, "%s failed (their watermarks stay; the next sync reads them again):\n", plural(len(failed), "form"))
	for _, f := range failed {
		fmt.Fprintf(w, "  %s: %s\n", f.FormID, shorten(f.Err.Error(), 300))
	}
	fmt.Fprintln(w, "Fix what each error says, then run 'formsync sync' again; 'formsync status' shows each form's last error.")
}

// printFilesSummary says what the run's files phase did.
func printFilesSummary(w io.Writer, cfg Config, rep *worker.Report) {
	t := rep.FileTotals()
	if t.Any() {
		var not []string
		for _, reason := range slices.Sorted(maps.Keys(t.NotStored)) {
			not = append(not, fmt.Sprintf("%d %s", t.NotStored[reason], reason))
		}
		line := fmt.Sprintf("Kept %s (%d bytes, %d new) in %s; %d pending", plural(int(t.Stored), "file"), t.Bytes, t.New, cfg.FilesStore, t.Pending)
		if len(not) > 0 {
			line += "; not kept: " + strings.Join(not, ", ")
		}
		fmt.Fprintln(w, line+".")
	}
	if rep.FilesErr != nil {
		fmt.Fprintf(w, "Files were not all kept (the rows are stored; the next sync tries again): %v\n", rep.FilesErr)
	}
}

// plural is "1 form", "3 forms".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// syncOnce wires the pipeline for this shard's forms, runs one sync and
// records it in m. The exit code says how it went.
func syncOnce(ctx context.Context, e *env, m *metrics.Metrics) (*worker.Report, int) {
	forms := shardForms(e.cfg)
	if len(forms) == 0 {
		e.log.Warn("no form falls in this shard", "shard_index", e.cfg.ShardIndex, "shard_count", e.cfg.ShardCount)
		return nil, exitOK
	}
	defer prepareTmpDir(e)()
	p, err := wire(ctx, e, forms, m)
	if err != nil {
		m.ObserveRun(nil, 0)
		return nil, wireFailed(e, err)
	}
	defer p.Close()
	rep, err := p.engine.Sync(ctx)
	e.progress.done()
	if err != nil {
		e.log.Error("sync failed", "error", err.Error())
		m.ObserveRun(nil, 0)
		return nil, exitFailed
	}
	m.ObserveRun(rep, rep.CommitDuration)
	if logInterrupted(ctx, e, rep, false) {
		return rep, exitFailed // not completed: the next run (or the Job's retry) finishes it
	}
	if rep.Failed() > 0 {
		return rep, exitFailed
	}
	return rep, exitOK
}
