package worker

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// Window bounds a backfill by created_at, both ends inclusive; a zero end is
// open.
type Window struct {
	Since, Until time.Time
}

func (w Window) contains(t time.Time) bool {
	return (w.Since.IsZero() || !t.Before(w.Since)) && (w.Until.IsZero() || !t.After(w.Until))
}

// BackfillOptions tunes one backfill.
type BackfillOptions struct {
	Window
	// DryRun locates the window's pages and reports what a backfill would
	// read, without reading it or writing anything.
	DryRun bool
	// CheckpointRows is how many staged rows trigger an intermediate commit,
	// which also records how far the backfill got so that an interrupted
	// backfill resumes there. Defaults to 50,000.
	CheckpointRows int
	// Progress, when set, is called after every page.
	Progress func(Progress)
}

// Progress is how far a backfill got.
type Progress struct {
	FormID     string
	Pages      int // pages read so far
	PagesTotal int // pages the window spans (an estimate: the form moves)
	Rows       int // rows staged so far
	Elapsed    time.Duration
	// ETA estimates the time left at the rate so far; 0 when unknown.
	ETA time.Duration
}

// BackfillReport says what a backfill did or, for a dry run, would do.
type BackfillReport struct {
	FormID   string
	Order    state.Order
	Inserted int64
	Updated  int64
	Staged   int
	Pages    int // pages read, including those read to locate the window
	Requests int
	// FirstPage and LastPage are the window's pages as located; RowsEstimate
	// is how many submissions they hold.
	FirstPage, LastPage int
	RowsEstimate        int
	Checkpoints         int
	// ResumedFrom is the cursor an interrupted backfill resumed at.
	ResumedFrom time.Time
	Duration    time.Duration
}

// Backfill re-reads a form, or the window of it, through the same
// exactly-once path as Sync: rows are upserted, so nothing is duplicated. It
// never moves the watermark backwards: a backfill of a bounded window leaves
// it alone, and a complete backfill of the whole form only moves it forward.
// Every CheckpointRows rows it commits what it has with its progress; when a
// backfill of the same window was interrupted, it resumes from there.
func (e *Engine) Backfill(ctx context.Context, formID string, opts BackfillOptions) (*BackfillReport, error) {
	opts.CheckpointRows = cmp.Or(opts.CheckpointRows, 50_000)
	if !opts.Since.IsZero() && !opts.Until.IsZero() && opts.Until.Before(opts.Since) {
		return nil, fmt.Errorf("backfill of form %s: --until %s is before --since %s", formID, opts.Until.Format(time.RFC3339), opts.Since.Format(time.RFC3339))
	}
	start := e.cfg.Now()
	st, err := e.formState(ctx, formID)
	if err != nil {
		return nil, err
	}
	b := &backfill{formRun: formRun{e: e, old: st, wm: st.Watermark, lastTotal: st.LastTotal, fields: map[string]struct{}{}}, opts: opts, start: start}
	b.firstTotal = -1
	rep := &BackfillReport{FormID: formID}
	defer func() {
		rep.Requests = b.report.Requests
		rep.Pages = b.report.Pages
		rep.Duration = e.cfg.Now().Sub(start)
		b.discard()
	}()
	if err := b.run(ctx, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func (e *Engine) formState(ctx context.Context, formID string) (state.Form, error) {
	states, err := e.dst.ReadState(ctx, []string{formID})
	if err != nil {
		return state.Form{}, fmt.Errorf("reading the state of form %s: %w", formID, err)
	}
	if st, ok := states[formID]; ok {
		return st, nil
	}
	return state.New(formID), nil
}

type backfill struct {
	formRun
	opts  BackfillOptions
	start time.Time
	// cursor is the created_at reached in the direction of the form's
	// order; resume re-reads from it (inclusive, harmlessly).
	cursor time.Time
	// whole is set when the backfill covers the whole form in one go:
	// then it may move the watermark forward.
	whole bool
}

func (b *backfill) run(ctx context.Context, rep *BackfillReport) error {
	first, err := b.fetch(ctx, 1)
	if err != nil {
		return err
	}
	if b.order, err = b.detectOrder(ctx, first); err != nil {
		return err
	}
	rep.Order = b.order
	win := b.opts.Window
	// Resume an interrupted backfill of the same window.
	if bf := b.old.Backfill; bf != nil && bf.Since.Equal(win.Since) && bf.Until.Equal(win.Until) && !bf.Cursor.IsZero() {
		rep.ResumedFrom = bf.Cursor
		switch b.order {
		case state.OrderNewestFirst:
			win.Until = bf.Cursor
		case state.OrderOldestFirst:
			win.Since = bf.Cursor
		}
	}
	b.whole = win.Since.IsZero() && win.Until.IsZero()

	near, far := win.Until, win.Since // newest-first: read from Until down to Since
	if b.order == state.OrderOldestFirst {
		near, far = win.Since, win.Until
	}
	firstPage, p, err := b.search(ctx, first, near)
	if err != nil {
		return err
	}
	lastPage := first.TotalPages
	if !far.IsZero() {
		if lastPage, _, err = b.search(ctx, first, far); err != nil {
			return err
		}
	}
	rep.FirstPage, rep.LastPage = firstPage, max(lastPage, firstPage)
	rep.RowsEstimate = (rep.LastPage - rep.FirstPage + 1) * max(b.perPage, 1)
	if first.Total == 0 {
		rep.FirstPage, rep.LastPage, rep.RowsEstimate = 0, 0, 0
	}
	if b.opts.DryRun || first.Total == 0 {
		return nil
	}
	if b.spool, err = sink.NewSpool(b.e.cfg.TmpDir); err != nil {
		return fmt.Errorf("form %s: %w", b.old.FormID, err)
	}
	b.old.Backfill = &state.Backfill{Since: b.opts.Since, Until: b.opts.Until, StartedAt: b.start.UTC()}
	if rf := rep.ResumedFrom; !rf.IsZero() {
		b.old.Backfill.Cursor = rf
	}
	read := 0
	var prev map[string]struct{}
	for page := firstPage; ; page++ {
		if p == nil {
			if p, err = b.fetch(ctx, page); err != nil {
				return err
			}
		}
		seen := make(map[string]struct{}, len(p.Submissions))
		beyond := false
		for i, s := range p.Submissions {
			row, names, err := sink.NewRowFields(b.old.FormID, s.ID, s.CreatedAt, s.IsSpam, s.Fields, s.Files)
			if err != nil {
				return fmt.Errorf("form %s page %d submission %d: %w", b.old.FormID, page, i+1, err)
			}
			if _, dup := prev[row.SubmissionKey]; dup {
				continue
			}
			seen[row.SubmissionKey] = struct{}{}
			if !win.contains(row.CreatedAt) {
				beyond = beyond || b.pastFar(row.CreatedAt, far)
				continue
			}
			if err := b.stage(row, names); err != nil {
				return err
			}
			b.cursor = row.CreatedAt
		}
		prev = seen
		read++
		if b.opts.Progress != nil {
			b.opts.Progress(b.progress(read, rep.LastPage-firstPage+1))
		}
		if beyond || len(p.Submissions) == 0 || page >= p.TotalPages {
			break
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("backfill of form %s stopped after page %d: %w", b.old.FormID, page, context.Cause(ctx))
		}
		if b.spool.Len() >= b.opts.CheckpointRows {
			if err := b.checkpoint(ctx, rep, false); err != nil {
				return err
			}
		}
		p = nil
	}
	return b.checkpoint(ctx, rep, true)
}

// pastFar reports whether t lies beyond the far end of the window in the
// form's order, so that the rest of the form can be left unread.
func (b *backfill) pastFar(t, far time.Time) bool {
	if far.IsZero() {
		return false
	}
	if b.order == state.OrderOldestFirst {
		return t.After(far)
	}
	return t.Before(far)
}

// search finds the first page holding a submission at or beyond t in the
// form's order (for newest-first: created_at <= t), by bisection: about
// log2(pages) requests. A zero t is page 1.
func (b *backfill) search(ctx context.Context, first *formsapi.Page, t time.Time) (int, *formsapi.Page, error) {
	if t.IsZero() || b.order == state.OrderUnknown || first.TotalPages <= 1 {
		return 1, first, nil
	}
	reached := func(p *formsapi.Page) bool {
		if len(p.Submissions) == 0 {
			return true
		}
		last := p.Submissions[len(p.Submissions)-1].CreatedAt
		if b.order == state.OrderNewestFirst {
			return !last.After(t)
		}
		return !last.Before(t)
	}
	if reached(first) {
		return 1, first, nil
	}
	var found *formsapi.Page
	var ferr error
	n := sort.Search(first.TotalPages-1, func(i int) bool {
		if ferr != nil {
			return true
		}
		p, err := b.fetch(ctx, i+2)
		if err != nil {
			ferr = err
			return true
		}
		ok := reached(p)
		if ok {
			found = p
		}
		return ok
	})
	if ferr != nil {
		return 0, nil, ferr
	}
	page := n + 2
	if page > first.TotalPages {
		return first.TotalPages, nil, nil
	}
	if found != nil && found.CurrentPage != page {
		found = nil // the last probe was not the answer; fetch it again
	}
	return page, found, nil
}

func (b *backfill) progress(read, total int) Progress {
	p := Progress{FormID: b.old.FormID, Pages: read, PagesTotal: max(total, read), Rows: b.report.Staged + b.spool.Len(), Elapsed: b.e.cfg.Now().Sub(b.start)}
	if read > 0 && p.PagesTotal > read {
		p.ETA = time.Duration(float64(p.Elapsed) / float64(read) * float64(p.PagesTotal-read))
	}
	return p
}

// checkpoint commits the staged rows with the backfill's progress; the final
// one clears the progress and, for a whole-form backfill, moves the
// watermark forward.
func (b *backfill) checkpoint(ctx context.Context, rep *BackfillReport, final bool) error {
	if err := b.spool.Finish(); err != nil {
		return fmt.Errorf("form %s: %w", b.old.FormID, err)
	}
	// Re-read the state just before writing it: a sync of the same form may
	// have moved its watermark meanwhile, and a backfill must not undo that.
	cur, err := b.e.formState(ctx, b.old.FormID)
	if err != nil {
		return err
	}
	next := b.formRun.next(b.e.cfg.Now().UTC())
	st := cur
	st.FieldNames = next.FieldNames
	if st.Order == state.OrderUnknown {
		st.Order = b.order
	}
	st.Backfill = &state.Backfill{Since: b.opts.Since, Until: b.opts.Until, Cursor: b.cursor, StartedAt: b.start.UTC()}
	if final {
		st.Backfill = nil
		if b.whole && rep.ResumedFrom.IsZero() {
			st.Watermark = cur.Watermark.Merge(b.wm)
			if st.Watermark.CreatedAt.Equal(b.wm.CreatedAt) {
				st.LastTotal = b.lastTotal
			}
			st.LastSuccessAt, st.LastError = next.LastSuccessAt, ""
		}
	}
	c := &sink.Commit{SyncedAt: b.e.cfg.Now().UTC(), Forms: []sink.FormCommit{{State: st, Rows: b.spool}}}
	res, err := b.e.dst.Commit(ctx, c)
	if err != nil {
		return fmt.Errorf("backfill of form %s: committing %d rows: %w", b.old.FormID, b.spool.Len(), err)
	}
	got := res[b.old.FormID]
	rep.Inserted += got.Inserted
	rep.Updated += got.Updated
	rep.Staged += b.spool.Len()
	b.report.Staged += b.spool.Len()
	rep.Checkpoints++
	b.e.cfg.Logger.Info("backfill checkpoint", "form", b.old.FormID, "rows", b.spool.Len(), "new", got.Inserted, "updated", got.Updated, "cursor", b.cursor, "final", final)
	b.spool.Remove()
	b.spool = nil
	if !final {
		if b.spool, err = sink.NewSpool(b.e.cfg.TmpDir); err != nil {
			return fmt.Errorf("form %s: %w", b.old.FormID, err)
		}
	}
	return nil
}
