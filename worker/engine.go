package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/formsync/formsync/internal/config"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker/formsapi"
)

// Source is the Forms API as the engine reads it. *formsapi.Client
// satisfies it.
type Source interface {
	Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error)
}

// Sink is where the engine keeps rows and state. Commit must apply all of a
// commit or none of it, and refuse it with sink.ErrStateConflict when a
// form's stored revision is not the one its state carries.
type Sink interface {
	ReadState(ctx context.Context, formIDs []string) (map[string]state.Form, error)
	Commit(ctx context.Context, c *sink.Commit) (sink.Result, error)
	// Find selects stored rows (Forget).
	Find(ctx context.Context, formID string, m sink.Match) ([]sink.Row, error)
}

var _ Source = (*formsapi.Client)(nil)

// Defaults of Config, applied to its zero fields.
const (
	DefaultPageSize      = formsapi.MaxLimit
	DefaultConcurrency   = 4
	DefaultFormTimeout   = 10 * time.Minute
	DefaultShutdownGrace = 20 * time.Second
	// FutureTolerance is how far in the future a created_at may lie and
	// still move the watermark.
	FutureTolerance = 24 * time.Hour
)

// commitAttempts bounds how often a commit refused for a concurrent update
// is merged and tried again.
const commitAttempts = 8

// Config tunes the engine. The zero value of each field means its default.
type Config struct {
	// Forms are the form ids to sync.
	Forms []string
	// PageSize is the limit asked per page, 1 to 100. Defaults to 100.
	PageSize int
	// Concurrency is how many forms are read at once; of each account,
	// when the Source reads forms through several ([Accounts]). Defaults
	// to 4.
	Concurrency int
	// FormTimeout bounds everything one form waits on in a run: requests,
	// retries, the rate limiter. A form past it fails for this run and
	// keeps its watermark; the others commit. Defaults to 10m.
	FormTimeout time.Duration
	// Lookback makes every sync re-read submissions newer than the watermark
	// minus Lookback, so that later changes (is_spam) are picked up.
	Lookback time.Duration
	// TmpDir is where rows are staged; "" is the system temporary directory.
	TmpDir string
	// ShutdownGrace is how long, once ctx is cancelled (SIGTERM), the
	// commits of what was read may still take: the parts queued and the
	// final commit of the forms read to their end, whether the signal came
	// before or during them. Defaults to 20s.
	ShutdownGrace time.Duration
	// Logger receives the per-form and per-run summaries. Defaults to a
	// logger that discards.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// ReconcileEvery makes a sync reconcile a form (read every page and
	// mark the stored rows no longer served as deleted) once that long has
	// passed since its last reconcile. 0, the default, never does: a
	// reconcile runs only when asked (Reconcile).
	ReconcileEvery time.Duration
	// FieldPolicy rewrites personal fields before anything is staged; nil
	// keeps every field as served.
	FieldPolicy FieldPolicy
	// PartRows makes a sync commit a form's rows in parts of this
	// many while it goes on reading the form, so that the sink writes
	// while the API is read rather than after; the form's last rows and
	// its new watermark are committed at the end of the run, only once
	// every part is. A run stopped half-way leaves the parts committed:
	// rows the next run reads again and finds unchanged. 0, the default,
	// commits every form's rows at the end of the run, in one commit. A
	// reconcile never commits in parts.
	PartRows int
	// SortContentKeys stages rows keyed by content (the older response
	// form) sorted by key, a MiB at a time (sink.Spool.SortContentKeys),
	// for a sink that inserts them faster in key order: SQLite.
	SortContentKeys bool
	// PartsByContent commits rows keyed by content in parts as well
	// (PartRows), for a sink that needs every transaction bounded:
	// BigQuery. Otherwise they are committed once, at the end of the run.
	PartsByContent bool
	// PartDays, when set, also ends a part (PartRows) and a backfill's
	// checkpoint once its rows span this many distinct days
	// (sink.Tuning.PartDays; see partDue).
	PartDays int
	// StartJitter is the longest random wait before a sync or reconcile
	// reads anything, so that the pods of a sharded run started on one
	// tick do not all commit at the same moment (BigQuery cancels one of
	// two transactions on the same tables). 0, the default, starts at
	// once.
	StartJitter time.Duration
	// Jitter draws a wait in [0, max); default uniform (math/rand/v2).
	Jitter func(max time.Duration) time.Duration
	// Progress, when set, is told after every page a sync or a reconcile
	// reads how far that form got; it is called from the goroutines that
	// read the forms, concurrently. A backfill reports its own progress
	// (BackfillOptions.Progress).
	Progress func(Progress)
	// FieldTypes pins the type of fields' view columns, by form id and
	// field name, whatever type their values have (docs/types.md): every
	// commit of a form stores its pins as state.Form.FieldTypes.Pinned,
	// so a pin removed here is gone from the view at the form's next
	// commit. nil pins nothing.
	FieldTypes map[string]fieldtype.Set
}

func (c Config) withDefaults() Config {
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.FormTimeout = cmp.Or(c.FormTimeout, DefaultFormTimeout)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, DefaultShutdownGrace)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Jitter == nil {
		c.Jitter = func(max time.Duration) time.Duration { return rand.N(max) }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every problem of the configuration at once (errors.Join
// of *config.FieldError, naming the fields of Config); zero fields stand
// for their defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, config.Errorf(field, format, args...))
	}
	if len(c.Forms) == 0 {
		bad("Forms", "no forms to sync")
	}
	if c.PageSize < 1 || c.PageSize > formsapi.MaxLimit {
		bad("PageSize", "%d is outside 1..%d", c.PageSize, formsapi.MaxLimit)
	}
	if c.Concurrency < 1 {
		bad("Concurrency", "%d is below 1", c.Concurrency)
	}
	if c.FormTimeout < 0 {
		bad("FormTimeout", "%s is negative", c.FormTimeout)
	}
	if c.Lookback < 0 {
		bad("Lookback", "%s is negative", c.Lookback)
	}
	if c.ShutdownGrace < 0 {
		bad("ShutdownGrace", "%s is negative", c.ShutdownGrace)
	}
	if c.ReconcileEvery < 0 {
		bad("ReconcileEvery", "%s is negative", c.ReconcileEvery)
	}
	if c.PartRows < 0 {
		bad("PartRows", "%d is negative", c.PartRows)
	}
	if c.StartJitter < 0 {
		bad("StartJitter", "%s is negative", c.StartJitter)
	}
	for _, form := range slices.Sorted(maps.Keys(c.FieldTypes)) {
		for _, field := range slices.Sorted(maps.Keys(c.FieldTypes[form])) {
			if _, err := fieldtype.Parse(string(c.FieldTypes[form][field])); err != nil {
				bad("FieldTypes", "form %s, field %q: %v", form, field, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Engine syncs the configured forms from a Source into a Sink.
type Engine struct {
	src Source
	dst Sink
	cfg Config
}

// New returns an engine; it checks the configuration.
func New(src Source, dst Sink, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return &Engine{src: src, dst: dst, cfg: cfg.withDefaults()}, nil
}

// FormReport says what one sync did for one form.
type FormReport struct {
	FormID string
	// Account is the account the form was read through ([Accounts]); ""
	// when the Source reads every form with one token.
	Account  string
	Inserted int64 // rows new to the table
	Updated  int64 // rows changed (a later version) or re-keyed
	// Reconciled is set when the run reconciled the form; Deleted counts
	// the rows it marked deleted upstream, Restored the marked rows that
	// were served again.
	Reconciled        bool
	Deleted, Restored int64
	// ReconcileErr says why a reconcile the sync was due
	// (Config.ReconcileEvery) was not made: the read did not add up. The
	// rows read were committed all the same, without marking deletions.
	ReconcileErr error
	// Forgotten counts submissions served but not stored because they were
	// forgotten on request.
	Forgotten int64
	// Copies counts submissions served on the same page as another with
	// the same created_at millisecond and content and no id (the older
	// response form): stored once, under one content key.
	Copies int64
	Staged int // rows read and handed to the sink
	// Parts counts the commits of rows made while the form was still read
	// (Config.PartRows); its last rows and watermark come after.
	Parts    int
	Pages    int // pages read
	Requests int // HTTP requests, retries included
	Limited  int // requests answered 429
	Rescans  int // pages or passes read again because the form moved while read
	Order    state.Order
	// Total is the API's total for the form as this run saw it (the lowest
	// of its final pass); -1 when the form was not read to the end.
	Total int64
	// Missing is how many submissions the API counts that the sink does not
	// hold after the run (and a full re-read); 0 when complete. It says so
	// only when Checked.
	Missing int64
	// Checked reports that the run compared the rows the sink holds for the
	// form with the API's total (the completeness check): not for a form
	// that failed, nor when the commit failed or a shutdown cut the run
	// short.
	Checked bool
	// Future, TooDeep and NoFields count submissions stored but not
	// trusted: a created_at more than FutureTolerance ahead (it does not
	// move the watermark), fields nested deeper than the sinks can query
	// (stored without them, raw kept), no fields member at all.
	Future, TooDeep, NoFields int
	// Watermark is the form's watermark after the run.
	Watermark state.Watermark
	// LastSuccessAt and LastReconcileAt are when the form last synced
	// and was last reconciled before this run, as stored (zero when
	// never): what a failed form's metrics keep showing.
	LastSuccessAt, LastReconcileAt time.Time
	Duration                       time.Duration
	// Err is why the form failed this run; its watermark did not move.
	// An interrupted form (shutdown) has Err wrapping context.Canceled.
	Err error
}

// Report says what one sync did.
type Report struct {
	Forms    []FormReport
	Duration time.Duration
	// CommitDuration is how long the sink's commits took.
	CommitDuration time.Duration
	// Conflicts counts commits refused because another process committed
	// some of the same forms meanwhile, merged and tried again.
	Conflicts int
	// CommitErr is set when the run's final commit failed: then no form's
	// watermark moved, and of its rows only the parts committed while the
	// forms were read (Config.PartRows) were written.
	CommitErr error
	// Fatal is a failure that ended the run for every form (the API
	// rejected the token): no further request was made.
	Fatal error
	// Rejected holds, by account, the tokens the API rejected when the
	// Source reads forms through several accounts ([Accounts]): each
	// stopped its own account's forms (they failed, watermarks untouched)
	// and no further request was made for them; the other accounts' forms
	// committed.
	Rejected map[string]error
}

// Failed counts the forms that failed, a failed commit failing them all.
func (r *Report) Failed() int {
	n := 0
	for _, f := range r.Forms {
		if f.Err != nil || r.CommitErr != nil {
			n++
		}
	}
	return n
}

// Err summarises the run's failures; nil when every form succeeded.
func (r *Report) Err() error {
	if r.Fatal != nil {
		return r.Fatal
	}
	if r.CommitErr != nil {
		return r.CommitErr
	}
	var errs []error
	for _, f := range r.Forms {
		if f.Err != nil {
			errs = append(errs, f.Err)
		}
	}
	return errors.Join(errs...)
}

// ErrFormTimeout is matched by the error of a form that did not finish
// within Config.FormTimeout.
var ErrFormTimeout = errors.New("form not read within its time budget")

// IncompleteError says that a form's rows fall short of the API's total
// after a run and a full re-read.
type IncompleteError struct {
	FormID                 string
	Stored, Total, Missing int64
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("form %s is incomplete: the API counts %d submissions, the sink holds %d after a full re-read (%d missing); "+
		"check the form for submissions the API lists but formsync cannot store, and report it", e.FormID, e.Total, e.Stored, e.Missing)
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
	now := e.cfg.Now()
	return e.run(ctx, "sync", e.cfg.Forms, func(st state.Form) readMode {
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
	return e.run(ctx, "reconcile", formIDs, func(state.Form) readMode { return readReconcile })
}

// run reads forms, each in the mode modeOf gives for its state, commits
// them together and checks their completeness. what names the run in its
// log lines: "sync" or "reconcile".
func (e *Engine) run(ctx context.Context, what string, forms []string, modeOf func(state.Form) readMode) (*Report, error) {
	if !e.waitJitter(ctx) {
		return &Report{}, nil // stopped before anything was read
	}
	start := e.cfg.Now()
	states, err := e.dst.ReadState(ctx, forms)
	if err != nil {
		return nil, fmt.Errorf("reading sync state: %w", err)
	}
	rep := &Report{}
	runs, rejected := e.readForms(ctx, rep, forms, states, modeOf)
	defer discardAll(runs)
	rejection(rep, rejected)
	remarked := e.commitRuns(ctx, rep, runs)
	if rep.CommitErr == nil && rep.Fatal == nil && ctx.Err() == nil {
		e.checkCompleteness(ctx, rep, runs, remarked)
	}
	for _, r := range runs {
		rep.Forms = append(rep.Forms, r.finalReport())
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
func (e *Engine) readForms(ctx context.Context, rep *Report, forms []string, states map[string]state.Form, modeOf func(state.Form) readMode) ([]*formRun, map[string]error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// One context per account, so that a rejected token stops its own
	// account's forms only.
	accounts := map[string]*accountRun{}
	for i, id := range forms {
		name := accountOf(e.src, id)
		if accounts[name] == nil {
			actx, acancel := context.WithCancelCause(runCtx)
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
		partsCtx, cancel := e.graceful(runCtx)
		defer cancel()
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
					runs[i] = e.readForm(fctx, st, modeOf(st), parts)
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

// commitRuns writes every form's outcome in one sink commit and fills the
// report's commit fields. It returns the reconciled forms whose commit was
// merged over a commit another process made after their state was read:
// their marks may have hit rows that commit stored (see checkCompleteness).
func (e *Engine) commitRuns(ctx context.Context, rep *Report, runs []*formRun) (remarked []*formRun) {
	now := e.cfg.Now().UTC()
	c := &sink.Commit{SyncedAt: now}
	var committed []*formRun
	var formIndex []int // committed[i]'s place in c.Forms
	seen := make(map[string]state.Copies, len(runs))
	merge := mergeRuns(seen)
	for _, r := range runs {
		switch {
		case r.err == nil:
			seen[r.old.FormID] = r.copies
			next := r.next(now)
			if st := r.parts.state; st != nil {
				// Committed in part already: the stored state is the one
				// the last part left.
				next = merge(*st, next)
			}
			if n := len(next.FieldNames); n > sink.MaxViewFields && n > len(r.old.FieldNames) {
				e.cfg.Logger.Warn("the form has more field names than a view has columns: its view shows the first ones, every value stays in the fields column",
					"form", r.old.FormID, "field_names", n, "view_columns", sink.MaxViewFields)
			}
			formIndex = append(formIndex, len(c.Forms))
			c.Forms = append(c.Forms, sink.FormCommit{State: next, Rows: r.spool, Reconcile: r.mode == readReconcile})
			committed = append(committed, r)
		case interrupted(r.err):
			// Stopped by shutdown or by another form's 401, not a failure
			// of this form: leave its state alone.
		default:
			st := r.old
			if r.parts.state != nil {
				st = *r.parts.state
			}
			st.LastError, st.LastErrorAt = r.err.Error(), now
			c.Forms = append(c.Forms, sink.FormCommit{State: st})
		}
	}
	if len(c.Forms) == 0 {
		return nil
	}
	// What was read completely is committed even when a shutdown comes
	// before or during the commit, within Config.ShutdownGrace of it.
	commitCtx, cancel := e.graceful(ctx)
	defer cancel()
	t0 := e.cfg.Now()
	res, conflicts, err := e.commit(commitCtx, c, merge)
	rep.CommitDuration += e.cfg.Now().Sub(t0)
	rep.Conflicts += conflicts
	if err != nil {
		rep.CommitErr = fmt.Errorf("committing %d forms: %w", len(c.Forms), err)
		return nil
	}
	for _, fc := range c.Forms {
		e.warnView(fc.State.FormID, res[fc.State.FormID])
	}
	for i, r := range committed {
		r.committed = true
		got := res[r.old.FormID]
		r.report.Inserted += got.Inserted
		r.report.Updated += got.Updated
		r.report.Deleted += got.Deleted
		r.report.Restored += got.Restored
		r.report.Reconciled = r.report.Reconciled || r.mode == readReconcile
		// As committed: merged with another process's state, if it had to be.
		r.report.Watermark = c.Forms[formIndex[i]].State.Watermark
		if r.mode == readReconcile && c.Forms[formIndex[i]].State.Revision != r.old.Revision {
			remarked = append(remarked, r)
		}
	}
	return remarked
}

// warnView tells the user when a commit could not make a form's view. The
// parts of a sync do not: its last commit, which takes in every form it
// read, says it once for the run.
func (e *Engine) warnView(formID string, c sink.Counts) {
	if c.View != nil {
		e.cfg.Logger.Warn("the view of a form could not be made: its rows are committed without it, and the next commit tries again",
			"form", formID, "error", c.View.Error())
	}
}

// graceful returns a context that ends Config.ShutdownGrace after ctx does
// (at once if ctx is done and the grace is 0): a commit under it finishes
// when a shutdown signal comes while it runs, rather than throwing away
// what the run read.
func (e *Engine) graceful(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(e.cfg.ShutdownGrace, cancel) })
	return gctx, func() { stop(); cancel() }
}

// interrupted reports a form stopped by the run (a shutdown, or another
// form's 401) rather than failing: its state is left alone.
func interrupted(err error) bool {
	return errors.Is(err, context.Canceled) && !errors.Is(err, formsapi.ErrUnauthorized)
}

// commit applies c, and when the sink refuses it because another process
// committed some of its forms since their state was read, re-reads those
// states, merges each with what this commit meant to write, and tries
// again, a bounded number of times.
func (e *Engine) commit(ctx context.Context, c *sink.Commit, merge func(stored, ours state.Form) state.Form) (sink.Result, int, error) {
	conflicts := 0
	for attempt := 1; ; attempt++ {
		for i := range c.Forms {
			// A read that began before a forget, or a state merged with
			// one, may name a forgotten submission in its watermark.
			c.Forms[i].State = c.Forms[i].State.WithoutForgotten()
		}
		e.pin(c)
		res, err := e.dst.Commit(ctx, c)
		if !errors.Is(err, sink.ErrStateConflict) {
			return res, conflicts, err
		}
		conflicts++
		if attempt >= commitAttempts {
			return nil, conflicts, fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		ids := make([]string, 0, len(c.Forms))
		for _, fc := range c.Forms {
			ids = append(ids, fc.State.FormID)
		}
		stored, rerr := e.dst.ReadState(ctx, ids)
		if rerr != nil {
			return nil, conflicts, fmt.Errorf("re-reading the state after a concurrent commit: %w", rerr)
		}
		for i, fc := range c.Forms {
			st, ok := stored[fc.State.FormID]
			if !ok {
				st = state.New(fc.State.FormID)
			}
			c.Forms[i].State = merge(st, fc.State)
		}
		e.cfg.Logger.Info("another process committed the same forms meanwhile; merged and committing again",
			"forms", len(ids), "attempt", attempt+1)
	}
}

// pin gives every form of c the field types Config.FieldTypes pins for
// it, and only those: the pins are the configuration's, never merged
// with the stored ones.
func (e *Engine) pin(c *sink.Commit) {
	for i := range c.Forms {
		c.Forms[i].State.FieldTypes.Pinned = e.cfg.FieldTypes[c.Forms[i].State.FormID]
	}
}

// mergeSync is the state a sync writes over a state another process stored
// after the sync read it: the newer watermark (never back), the stored
// backfill progress (a sync does not own it), this run's outcome. A state
// that records a failure is the state the sync read with the error: the
// run moved nothing of the form, so the stored state is kept whole, or a
// reconcile or backfill committed meanwhile would lose the field policy,
// copies and total it recorded.
func mergeSync(stored, ours state.Form) state.Form {
	if ours.LastError != "" {
		out := stored
		out.LastError, out.LastErrorAt = ours.LastError, ours.LastErrorAt
		return out
	}
	out := merged(stored, ours)
	out.Backfill = stored.Backfill
	return out
}

// mergeRuns is mergeSync for the forms of a run, whose reads saw the copies
// seen holds (by form id). A reconcile committed since a form's state was
// read read every page: the copies it counted replace those the state read
// named, which may be gone upstream since (counted again, they would make
// the form look fuller than it is and hide a missing row from the
// completeness check), and only those the run's own read saw are added.
func mergeRuns(seen map[string]state.Copies) func(stored, ours state.Form) state.Form {
	return func(stored, ours state.Form) state.Form {
		if ours.LastError == "" && stored.LastReconcileAt.After(ours.LastReconcileAt) {
			ours.Copies = copiesAfter(nil, seen[ours.FormID], ours.Forgotten)
		}
		return mergeSync(stored, ours)
	}
}

// merged is what two states of one form agree on: the later watermark, with
// the total seen at it; every field name, each of the type that fits
// both; this writer's outcome and order; the stored revision.
func merged(stored, ours state.Form) state.Form {
	out := ours
	out.Revision = stored.Revision
	// Tombstones are only ever added, by forget, which commits nothing
	// else: the stored ones are the latest, with the pending ones this
	// writer's read met counted.
	out.Forgotten = stored.Forgotten.MergedWith(ours.Forgotten)
	if ours.LastReconcileAt.After(stored.LastReconcileAt) {
		// Ours is a reconcile, later than any stored: it read every page,
		// and the copies it saw replace the stored ones, which may be gone
		// upstream since (counted, they would make the form look fuller
		// than it is).
		out.Copies = copiesAfter(nil, ours.Copies, stored.Forgotten)
	} else {
		out.Copies = copiesAfter(stored.Copies, ours.Copies, stored.Forgotten)
	}
	if stored.LastReconcileAt.After(out.LastReconcileAt) {
		out.LastReconcileAt = stored.LastReconcileAt
	}
	out.Watermark = stored.Watermark.Merge(ours.Watermark)
	if !out.Watermark.CreatedAt.Equal(ours.Watermark.CreatedAt) {
		out.LastTotal = stored.LastTotal
	}
	out = withFields(out, stored.FieldNames, stored.FieldTypes.Seen)
	if out.Order == state.OrderUnknown {
		out.Order = stored.Order
	}
	if stored.LastSuccessAt.After(out.LastSuccessAt) {
		out.LastSuccessAt = stored.LastSuccessAt
	}
	return out
}

// checkCompleteness compares each committed form's stored rows with the
// API's total. Forms short of it are read again in full and committed; any
// still short is reported incomplete. So are the forms of remarked
// (commitRuns), which the total cannot vouch for.
func (e *Engine) checkCompleteness(ctx context.Context, rep *Report, runs, remarked []*formRun) {
	short := e.shortForms(ctx, runs, true)
	for _, r := range remarked {
		if r.report.Checked && !slices.Contains(short, r) {
			// A reconcile marks every stored row it did not read as
			// deleted: merged over a commit that stored submissions added
			// after they were read, it marked them too, and the count
			// still adds up. Read again, every row served is cleared.
			short = append(short, r)
		}
	}
	if len(short) == 0 {
		return
	}
	ids := make([]string, 0, len(short))
	for _, r := range short {
		ids = append(ids, r.old.FormID)
	}
	e.cfg.Logger.Warn("forms hold fewer rows than the API counts, or were reconciled over a concurrent commit; reading them again in full", "forms", ids)
	states, err := e.dst.ReadState(ctx, ids)
	if err != nil {
		for _, r := range short {
			r.err = fmt.Errorf("form %s: re-reading the state for the completeness check: %w", r.old.FormID, err)
		}
		return
	}
	sub := &Report{}
	again, rejected := e.readForms(ctx, sub, ids, states, func(state.Form) readMode { return readAll })
	defer discardAll(again)
	rejection(sub, rejected)
	e.commitRuns(ctx, sub, again) // readAll marks nothing
	rep.CommitDuration += sub.CommitDuration
	rep.Conflicts += sub.Conflicts
	for i, r := range short {
		a := again[i]
		r.report.Rescans++
		r.report.Pages += a.report.Pages
		r.report.Requests += a.report.Requests
		r.report.Limited += a.report.Limited
		r.report.Inserted += a.report.Inserted
		r.report.Updated += a.report.Updated
		r.report.Restored += a.report.Restored
		r.copies = r.copies.Merge(a.copies)
		switch {
		case sub.CommitErr != nil:
			r.err = fmt.Errorf("form %s: committing the full re-read: %w", r.old.FormID, sub.CommitErr)
		case a.err != nil:
			r.err = fmt.Errorf("form %s: the full re-read for the completeness check failed: %w", r.old.FormID, a.err)
		default:
			r.report.Watermark, r.report.Total, r.report.Missing = a.report.Watermark, a.report.Total, 0
		}
	}
	// Recorded in the states too, so that `formsync status` shows it.
	still := e.shortForms(ctx, again, false)
	if len(still) == 0 {
		return
	}
	byID := make(map[string]*formRun, len(short))
	for _, r := range short {
		byID[r.old.FormID] = r
	}
	ids = ids[:0]
	for _, a := range still {
		r := byID[a.old.FormID]
		r.report.Missing = a.report.Missing
		r.err = &IncompleteError{FormID: r.old.FormID, Stored: a.report.Total - a.report.Missing, Total: a.report.Total, Missing: a.report.Missing}
		ids = append(ids, r.old.FormID)
	}
	now := e.cfg.Now().UTC()
	states, err = e.dst.ReadState(ctx, ids)
	if err == nil {
		c := &sink.Commit{SyncedAt: now}
		for _, id := range ids {
			st := states[id]
			st.LastError, st.LastErrorAt = byID[id].err.Error(), now
			c.Forms = append(c.Forms, sink.FormCommit{State: st})
		}
		_, _, err = e.commit(ctx, c, mergeSync)
	}
	if err != nil {
		e.cfg.Logger.Error("cannot record incomplete forms in their state", "forms", ids, "error", err.Error())
	}
}

// Recounter is a Sink whose row counters can be recounted from its rows.
// A sink keeps a form's row_count from its stored state, commit by
// commit: a state row deleted by hand while the rows stayed, or a counter
// changed by hand, leaves a count the rows do not bear out, which the
// completeness check would blame on the API. The engine recounts a form
// whose count falls short of the API's total (or is negative) before it
// reads the form again or calls it incomplete; a form whose count adds
// up costs nothing more.
type Recounter interface {
	Recount(ctx context.Context, formIDs []string) error
}

// shortForms are the committed, completely read forms whose stored rows
// fall short of the API's total; each gets report.Missing. With recount,
// the counters of those forms (and of any form with a negative one) are
// recounted from the rows first, when the sink can (Recounter), and only
// the forms still short are returned.
func (e *Engine) shortForms(ctx context.Context, runs []*formRun, recount bool) []*formRun {
	var ids []string
	for _, r := range runs {
		if r.committed && r.err == nil && r.complete() {
			ids = append(ids, r.old.FormID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	states, err := e.dst.ReadState(ctx, ids)
	if err != nil {
		e.cfg.Logger.Warn("cannot read the state for the completeness check", "error", err.Error())
		return nil
	}
	rc, canRecount := e.dst.(Recounter)
	if recount && canRecount {
		var doubt []string
		for _, r := range runs {
			if st, ok := states[r.old.FormID]; ok && r.committed && r.err == nil && r.complete() &&
				(held(st) < r.report.Total || st.Rows < 0 || st.Deleted < 0) {
				doubt = append(doubt, r.old.FormID)
			}
		}
		if len(doubt) > 0 {
			e.cfg.Logger.Info("recounting the stored rows of forms whose row count falls short of the API's total", "forms", doubt)
			if err := rc.Recount(ctx, doubt); err != nil {
				e.cfg.Logger.Warn("cannot recount the stored rows", "forms", doubt, "error", err.Error())
			} else if states, err = e.dst.ReadState(ctx, ids); err != nil {
				e.cfg.Logger.Warn("cannot read the state for the completeness check", "error", err.Error())
				return nil
			}
		}
	}
	var short []*formRun
	for _, r := range runs {
		st, ok := states[r.old.FormID]
		if !ok || !r.committed || r.err != nil || !r.complete() {
			continue
		}
		r.report.Checked = true
		if h := held(st); h < r.report.Total {
			r.report.Missing = r.report.Total - h
			short = append(short, r)
		}
	}
	return short
}

// held is how many of the submissions the API serves the sink accounts
// for: its rows, and the submissions forgotten on request (served but
// never stored) and copies (served twice, stored once).
func held(st state.Form) int64 {
	h := st.Rows + st.Copies.Count()
	if st.Forgotten != nil {
		h += st.Forgotten.Count
	}
	return h
}

// logReport logs a line per form and one for the run, what ("sync" or
// "reconcile") naming it.
func (e *Engine) logReport(what string, rep *Report) {
	done := map[string]string{"sync": "synced", "reconcile": "reconciled"}[what]
	log := e.cfg.Logger
	var inserted, updated int64
	var requests, limited int
	for _, f := range rep.Forms {
		inserted, updated = inserted+f.Inserted, updated+f.Updated
		requests, limited = requests+f.Requests, limited+f.Limited
		attrs := []any{slog.String("form", f.FormID)}
		if f.Account != "" {
			attrs = append(attrs, slog.String("account", f.Account))
		}
		attrs = append(attrs,
			slog.Int64("new", f.Inserted), slog.Int64("updated", f.Updated),
			slog.Int("staged", f.Staged), slog.Int("pages", f.Pages),
			slog.Int("requests", f.Requests), slog.Int("rate_limited", f.Limited),
			slog.Int("rescans", f.Rescans), slog.String("order", string(f.Order)),
			slog.Float64("duration_seconds", f.Duration.Seconds()),
		)
		if f.Reconciled {
			attrs = append(attrs, slog.Bool("reconciled", true), slog.Int64("deleted_upstream", f.Deleted))
		}
		for _, n := range []struct {
			key string
			v   int64
		}{{"restored", f.Restored}, {"forgotten_skipped", f.Forgotten}, {"copies", f.Copies}} {
			if n.v > 0 {
				attrs = append(attrs, slog.Int64(n.key, n.v))
			}
		}
		for _, n := range []struct {
			key string
			v   int
		}{{"future_created_at", f.Future}, {"nested_too_deep", f.TooDeep}, {"without_fields", f.NoFields}, {"parts", f.Parts}} {
			if n.v > 0 {
				attrs = append(attrs, slog.Int(n.key, n.v))
			}
		}
		err := cmp.Or(f.Err, rep.CommitErr)
		switch {
		case rep.Fatal != nil && errors.Is(err, formsapi.ErrUnauthorized):
			// Said once, below, for the whole run.
			log.Debug("form not read: the run stopped", append(attrs, slog.String("error", err.Error()))...)
		case rep.Rejected[f.Account] != nil && errors.Is(err, formsapi.ErrUnauthorized):
			// Said once, below, for the account.
			log.Debug("form not read: its account's token was rejected", append(attrs, slog.String("error", err.Error()))...)
		case err != nil && interrupted(err):
			log.Warn("form interrupted before it was read completely; it will be read again next run", attrs...)
		case err != nil:
			log.Error("form failed", append(attrs, slog.String("error", err.Error()))...)
		case f.Future+f.TooDeep+f.NoFields > 0:
			log.Warn("form "+done+"; some submissions are stored but not trusted (see the counts)", attrs...)
		default:
			log.Info("form "+done, attrs...)
		}
	}
	attrs := []any{
		slog.Int("forms", len(rep.Forms)), slog.Int("failed", rep.Failed()),
		slog.Int64("new", inserted), slog.Int64("updated", updated),
		slog.Int("requests", requests), slog.Int("rate_limited", limited),
		slog.Float64("duration_seconds", rep.Duration.Seconds()),
	}
	if rep.Conflicts > 0 {
		attrs = append(attrs, slog.Int("commit_conflicts", rep.Conflicts))
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Rejected)) {
		failed := 0
		for _, f := range rep.Forms {
			if f.Account == name && f.Err != nil {
				failed++
			}
		}
		log.Error("the API rejected an account's token: its forms failed, the other accounts' forms went on",
			slog.String("account", name), slog.Int("failed", failed), slog.String("error", rep.Rejected[name].Error()))
	}
	switch {
	case rep.Fatal != nil:
		log.Error(what+" stopped", append(attrs, slog.String("error", rep.Fatal.Error()))...)
	case rep.CommitErr != nil:
		log.Error(what+" failed", append(attrs, slog.String("error", rep.CommitErr.Error()))...)
	case rep.Failed() > 0:
		// Said at WARNING so that a filter on severity sees a run in
		// which forms failed without reading every form's line.
		log.Warn(what+" finished", attrs...)
	default:
		log.Info(what+" finished", attrs...)
	}
}

// newSpool creates an empty spool in the configured directory.
func (e *Engine) newSpool() (*sink.Spool, error) {
	sp, err := sink.NewSpool(e.cfg.TmpDir)
	if err == nil && e.cfg.SortContentKeys {
		sp.SortContentKeys()
	}
	return sp, err
}
