// Package memory is formsync's reference sink: it keeps submissions and
// sync state in memory, with the semantics every real sink must have
// (sinktest checks them all). The engine's tests run on it, so that what
// they prove about reading the API does not depend on a database, and it
// shows in a few lines what a sink promises; `formsync backfill --dry-run`
// reads into it, so that a dry run writes nothing:
//
//   - A Commit applies all of its forms or none: rows are upserted on
//     (form_id, submission_key) and states written, after every form's
//     revision was found equal to the stored one (else *sink.ConflictError).
//   - An upsert of a key already stored makes the row the later version of
//     the submission, every column included; created_at counts as changed
//     only when it differs to the millisecond (the newer response form
//     prints three digits where a row loaded from the older one keeps six).
//   - A row with an id whose content key is stored as a row without id (the
//     form moved from the older to the newer response form) re-keys that
//     row instead of adding one; if the id is stored already, the
//     content-keyed twin is removed (staged again later in the commit, it
//     is the stored row again, not a new one).
//   - A staged row whose submission or content key has a tombstone in the
//     state's Forgotten is skipped; Forget removes rows before the staged
//     ones are applied.
//   - A staged row clears the deleted_at of the row it upserts; a
//     reconcile marks every other row of the form deleted (deleted_at =
//     the commit's time) unless marked already.
//   - row_count is the number of rows stored for the form and not marked
//     deleted; deleted_count the number marked.
//   - It is a sink.FileKeeper: a file copy belongs to its row. A commit
//     that removes a row (forget, a twin) removes its copies, a re-keyed
//     row takes its copies to its new key, Remove with Rows removes the
//     form's copies, and a copy recorded for a row not stored is dropped.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// Sink is an in-memory sink, safe for concurrent use. The zero value is not
// ready: use New.
type Sink struct {
	mu     sync.Mutex
	rows   map[string]map[string]stored // form -> submission key -> row
	states map[string]state.Form
	// copies are the file copies of stored rows: form -> submission key
	// -> URL -> copy. A commit replaces a form's map, and a key's, rather
	// than changing them.
	copies map[string]map[string]map[string]sink.FileCopy
	closed bool
	// now is the clock of copies recorded without their time.
	now func() time.Time
}

type stored struct {
	row      sink.Row
	syncedAt time.Time
}

var (
	_ sink.Sink       = (*Sink)(nil)
	_ sink.FileKeeper = (*Sink)(nil)
)

// New returns an empty sink.
func New() *Sink {
	return &Sink{rows: map[string]map[string]stored{}, states: map[string]state.Form{},
		copies: map[string]map[string]map[string]sink.FileCopy{}, now: time.Now}
}

// ReadState returns copies of the stored states of formIDs (all when empty).
func (s *Sink) ReadState(ctx context.Context, formIDs []string) (map[string]state.Form, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory sink: closed")
	}
	out := map[string]state.Form{}
	for id, st := range s.states {
		if len(formIDs) == 0 || slices.Contains(formIDs, id) {
			out[id] = cloneState(st)
		}
	}
	return out, nil
}

// ReadRows returns a form's rows ordered by created_at, then key.
func (s *Sink) ReadRows(ctx context.Context, formID string) ([]sink.Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sink.Row, 0, len(s.rows[formID]))
	for _, r := range s.rows[formID] {
		row := r.row
		row.ContentKey = sink.ContentKey(row.CreatedAt, row.Fields, row.Files)
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b sink.Row) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.SubmissionKey, b.SubmissionKey)
	})
	return out, nil
}

// Find returns the form's rows that m selects, ordered like ReadRows.
func (s *Sink) Find(ctx context.Context, formID string, m sink.Match) ([]sink.Row, error) {
	rows, err := s.ReadRows(ctx, formID)
	if err != nil {
		return nil, err
	}
	out := rows[:0]
	for _, r := range rows {
		if slices.Contains(m.Keys, r.SubmissionKey) || m.Field != "" && fieldIs(r.Fields, m.Field, m.Value) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Close makes later calls fail.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Commit applies c atomically: it works on copies and swaps them in only
// when every form went through.
func (s *Sink) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	if c == nil {
		return sink.Result{}, nil
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("memory sink: commit: %w", err)
	}
	syncedAt := c.SyncTime(time.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory sink: closed")
	}
	expected := map[string]int64{}
	var conflicts []string
	for _, fc := range c.Forms {
		id := fc.State.FormID
		if _, seen := expected[id]; seen {
			continue
		}
		expected[id] = fc.State.Revision
		if s.states[id].Revision != fc.State.Revision {
			conflicts = append(conflicts, id)
		}
	}
	if len(conflicts) > 0 {
		return nil, fmt.Errorf("memory sink: %w", &sink.ConflictError{Forms: conflicts})
	}

	rows := maps.Clone(s.rows)
	states := maps.Clone(s.states)
	copies := maps.Clone(s.copies)
	res := sink.Result{}
	// removed holds, per form, the content-keyed twins this commit
	// removed because their id was stored: one staged again later in the
	// commit is the stored row, not a new one.
	removed := map[string]map[string]stored{}
	for _, fc := range c.Forms {
		id := fc.State.FormID
		form := maps.Clone(rows[id])
		if form == nil {
			form = map[string]stored{}
		}
		counts := res[id]
		formCopies := maps.Clone(copies[id])
		if removed[id] == nil {
			removed[id] = map[string]stored{}
		}
		for _, k := range fc.Forget {
			if _, ok := form[k]; ok {
				delete(form, k)
				counts.Forgotten++
			}
		}
		var seen map[string]struct{}
		if fc.Reconcile {
			seen = map[string]struct{}{}
		}
		if fc.Rows != nil && fc.Rows.Len() > 0 {
			n := 0
			for r, err := range fc.Rows.Rows() {
				if err != nil {
					return nil, fmt.Errorf("memory sink: form %s: %w", id, err)
				}
				if n++; n%256 == 0 {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
				}
				if r.FormID != id {
					return nil, fmt.Errorf("memory sink: form %s: spool row %d belongs to form %q", id, n, r.FormID)
				}
				if fc.State.Forgotten.Has(r.SubmissionKey) || fc.State.Forgotten.Has(r.ContentKey) {
					continue
				}
				if rekeys(form, r) {
					carryCopies(formCopies, r.ContentKey, r.SubmissionKey)
				}
				key := upsert(form, removed[id], r, syncedAt, &counts)
				if seen != nil {
					seen[key] = struct{}{}
				}
			}
		}
		if seen != nil {
			for k, r := range form {
				if _, ok := seen[k]; !ok && r.row.DeletedAt.IsZero() {
					r.row.DeletedAt = syncedAt
					form[k] = r
					counts.Deleted++
				}
			}
		}
		// No copy outlives its row: the forgotten rows' and the removed
		// twins' go.
		maps.DeleteFunc(formCopies, func(k string, _ map[string]sink.FileCopy) bool { _, ok := form[k]; return !ok })
		copies[id] = formCopies
		rows[id] = form
		res[id] = counts
		st := cloneState(fc.State)
		st.Rows, st.Deleted = 0, 0
		for _, r := range form {
			if r.row.DeletedAt.IsZero() {
				st.Rows++
			} else {
				st.Deleted++
			}
		}
		st.Revision = expected[id] + 1
		states[id] = st
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.rows, s.states, s.copies = rows, states, copies
	return res, nil
}

// carryCopies moves the copies of the row stored under key from to key
// to: the row was re-keyed.
func carryCopies(copies map[string]map[string]sink.FileCopy, from, to string) {
	if copies[from] == nil {
		return
	}
	moved := make(map[string]sink.FileCopy, len(copies[from]))
	for u, c := range copies[from] {
		c.SubmissionKey = to
		moved[u] = c
	}
	delete(copies, from)
	copies[to] = moved
}

// rekeys reports whether upsert re-keys a stored row to r's key: r has
// an id, and its content key is stored as a row without one, its id key
// not at all.
func rekeys(form map[string]stored, r sink.Row) bool {
	if r.SubmissionID == nil || r.ContentKey == "" || r.ContentKey == r.SubmissionKey {
		return false
	}
	twin, ok := form[r.ContentKey]
	_, taken := form[r.SubmissionKey]
	return ok && twin.row.SubmissionID == nil && !taken
}

// upsert applies one staged row to a form's rows and returns the key it
// is stored under. removed holds the twins the commit removed so far.
func upsert(form, removed map[string]stored, r sink.Row, syncedAt time.Time, counts *sink.Counts) string {
	if r.SubmissionID != nil && r.ContentKey != "" && r.ContentKey != r.SubmissionKey {
		if twin, ok := form[r.ContentKey]; ok && twin.row.SubmissionID == nil {
			delete(form, r.ContentKey)
			if _, taken := form[r.SubmissionKey]; taken {
				removed[r.ContentKey] = twin
			} else {
				// Re-keyed: the row keeps its created_at (six digits
				// where the newer form prints three).
				next := r
				next.CreatedAt = twin.row.CreatedAt
				next.Raw = firstNonEmpty(r.Raw, twin.row.Raw)
				form[r.SubmissionKey] = stored{row: clean(next), syncedAt: syncedAt}
				counts.Updated++
				if !twin.row.DeletedAt.IsZero() {
					counts.Restored++
				}
				return r.SubmissionKey
			}
		}
	}
	if twin, ok := removed[r.SubmissionKey]; ok && r.SubmissionID == nil {
		// A twin removed earlier in this commit, staged again: it is
		// the stored row, upserted as any other.
		delete(removed, r.SubmissionKey)
		form[r.SubmissionKey] = twin
	}
	old, ok := form[r.SubmissionKey]
	if !ok {
		form[r.SubmissionKey] = stored{row: clean(r), syncedAt: syncedAt}
		counts.Inserted++
		return r.SubmissionKey
	}
	restored := !old.row.DeletedAt.IsZero()
	if restored {
		counts.Restored++
	}
	next := r
	if next.SubmissionID == nil {
		next.SubmissionID = old.row.SubmissionID
	}
	next.Raw = firstNonEmpty(r.Raw, old.row.Raw)
	if next.CreatedAt.Truncate(time.Millisecond).Equal(old.row.CreatedAt.Truncate(time.Millisecond)) {
		next.CreatedAt = old.row.CreatedAt
	}
	unchanged := same(clean(next), old.row)
	if unchanged && !restored {
		return r.SubmissionKey
	}
	form[r.SubmissionKey] = stored{row: clean(next), syncedAt: syncedAt}
	if !unchanged {
		counts.Updated++
	}
	return r.SubmissionKey
}

// clean is a row as stored: the content key is derived on reading.
func clean(r sink.Row) sink.Row {
	r.ContentKey = ""
	r.DeletedAt = time.Time{}
	if r.SubmissionID != nil {
		v := *r.SubmissionID
		r.SubmissionID = &v
	}
	return r
}

func same(a, b sink.Row) bool {
	return a.FormID == b.FormID && a.SubmissionKey == b.SubmissionKey && a.CreatedAt.Equal(b.CreatedAt) &&
		a.IsSpam == b.IsSpam && a.Fields == b.Fields && a.Files == b.Files && a.Raw == b.Raw &&
		(a.SubmissionID == nil) == (b.SubmissionID == nil) && (a.SubmissionID == nil || *a.SubmissionID == *b.SubmissionID)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cloneState(f state.Form) state.Form {
	if f.Watermark.Boundary != nil {
		f.Watermark.Boundary = slices.Clone(f.Watermark.Boundary)
	}
	if f.FieldNames != nil {
		f.FieldNames = slices.Clone(f.FieldNames)
	}
	if f.Backfill != nil {
		b := *f.Backfill
		f.Backfill = &b
	}
	f.Forgotten = f.Forgotten.Clone()
	f.Copies = maps.Clone(f.Copies)
	return f
}

// fieldIs reports whether the fields object (JSON) has a member named name
// that is the JSON string value: the test a sink.Match applies to a row's
// fields.
func fieldIs(fields, name, value string) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(fields), &m); err != nil {
		return false
	}
	raw, ok := m[name]
	if !ok {
		return false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return false
	}
	return s == value
}

// Remove removes a form (sink.Removal): its state, reduced to its
// tombstones when it has some, and with r.Rows its rows, after checking
// the form's revision.
func (s *Sink) Remove(ctx context.Context, r sink.Removal) (sink.Removed, error) {
	if err := ctx.Err(); err != nil {
		return sink.Removed{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sink.Removed{}, fmt.Errorf("memory sink: closed")
	}
	st, ok := s.states[r.FormID]
	if st.Revision != r.Revision {
		return sink.Removed{}, fmt.Errorf("memory sink: %w", &sink.ConflictError{Forms: []string{r.FormID}})
	}
	out := sink.Removed{State: ok}
	if st.Forgotten != nil {
		out.Tombstones, out.Forgotten = true, st.Forgotten.Count
	}
	for _, row := range s.rows[r.FormID] {
		if row.row.DeletedAt.IsZero() {
			out.Rows++
		} else {
			out.Deleted++
		}
	}
	if r.DryRun {
		return out, nil
	}
	if r.Rows {
		delete(s.rows, r.FormID)
		delete(s.copies, r.FormID)
	}
	switch {
	case out.Tombstones:
		kept := state.New(r.FormID)
		kept.Forgotten, kept.Revision = st.Forgotten.Clone(), st.Revision+1
		if !r.Rows {
			kept.Rows, kept.Deleted, kept.FieldNames, kept.FieldPolicy = st.Rows, st.Deleted, st.FieldNames, st.FieldPolicy
		}
		s.states[r.FormID] = kept
	case ok:
		delete(s.states, r.FormID)
	}
	return out, nil
}

// Recount does nothing: every commit counts a form's rows anew, so its
// counters cannot drift from them.
func (s *Sink) Recount(ctx context.Context, _ []string) error { return ctx.Err() }

// FileRows returns the stored rows of formIDs (all forms when empty)
// whose files name something, those marked deleted included, ordered by
// form, created_at and key, each with its copies by URL.
func (s *Sink) FileRows(ctx context.Context, formIDs []string, since time.Time) ([]sink.FileRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory sink: closed")
	}
	var out []sink.FileRow
	for id, form := range s.rows {
		if len(formIDs) > 0 && !slices.Contains(formIDs, id) {
			continue
		}
		for key, r := range form {
			if noFiles(r.row.Files) || r.row.CreatedAt.Before(since) {
				continue
			}
			fr := sink.FileRow{FormID: id, SubmissionKey: key, CreatedAt: r.row.CreatedAt,
				Deleted: !r.row.DeletedAt.IsZero(), Files: r.row.Files}
			for _, c := range s.copies[id][key] {
				fr.Copies = append(fr.Copies, c)
			}
			slices.SortFunc(fr.Copies, func(a, b sink.FileCopy) int { return strings.Compare(a.URL, b.URL) })
			out = append(out, fr)
		}
	}
	slices.SortFunc(out, func(a, b sink.FileRow) int {
		if c := strings.Compare(a.FormID, b.FormID); c != 0 {
			return c
		}
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.SubmissionKey, b.SubmissionKey)
	})
	return out, nil
}

// noFiles reports whether a row's files name nothing.
func noFiles(files string) bool {
	switch files {
	case "", "[]", "{}", "null":
		return true
	}
	return false
}

// RecordFiles stores copies, each replacing the copy of its key; a copy
// whose row is not stored is dropped.
func (s *Sink) RecordFiles(ctx context.Context, copies []sink.FileCopy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, c := range copies {
		if c.FormID == "" || c.SubmissionKey == "" || c.URL == "" {
			return fmt.Errorf("memory sink: recording files: a copy without its form, submission key or URL: %+v", c)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory sink: closed")
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	for _, c := range copies {
		if _, ok := s.rows[c.FormID][c.SubmissionKey]; !ok {
			continue
		}
		if c.RecordedAt.IsZero() {
			c.RecordedAt = now
		}
		c.RecordedAt = c.RecordedAt.UTC().Truncate(time.Microsecond)
		if !c.StoredAt.IsZero() {
			c.StoredAt = c.StoredAt.UTC().Truncate(time.Microsecond)
		}
		form := s.copies[c.FormID]
		if form == nil {
			form = map[string]map[string]sink.FileCopy{}
			s.copies[c.FormID] = form
		}
		row := form[c.SubmissionKey]
		if row == nil {
			row = map[string]sink.FileCopy{}
			form[c.SubmissionKey] = row
		}
		row[c.URL] = c
	}
	return nil
}

// NamedDigests returns which of digests a stored copy names.
func (s *Sink) NamedDigests(ctx context.Context, digests []string) (map[string]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory sink: closed")
	}
	want := map[string]bool{}
	for _, d := range digests {
		want[d] = true
	}
	out := map[string]bool{}
	for _, form := range s.copies {
		for _, row := range form {
			for _, c := range row {
				if c.SHA256 != "" && want[c.SHA256] {
					out[c.SHA256] = true
				}
			}
		}
	}
	return out, nil
}
