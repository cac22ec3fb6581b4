package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/formsync/formsync/worker/metrics"
)

// runReconcile is `formsync reconcile`: read every page of the forms and
// mark the stored rows the API no longer serves as deleted upstream.
func runReconcile(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	form := onceString(fs, "form", "reconcile the form of this `id` only (default: every form of FORMSYNC_FORMS in this shard)")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	configured := e.cfg.Forms
	var problems []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "form" && *form == "" {
			// An empty --form (a script's unset variable) must not
			// reconcile every form.
			problems = append(problems, "--form is empty: give a form id, or leave --form out to reconcile every form of FORMSYNC_FORMS")
		}
	})
	if *form != "" {
		if msg := formIDProblem(*form); msg != "" {
			problems = append(problems, "--form "+msg)
		}
		e.cfg.Forms = []string{*form}
	}
	listed := *form == "" && len(e.cfg.Forms) > 0
	if *form == "" && !listed {
		problems = append(problems, "no form to reconcile: name one with --form ID, or list the forms in FORMSYNC_FORMS")
	}
	need := needs("reconcile")
	need.Forms = listed // forms named by --form need no FORMSYNC_FORMS
	if err := e.cfg.Validate(need); err != nil {
		problems = append(problems, configProblems(err)...)
	}
	if len(problems) > 0 {
		return configError(e, &ConfigError{Problems: problems})
	}
	forms := []string{*form}
	if *form != "" {
		if code, ok := checkFormKnown(ctx, e, configured, *form); !ok {
			return code
		}
	} else {
		if forms = shardForms(e.cfg); len(forms) == 0 {
			e.log.Warn("no form falls in this shard", "shard_index", e.cfg.ShardIndex, "shard_count", e.cfg.ShardCount)
			return exitOK
		}
	}
	defer prepareTmpDir(e)()
	m := metrics.New()
	e.progress = startProgress(e, "reconcile")
	p, err := wire(ctx, e, forms, m)
	if err != nil {
		// A failed run, as sync counts one: the Pushgateway's group
		// would otherwise keep the last success.
		m.ObserveRun(nil, 0)
		pushMetrics(ctx, e, m)
		return wireFailed(e, err)
	}
	defer p.Close()
	rep, err := p.engine.Reconcile(ctx, forms...)
	e.progress.done()
	if err != nil {
		e.log.Error("reconcile failed", "error", err.Error())
		m.ObserveRun(nil, 0)
		pushMetrics(ctx, e, m)
		return exitFailed
	}
	m.ObserveRun(rep, rep.CommitDuration)
	pushMetrics(ctx, e, m)
	states, _ := p.sink.ReadState(ctx, forms)
	for _, f := range rep.Forms {
		if f.Err != nil || rep.CommitErr != nil || !f.Reconciled {
			continue
		}
		st := states[f.FormID]
		fmt.Fprintf(e.stdout, "Reconcile of form %s: %d submissions served (%d new, %d updated), %d rows newly marked deleted upstream, %d served again; the table holds %d rows, %d of them deleted upstream (%d requests, %s).\n",
			f.FormID, f.Total, f.Inserted, f.Updated, f.Deleted, f.Restored, st.Rows+st.Deleted, st.Deleted, f.Requests, f.Duration.Round(time.Millisecond))
	}
	if logInterrupted(ctx, e, rep, true) || rep.Failed() > 0 {
		return exitFailed
	}
	return exitOK
}
