package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// Source is the Forms API as the engine reads it. *formsapi.Client
// satisfies it.
type Source interface {
	Page(ctx context.Context, formID string, page, limit int) (*formsapi.Page, *formsapi.Response, error)
}

// Sink is where the engine keeps rows and state. Commit must apply all of a
// commit or none of it.
type Sink interface {
	ReadState(ctx context.Context, formIDs []string) (map[string]state.Form, error)
	Commit(ctx context.Context, c *sink.Commit) (sink.Result, error)
}

var _ Source = (*formsapi.Client)(nil)

// Config tunes the engine. The zero value of each field means its default.
type Config struct {
	// Forms are the form ids to sync.
	Forms []string
	// PageSize is the limit asked per page. Defaults to 100.
	PageSize int
	// Concurrency is how many forms are read at once. Defaults to 4.
	Concurrency int
	// Lookback makes every sync re-read submissions newer than the watermark
	// minus Lookback, so that later changes (is_spam) are picked up.
	Lookback time.Duration
	// TmpDir is where rows are staged; "" is the system temporary directory.
	TmpDir string
	// MaxRescans bounds how often one form is re-read in a run when its
	// pages moved under the reader (deletions). Defaults to 2.
	MaxRescans int
	// ShutdownGrace bounds the commit of forms already read when ctx is
	// cancelled (SIGTERM). Defaults to 15s.
	ShutdownGrace time.Duration
	// Logger receives the per-form and per-run summaries. Defaults to a
	// logger that discards.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.PageSize = cmp.Or(c.PageSize, 100)
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.MaxRescans = cmp.Or(c.MaxRescans, 2)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, 15*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every problem of the configuration at once, in the
// names of its fields; zero fields stand for their defaults.
func (c Config) Validate() error {
	return c.withDefaults().validate()
}

func (c Config) validate() error {
	var errs []error
	if len(c.Forms) == 0 {
		errs = append(errs, errors.New("no forms to sync"))
	}
	if c.PageSize < 1 || c.PageSize > 100 {
		errs = append(errs, fmt.Errorf("page size %d is outside 1..100", c.PageSize))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d is below 1", c.Concurrency))
	}
	if c.Lookback < 0 {
		errs = append(errs, fmt.Errorf("lookback %s is negative", c.Lookback))
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
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return &Engine{src: src, dst: dst, cfg: cfg}, nil
}

// FormReport says what one sync did for one form.
type FormReport struct {
	FormID   string
	Inserted int64 // rows new to the table
	Updated  int64 // rows changed (is_spam, fields, files) or re-keyed
	Staged   int   // rows read and handed to the sink
	Pages    int   // pages read
	Requests int   // HTTP requests, retries included
	Limited  int   // requests answered 429
	Rescans  int   // extra passes because the pages moved while being read
	Order    state.Order
	// Watermark is the form's watermark after the run.
	Watermark state.Watermark
	Duration  time.Duration
	// Err is why the form failed this run; its watermark did not move.
	Err error
}

// Report says what one sync did.
type Report struct {
	Forms    []FormReport
	Duration time.Duration
	// CommitDuration is how long the sink's commit took.
	CommitDuration time.Duration
	// CommitErr is set when the commit itself failed: then no form's rows
	// or state were written.
	CommitErr error
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

// Sync makes one pass over every form: read what is new, then commit all
// forms' rows and watermarks together. A form that fails records its error
// and keeps its watermark; the others still commit. Cancelling ctx stops the
// reading; forms read completely by then are still committed, within
// Config.ShutdownGrace.
func (e *Engine) Sync(ctx context.Context) (*Report, error) {
	start := e.cfg.Now()
	states, err := e.dst.ReadState(ctx, e.cfg.Forms)
	if err != nil {
		return nil, fmt.Errorf("reading sync state: %w", err)
	}
	outcomes := make([]*formRun, len(e.cfg.Forms))
	sem := make(chan struct{}, e.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, id := range e.cfg.Forms {
		st, ok := states[id]
		if !ok {
			st = state.New(id)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				outcomes[i] = &formRun{old: st, err: fmt.Errorf("form %s: not started: %w", id, context.Cause(ctx))}
				return
			}
			outcomes[i] = e.readForm(ctx, st)
		}()
	}
	wg.Wait()
	defer func() {
		for _, o := range outcomes {
			o.discard()
		}
	}()
	return e.commit(ctx, start, outcomes), nil
}

// commit writes every form's outcome in one sink commit and reports.
func (e *Engine) commit(ctx context.Context, start time.Time, outcomes []*formRun) *Report {
	now := e.cfg.Now().UTC()
	c := &sink.Commit{SyncedAt: now}
	interrupted := ctx.Err() != nil
	for _, o := range outcomes {
		switch {
		case o.err == nil:
			c.Forms = append(c.Forms, sink.FormCommit{State: o.next(now), Rows: o.spool})
		case interrupted && errors.Is(o.err, context.Canceled):
			// Stopped by shutdown, not a failure of the form: leave its state alone.
		default:
			st := o.old
			st.LastError, st.LastErrorAt = o.err.Error(), now
			c.Forms = append(c.Forms, sink.FormCommit{State: st})
		}
	}
	commitCtx := ctx
	if interrupted {
		var cancel context.CancelFunc
		commitCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ShutdownGrace)
		defer cancel()
	}
	rep := &Report{}
	var res sink.Result
	if len(c.Forms) > 0 {
		var err error
		t0 := e.cfg.Now()
		res, err = e.dst.Commit(commitCtx, c)
		rep.CommitDuration = e.cfg.Now().Sub(t0)
		if err != nil {
			rep.CommitErr = fmt.Errorf("committing %d forms: %w", len(c.Forms), err)
		}
	}
	for _, o := range outcomes {
		fr := o.report
		fr.Err = o.err
		fr.Watermark = o.old.Watermark
		if o.err == nil && rep.CommitErr == nil {
			fr.Watermark = o.wm
			fr.Inserted, fr.Updated = res[fr.FormID].Inserted, res[fr.FormID].Updated
		}
		rep.Forms = append(rep.Forms, fr)
	}
	rep.Duration = e.cfg.Now().Sub(start)
	e.logReport(rep)
	return rep
}

func (e *Engine) logReport(rep *Report) {
	log := e.cfg.Logger
	var inserted, updated int64
	var requests, limited int
	for _, f := range rep.Forms {
		inserted, updated = inserted+f.Inserted, updated+f.Updated
		requests, limited = requests+f.Requests, limited+f.Limited
		attrs := []any{
			slog.String("form", f.FormID),
			slog.Int64("new", f.Inserted), slog.Int64("updated", f.Updated),
			slog.Int("staged", f.Staged), slog.Int("pages", f.Pages),
			slog.Int("requests", f.Requests), slog.Int("rate_limited", f.Limited),
			slog.Int("rescans", f.Rescans), slog.String("order", string(f.Order)),
			slog.Float64("duration_seconds", f.Duration.Seconds()),
		}
		switch err := cmp.Or(f.Err, rep.CommitErr); {
		case err != nil:
			log.Error("form failed", append(attrs, slog.String("error", err.Error()))...)
		default:
			log.Info("form synced", attrs...)
		}
	}
	attrs := []any{
		slog.Int("forms", len(rep.Forms)), slog.Int("failed", rep.Failed()),
		slog.Int64("new", inserted), slog.Int64("updated", updated),
		slog.Int("requests", requests), slog.Int("rate_limited", limited),
		slog.Float64("duration_seconds", rep.Duration.Seconds()),
	}
	if rep.CommitErr != nil {
		log.Error("sync failed", append(attrs, slog.String("error", rep.CommitErr.Error()))...)
		return
	}
	log.Info("sync finished", attrs...)
}

// mergeFields returns the sorted union of two sorted name lists.
func mergeFields(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
