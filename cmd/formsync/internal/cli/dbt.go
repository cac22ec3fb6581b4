package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/formsync/formsync/sink/dbt"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/schedule"
)

// runDBT is `formsync dbt`: write (or bring up to date) a dbt project over
// the configured sink's tables and views. It reads the sink as status
// does, read-only, and writes only under --dir.
func runDBT(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("dbt", flag.ContinueOnError)
	dir := fs.String("dir", "formsync_dbt", "`directory` of the dbt project, created if missing; files there without formsync's 'generated' first line are never changed")
	dry := fs.Bool("dry-run", false, "say what would be written and removed, change nothing")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if *dir == "" {
		fmt.Fprintln(e.stderr, "formsync dbt: --dir is empty: give the directory of the dbt project")
		return exitUsage
	}
	if err := e.cfg.Validate(needs("dbt")); err != nil {
		return configError(e, err)
	}
	period, err := schedule.Period(e.cfg.Schedule, time.Now())
	if err != nil {
		return configError(e, &ConfigError{Problems: []string{fmt.Sprintf("FORMSYNC_SCHEDULE=%q: %v", e.cfg.Schedule, err)}})
	}
	dst, err := openReadOnly(ctx, e.cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync dbt: %v\n", err)
		return exitFailed
	}
	defer dst.Close()
	states, err := dst.ReadState(ctx, nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync dbt: %v\n", err)
		return exitFailed
	}
	forms, unsynced := dbtForms(states, e.cfg.Forms)
	p := dbt.Project{
		Adapter:   dbt.Adapter(e.cfg.Sink),
		BQProject: e.cfg.BQProject, BQDataset: e.cfg.BQDataset, BQLocation: e.cfg.BQLocation,
		Forms:     forms,
		Freshness: dbt.FreshnessFor(period),
	}
	if p.Adapter == dbt.SQLite {
		// The profile is read from the project's directory: a relative
		// path would name another file there.
		if p.SQLitePath, err = filepath.Abs(e.cfg.SQLitePath); err == nil {
			p.Dir, err = filepath.Abs(*dir)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "formsync dbt: %v\n", err)
			return exitFailed
		}
	}
	files, err := p.Files()
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync dbt: %v\n", err)
		return exitFailed
	}
	res, err := dbt.Write(*dir, files, *dry)
	would := ""
	if *dry {
		would = "would be "
	}
	for _, f := range res.Written {
		fmt.Fprintf(e.stdout, "%swritten: %s\n", would, filepath.Join(*dir, f))
	}
	for _, f := range res.Removed {
		fmt.Fprintf(e.stdout, "%sremoved: %s (its form is no longer synced)\n", would, filepath.Join(*dir, f))
	}
	for _, f := range res.Kept {
		fmt.Fprintf(e.stdout, "kept: %s: its first line is not the comment %q, so it is yours and left as it is\n", filepath.Join(*dir, f), dbt.Marker)
	}
	if len(res.Unchanged) > 0 {
		fmt.Fprintf(e.stdout, "unchanged: %d file(s)\n", len(res.Unchanged))
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "formsync dbt: %v\n", err)
		return exitFailed
	}
	for _, id := range unsynced {
		fmt.Fprintf(e.stdout, "not modelled: form %s has not been synced yet, so it has no view; run formsync dbt again after a sync\n", id)
	}
	if len(forms) == 0 {
		fmt.Fprintln(e.stdout, "No form has been synced yet: the project has sources for formsync's tables and no staging model.")
	}
	if !*dry {
		fmt.Fprintf(e.stdout, "dbt project for %s with %d staging model(s) in %s: run 'dbt build' there (docs/dbt.md)\n", e.cfg.Sink, len(forms), *dir)
	}
	return exitOK
}

// dbtForms are the forms to model: those with a state in the sink (each
// has a view), only those of FORMSYNC_FORMS when it is set. unsynced are
// forms of FORMSYNC_FORMS with no state yet, hence no view.
func dbtForms(states map[string]state.Form, configured []string) (forms []state.Form, unsynced []string) {
	for id, st := range states {
		if len(configured) == 0 || slices.Contains(configured, id) {
			forms = append(forms, st)
		}
	}
	for _, id := range configured {
		if _, ok := states[id]; !ok {
			unsynced = append(unsynced, id)
		}
	}
	return forms, unsynced
}
