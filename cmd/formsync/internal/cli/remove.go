package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/formsync/formsync/sink"
)

// runRemove is `formsync remove`: take a form out of the store, its sync
// state (so that status no longer lists it, nor its last error) and, with
// --rows, its stored rows. A form still in FORMSYNC_FORMS is refused: the
// next run would sync it again from nothing. Tombstones stay (see
// sink.Removal).
func runRemove(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("remove", flag.ContinueOnError)
	form := onceString(fs, "form", "`id` of the form to remove (required); it must no longer be in FORMSYNC_FORMS")
	rows := fs.Bool("rows", false, "remove the form's stored rows too, and its view; without it they stay in the table")
	dry := fs.Bool("dry-run", false, "say what would be removed, with counts, and change nothing")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	var problems []string
	if msg := flagFormProblem(*form, "to remove"); msg != "" {
		problems = append(problems, msg)
	}
	if err := e.cfg.Validate(needs("remove")); err != nil {
		problems = append(problems, configProblems(err)...)
	}
	configured := slices.Contains(e.cfg.Forms, *form)
	if configured && !*dry {
		problems = append(problems, fmt.Sprintf("--form %s is in FORMSYNC_FORMS: take it out of FORMSYNC_FORMS (and deploy that) first; removed while configured, the next run would sync it again from nothing", *form))
	}
	if len(problems) > 0 {
		return configError(e, &ConfigError{Problems: problems})
	}
	dst, ok := openStore(ctx, e, "remove", "removed", *dry)
	if !ok {
		return exitFailed
	}
	defer dst.Close()
	states, err := dst.ReadState(ctx, []string{*form})
	if err != nil {
		e.log.Error("cannot read the sync state", "form", *form, "error", err.Error())
		return exitFailed
	}
	st, hasState := states[*form]
	got, err := dst.Remove(ctx, sink.Removal{FormID: *form, Revision: st.Revision, Rows: *rows, DryRun: *dry})
	if errors.Is(err, sink.ErrStateConflict) {
		e.log.Error("the form was committed meanwhile (a sync, backfill or reconcile of it is running): nothing was removed; run the command again once it has finished",
			"form", *form)
		return exitFailed
	}
	if err != nil {
		e.log.Error("remove failed: nothing was removed", "form", *form, "error", err.Error())
		return exitFailed
	}
	if !got.State && got.Rows+got.Deleted == 0 {
		fmt.Fprintf(e.stdout, "Nothing to remove: form %s has no sync state and no stored rows here.\n", *form)
		return exitOK
	}
	w := e.stdout
	if *dry {
		fmt.Fprintf(w, "Dry run: would remove form %s from formsync:\n", *form)
	} else {
		fmt.Fprintf(w, "Removed form %s from formsync:\n", *form)
	}
	verb := map[bool]string{true: "would be removed", false: "removed"}[*dry]
	switch {
	case !hasState:
		fmt.Fprintln(w, "  sync state: none")
	case got.Tombstones:
		fmt.Fprintf(w, "  sync state: %s, but for the tombstones of %d forgotten submission(s), which stay so that they are never stored again if the form is configured again\n", verb, got.Forgotten)
	case st.LastError != "":
		fmt.Fprintf(w, "  sync state: %s (with its last error: %s)\n", verb, shorten(st.LastError, 120))
	default:
		fmt.Fprintf(w, "  sync state: %s\n", verb)
	}
	switch n := got.Rows + got.Deleted; {
	case n == 0:
		fmt.Fprintln(w, "  stored rows: none")
	case *rows:
		fmt.Fprintf(w, "  stored rows: %d %s (%d marked deleted upstream), and the form's view\n", n, verb, got.Deleted)
	default:
		stay := "stay"
		if *dry {
			stay = "would stay"
		}
		fmt.Fprintf(w, "  stored rows: %d %s in the table (%d marked deleted upstream); --rows removes them\n", n, stay, got.Deleted)
	}
	if *dry {
		if configured {
			fmt.Fprintf(w, "Form %s is in FORMSYNC_FORMS: the removal itself is refused until it is taken out.\n", *form)
		}
		return exitOK
	}
	e.log.Info("form removed", "form", *form, "state", got.State, "tombstones_kept", got.Tombstones,
		"rows_removed", removedRows(got, *rows), "rows_kept", got.Rows+got.Deleted-removedRows(got, *rows))
	if got.View != nil {
		// The removal is committed; the view, outside the transaction
		// in BigQuery, is not dropped.
		e.log.Error("the form was removed, but its view could not be dropped: drop it by hand", "form", *form, "error", got.View.Error())
		return exitFailed
	}
	return exitOK
}

// removedRows is how many stored rows a removal took out.
func removedRows(got sink.Removed, rows bool) int64 {
	if !rows {
		return 0
	}
	return got.Rows + got.Deleted
}
