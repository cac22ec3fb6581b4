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
	"github.com/formsync/formsync/worker/files"
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
	req, code, ok := parseForget(e, args)
	if !ok {
		return code
	}
	dst, ok := openStore(ctx, e, "forget", "forgotten", req.dry)
	if !ok {
		return exitFailed
	}
	defer dst.Close()
	if code, ok := checkFormStored(ctx, e, dst, req.form); !ok {
		return code
	}
	rep, code := forgetIn(ctx, e, dst, req)
	if rep == nil {
		return code
	}
	printForget(e, req, rep)
	return purgeResult(e, rep)
}

// forgetRequest is what forget is asked: which submissions of which form,
// and whether only to list them (a dry run).
type forgetRequest struct {
	form  string
	match sink.Match
	dry   bool
}

// parseForget reads forget's flags into a request, the --field value as
// the rows store it. When the flags or the configuration forget needs have
// problems, it lists them all and returns false with the exit code.
func parseForget(e *env, args []string) (req forgetRequest, code int, ok bool) {
	fs := flag.NewFlagSet("forget", flag.ContinueOnError)
	form := onceString(fs, "form", "`id` of the form (required)")
	var keys listFlag
	fs.Var(&keys, "key", "submission key to forget: the submission's id, or, in a form of the older response form (no ids), its content key, 32 hex digits of a hash of its content (the submission_key column); repeat or comma-separate")
	field := fs.String("field", "", "forget every submission whose field NAME holds VALUE exactly: NAME=VALUE (a hashed field takes the clear value)")
	dry := fs.Bool("dry-run", false, "list what would be forgotten, change nothing")
	if ok, code := parseFlags(fs, e, args); !ok {
		return forgetRequest{}, code, false
	}
	req = forgetRequest{form: *form, match: sink.Match{Keys: keys}, dry: *dry}
	problems := forgetFlagProblems(*form, *field, keys)
	if err := e.cfg.Validate(needs("forget")); err != nil {
		problems = append(problems, configProblems(err)...)
	}
	if name, value, ok := fieldFlag(*field); ok {
		// The stored value: a field the policy hashes is stored hashed.
		stored, err := e.cfg.policy.Lookup(name, value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("--field %s: %v", name, err))
		}
		req.match.Field, req.match.Value = name, stored
	}
	if len(problems) > 0 {
		return forgetRequest{}, configError(e, &ConfigError{Problems: problems}), false
	}
	return req, 0, true
}

// forgetFlagProblems are the problems of forget's flags themselves: no
// form, nothing to forget, or a --field that is not NAME=VALUE.
func forgetFlagProblems(form, field string, keys []string) []string {
	var problems []string
	if msg := flagFormProblem(form, "holding the submissions"); msg != "" {
		problems = append(problems, msg)
	}
	switch _, _, ok := fieldFlag(field); {
	case field == "" && len(keys) == 0:
		problems = append(problems, "give --key KEY or --field NAME=VALUE: what to forget")
	case field != "" && !ok:
		problems = append(problems, fmt.Sprintf("--field %q: use NAME=VALUE, e.g. --field email=person@example.com", field))
	}
	return problems
}

// fieldFlag splits a --field NAME=VALUE; ok is false when it is not one
// (no "=", or no name).
func fieldFlag(field string) (name, value string, ok bool) {
	name, value, ok = strings.Cut(field, "=")
	return name, value, ok && name != ""
}

// checkFormStored refuses a --form that names no form formsync ever read:
// a mistyped form id would find nothing, tombstone the keys under a form
// that does not exist and report success. A state that only records
// failures (a reconcile of the mistyped id, which answered 404) does not
// make the id a form formsync ever read. When it refuses, it says why and
// returns the exit code.
func checkFormStored(ctx context.Context, e *env, dst sink.Sink, form string) (code int, ok bool) {
	states, err := dst.ReadState(ctx, []string{form})
	if err != nil {
		e.log.Error("cannot read the sync state", "form", form, "error", err.Error())
		return exitFailed, false
	}
	if st, found := states[form]; (found && everRead(st)) || slices.Contains(e.cfg.Forms, form) {
		return 0, true
	}
	return configError(e, &ConfigError{Problems: []string{fmt.Sprintf("--form %s: no such form here (never synced, and not in FORMSYNC_FORMS): check the id", form)}}), false
}

// forgetIn forgets the request's submissions in dst, or with a dry run
// finds them. When it cannot, it says why and returns a nil report and the
// exit code.
func forgetIn(ctx context.Context, e *env, dst sink.Sink, req forgetRequest) (*worker.ForgetReport, int) {
	// Only what forget reads: the engine's reading settings (page size,
	// concurrency, ...) are not its business, nor checked for it.
	// Its commit stores the form's pinned types, as every commit does.
	cfg := worker.Config{Forms: []string{req.form}, Logger: e.log, FieldPolicy: e.cfg.fieldPolicy(), FieldTypes: e.cfg.pins}
	if e.cfg.FilesStore != "" && !req.dry {
		// The removed rows' files are deleted from the store too.
		store, err := files.OpenStore(ctx, e.cfg.FilesStore, files.StoreOptions{})
		if err != nil {
			e.log.Error("cannot open the files store: nothing was removed", "form", req.form, "error", err.Error())
			return nil, exitFailed
		}
		defer store.Close()
		cfg.Files = &worker.Files{Store: store}
	}
	eng, err := worker.New(nil, dst, cfg)
	if err != nil {
		return nil, configError(e, err)
	}
	rep, err := eng.Forget(ctx, req.form, req.match, req.dry)
	if err != nil {
		e.log.Error("forget failed: nothing was removed", "form", req.form, "error", err.Error())
		return nil, exitFailed
	}
	return rep, exitOK
}

// printForget says what forget did, or with a dry run would do: that
// nothing matched, that every key was forgotten before, or the rows and
// keys it forgot.
func printForget(e *env, req forgetRequest, rep *worker.ForgetReport) {
	switch {
	case len(rep.Rows) == 0 && len(rep.Unstored) == 0 && len(rep.Before) == 0:
		if req.dry {
			fmt.Fprintf(e.stdout, "Dry run: no stored row of form %s matches: nothing would change.\n", req.form)
		} else {
			fmt.Fprintf(e.stdout, "No stored row of form %s matches: nothing changed.\n", req.form)
		}
	case !req.dry && !rep.Committed:
		// Only keys, every one forgotten before (the command run again).
		fmt.Fprintf(e.stdout, "Nothing new to forget in form %s: no stored row has these keys, and they were tombstoned before: %s\n",
			req.form, strings.Join(rep.Before, ", "))
	default:
		printForgotten(e, req, rep)
	}
}

// printForgotten lists the rows and keys forget forgot, or with a dry run
// would forget.
func printForgotten(e *env, req forgetRequest, rep *worker.ForgetReport) {
	verb := "Forgot"
	if req.dry {
		verb = "Dry run: would forget"
	}
	fmt.Fprintf(e.stdout, "%s %d stored row(s) of form %s:\n", verb, len(rep.Rows), req.form)
	for _, r := range rep.Rows {
		state := ""
		if !r.DeletedAt.IsZero() {
			state = " (deleted upstream)"
		}
		fmt.Fprintf(e.stdout, "  %s  created %s%s\n", r.SubmissionKey, r.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"), state)
	}
	if len(rep.Unstored) > 0 {
		what := "tombstoned anyway, so that no later sync loads them"
		if req.dry {
			what = "would be tombstoned anyway"
		}
		fmt.Fprintf(e.stdout, "Keys not stored (%s): %s\n", what, strings.Join(rep.Unstored, ", "))
		fmt.Fprintf(e.stdout, "(A key is a submission's id in form %s, or, for a submission of the older response form, which has no id, its content key: 32 hex digits of a hash of its content. If these were meant to match stored rows, check --form and the keys.)\n", req.form)
	}
	if len(rep.Before) > 0 {
		fmt.Fprintf(e.stdout, "Keys tombstoned before, nothing to do: %s\n", strings.Join(rep.Before, ", "))
	}
	if !req.dry {
		fmt.Fprintln(e.stdout, "No later sync, lookback, backfill or reconcile will store these submissions again.")
	}
	printForgottenFiles(e, rep)
}

// printForgottenFiles says what became of the files the forgotten rows
// named in the files store.
func printForgottenFiles(e *env, rep *worker.ForgetReport) {
	if len(rep.Objects) == 0 {
		return
	}
	if len(rep.Deleted) > 0 {
		fmt.Fprintf(e.stdout, "Deleted %d file(s) from the files store: %s\n", len(rep.Deleted), strings.Join(rep.Deleted, ", "))
	}
	if len(rep.Kept) > 0 {
		fmt.Fprintf(e.stdout, "Kept %d file(s) that another stored submission names too: %s\n", len(rep.Kept), strings.Join(rep.Kept, ", "))
	}
	if rep.ObjectsErr != nil {
		fmt.Fprintf(e.stdout, "Not deleted from the files store: %v.\nNo stored row names them any more: delete the objects sha256/<digest> of these digests from the store by hand: %s\n",
			rep.ObjectsErr, strings.Join(slices.DeleteFunc(slices.Clone(rep.Objects), func(d string) bool { return slices.Contains(rep.Deleted, d) || slices.Contains(rep.Kept, d) }), ", "))
	}
}

// purgeResult is forget's exit code once its commit is done: 1 when the
// sink could not erase the removed rows' old bytes yet (a reader of an
// older snapshot of the SQLite file), which running the command again
// finishes.
func purgeResult(e *env, rep *worker.ForgetReport) int {
	if rep.Purge == nil {
		if rep.ObjectsErr != nil {
			return exitFailed
		}
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
