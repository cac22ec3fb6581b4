package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// ForgetReport says what Forget found and did.
type ForgetReport struct {
	FormID string
	// Rows are the stored rows the match selected: removed, or with DryRun
	// what would be.
	Rows []sink.Row
	// Removed counts the rows the commit removed.
	Removed int64
	// Unstored are the keys asked for that no stored row has and no
	// earlier forget tombstoned: tombstoned all the same, so that they are
	// never loaded.
	Unstored []string
	// Before are the keys asked for that no stored row has because an
	// earlier forget tombstoned them: nothing to do.
	Before []string
	DryRun bool
	// Committed says that the forget wrote: it removed rows or added
	// tombstones. False for a dry run, and for keys all tombstoned before.
	Committed bool
	// Conflicts counts commits refused because another process committed
	// the form meanwhile; the match was then made again.
	Conflicts int
	// Purge is why the sink could not yet erase the old copies of what it
	// removed (sink.Purger); nil when it did, or keeps none.
	Purge error
	// Objects are the digests of the files store's objects the removed
	// rows named: Deleted lists those deleted, Kept those another stored
	// submission still names. ObjectsErr says why some were not deleted
	// (no files store configured, the store failing): they are then
	// named by no row, and the report lists them.
	Objects    []string
	Deleted    []string
	Kept       []string
	ObjectsErr error
}

// purge erases what the sink still keeps of removed rows, when it keeps
// any (sink.Purger), and says in rep why it could not.
func (e *Engine) purge(ctx context.Context, rep *ForgetReport) {
	err := sink.Optional{Sink: e.dst}.Purge(ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		return
	}
	if rep.Purge = err; rep.Purge != nil {
		e.cfg.Logger.Warn("the removed rows' bytes are not erased from the store yet", "form", rep.FormID, "error", rep.Purge.Error())
	}
}

// ErrNothingToForget is returned by Forget for a match that selects nothing
// at all (no key and no field).
var ErrNothingToForget = errors.New("forget: give submission keys or a field and value")

// Forget removes a form's stored rows that m selects (an erasure request)
// and records tombstones for them, in one commit, so that no later sync,
// lookback, backfill or reconcile stores them again. Keys in m that no
// stored row has are tombstoned too. With dryRun it only reports the rows.
// m.Value is compared with the stored value: for a field the policy
// hashes, give the hash (fieldpolicy's Lookup makes it).
func (e *Engine) Forget(ctx context.Context, formID string, m sink.Match, dryRun bool) (*ForgetReport, error) {
	if m.Empty() {
		return nil, ErrNothingToForget
	}
	rep := &ForgetReport{FormID: formID, DryRun: dryRun}
	for attempt := 1; ; attempt++ {
		st, err := e.formState(ctx, formID)
		if err != nil {
			return rep, err
		}
		if err := e.reading.matchesPolicy(st, m); err != nil {
			return rep, err
		}
		rows, err := e.dst.Find(ctx, formID, m)
		if err != nil {
			return rep, fmt.Errorf("forget in form %s: finding the rows: %w", formID, err)
		}
		rep.found(st, m, rows)
		if dryRun || len(rows) == 0 && len(rep.Unstored) == 0 {
			// Nothing to remove and nothing to tombstone: no commit. A
			// form that something was forgotten from may still hold its
			// bytes, if a reader held up the purge of that forget: this is
			// the run that finishes it.
			if !dryRun && !st.Forgotten.Empty() {
				e.purge(ctx, rep)
			}
			return rep, nil
		}
		objects, err := e.objectsOf(ctx, formID, rows)
		if err != nil {
			return rep, fmt.Errorf("forget in form %s: %w", formID, err)
		}
		fc, err := forgetCommit(st, rows, rep.Unstored)
		if err != nil {
			return rep, err
		}
		c := &sink.Commit{SyncedAt: e.cfg.Now().UTC(), Forms: []sink.FormCommit{fc}}
		e.commits.pin(c)
		res, err := e.dst.Commit(ctx, c)
		if errors.Is(err, sink.ErrStateConflict) && attempt < commitAttempts {
			// A sync or another forget committed the form meanwhile: its
			// rows may differ now. Match again.
			rep.Conflicts++
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("forget in form %s: committing: %w", formID, err)
		}
		rep.Removed, rep.Committed = res[formID].Forgotten, true
		e.cfg.Logger.Info("forgot submissions", "form", formID, "rows_removed", rep.Removed,
			"tombstones_for_unstored_keys", len(rep.Unstored))
		e.commits.warnView(formID, res[formID])
		e.purge(ctx, rep)
		e.deleteObjects(ctx, rep, objects)
		return rep, nil
	}
}

// matchesPolicy refuses a match by field in a form whose rows were stored
// under another field policy than the configured one: a field the policy
// hashes is matched by its hash under the configured policy (and key),
// under another one nothing matches, and the erasure would look done.
func (rd reading) matchesPolicy(st state.Form, m sink.Match) error {
	now := rd.policyID()
	if m.Field == "" || st.FieldPolicy == now || st.Rows+st.Deleted == 0 {
		return nil
	}
	return fmt.Errorf("forget in form %s: %w: its rows were stored under field policy %s and %s is configured; set FORMSYNC_FIELD_POLICY (and its key) as the syncs of the form have them, or forget by --key",
		st.FormID, ErrForgetPolicy, policyName(st.FieldPolicy), policyName(now))
}

// found records the rows m selected in the form whose state is st, and
// sorts the keys asked for that no row has: tombstoned by an earlier
// forget (Before), or not (Unstored).
func (rep *ForgetReport) found(st state.Form, m sink.Match, rows []sink.Row) {
	rep.Rows = rows
	rep.Unstored, rep.Before = nil, nil
	for _, k := range unstored(m.Keys, rows) {
		if st.Forgotten.Has(k) {
			rep.Before = append(rep.Before, k)
		} else {
			rep.Unstored = append(rep.Unstored, k)
		}
	}
}

// ErrForgetPolicy is returned by Forget for a match by field under another
// field policy than the form's rows were stored under.
var ErrForgetPolicy = errors.New("not the field policy of the stored rows")

// policyName names a policy identity in a message.
func policyName(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// forgetCommit is the commit that removes rows from a form and tombstones
// them and the unstored keys.
func forgetCommit(st state.Form, rows []sink.Row, unstored []string) (sink.FormCommit, error) {
	fg := st.Forgotten
	if fg == nil {
		var err error
		if fg, err = state.NewForgotten(); err != nil {
			return sink.FormCommit{}, err
		}
	}
	var keys, remove []string
	var from, to time.Time
	// A forgotten submission's copies (copies.go) are forgotten with it:
	// counted with the tombstones, no longer named in the state.
	var copies int64
	st.Copies = maps.Clone(st.Copies)
	for _, r := range rows {
		for _, k := range []string{r.SubmissionKey, r.ContentKey} {
			copies += st.Copies[k]
			delete(st.Copies, k)
		}
		// The content key too: a row keyed by content comes back with an
		// id when the form moves to the newer response form, and one with
		// an id without it when it moves back.
		keys = append(keys, r.SubmissionKey, r.ContentKey)
		remove = append(remove, r.SubmissionKey)
		if from.IsZero() || r.CreatedAt.Before(from) {
			from = r.CreatedAt
		}
		if to.IsZero() || r.CreatedAt.After(to) {
			to = r.CreatedAt
		}
	}
	if len(st.Copies) == 0 {
		st.Copies = nil
	}
	// A key no row has may name no submission the API serves: its
	// tombstone is counted once a read meets it (state.Forgotten.Pending).
	st.Forgotten = fg.With(int64(len(rows))+copies, keys...).WithUnstored(unstored...)
	// Where the rows are: the sink need not look for them elsewhere.
	return sink.FormCommit{State: st.WithoutForgotten(), Forget: remove, ForgetFrom: from, ForgetTo: to}, nil
}

// unstored are the keys no row has.
func unstored(keys []string, rows []sink.Row) []string {
	have := make(map[string]bool, len(rows))
	for _, r := range rows {
		have[r.SubmissionKey] = true
	}
	var out []string
	for _, k := range keys {
		if !have[k] {
			have[k] = true
			out = append(out, k)
		}
	}
	return out
}

// objectsOf returns the digests of the stored objects the copies of rows
// name (sink.FileKeeper); none when the sink keeps no copies.
func (e *Engine) objectsOf(ctx context.Context, formID string, rows []sink.Row) ([]string, error) {
	keeper, err := sink.Optional{Sink: e.dst}.FileKeeper()
	if errors.Is(err, errors.ErrUnsupported) || len(rows) == 0 {
		return nil, nil
	}
	fileRows, err := keeper.FileRows(ctx, []string{formID}, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("reading the rows' file copies: %w", err)
	}
	keys := make(map[string]bool, len(rows))
	for _, r := range rows {
		keys[r.SubmissionKey] = true
	}
	var digests []string
	for _, fr := range fileRows {
		if !keys[fr.SubmissionKey] {
			continue
		}
		for _, cp := range fr.Copies {
			if cp.Stored() {
				digests = append(digests, cp.SHA256)
			}
		}
	}
	slices.Sort(digests)
	return slices.Compact(digests), nil
}

// deleteObjects deletes, after a forget's commit removed the rows and
// their copies, each of the objects they named that no stored copy names
// any more, and says in rep what it deleted and kept.
func (e *Engine) deleteObjects(ctx context.Context, rep *ForgetReport, digests []string) {
	if len(digests) == 0 {
		return
	}
	rep.Objects = digests
	if e.cfg.Files == nil {
		rep.ObjectsErr = fmt.Errorf("no files store is configured (FORMSYNC_FILES_STORE): the %d objects the removed rows named were not deleted", len(digests))
		e.cfg.Logger.Warn("the forgotten submissions' files were not deleted", "form", rep.FormID, "objects", digests, "error", rep.ObjectsErr.Error())
		return
	}
	keeper, err := sink.Optional{Sink: e.dst}.FileKeeper()
	if err != nil {
		rep.ObjectsErr = err
		return
	}
	named, err := keeper.NamedDigests(ctx, digests)
	if err != nil {
		rep.ObjectsErr = fmt.Errorf("asking which objects other submissions name: %w", err)
		e.cfg.Logger.Warn("the forgotten submissions' files were not deleted", "form", rep.FormID, "objects", digests, "error", rep.ObjectsErr.Error())
		return
	}
	var errs []error
	for _, d := range digests {
		if named[d] {
			rep.Kept = append(rep.Kept, d)
			continue
		}
		if err := e.cfg.Files.Store.Delete(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("deleting object %s: %w", d, err))
			continue
		}
		rep.Deleted = append(rep.Deleted, d)
	}
	if rep.ObjectsErr = errors.Join(errs...); rep.ObjectsErr != nil {
		e.cfg.Logger.Warn("some of the forgotten submissions' files were not deleted", "form", rep.FormID, "error", rep.ObjectsErr.Error())
	}
	e.cfg.Logger.Info("deleted the forgotten submissions' files", "form", rep.FormID, "deleted", len(rep.Deleted), "kept_named_by_another_submission", len(rep.Kept))
}
