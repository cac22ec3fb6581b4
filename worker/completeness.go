package worker

import (
	"context"
	"fmt"
	"slices"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

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
	again, rejected := e.readForms(ctx, sub, ids, states, func(state.Form) readMode { return readAll }, nil)
	defer discardAll(again)
	rejection(sub, rejected)
	e.commitRuns(ctx, sub, again) // readAll marks nothing
	rep.CommitDuration += sub.CommitDuration
	rep.Conflicts += sub.Conflicts
	for i, r := range short {
		r.takeReread(again[i], sub.CommitErr)
	}
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
	// Recorded in the states too, so that `formsync status` shows it.
	e.recordIncomplete(ctx, ids, byID)
}

// takeReread adds to r what a, the full re-read of its form for the
// completeness check, did; commitErr is why that re-read's commit failed.
func (r *formRun) takeReread(a *formRun, commitErr error) {
	r.report.Rescans++
	r.report.Pages += a.report.Pages
	r.report.Requests += a.report.Requests
	r.report.Limited += a.report.Limited
	r.report.Inserted += a.report.Inserted
	r.report.Updated += a.report.Updated
	r.report.Restored += a.report.Restored
	r.copies = r.copies.Merge(a.copies)
	switch {
	case commitErr != nil:
		r.err = fmt.Errorf("form %s: committing the full re-read: %w", r.old.FormID, commitErr)
	case a.err != nil:
		r.err = fmt.Errorf("form %s: the full re-read for the completeness check failed: %w", r.old.FormID, a.err)
	default:
		r.report.Watermark, r.report.Total, r.report.Missing = a.report.Watermark, a.report.Total, 0
	}
}

// recordIncomplete writes the error of each incomplete form ids (byID
// holds its run) into its stored state.
func (e *Engine) recordIncomplete(ctx context.Context, ids []string, byID map[string]*formRun) {
	now := e.cfg.Now().UTC()
	states, err := e.dst.ReadState(ctx, ids)
	if err == nil {
		c := &sink.Commit{SyncedAt: now}
		for _, id := range ids {
			st := states[id]
			st.LastError, st.LastErrorAt = byID[id].err.Error(), now
			c.Forms = append(c.Forms, sink.FormCommit{State: st})
		}
		_, _, err = e.commits.commit(ctx, c, mergeSync)
	}
	if err != nil {
		e.cfg.Logger.Error("cannot record incomplete forms in their state", "forms", ids, "error", err.Error())
	}
}

// shortForms are the committed, completely read forms whose stored rows
// fall short of the API's total; each gets report.Missing. With recount,
// the counters of those forms (and of any form with a negative one) are
// recounted from the rows first (sink.Sink.Recount says why), and only
// the forms still short are returned.
func (e *Engine) shortForms(ctx context.Context, runs []*formRun, recount bool) []*formRun {
	var ids []string
	for _, r := range runs {
		if r.checkable() {
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
	if recount {
		if states, err = e.recount(ctx, runs, ids, states); err != nil {
			e.cfg.Logger.Warn("cannot read the state for the completeness check", "error", err.Error())
			return nil
		}
	}
	var short []*formRun
	for _, r := range runs {
		st, ok := states[r.old.FormID]
		if !ok || !r.checkable() {
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

// recount recounts the counters of the runs' forms whose stored count
// (states, of the forms ids) falls short of the API's total, or is
// negative, and returns their states read again; states as they were when
// none does, or the recount fails (said in the log). The error is the
// failure to read them again.
func (e *Engine) recount(ctx context.Context, runs []*formRun, ids []string, states map[string]state.Form) (map[string]state.Form, error) {
	var doubt []string
	for _, r := range runs {
		if st, ok := states[r.old.FormID]; ok && r.checkable() && (held(st) < r.report.Total || st.Rows < 0 || st.Deleted < 0) {
			doubt = append(doubt, r.old.FormID)
		}
	}
	if len(doubt) == 0 {
		return states, nil
	}
	e.cfg.Logger.Info("recounting the stored rows of forms whose row count falls short of the API's total", "forms", doubt)
	if err := e.dst.Recount(ctx, doubt); err != nil {
		e.cfg.Logger.Warn("cannot recount the stored rows", "forms", doubt, "error", err.Error())
		return states, nil
	}
	return e.dst.ReadState(ctx, ids)
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
