package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// Source is the Forms API as the engine reads it. *formsapi.Client
// satisfies it.
type Source interface {
	Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error)
}

// Sink is the part of a sink.Sink the engine uses: every sink has it.
// Commit must apply all of a commit or none of it, and refuse it with
// sink.ErrStateConflict when a form's stored revision is not the one its
// state carries. What a sink may do beyond it (tuning, purging) the engine
// asks sink.Optional.
type Sink interface {
	ReadState(ctx context.Context, formIDs []string) (map[string]state.Form, error)
	Commit(ctx context.Context, c *sink.Commit) (sink.Result, error)
	// Find selects stored rows (Forget).
	Find(ctx context.Context, formID string, m sink.Match) ([]sink.Row, error)
	// Recount counts the rows of forms anew into their counters: the
	// completeness check recounts a form whose count falls short of the
	// API's total (or is negative) before it reads the form again or calls
	// it incomplete; a form whose count adds up costs nothing more.
	Recount(ctx context.Context, formIDs []string) error
}

var _ Source = (*formsapi.Client)(nil)

// accountSource is a Source that reads forms through several accounts and
// says which a form belongs to ([Accounts]). A Source that is not reads
// every form with one token: all forms share one account, "".
type accountSource interface {
	Source
	Account(formID string) string
}

// Engine syncs the configured forms from a Source into a Sink. It builds
// each form's read (formRun) from reading, and writes through commits.
type Engine struct {
	src     Source
	dst     Sink
	cfg     Config
	reading reading
	commits committer
}

// New returns an engine; it checks the configuration.
func New(src Source, dst Sink, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Engine{
		src: src, dst: dst, cfg: cfg,
		reading: reading{
			src: src, pageSize: cfg.PageSize, lookback: cfg.Lookback, budget: cfg.FormTimeout, now: cfg.Now,
			policy: cfg.FieldPolicy, tmpDir: cfg.TmpDir, sortContentKeys: cfg.SortContentKeys,
			partRows: cfg.PartRows, partsByContent: cfg.PartsByContent, partDays: cfg.PartDays, logger: cfg.Logger,
		},
		commits: committer{dst: dst, pins: cfg.FieldTypes, grace: cfg.ShutdownGrace, logger: cfg.Logger},
	}, nil
}

// account is the account a form is read through: "" when the Source reads
// every form with one token.
func (e *Engine) account(formID string) string {
	if a, ok := e.src.(accountSource); ok {
		return a.Account(formID)
	}
	return ""
}

// Sync makes one pass over every form: read what is new, then commit all
// forms' rows and watermarks together, then check every form's rows
// against the API's total. A form that fails records its error and keeps
// its watermark; the others still commit. Cancelling ctx stops the reading;
// forms read completely by then are still committed, within
// Config.ShutdownGrace. The error is for what stopped the run before any
// form was read (the state could not be read).
//
// A form whose last reconcile is older than Config.ReconcileEvery is
// reconciled in the same pass (see Reconcile).
func (e *Engine) Sync(ctx context.Context) (*Report, error) {
	if !e.waitJitter(ctx) {
		return &Report{}, nil // stopped before anything was read
	}
	return e.sync(ctx, e.cfg.Forms)
}

// SyncForms is Sync for some of the configured forms, at once (without
// Config.StartJitter): what a trigger asks for. The forms are read
// together and committed in one commit. A form that is not configured is
// an error, and then nothing is read.
func (e *Engine) SyncForms(ctx context.Context, formIDs ...string) (*Report, error) {
	for _, id := range formIDs {
		if !slices.Contains(e.cfg.Forms, id) {
			return nil, fmt.Errorf("form %q is not one of the configured forms", id)
		}
	}
	return e.sync(ctx, formIDs)
}

func (e *Engine) sync(ctx context.Context, forms []string) (*Report, error) {
	now := e.cfg.Now()
	return e.run(ctx, "sync", forms, func(st state.Form) readMode {
		if every := e.cfg.ReconcileEvery; every > 0 && now.Sub(st.LastReconcileAt) >= every {
			return readReconcileDue
		}
		return readNew
	})
}

// waitJitter waits a random time up to Config.StartJitter; false when ctx
// ended first.
func (e *Engine) waitJitter(ctx context.Context) bool {
	if e.cfg.StartJitter <= 0 {
		return true
	}
	d := e.cfg.Jitter(e.cfg.StartJitter)
	if d <= 0 {
		return ctx.Err() == nil
	}
	e.cfg.Logger.Debug("waiting before the run starts (start jitter)", "wait_seconds", d.Seconds())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Reconcile reads every page of the given forms (all configured forms when
// none is given) and commits what it read as a sync does, marking in the
// same commit every stored row that was not served as deleted upstream
// (deleted_at; never a hard delete) and clearing the mark of rows served
// again. A read that saw fewer submissions than the API counts marks
// nothing. A reconcile also rewrites every served row under the configured
// field policy and records it.
func (e *Engine) Reconcile(ctx context.Context, formIDs ...string) (*Report, error) {
	if len(formIDs) == 0 {
		formIDs = e.cfg.Forms
	}
	if !e.waitJitter(ctx) {
		return &Report{}, nil // stopped before anything was read
	}
	return e.run(ctx, "reconcile", formIDs, func(state.Form) readMode { return readReconcile })
}

// run reads forms, each in the mode modeOf gives for its state, commits
// them together and checks their completeness. what names the run in its
// log lines: "sync" or "reconcile".
func (e *Engine) run(ctx context.Context, what string, forms []string, modeOf func(state.Form) readMode) (*Report, error) {
	start := e.cfg.Now()
	states, err := e.dst.ReadState(ctx, forms)
	if err != nil {
		return nil, fmt.Errorf("reading sync state: %w", err)
	}
	rep := &Report{}
	pf := e.startPrefetch(ctx)
	defer pf.stop()
	runs, rejected := e.readForms(ctx, rep, forms, states, modeOf, pf)
	defer discardAll(runs)
	rejection(rep, rejected)
	remarked := e.commitRuns(ctx, rep, runs)
	if rep.CommitErr == nil && rep.Fatal == nil && ctx.Err() == nil {
		e.checkCompleteness(ctx, rep, runs, remarked)
	}
	for _, r := range runs {
		rep.Forms = append(rep.Forms, r.finalReport())
	}
	if e.cfg.Files != nil && e.cfg.Files.Fetcher != nil && rep.CommitErr == nil && rep.Fatal == nil && ctx.Err() == nil {
		e.filesPhase(ctx, rep, forms, pf)
	}
	rep.Duration = e.cfg.Now().Sub(start)
	e.logReport(what, rep)
	return rep, nil
}

// readForms reads forms, Config.Concurrency at once, each under its time
// budget, in the mode modeOf gives for its state. A 401 cancels the forms
// of its account still reading (all forms, when the Source reads them all
// with one token) and is returned by account: the token is wrong for all
// of them. The other accounts' forms read on.
func (e *Engine) readForms(ctx context.Context, rep *Report, forms []string, states map[string]state.Form, modeOf func(state.Form) readMode, pf *prefetcher) ([]*formRun, map[string]error) {
	// One context per account, so that a rejected token stops its own
	// account's forms only.
	accounts := map[string]*accountRun{}
	for i, id := range forms {
		name := e.account(id)
		if accounts[name] == nil {
			actx, acancel := context.WithCancelCause(ctx)
			defer acancel(nil)
			accounts[name] = &accountRun{ctx: actx, cancel: acancel}
		}
		accounts[name].forms = append(accounts[name].forms, i)
	}
	runs := make([]*formRun, len(forms))
	var parts *partCommitter
	if e.cfg.PartRows > 0 {
		// Parts queued when the run stops still commit, within the grace:
		// a form read to its end needs every part in for its final commit.
		partsCtx, stopParts := e.commits.graceful(ctx)
		defer stopParts()
		parts = e.startParts(partsCtx)
		defer func() {
			parts.wait()
			rep.CommitDuration += parts.duration
			rep.Conflicts += parts.conflicts
			for _, r := range runs {
				r.settleParts()
			}
		}()
	}
	// Each account reads Config.Concurrency forms at once, in the order
	// given: forms waiting on one account's rate limit do not hold the
	// places of another account's.
	var g errgroup.Group
	for _, acc := range accounts {
		g.Go(func() error {
			var ag errgroup.Group
			ag.SetLimit(e.cfg.Concurrency)
			for _, i := range acc.forms {
				id := forms[i]
				st, ok := states[id]
				if !ok {
					st = state.New(id)
				}
				ag.Go(func() error {
					if acc.ctx.Err() != nil {
						runs[i] = e.newRun(st)
						runs[i].err = fmt.Errorf("form %s: not started: %w", id, context.Cause(acc.ctx))
						return nil
					}
					fctx, fcancel := context.WithTimeoutCause(acc.ctx, e.cfg.FormTimeout, ErrFormTimeout)
					defer fcancel()
					runs[i] = e.newRun(st)
					if pf != nil && modeOf(st) == readNew {
						runs[i].prefetch = pf.offer
					}
					runs[i].read(fctx, modeOf(st), parts, e.cfg.Progress)
					if err := runs[i].err; errors.Is(err, formsapi.ErrUnauthorized) {
						acc.cancel(err)
					}
					return nil
				})
			}
			return ag.Wait()
		})
	}
	g.Wait()
	if parts != nil && e.cfg.CommitDays > 0 {
		spillDays(runs, e.cfg.CommitDays)
	}
	var rejected map[string]error
	for name, acc := range accounts {
		if err := context.Cause(acc.ctx); errors.Is(err, formsapi.ErrUnauthorized) {
			if rejected == nil {
				rejected = map[string]error{}
			}
			rejected[name] = err
		}
	}
	return runs, rejected
}

// accountRun is what the forms of one account share in a run.
type accountRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	forms  []int // indexes of the run's forms
}

// rejection sorts a run's rejected tokens (readForms): one for every form
// (the Source reads them all with one token) is the run's Fatal, those of
// accounts are its Rejected.
func rejection(rep *Report, rejected map[string]error) {
	if err, ok := rejected[""]; ok {
		rep.Fatal = fmt.Errorf("the run stopped at the first rejected request, since the token is the same for every form: %w", err)
		return
	}
	for name, err := range rejected {
		if rep.Rejected == nil {
			rep.Rejected = map[string]error{}
		}
		// The error names the account already when its Source is an
		// Accounts: said once.
		if ae := (*AccountError)(nil); errors.As(err, &ae) && ae.Account == name {
			err = ae.Err
		}
		rep.Rejected[name] = fmt.Errorf("account %s: its forms stopped at the first rejected request, since they share its token: %w", name, err)
	}
}

func discardAll(runs []*formRun) {
	for _, r := range runs {
		r.discard()
	}
}

// interrupted reports a form stopped by the run (a shutdown, or another
// form's 401) rather than failing: its state is left alone.
func interrupted(err error) bool {
	return errors.Is(err, context.Canceled) && !errors.Is(err, formsapi.ErrUnauthorized)
}
