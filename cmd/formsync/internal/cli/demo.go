package cli

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/worker"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/metrics"
)

// demoQuery is the query the demo runs and suggests. submissions and spam
// count what the form service shows today, as the README's queries do;
// the rows deleted upstream are counted apart.
const demoQuery = `SELECT form_id, COUNT(*) FILTER (WHERE deleted_at IS NULL) AS submissions,
SUM(is_spam) FILTER (WHERE deleted_at IS NULL) AS spam, COUNT(deleted_at) AS deleted_upstream, MAX(created_at) AS newest
FROM submissions GROUP BY form_id ORDER BY form_id`

// demoFilesQuery is the demo's query of where the files stand.
const demoFilesQuery = `SELECT form_id, COUNT(*) AS files, COUNT(stored_at) AS kept, COUNT(not_stored_reason) AS not_kept,
SUM(stored_size) AS bytes_kept FROM submission_files GROUP BY form_id ORDER BY form_id`

func runDemo(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	db := fs.String("db", "formsync-demo.db", "SQLite file the demo writes (replaced on every run)")
	n := fs.Int("submissions", 500, "submissions per simulated form")
	filesDir := fs.String("files", "", "folder the demo keeps the submissions' files in (default formsync-demo-files beside -db)")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if *n < 4 {
		// The simulator takes 0 for its default, and the demo deletes 3
		// submissions of a form: fewer leave it nothing to show.
		fmt.Fprintf(e.stderr, "formsync demo: -submissions %d: give at least 4 submissions per form\n", *n)
		return exitUsage
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(*db + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(e.stderr, "formsync demo: %v\n", err)
			return exitFailed
		}
	}
	if *filesDir == "" {
		*filesDir = filepath.Join(filepath.Dir(*db), "formsync-demo-files")
	}
	store, err := filepath.Abs(*filesDir)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync demo: -files %s: %v\n", *filesDir, err)
		return exitUsage
	}
	sim := apisim.New(apisim.Options{
		Seed: 42, Variant: apisim.Newer, Order: apisim.NewestFirst,
		Forms: []string{"contact", "signup", "feedback"}, SubmissionsPerForm: *n, TieEvery: 50,
		// History up to about an hour ago, so the new submissions follow it.
		Start:     time.Now().UTC().Add(-time.Duration(*n)*37*time.Second - time.Hour).Truncate(time.Second),
		RateLimit: 40, RetryAfter: apisim.RetryAfterMixed,
		// Some files the service has deleted already (30 days after upload).
		Files: apisim.FileOptions{Expired: 0.05},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync demo: starting the simulator: %v\n", err)
		return exitFailed
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// The demo reads no FORMSYNC_* variable: it runs the same on every
	// machine, whatever is set for a real deployment.
	e.cfg = defaultConfig()
	e.cfg.APIBaseURL = "http://" + ln.Addr().String()
	e.cfg.APIToken, e.cfg.APITokenFile = formsapi.Secret(apisim.DefaultToken), ""
	e.cfg.Forms = sim.FormIDs()
	e.cfg.Sink, e.cfg.SQLitePath = "sqlite", *db
	e.cfg.ShardIndex, e.cfg.ShardCount = 0, 1
	e.cfg.RateLimit = 30
	// The files are kept in a folder; the simulator serves them on
	// loopback, which a real deployment never allows.
	e.cfg.FilesStore, e.cfg.FilesAllowLoopback = (&url.URL{Scheme: "file", Path: filepath.ToSlash(store)}).String(), true
	e.log = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	out := e.stdout
	fmt.Fprintf(out, "formsync demo: the API simulator serves %d forms of %d submissions at %s\n", len(e.cfg.Forms), *n, e.cfg.APIBaseURL)
	fmt.Fprintf(out, "(it answers like the real API: pages of JSON, newest first, a rate limit answered by 429)\n\n")

	start := time.Now()
	fmt.Fprintf(out, "1. First sync into %s: every submission is new, and every file they name is kept in %s/.\n", *db, *filesDir)
	if rep, code := syncOnce(ctx, e, metrics.New()); rep == nil || rep.Err() != nil {
		return max(code, exitFailed)
	} else {
		printReport(out, rep)
		printFilesSummary(out, e.cfg, rep)
	}

	added := map[string]int{"contact": 17, "signup": 3}
	fmt.Fprintf(out, "\n2. New submissions arrive: contact +%d, signup +%d, feedback +0.\n", added["contact"], added["signup"])
	for f, k := range added {
		sim.Add(f, k)
	}
	fmt.Fprintf(out, "3. Second sync: only the new ones are read (one or two pages per form) and loaded.\n")
	if rep, code := syncOnce(ctx, e, metrics.New()); rep == nil || rep.Err() != nil {
		return max(code, exitFailed)
	} else {
		printReport(out, rep)
	}

	gone := sim.Delete("feedback", 3)
	fmt.Fprintf(out, "\n4. %d feedback submissions are deleted upstream. The API says nothing of it: a reconcile\n", len(gone))
	fmt.Fprintf(out, "   reads every page of the form and marks the rows it no longer serves (deleted_at; the views leave them out).\n")
	if code := demoReconcile(ctx, e, "feedback"); code != exitOK {
		return code
	}

	fmt.Fprintf(out, "\n5. What is in %s now:\n\n", *db)
	if err := printQuery(ctx, out, *db, demoQuery); err != nil {
		fmt.Fprintf(e.stderr, "formsync demo: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(out, "\nWhere the files stand (submission_files; the service deleted some before the first sync):\n\n")
	if err := printQuery(ctx, out, *db, demoFilesQuery); err != nil {
		fmt.Fprintf(e.stderr, "formsync demo: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(out, "\nDone in %s. Try next:\n", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(out, "  sqlite3 %s \"%s\"\n", *db, strings.ReplaceAll(demoQuery, "\n", " "))
	fmt.Fprintf(out, "  sqlite3 %s \"SELECT created_at, name, email FROM form_contact ORDER BY created_at DESC LIMIT 5\"\n", *db)
	fmt.Fprintf(out, "  sqlite3 %s \"SELECT submission_key, name, object_uri FROM submission_files WHERE stored_at IS NOT NULL LIMIT 5\"\n", *db)
	// From a clone, before any install, formsync is not on the PATH.
	fmt.Fprintf(out, "  FORMSYNC_SQLITE_PATH=%s go run ./cmd/formsync status   # or formsync status, once installed\n", *db)
	return exitOK
}

// demoReconcile reconciles one form and prints what it marked.
func demoReconcile(ctx context.Context, e *env, form string) int {
	p, err := wire(ctx, e, []string{form}, metrics.New())
	if err != nil {
		return wireFailed(e, err)
	}
	defer p.Close()
	rep, err := p.engine.Reconcile(ctx, form)
	if err != nil || rep.Err() != nil {
		e.log.Error("reconcile failed", "error", cmp.Or(err, rep.Err()).Error())
		return exitFailed
	}
	for _, f := range rep.Forms {
		fmt.Fprintf(e.stdout, "   %s: %d pages read, %d rows marked deleted upstream.\n", f.FormID, f.Pages, f.Deleted)
	}
	return exitOK
}

// printReport prints a sync report as a table for people.
func printReport(w io.Writer, rep *worker.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  FORM\tNEW\tUPDATED\tPAGES\tREQUESTS\t429s\tORDER\tRESULT")
	for _, f := range rep.Forms {
		result := "ok"
		if err := cmp.Or(f.Err, rep.CommitErr); err != nil {
			result = err.Error()
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", f.FormID, f.Inserted, f.Updated, f.Pages, f.Requests, f.Limited, f.Order, result)
	}
	tw.Flush()
}

// printQuery runs a read-only query on the SQLite file and prints the result.
func printQuery(ctx context.Context, w io.Writer, path, query string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+strings.Join(cols, "\t"))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = fmt.Sprint(v)
		}
		fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}
