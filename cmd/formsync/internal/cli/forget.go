package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"os"
	"slices"
	"strings"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker"
)

// listFlag collects a flag given several times or comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*l = append(*l, x)
		}
	}
	return nil
}

// runForget is `formsync forget`: remove a person's submissions from the
// sink and keep them out of every later load.
func runForget(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("forget", flag.ContinueOnError)
	form := onceString(fs, "form", "`id` of the form (required)")
	var keys listFlag
	fs.Var(&keys, "key", "submission key to forget: the submission's id, or, in a form of the older response form (no ids), its content key, 32 hex digits of a hash of its content (the submission_key column); repeat or comma-separate")
	field := fs.String("field", "", "forget every submission whose field NAME holds VALUE exactly: NAME=VALUE (a hashed field takes the clear value)")
	dry := fs.Bool("dry-run", false, "list what would be forgotten, change nothing")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	var problems []string
	if msg := flagFormProblem(*form, "holding the submissions"); msg != "" {
		problems = append(problems, msg)
	}
	name, value, hasField := strings.Cut(*field, "=")
	switch {
	case *field == "" && len(keys) == 0:
		problems = append(problems, "give --key KEY or --field NAME=VALUE: what to forget")
	case *field != "" && (!hasField || name == ""):
		problems = append(problems, fmt.Sprintf("--field %q: use NAME=VALUE, e.g. --field email=person@example.com", *field))
	}
	if err := e.cfg.Validate(needs("forget")); err != nil {
		problems = append(problems, configProblems(err)...)
	}
	m := sink.Match{Keys: keys}
	if *field != "" && hasField && name != "" {
		// The stored value: a field the policy hashes is stored hashed.
		stored, err := e.cfg.policy.Lookup(name, value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("--field %s: %v", name, err))
		}
		m.Field, m.Value = name, stored
	}
	if len(problems) > 0 {
		return configError(e, &ConfigError{Problems: problems})
	}
	dst, ok := openStore(ctx, e, "forget", "forgotten", *dry)
	if !ok {
		return exitFailed
	}
	defer dst.Close()
	// A mistyped form id would find nothing, tombstone the keys under a
	// form that does not exist and report success. A state that only
	// records failures (a reconcile of the mistyped id, which answered
	// 404) does not make the id a form formsync ever read.
	if states, err := dst.ReadState(ctx, []string{*form}); err != nil {
		e.log.Error("cannot read the sync state", "form", *form, "error", err.Error())
		return exitFailed
	} else if st, ok := states[*form]; !(ok && everRead(st)) && !slices.Contains(e.cfg.Forms, *form) {
		return configError(e, &ConfigError{Problems: []string{fmt.Sprintf("--form %s: no such form here (never synced, and not in FORMSYNC_FORMS): check the id", *form)}})
	}
	// Only what forget reads: the engine's reading settings (page size,
	// concurrency, ...) are not its business, nor checked for it.
	// Its commit stores the form's pinned types, as every commit does.
	cfg := worker.Config{Forms: []string{*form}, Logger: e.log, FieldPolicy: e.cfg.fieldPolicy(), FieldTypes: e.cfg.pins}
	eng, err := worker.New(nil, dst, cfg)
	if err != nil {
		return configError(e, err)
	}
	rep, err := eng.Forget(ctx, *form, m, *dry)
	if err != nil {
		e.log.Error("forget failed: nothing was removed", "form", *form, "error", err.Error())
		return exitFailed
	}
	if len(rep.Rows) == 0 && len(rep.Unstored) == 0 && len(rep.Before) == 0 {
		if *dry {
			fmt.Fprintf(e.stdout, "Dry run: no stored row of form %s matches: nothing would change.\n", *form)
		} else {
			fmt.Fprintf(e.stdout, "No stored row of form %s matches: nothing changed.\n", *form)
		}
		return purgeResult(e, rep)
	}
	if !*dry && !rep.Committed {
		// Only keys, every one forgotten before (the command run again).
		fmt.Fprintf(e.stdout, "Nothing new to forget in form %s: no stored row has these keys, and they were tombstoned before: %s\n",
			*form, strings.Join(rep.Before, ", "))
		return purgeResult(e, rep)
	}
	verb := "Forgot"
	if *dry {
		verb = "Dry run: would forget"
	}
	fmt.Fprintf(e.stdout, "%s %d stored row(s) of form %s:\n", verb, len(rep.Rows), *form)
	for _, r := range rep.Rows {
		state := ""
		if !r.DeletedAt.IsZero() {
			state = " (deleted upstream)"
		}
		fmt.Fprintf(e.stdout, "  %s  created %s%s\n", r.SubmissionKey, r.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"), state)
	}
	if len(rep.Unstored) > 0 {
		what := "tombstoned anyway, so that no later sync loads them"
		if *dry {
			what = "would be tombstoned anyway"
		}
		fmt.Fprintf(e.stdout, "Keys not stored (%s): %s\n", what, strings.Join(rep.Unstored, ", "))
		fmt.Fprintf(e.stdout, "(A key is a submission's id in form %s, or, for a submission of the older response form, which has no id, its content key: 32 hex digits of a hash of its content. If these were meant to match stored rows, check --form and the keys.)\n", *form)
	}
	if len(rep.Before) > 0 {
		fmt.Fprintf(e.stdout, "Keys tombstoned before, nothing to do: %s\n", strings.Join(rep.Before, ", "))
	}
	if !*dry {
		fmt.Fprintln(e.stdout, "No later sync, lookback, backfill or reconcile will store these submissions again.")
	}
	return purgeResult(e, rep)
}

// purgeResult is forget's exit code once its commit is done: 1 when the
// sink could not erase the removed rows' old bytes yet (a reader of an
// older snapshot of the SQLite file), which running the command again
// finishes.
func purgeResult(e *env, rep *worker.ForgetReport) int {
	if rep.Purge == nil {
		return exitOK
	}
	if e.cfg.Sink == "bigquery" {
		// The rows are forgotten; copies in staging tables of earlier
		// commits could not be removed now and expire with those tables.
		fmt.Fprintf(e.stdout, "Not removed from the staging tables yet: %v.\n", rep.Purge)
		return exitFailed
	}
	fmt.Fprintf(e.stdout, "Not erased from the file yet: %v.\nOnce that reader has finished, run this command again: it finds nothing more to remove and erases them.\n", rep.Purge)
	return exitFailed
}

// everRead reports whether a stored state shows the form was ever read or
// written: a success, a row, a watermark, a backfill under way or an
// earlier erasure. A state holding only the error of a failed read does not.
func everRead(st state.Form) bool {
	return !st.LastSuccessAt.IsZero() || st.Rows+st.Deleted > 0 || !st.Watermark.IsZero() ||
		st.Backfill != nil || st.Forgotten != nil
}

// openStore opens the store a command changes (command: "forget",
// "remove"; done: what it says of its work, "forgotten", "removed"). The
// store must exist already: a mistyped FORMSYNC_SQLITE_PATH or dataset
// would be created empty, and the command reported against it while the
// rows stay elsewhere. A dry run only reads: like status, it opens the
// store read-only, so it works on a copy or as a user that may not write,
// and can change nothing (not even migrate the schema). It reports why it
// could not, and returns false then.
func openStore(ctx context.Context, e *env, command, done string, dry bool) (sink.Sink, bool) {
	var dst sink.Sink
	var err error
	if dry {
		dst, err = openReadOnly(ctx, e.cfg)
	} else if err = storeExists(ctx, e.cfg); err == nil {
		dst, err = openSink(ctx, e.cfg)
	}
	if nse := (noStoreError{}); errors.As(err, &nse) {
		fmt.Fprintf(e.stderr, "formsync %s: %v; nothing was %s\n", command, err, done)
		return nil, false
	}
	if err != nil {
		e.log.Error("cannot open the sink", "error", err.Error())
		return nil, false
	}
	return dst, true
}

// storeExists reports a sink a sync never wrote: no SQLite file at
// FORMSYNC_SQLITE_PATH, or no formsync tables in the BigQuery dataset. It
// creates nothing; other failures are left to opening the sink.
func storeExists(ctx context.Context, cfg Config) error {
	switch cfg.Sink {
	case "sqlite":
		if _, err := os.Stat(cfg.SQLitePath); errors.Is(err, iofs.ErrNotExist) {
			return noDatabase(cfg)
		}
	case "bigquery":
		s, err := bigquery.OpenReadOnly(ctx, cfg.bigQuery())
		if errors.Is(err, bigquery.ErrNotFound) {
			return noStoreError{err}
		}
		if err == nil {
			s.Close()
		}
	}
	return nil
}
