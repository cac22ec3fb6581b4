package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unsafe"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/worker/formsapi"
	"github.com/formsync/formsync/worker/pager"
)

// reading is what the read of a form uses, all of it the engine's
// configuration: the Source and how to page it, the clock, the field
// policy, where and how rows are staged and when they are handed over in
// parts. The engine builds it once (New); each formRun holds a copy and
// nothing of the engine.
type reading struct {
	src      Source
	pageSize int
	// lookback is Config.Lookback; budget is Config.FormTimeout, named
	// when it stopped a form.
	lookback, budget time.Duration
	now              func() time.Time
	policy           FieldPolicy
	// tmpDir and sortContentKeys are where and how rows are staged
	// (Config.TmpDir, Config.SortContentKeys).
	tmpDir          string
	sortContentKeys bool
	// partRows and partsByContent say when staged rows are handed over
	// as a part (Config.PartRows, Config.PartsByContent), and when a
	// backfill checkpoints.
	partRows       int
	partsByContent bool
	// partDays is Config.PartDays: a part or checkpoint also ends at so
	// many distinct days (daysDue).
	partDays int
	logger   *slog.Logger
}

// newSpool creates an empty spool in the configured directory.
func (rd reading) newSpool() (*sink.Spool, error) {
	sp, err := sink.NewSpool(rd.tmpDir)
	if err == nil && rd.sortContentKeys {
		sp.SortContentKeys()
	}
	return sp, err
}

// formRun is one form's read in a run (a sync's, a reconcile's, a
// backfill's): what it uses, and what was read, staged and learnt.
type formRun struct {
	reading
	old   state.Form
	spool *sink.Spool
	// wm is the watermark after the rows staged so far.
	wm *state.WatermarkBuilder
	// types holds every field name of the rows staged so far, with the
	// type of its values as stored (after the field policy).
	types fieldtype.Set
	// facts are what the read learnt of the form: its order, the lowest
	// total of the last pass, the page size, whether a reconcile's read
	// added up.
	facts pager.Facts
	// committed is set once the run's rows and state are in the sink.
	committed bool
	start     time.Time
	// onStaged, when set, is told of every staged row.
	onStaged func(sink.Row)
	// prefetch, when set, is given every staged row newer than the
	// stored watermark, whose files it fetches while the form is read.
	prefetch func(sink.Row)
	// mode is what the run reads and what its commit does.
	mode readMode
	// forgotten counts the submissions served but skipped because they
	// were forgotten on request; met holds the keys of those forgotten
	// while not stored, whose tombstones are pending until a read meets
	// them (state.Forgotten.Met).
	forgotten int64
	met       []string
	// copies are the copies the read saw (see copies.go).
	copies state.Copies
	// partsTo, when set, takes the staged rows every Config.PartRows
	// rows (handOff) and commits them while the form is still read; parts
	// is what those commits did.
	partsTo *partCommitter
	parts   partResult

	// progress, when set, is told of every page read (Config.Progress);
	// rows counts the submissions the pages read held, for it.
	progress func(Progress)
	rows     int

	report FormReport
	err    error
}

// newRun is the read of the form whose stored state is st.
func (e *Engine) newRun(st state.Form) *formRun {
	return &formRun{
		reading: e.reading,
		old:     st, wm: state.NewWatermarkBuilder(st.Watermark), facts: pager.Facts{Total: -1}, start: e.cfg.Now(),
		report: FormReport{FormID: st.FormID, Account: e.account(st.FormID), Total: -1},
	}
}

// readMode says what a form's run reads and what its commit does.
type readMode int

const (
	// readNew reads what is new since the watermark (a sync).
	readNew readMode = iota
	// readAll reads every page whatever the watermark (the completeness
	// check's re-read).
	readAll
	// readReconcile reads every page, and its commit marks the stored
	// rows not served deleted; it rewrites every served row under the
	// configured field policy.
	readReconcile
	// readReconcileDue is a reconcile a sync is due (Config.ReconcileEvery).
	// A read that does not add up, which a reconcile refuses, is committed
	// as readAll: the rows and the watermark, no marks.
	readReconcileDue
)

// read reads the form and stages its rows; r.err says why it failed. It
// commits nothing itself: when parts is not nil and the mode allows it,
// parts commits the rows staged beyond Config.PartRows while the form is
// read on. progress, when set, is told of every page (Config.Progress).
func (r *formRun) read(ctx context.Context, mode readMode, parts *partCommitter, progress func(Progress)) {
	st := r.old
	due := mode == readReconcileDue
	if due {
		mode = readReconcile
	}
	r.mode = mode
	r.progress = progress
	if mode != readReconcile {
		// A reconcile marks what it did not stage in the same commit as
		// everything it staged.
		r.partsTo = parts
	}
	if err := r.checkPolicy(mode == readReconcile); err != nil {
		r.err = err
		return
	}
	spool, err := r.newSpool()
	if err != nil {
		r.err = fmt.Errorf("form %s: %w", st.FormID, err)
		return
	}
	r.spool = spool
	if err := r.scan(ctx, mode != readNew); err != nil {
		r.err = r.explain(ctx, err)
		return
	}
	if err := r.spool.Finish(); err != nil {
		r.err = fmt.Errorf("form %s: %w", st.FormID, err)
		return
	}
	r.report.Total = r.facts.Total
	if mode == readReconcile {
		r.err = r.checkReconcileRead()
		if r.err != nil && due {
			// Refusing the whole form would keep its new rows out for as
			// long as the API's count and what it serves disagree (a copy
			// split across a page border): every sync would be this
			// reconcile. The reconcile is tried again on the next sync.
			r.logger.Warn("reconcile due but not made: the rows read are committed without marking deletions", "form", st.FormID, "error", r.err.Error())
			r.report.ReconcileErr = r.err
			r.err, r.mode = nil, readAll
		}
	}
}

// checkReconcileRead refuses to reconcile from a read that saw fewer
// submissions than the API counts: the rows it missed would be marked
// deleted. So it does from a read of a form of several pages whose sort
// order is unknown, read in a direction that pages moving may make skip
// submissions; a form of one page (empty, or whose submissions cannot
// tell the order) is read whole in one request.
func (r *formRun) checkReconcileRead() error {
	f := r.facts
	if !f.AddedUp {
		return fmt.Errorf("form %s: not reconciled: the read saw %d submissions where the API counts %d, and a row it missed would be marked deleted; the next reconcile tries again",
			r.old.FormID, f.Seen, f.Total)
	}
	if f.Order == state.OrderUnknown && f.Total > int64(f.PerPage) {
		return fmt.Errorf("form %s: not reconciled: its %d submissions span several pages and do not tell the order the API sorts them in, which a read must follow so that a row it missed is not marked deleted; the next reconcile tries again",
			r.old.FormID, f.Total)
	}
	return nil
}

// explain names a form's time budget when that is what stopped it (only
// the form's own context carries ErrFormTimeout as its cause).
func (r *formRun) explain(ctx context.Context, err error) error {
	if !errors.Is(context.Cause(ctx), ErrFormTimeout) {
		return err
	}
	if !errors.Is(err, ErrFormTimeout) {
		err = fmt.Errorf("%w: %w", ErrFormTimeout, err)
	}
	return fmt.Errorf("form %s: stopped after %d pages by its %s budget: %w", r.old.FormID, r.report.Pages, r.budget, err)
}

// finalReport is the form's report with what the run ended with.
func (r *formRun) finalReport() FormReport {
	fr := r.report
	fr.Err = r.err
	fr.Order = r.facts.Order
	fr.Duration = r.now().Sub(r.start)
	fr.Forgotten = r.forgotten
	fr.Copies = r.copies.Count()
	fr.LastSuccessAt, fr.LastReconcileAt = r.old.LastSuccessAt, r.old.LastReconcileAt
	if !r.committed {
		fr.Watermark = r.old.Watermark
	}
	if r.spool != nil {
		fr.Staged += r.spool.Len()
	}
	return fr
}

// discard removes the staged rows; the run is over.
func (r *formRun) discard() {
	if r != nil && r.spool != nil {
		r.spool.Remove()
	}
}

// checkable reports whether the run's rows, as committed, can be compared
// with the API's total: committed, without error, read completely.
func (r *formRun) checkable() bool { return r.committed && r.err == nil && r.complete() }

// complete reports whether the run read enough of the form for the rows
// stored to be compared with the API's total.
func (r *formRun) complete() bool { return r.report.Total >= 0 && r.facts.Order != state.OrderUnknown }

// next is the form's state after a successful run.
func (r *formRun) next(now time.Time) state.Form {
	st := r.old
	// Without a known order the reader could not choose the direction that
	// never skips, so the watermark waits for a run that knows it.
	if !(r.facts.Order == state.OrderUnknown && r.old.Watermark.IsZero()) {
		st.Watermark = r.wm.Watermark()
		st.LastTotal = r.facts.Total
	}
	if r.facts.Order != state.OrderUnknown {
		st.Order = r.facts.Order
	}
	st.FieldNames = r.fieldNames()
	st.FieldTypes.Seen = r.fieldTypes(st.FieldNames)
	st.FieldTypes.Added = r.fieldsAdded(st.FieldNames, now)
	st.LastSuccessAt, st.LastError = now, ""
	st.FieldPolicy = r.policyID()
	st.Forgotten = st.Forgotten.Met(r.met...)
	if r.mode == readReconcile {
		st.LastReconcileAt = now
		// A reconcile reads every page: what it saw replaces what was
		// known (a copy deleted upstream since is no longer counted).
		st.Copies = copiesAfter(nil, r.copies, st.Forgotten)
	} else {
		st.Copies = copiesAfter(st.Copies, r.copies, st.Forgotten)
	}
	return st
}

// fieldNames are the form's field names: those stored before the run and
// those of the rows staged so far.
func (r *formRun) fieldNames() []string {
	names := make([]string, 0, len(r.types))
	for f := range r.types {
		names = append(names, f)
	}
	slices.Sort(names)
	names = mergeFields(r.old.FieldNames, names)
	if p := r.policy; p != nil {
		// A field the policy drops gets no view column, whatever was
		// stored before it.
		names = p.Names(names)
	}
	return names
}

// fieldTypes are the types of the form's fields names, which
// fieldNames gave: those stored before the run widened by those of the
// rows staged so far. A field the policy drops has no name and so no
// type.
func (r *formRun) fieldTypes(names []string) fieldtype.Set {
	return typesOf(names, fieldtype.Merge(r.old.FieldTypes.Seen, r.types))
}

// fieldsAdded is when each of names (sorted) that came after the form's
// first rows was first seen: the times stored before the run, and now for
// the names this run is the first to see. A form with no rows and no
// field names stored had no shape yet: its first fields are its shape,
// not a change of it.
func (r *formRun) fieldsAdded(names []string, now time.Time) map[string]time.Time {
	var out map[string]time.Time
	for f, t := range r.old.FieldTypes.Added {
		if _, found := slices.BinarySearch(names, f); found {
			out = fieldtype.MergeAdded(out, map[string]time.Time{f: t})
		}
	}
	if r.old.Rows == 0 && len(r.old.FieldNames) == 0 {
		return out
	}
	for _, f := range names {
		if _, had := slices.BinarySearch(r.old.FieldNames, f); had {
			continue
		}
		if _, ok := out[f]; !ok {
			out = fieldtype.MergeAdded(out, map[string]time.Time{f: now.UTC()})
		}
	}
	return out
}

// newFields are the fields the committed state st holds that the form had
// not before this run, and that this run was the first to see (a part of
// it included): another process's sighting is its own to tell.
func (r *formRun) newFields(st state.Form) []NewField {
	var out []NewField
	for _, f := range st.FieldNames {
		if _, had := slices.BinarySearch(r.old.FieldNames, f); had {
			continue
		}
		at, ok := st.FieldTypes.Added[f]
		if !ok || at.Before(r.start.UTC().Truncate(time.Microsecond)) {
			continue
		}
		nf := NewField{Name: f, Type: st.FieldTypes.Type(f), Action: "keep"}
		if r.policy != nil {
			nf.Rule, nf.Action = r.policy.RuleFor(f)
		}
		out = append(out, nf)
	}
	return out
}

// typesOf is types without the fields not in names (sorted).
func typesOf(names []string, types fieldtype.Set) fieldtype.Set {
	for f := range types {
		if _, found := slices.BinarySearch(names, f); !found {
			delete(types, f)
		}
	}
	if len(types) == 0 {
		return nil
	}
	return types
}

// fetch reads a page of the form, counting the requests it took.
func (r *formRun) fetch(ctx context.Context, page int) (*formsapi.Page, error) {
	p, resp, err := r.src.Page(ctx, r.old.FormID, page, r.pageSize)
	if resp != nil {
		r.report.Requests += resp.Requests
		r.report.Limited += resp.RateLimited
	}
	if err != nil {
		return nil, err
	}
	r.report.Pages++
	r.rows += len(p.Submissions)
	if r.progress != nil {
		r.progress(r.progressAfter(p))
	}
	return p, nil
}

// progressAfter is how far the read got after page p. How many pages it
// spans is known when it reads every page (a first sync, a reconcile): the
// pages the API counts; a sync since a watermark stops where it meets it,
// which no count says in advance (PagesTotal 0).
func (r *formRun) progressAfter(p *formsapi.Page) Progress {
	pr := Progress{FormID: r.old.FormID, Pages: r.report.Pages, Rows: r.rows, Elapsed: r.now().Sub(r.start)}
	if r.mode != readNew || r.old.Watermark.IsZero() {
		// Pages read again (the form moved) count on top.
		return pr.withTotal(p.TotalPages + r.report.Rescans)
	}
	return pr
}

// rowOf builds the stored row of a submission. What a sink cannot hold is
// reported, not fatal: fields nested too deeply are left out (the raw
// object keeps them), a missing fields member is stored as {}.
func (r *formRun) rowOf(s formsapi.Submission) (sink.Row, error) {
	if s.Fields == nil {
		r.report.NoFields++
	}
	row, err := sink.NewRow(r.old.FormID, s.ID, s.CreatedAt, s.IsSpam, s.Fields, s.Files)
	if errors.Is(err, sink.ErrTooDeep) {
		r.report.TooDeep++
		row, err = sink.NewRow(r.old.FormID, s.ID, s.CreatedAt, s.IsSpam, nil, nil)
	}
	if err != nil {
		return sink.Row{}, err
	}
	fields, raw, err := r.applyPolicy(row.Fields, s.Raw)
	if err != nil {
		return sink.Row{}, err
	}
	row.Fields, row.Raw = fields, string(raw)
	return row, nil
}

// stage appends a row to the spool, takes in its field names and their
// types, and moves the watermark over it. A submission forgotten on
// request is not staged (it never touches disk, nor names a field) but
// moves the watermark all the same: it is handled.
func (r *formRun) stage(row sink.Row) error {
	if fg := r.old.Forgotten; forgotten(fg, row) {
		r.forgotten++
		for _, k := range []string{row.SubmissionKey, row.ContentKey} {
			if fg.IsPending(k) && !slices.Contains(r.met, k) {
				r.met = append(r.met, k)
			}
		}
	} else if err := r.spool.Append(row); err != nil {
		return fmt.Errorf("form %s: %w", r.old.FormID, err)
	} else {
		// The view reads the fields as stored: named and typed after the
		// policy (a hashed email is a string, a dropped field is no
		// name). Observe only reads them.
		r.types = r.types.Observe(unsafe.Slice(unsafe.StringData(row.Fields), len(row.Fields)))
	}
	if row.CreatedAt.After(r.start.Add(FutureTolerance)) {
		// Stored, but a watermark this far ahead would hide every
		// submission made until then.
		r.report.Future++
	} else {
		var id int64
		if row.SubmissionID != nil {
			id = *row.SubmissionID
		}
		r.wm.Advance(row.CreatedAt, id, row.SubmissionKey)
		if row.ContentKey != row.SubmissionKey {
			// Also by content: should the form answer in the older
			// response form next time, the submissions at the watermark's
			// millisecond are recognised as loaded rather than stored
			// again under their content keys.
			r.wm.Advance(row.CreatedAt, id, row.ContentKey)
		}
	}
	if r.onStaged != nil {
		r.onStaged(row)
	}
	if r.prefetch != nil && !row.CreatedAt.Before(r.old.Watermark.CreatedAt) && !forgotten(r.old.Forgotten, row) {
		r.prefetch(row)
	}
	if r.partsTo != nil && r.partDue(r.spool) {
		return r.handOff()
	}
	return nil
}

// forgotten reports whether row is a submission forgotten on request.
func forgotten(fg *state.Forgotten, row sink.Row) bool {
	return !fg.Empty() && (fg.Has(row.SubmissionKey) || fg.Has(row.ContentKey))
}

// withFields is st with the field names and types of rows of its form it
// did not see: the names joined, each type widened to fit both (the
// merge of two writers' views of a form, in either order).
func withFields(st state.Form, names []string, types fieldtype.Set, added map[string]time.Time) state.Form {
	st.FieldNames = mergeFields(st.FieldNames, names)
	st.FieldTypes.Seen = fieldtype.Merge(st.FieldTypes.Seen, types)
	st.FieldTypes.Added = fieldtype.MergeAdded(st.FieldTypes.Added, added)
	return st
}

// mergeFields returns the sorted union of two sorted name lists.
func mergeFields(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
