package worker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/worker/formsapi"
)

// scanMode says which submissions a pass over a form is after.
type scanMode int

const (
	// scanIncremental reads what is newer than the watermark (minus the
	// lookback), in as few requests as the sort order allows.
	scanIncremental scanMode = iota
	// scanAll reads every page: the first sync, an unknown order, or a
	// re-scan after a short read.
	scanAll
)

// formRun is one form's part of a run: what was read, staged and learnt.
type formRun struct {
	e     *Engine
	old   state.Form
	spool *sink.Spool
	// wm is the watermark after the rows staged so far.
	wm        state.Watermark
	order     state.Order
	perPage   int
	lastTotal int64
	fields    map[string]struct{}
	// keepWatermark is set when the pages kept moving under the reader: the
	// rows are committed (harmlessly) but the watermark stays, so the next
	// run reads the same range again.
	keepWatermark bool

	// Per pass: whether a submission may have been skipped because the
	// pages moved, how many submissions newer than the old watermark were
	// found, and the total reported by the pass's first response.
	unstable   bool
	passNew    int64
	firstTotal int64

	report FormReport
	err    error
}

// readForm reads one form and stages its rows; it never commits.
func (e *Engine) readForm(ctx context.Context, st state.Form) *formRun {
	start := e.cfg.Now()
	r := &formRun{e: e, old: st, wm: st.Watermark, lastTotal: st.LastTotal, fields: map[string]struct{}{}}
	r.report.FormID = st.FormID
	defer func() {
		r.report.Duration = e.cfg.Now().Sub(start)
		r.report.Order = r.order
		if r.spool != nil {
			r.report.Staged = r.spool.Len()
		}
	}()
	spool, err := sink.NewSpool(e.cfg.TmpDir)
	if err != nil {
		r.err = fmt.Errorf("form %s: %w", st.FormID, err)
		return r
	}
	r.spool = spool
	if err := r.scan(ctx); err != nil {
		r.err = err
		return r
	}
	if err := spool.Finish(); err != nil {
		r.err = fmt.Errorf("form %s: %w", st.FormID, err)
	}
	return r
}

// discard removes the staged rows; the run is over.
func (r *formRun) discard() {
	if r != nil && r.spool != nil {
		r.spool.Remove()
	}
}

// next is the form's state after a successful run.
func (r *formRun) next(now time.Time) state.Form {
	st := r.old
	// Without a known order the reader could not choose the direction that
	// never skips, so the watermark waits for a run that knows it.
	keep := r.keepWatermark || (r.order == state.OrderUnknown && r.old.Watermark.IsZero())
	if !keep {
		st.Watermark = r.wm
		st.LastTotal = r.lastTotal
	}
	if r.order != state.OrderUnknown {
		st.Order = r.order
	}
	names := make([]string, 0, len(r.fields))
	for f := range r.fields {
		names = append(names, f)
	}
	slices.Sort(names)
	st.FieldNames = mergeFields(st.FieldNames, names)
	st.LastSuccessAt, st.LastError = now, ""
	return st
}

func (r *formRun) fetch(ctx context.Context, page int) (*formsapi.Page, error) {
	p, resp, err := r.e.src.Page(ctx, r.old.FormID, page, r.e.cfg.PageSize)
	if resp != nil {
		r.report.Requests += resp.Requests
		r.report.Limited += resp.RateLimited
	}
	if err != nil {
		return nil, err
	}
	r.report.Pages++
	if r.firstTotal < 0 {
		r.firstTotal = int64(p.Total)
	}
	r.lastTotal = int64(p.Total)
	if p.PerPage > 0 {
		r.perPage = p.PerPage
	}
	return p, nil
}

// scan reads what is new in the form, re-reading while its pages move under
// the reader.
func (r *formRun) scan(ctx context.Context) error {
	mode := scanIncremental
	r.firstTotal = -1
	first, err := r.fetch(ctx, 1)
	if err != nil {
		return err
	}
	if r.order, err = r.detectOrder(ctx, first); err != nil {
		return err
	}
	wm := r.old.Watermark
	if wm.IsZero() || r.order == state.OrderUnknown {
		mode = scanAll
	}
	// threshold is the watermark lowered by the lookback: what is newer than
	// it is staged (again).
	threshold := wm
	if r.e.cfg.Lookback > 0 && !wm.IsZero() {
		threshold = state.Watermark{CreatedAt: wm.CreatedAt.Add(-r.e.cfg.Lookback)}
	}
	for pass := 0; ; pass++ {
		if err := r.pass(ctx, mode, threshold, first); err != nil {
			return err
		}
		first = nil
		if !r.unstable {
			break
		}
		if pass == r.e.cfg.MaxRescans {
			r.keepWatermark = true
			return nil
		}
		r.report.Rescans++
	}
	// A short read: fewer new submissions than the total grew by means some
	// were inserted behind the watermark or skipped. Read everything once.
	if mode == scanIncremental && r.old.LastTotal >= 0 && r.passNew < r.firstTotal-r.old.LastTotal {
		r.report.Rescans++
		if err := r.pass(ctx, scanAll, state.Watermark{}, nil); err != nil {
			return err
		}
		if r.unstable {
			r.keepWatermark = true
		}
	}
	return nil
}

// pass makes one pass over the form. first, when not nil, is page 1 already
// fetched in this pass.
//
// The direction of reading is chosen so that a page moving under the reader
// repeats a submission rather than skipping one. New submissions arrive at
// the head of a newest-first form and push later pages down: reading from
// page 1 onwards sees the pushed ones twice, which is harmless. In an
// oldest-first form they arrive at the tail, where they move nothing, but a
// deletion pulls every later page up: reading from the last page backwards
// sees the pulled ones twice. What is left, a deletion in a newest-first
// form, is detected (the total drops and no submission repeats) and answered
// by another pass.
func (r *formRun) pass(ctx context.Context, mode scanMode, threshold state.Watermark, first *formsapi.Page) error {
	r.unstable, r.passNew, r.firstTotal = false, 0, -1
	if first != nil {
		r.firstTotal = int64(first.Total)
	}
	if r.order == state.OrderNewestFirst || (r.order == state.OrderUnknown && mode == scanAll) {
		return r.forward(ctx, first, threshold, mode == scanIncremental)
	}
	if first == nil {
		var err error
		if first, err = r.fetch(ctx, 1); err != nil {
			return err
		}
	}
	return r.backward(ctx, first, threshold, mode == scanIncremental)
}

// forward reads a newest-first form from page 1 on, staging every
// submission newer than threshold, until the last page or, when
// stopAtOlder, the page where submissions older than threshold begin.
func (r *formRun) forward(ctx context.Context, p *formsapi.Page, threshold state.Watermark, stopAtOlder bool) error {
	var prev map[string]struct{}
	prevTotal := -1
	for page := 1; ; page++ {
		if p == nil {
			var err error
			if p, err = r.fetch(ctx, page); err != nil {
				return err
			}
		}
		keys, repeated, older, err := r.consume(p, threshold, prev)
		if err != nil {
			return err
		}
		// Fewer submissions than before and none repeated from the page
		// before: something ahead was deleted and pulled one we had not
		// read yet onto a page we had.
		if prevTotal >= 0 && p.Total < prevTotal && repeated == 0 {
			r.unstable = true
		}
		prevTotal = p.Total
		if (stopAtOlder && older) || len(p.Submissions) == 0 || page >= p.TotalPages {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("form %s: stopped after page %d: %w", r.old.FormID, page, context.Cause(ctx))
		}
		prev, p = keys, nil
	}
}

// backward reads an oldest-first form from its last page towards page 1,
// staging every submission newer than threshold, until page 1 or, when
// stopAtOlder, a page that starts with a submission already loaded (older
// than threshold or in its boundary): everything before it is loaded too.
// first is page 1, which tells where the last page is.
func (r *formRun) backward(ctx context.Context, first *formsapi.Page, threshold state.Watermark, stopAtOlder bool) error {
	var prev map[string]struct{}
	last := max(first.TotalPages, 1)
	for page := last; page >= 1; page-- {
		// Page 1 as fetched at the start may be stale by now: read it again
		// unless nothing was read since.
		p := first
		if page != last || page != 1 {
			var err error
			if p, err = r.fetch(ctx, page); err != nil {
				return err
			}
		}
		keys, _, _, err := r.consume(p, threshold, prev)
		if err != nil {
			return err
		}
		if stopAtOlder && len(p.Submissions) > 0 {
			s := p.Submissions[0]
			if row, err := sink.NewRow(r.old.FormID, s.ID, s.CreatedAt, s.IsSpam, s.Fields, s.Files); err == nil &&
				threshold.Compare(row.CreatedAt, row.SubmissionKey) <= 0 {
				return nil
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("form %s: stopped after page %d: %w", r.old.FormID, page, context.Cause(ctx))
		}
		prev = keys
	}
	return nil
}

// consume stages a page's submissions newer than threshold, skipping those
// already taken from the neighbouring page read just before (prev). It
// reports how many it skipped that way and whether the page holds
// submissions already loaded.
func (r *formRun) consume(p *formsapi.Page, threshold state.Watermark, prev map[string]struct{}) (keys map[string]struct{}, repeated int, older bool, err error) {
	keys = make(map[string]struct{}, len(p.Submissions))
	for i, s := range p.Submissions {
		row, names, err := sink.NewRowFields(r.old.FormID, s.ID, s.CreatedAt, s.IsSpam, s.Fields, s.Files)
		if err != nil {
			return nil, 0, false, fmt.Errorf("form %s page %d submission %d: %w", r.old.FormID, p.CurrentPage, i+1, err)
		}
		if _, dup := keys[row.SubmissionKey]; dup {
			continue
		}
		keys[row.SubmissionKey] = struct{}{}
		if _, dup := prev[row.SubmissionKey]; dup {
			repeated++
			continue
		}
		// A submission already loaded (older than the threshold, or in its
		// boundary) marks where a newest-first read can stop: ties sort by
		// id, so a tie that arrived later sorts ahead of the loaded ones.
		if threshold.Compare(row.CreatedAt, row.SubmissionKey) <= 0 {
			older = true
			continue
		}
		if err := r.stage(row, names); err != nil {
			return nil, 0, false, err
		}
	}
	return keys, repeated, older, nil
}

func (r *formRun) stage(row sink.Row, fieldNames []string) error {
	if err := r.spool.Append(row); err != nil {
		return fmt.Errorf("form %s: %w", r.old.FormID, err)
	}
	if r.old.Watermark.IsNew(row.CreatedAt, row.SubmissionKey) {
		r.passNew++
	}
	var id int64
	if row.SubmissionID != nil {
		id = *row.SubmissionID
	}
	r.wm = r.wm.Advance(row.CreatedAt, id, row.SubmissionKey)
	for _, name := range fieldNames {
		if _, ok := r.fields[name]; !ok {
			r.fields[name] = struct{}{}
		}
	}
	return nil
}

// detectOrder tells the sort order from page 1, or, when page 1 cannot tell
// (one submission, or all sharing one created_at), from the stored order or
// the last page.
func (r *formRun) detectOrder(ctx context.Context, first *formsapi.Page) (state.Order, error) {
	if o := orderOf(first.Submissions); o != state.OrderUnknown {
		return o, nil
	}
	if r.old.Order != state.OrderUnknown || first.TotalPages <= 1 || len(first.Submissions) == 0 {
		return r.old.Order, nil
	}
	last, err := r.fetch(ctx, first.TotalPages)
	if err != nil {
		return state.OrderUnknown, err
	}
	if len(last.Submissions) == 0 {
		return state.OrderUnknown, nil
	}
	return orderOf([]formsapi.Submission{first.Submissions[0], last.Submissions[len(last.Submissions)-1]}), nil
}

func orderOf(subs []formsapi.Submission) state.Order {
	if len(subs) < 2 {
		return state.OrderUnknown
	}
	a, b := subs[0].CreatedAt, subs[len(subs)-1].CreatedAt
	switch {
	case a.After(b):
		return state.OrderNewestFirst
	case a.Before(b):
		return state.OrderOldestFirst
	}
	return state.OrderUnknown
}
