package bigquery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	bq "cloud.google.com/go/bigquery"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
)

// Remove removes a form from the dataset (sink.Removal): one transaction
// takes the lock every commit takes, checks the form's revision, deletes
// its rows when r.Rows (a filter on created_at covering every partition,
// so that a table requiring partition filters accepts it) and its sync
// state, or reduces the state to its tombstones when it has some. The
// counts come from one COUNT over the form's rows (clustering on form_id
// prunes it to them), read before: a commit of the form in between moves
// its revision, and the transaction then refuses.
//
// With r.Rows the form's view is dropped after the transaction, if it is
// formsync's (its description says so); Removed.View says why it could
// not be.
func (s *Sink) Remove(ctx context.Context, r sink.Removal) (sink.Removed, error) {
	return guardValue(s, ctx, func(ctx context.Context) (sink.Removed, error) { return s.remove(ctx, r) })
}

func (s *Sink) remove(ctx context.Context, r sink.Removal) (sink.Removed, error) {
	var out sink.Removed
	if r.FormID == "" {
		return out, errors.New("bigquery: removing a form: empty form id")
	}
	states, err := s.readState(ctx, []string{r.FormID}, nil, nil)
	if err != nil {
		return out, err
	}
	st, ok := states[r.FormID]
	if ok {
		out.State = true
		if st.Forgotten != nil {
			out.Tombstones, out.Forgotten = true, st.Forgotten.Count
		}
	}
	if st.Revision != r.Revision {
		return sink.Removed{}, &sink.ConflictError{Forms: []string{r.FormID}}
	}
	if out.Rows, out.Deleted, err = s.countRows(ctx, r.FormID); err != nil {
		return sink.Removed{}, err
	}
	if r.DryRun || !out.State && (!r.Rows || out.Rows+out.Deleted == 0) {
		return out, nil
	}
	syncedAt := s.cfg.Now().UTC().Truncate(time.Microsecond)
	base, err := commitID(s.cfg, syncedAt, []sink.FormCommit{{State: state.Form{FormID: r.FormID}}})
	if err != nil {
		return sink.Removed{}, err
	}
	params := []bq.QueryParameter{
		{Name: "synced_at", Value: syncedAt}, {Name: "commit_id", Value: base},
		{Name: "form_id", Value: r.FormID}, {Name: "revision", Value: r.Revision},
	}
	if err := s.removeOldDays(ctx, base, r); err != nil {
		return sink.Removed{}, err
	}
	order := []string{r.FormID}
	read := map[string]state.Form{r.FormID: {FormID: r.FormID, Revision: r.Revision}}
	if _, err := s.transact(ctx, base+"_remove", "removing form "+r.FormID, render("remove", removal{tables: s.t, Rows: r.Rows}), params, order, read); err != nil {
		return sink.Removed{}, err
	}
	if r.Rows {
		s.forgetView(r.FormID)
		out.View = s.dropView(ctx, r.FormID)
	}
	return out, nil
}

// removeOldDays, for a removal with the form's rows, deletes the rows of
// a form whose rows fall on more than PartDays days, all but those of its
// last PartDays days, in DELETEs of PartDays days each, before the
// removal's transaction deletes the rest:
// one BigQuery job may write at most 4,000 daily partitions, and a form
// spread over years would otherwise never be removed. Those DELETEs are
// not part of the transaction: should it then fail (a sync committed the
// form meanwhile), the form keeps its state without those rows, and
// running remove again finishes it.
func (s *Sink) removeOldDays(ctx context.Context, base string, r sink.Removal) error {
	if !r.Rows {
		return nil
	}
	formID := r.FormID
	var days []int64
	q := s.query(render("formDays", s.t), bq.QueryParameter{Name: "form_id", Value: formID})
	err := s.readAll(ctx, "listing the days of form "+formID, "table "+s.t.Submissions, q.Read, func() { days = nil }, func(v []bq.Value) error {
		if len(v) != 1 {
			return fmt.Errorf("bigquery: listing days: got %d columns, want 1", len(v))
		}
		days = append(days, vInt(v[0]))
		return nil
	})
	if err != nil {
		return err
	}
	day := func(d int64) time.Time { return time.Unix(d*86400, 0).UTC() }
	cut := len(days) - min(len(days), PartDays)
	for i := 0; i < cut; i += PartDays {
		last := min(i+PartDays, cut) - 1
		params := []bq.QueryParameter{
			{Name: "form_id", Value: formID},
			{Name: "removed_from", Value: day(days[i])},
			{Name: "removed_to", Value: day(days[last]).Add(24*time.Hour - time.Microsecond)},
		}
		op := fmt.Sprintf("removing the rows of form %s of %d days", formID, last-i+1)
		if _, err := s.transact(ctx, fmt.Sprintf("%s_days%d_", base, i/PartDays), op, render("removeDays", s.t), params, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// countRows counts the form's rows not marked deleted upstream (live) and
// marked.
func (s *Sink) countRows(ctx context.Context, formID string) (live, deleted int64, err error) {
	q := s.query(render("countRows", s.t), bq.QueryParameter{Name: "form_id", Value: formID})
	err = s.readAll(ctx, "counting the rows of form "+formID, "table "+s.t.Submissions, q.Read, func() { live, deleted = 0, 0 }, func(v []bq.Value) error {
		if len(v) != 2 {
			return fmt.Errorf("bigquery: counting rows: got %d columns, want 2", len(v))
		}
		live, deleted = vInt(v[0]), vInt(v[1])
		return nil
	})
	return live, deleted, err
}

// dropView drops the form's view when it is formsync's: a table, or a
// view of the user's that took the name, stays.
func (s *Sink) dropView(ctx context.Context, formID string) error {
	meta, err := s.viewMeta(ctx, sqlname.ViewName(formID))
	if err != nil || meta == nil || meta.Type != bq.ViewTable || !strings.HasPrefix(meta.Description, "formsync:") {
		return err
	}
	return s.retry(ctx, func() error {
		err := s.dataset().Table(sqlname.ViewName(formID)).Delete(ctx)
		if isNotFound(err) {
			return nil
		}
		return s.scope.classify("dropping the view", "view "+s.viewRef(formID), err)
	})
}

// Recount sets the row counters of the given forms' states (row_count,
// deleted_count) to the rows the table holds, in a transaction that takes
// the lock every commit takes, so that no commit's counts fall between
// the count and the update. Commits keep the counters without counting,
// from the stored state: a state deleted by hand while its rows stayed,
// or a counter changed by hand, holds a count the rows do not bear out.
// The engine recounts only a form whose count falls short of the API's
// total (one COUNT over its rows, which clustering on form_id prunes to
// them), never in a sync whose count adds up.
func (s *Sink) Recount(ctx context.Context, formIDs []string) error {
	if len(formIDs) == 0 {
		return nil
	}
	return s.guard(ctx, func(ctx context.Context) error {
		syncedAt := s.cfg.Now().UTC().Truncate(time.Microsecond)
		var forms []sink.FormCommit
		for _, id := range formIDs {
			forms = append(forms, sink.FormCommit{State: state.Form{FormID: id}})
		}
		base, err := commitID(s.cfg, syncedAt, forms)
		if err != nil {
			return err
		}
		params := []bq.QueryParameter{
			{Name: "synced_at", Value: syncedAt}, {Name: "commit_id", Value: base},
			{Name: "form_ids", Value: formIDs},
		}
		// No revision to hold: the recount writes no state a commit read.
		_, err = s.transact(ctx, base+"_recount", "recounting rows", render("recount", s.t), params, nil, nil)
		return err
	})
}
