package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
)

// commitAttempts bounds how often a commit refused for a concurrent update
// is merged and tried again.
const commitAttempts = 8

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
	commitCtx, cancel := e.commits.graceful(ctx)
	defer cancel()
	t0 := e.cfg.Now()
	res, conflicts, err := e.commits.commit(commitCtx, c, merge)
	rep.CommitDuration += e.cfg.Now().Sub(t0)
	rep.Conflicts += conflicts
	if err != nil {
		rep.CommitErr = fmt.Errorf("committing %d forms: %w", len(c.Forms), err)
		return nil
	}
	for _, fc := range c.Forms {
		e.commits.warnView(fc.State.FormID, res[fc.State.FormID])
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
		st := c.Forms[formIndex[i]].State
		r.report.Watermark = st.Watermark
		r.report.Fields, r.report.NewFields = len(st.FieldNames), r.newFields(st)
		if r.mode == readReconcile && c.Forms[formIndex[i]].State.Revision != r.old.Revision {
			remarked = append(remarked, r)
		}
	}
	return remarked
}

// committer writes commits to the sink for the engine, the parts of a sync
// and the checkpoints of a backfill alike: with the configured field type
// pins, merged and tried again when another process committed the same
// forms, under a grace after a shutdown.
type committer struct {
	dst Sink
	// pins are Config.FieldTypes.
	pins map[string]fieldtype.Set
	// grace is Config.ShutdownGrace.
	grace  time.Duration
	logger *slog.Logger
}

// graceful returns a context that ends Config.ShutdownGrace after ctx does
// (at once if ctx is done and the grace is 0): a commit under it finishes
// when a shutdown signal comes while it runs, rather than throwing away
// what the run read.
func (cm committer) graceful(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(cm.grace, cancel) })
	return gctx, func() { stop(); cancel() }
}

// warnView tells the user when a commit could not make a form's view. The
// parts of a sync do not: its last commit, which takes in every form it
// read, says it once for the run.
func (cm committer) warnView(formID string, c sink.Counts) {
	if c.View != nil {
		cm.logger.Warn("the view of a form could not be made: its rows are committed without it, and the next commit tries again",
			"form", formID, "error", c.View.Error())
	}
}

// commit applies c, and when the sink refuses it because another process
// committed some of its forms since their state was read, re-reads those
// states, merges each with what this commit meant to write, and tries
// again, a bounded number of times.
func (cm committer) commit(ctx context.Context, c *sink.Commit, merge func(stored, ours state.Form) state.Form) (sink.Result, int, error) {
	conflicts := 0
	for attempt := 1; ; attempt++ {
		for i := range c.Forms {
			// A read that began before a forget, or a state merged with
			// one, may name a forgotten submission in its watermark.
			c.Forms[i].State = c.Forms[i].State.WithoutForgotten()
		}
		cm.pin(c)
		res, err := cm.dst.Commit(ctx, c)
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
		stored, rerr := cm.dst.ReadState(ctx, ids)
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
		cm.logger.Info("another process committed the same forms meanwhile; merged and committing again",
			"forms", len(ids), "attempt", attempt+1)
	}
}

// pin gives every form of c the field types Config.FieldTypes pins for
// it, and only those: the pins are the configuration's, never merged
// with the stored ones.
func (cm committer) pin(c *sink.Commit) {
	for i := range c.Forms {
		c.Forms[i].State.FieldTypes.Pinned = cm.pins[c.Forms[i].State.FormID]
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
	out = withFields(out, stored.FieldNames, stored.FieldTypes.Seen, stored.FieldTypes.Added)
	if out.Order == state.OrderUnknown {
		out.Order = stored.Order
	}
	if stored.LastSuccessAt.After(out.LastSuccessAt) {
		out.LastSuccessAt = stored.LastSuccessAt
	}
	return out
}
