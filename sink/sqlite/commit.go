package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/formsync/formsync/sink"
)

// Per-row statements. Arguments are repeated rather than numbered so that
// every statement reads left to right.
const (
	insertRowSQL = `INSERT INTO submissions
	(form_id, submission_id, submission_key, created_at, is_spam, fields, files, raw, synced_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (form_id, submission_key) DO NOTHING`
	// updateRowSQL makes a stored row the later version of its submission,
	// every column included, and only when something differs, so that
	// RowsAffected says whether it was updated. created_at is compared to
	// the millisecond: the newer response form prints three digits where a
	// row loaded from the older one keeps six, and that is not a change. A
	// NULL raw (a row staged without it) leaves the stored one.
	updateRowSQL = `UPDATE submissions
	SET submission_id = coalesce(?1, submission_id), is_spam = ?2, fields = ?3, files = ?4,
	    raw = coalesce(?5, raw),
	    created_at = CASE WHEN substr(created_at, 1, 23) = substr(?6, 1, 23) THEN created_at ELSE ?6 END,
	    synced_at = ?7
	WHERE form_id = ?8 AND submission_key = ?9
	  AND (is_spam IS NOT ?2 OR fields IS NOT ?3 OR files IS NOT ?4
	       OR (?5 IS NOT NULL AND raw IS NOT ?5)
	       OR substr(created_at, 1, 23) IS NOT substr(?6, 1, 23)
	       OR (?1 IS NOT NULL AND submission_id IS NOT ?1))`
	// rekeyRowSQL moves a row loaded from the older response form (keyed
	// by content) to its id key, keeping its created_at (six digits where
	// the newer form prints three), unless the id key is already taken.
	rekeyRowSQL = `UPDATE submissions
	SET submission_id = ?, submission_key = ?, is_spam = ?, fields = ?, files = ?, raw = coalesce(?, raw), synced_at = ?
	WHERE form_id = ? AND submission_key = ? AND submission_id IS NULL
	  AND NOT EXISTS (SELECT 1 FROM submissions WHERE form_id = ? AND submission_key = ?)`
	deleteLegacySQL = `DELETE FROM submissions WHERE form_id = ? AND submission_key = ? AND submission_id IS NULL`
	// INDEXED BY: left to itself SQLite plans this on the primary key and
	// reads every row of the form; the partial index holds only the rows
	// keyed by content, so the answer costs a page or two.
	hasLegacySQL = `SELECT EXISTS (SELECT 1 FROM submissions INDEXED BY submissions_legacy
		WHERE form_id = ? AND submission_id IS NULL)`
	prevStateSQL = `SELECT row_count, deleted_count, field_names, revision FROM sync_state WHERE form_id = ?`
)

// ctxCheckEvery is how many rows go by between checks of the context: the
// per-row statements run without it (the driver would start a goroutine
// per statement to watch it).
const ctxCheckEvery = 256

type commitStmts struct {
	insert, update, rekey, deleteLegacy, hasLegacy, prevState, writeState *sql.Stmt
}

func prepare(ctx context.Context, tx *sql.Tx) (*commitStmts, error) {
	var st commitStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.insert, insertRowSQL}, {&st.update, updateRowSQL}, {&st.rekey, rekeyRowSQL},
		{&st.deleteLegacy, deleteLegacySQL}, {&st.hasLegacy, hasLegacySQL},
		{&st.prevState, prevStateSQL}, {&st.writeState, writeStateSQL},
	} {
		stmt, err := tx.PrepareContext(ctx, p.query)
		if err != nil {
			return nil, fmt.Errorf("sqlite: preparing commit: %w", err)
		}
		*p.dst = stmt
	}
	return &st, nil
}

// Commit applies c in one SQL transaction: every form's staged rows are
// upserted on (form_id, submission_key) and every form's state is written,
// or, on any error or cancellation, nothing is. The result holds the counts
// of every form in c.
func (s *Sink) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	if c == nil {
		return sink.Result{}, nil
	}
	for _, fc := range c.Forms {
		if err := fc.State.Validate(); err != nil {
			return nil, fmt.Errorf("sqlite: commit: %w", err)
		}
	}
	syncedAt := c.SyncedAt
	if syncedAt.IsZero() {
		syncedAt = s.now()
	}
	syncedAt = syncedAt.UTC().Truncate(time.Microsecond)

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: beginning commit: %w", err)
	}
	defer tx.Rollback()
	st, err := prepare(ctx, tx)
	if err != nil {
		return nil, err
	}
	res := make(sink.Result, len(c.Forms))
	// A form listed twice is checked once, against the revision stored
	// before this commit, and stored at that revision + 1.
	expected := map[string]int64{}
	var conflicts []string
	for _, fc := range c.Forms {
		id := fc.State.FormID
		rev, seen := expected[id]
		if !seen {
			rev = fc.State.Revision
			expected[id] = rev
		}
		counts, err := s.commitForm(ctx, tx, st, fc, rev, !seen, syncedAt)
		if errors.Is(err, sink.ErrStateConflict) {
			conflicts = append(conflicts, id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: committing form %s: %w", id, err)
		}
		prev := res[id]
		res[id] = sink.Counts{Inserted: prev.Inserted + counts.Inserted, Updated: prev.Updated + counts.Updated}
	}
	if len(conflicts) > 0 {
		return nil, fmt.Errorf("sqlite: %w", &sink.ConflictError{Forms: conflicts})
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: committing: %w", err)
	}
	return res, nil
}

// commitForm writes one form's rows and state at revision+1. When check is
// set it first compares the stored revision with revision and returns
// sink.ErrStateConflict, writing nothing, when they differ.
func (s *Sink) commitForm(ctx context.Context, tx *sql.Tx, st *commitStmts, fc sink.FormCommit, revision int64, check bool, syncedAt time.Time) (sink.Counts, error) {
	formID := fc.State.FormID
	var (
		counts      sink.Counts
		prevRows    int64
		prevDeleted int64
		prevFields  []string
		stored      int64
		existed     = true
	)
	var fieldsJSON string
	err := st.prevState.QueryRowContext(ctx, formID).Scan(&prevRows, &prevDeleted, &fieldsJSON, &stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		existed = false
	case err != nil:
		return counts, fmt.Errorf("reading previous state: %w", err)
	default:
		if err := json.Unmarshal([]byte(fieldsJSON), &prevFields); err != nil {
			return counts, fmt.Errorf("reading previous field names: %w", err)
		}
	}
	if check && stored != revision {
		return counts, sink.ErrStateConflict
	}
	var removed int64
	if fc.Rows != nil && fc.Rows.Len() > 0 {
		var err error
		removed, err = upsertRows(ctx, st, formID, fc.Rows, formatTime(syncedAt).String, &counts)
		if err != nil {
			return counts, err
		}
	}
	rows := prevRows + counts.Inserted - removed
	args, err := stateArgs(fc.State, rows, prevDeleted, revision+1, syncedAt)
	if err != nil {
		return counts, fmt.Errorf("encoding state: %w", err)
	}
	if _, err := st.writeState.ExecContext(ctx, args...); err != nil {
		return counts, fmt.Errorf("writing state: %w", err)
	}
	if !existed || !slices.Equal(prevFields, fc.State.FieldNames) {
		if err := writeView(ctx, tx, formID, fc.State.FieldNames); err != nil {
			return counts, err
		}
	}
	return counts, nil
}

// stagedRow is a spool row with its created_at formatted for the table.
type stagedRow struct {
	sink.Row
	created string
}

// prefetchBatch is how many rows prefetch hands over at a time, and
// prefetchDepth how many batches it reads ahead.
const (
	prefetchBatch = 256
	prefetchDepth = 4
)

// prefetch yields the rows of seq, reading and parsing them in a goroutine
// of its own a few batches ahead, so that decoding the spool runs on
// another core than the statements, which are the commit's critical path.
// The goroutine has ended (and closed the spool) when the iteration does.
func prefetch(seq iter.Seq2[sink.Row, error]) iter.Seq2[stagedRow, error] {
	type batch struct {
		rows []stagedRow
		err  error
	}
	return func(yield func(stagedRow, error) bool) {
		ch := make(chan batch, prefetchDepth)
		free := make(chan []stagedRow, prefetchDepth+2)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(ch)
			send := func(b batch) bool {
				select {
				case ch <- b:
					return true
				case <-stop:
					return false
				}
			}
			next := func() []stagedRow {
				select {
				case b := <-free:
					return b[:0]
				default:
					return make([]stagedRow, 0, prefetchBatch)
				}
			}
			b := next()
			for r, err := range seq {
				if err != nil {
					send(batch{rows: b, err: err})
					return
				}
				b = append(b, stagedRow{Row: r, created: r.CreatedAt.UTC().Format(sink.TimeLayout)})
				if len(b) == prefetchBatch {
					if !send(batch{rows: b}) {
						return
					}
					b = next()
				}
			}
			if len(b) > 0 {
				send(batch{rows: b})
			}
		}()
		defer func() {
			close(stop)
			<-done
		}()
		for b := range ch {
			for _, r := range b.rows {
				if !yield(r, nil) {
					return
				}
			}
			if b.err != nil {
				yield(stagedRow{}, b.err)
				return
			}
			clear(b.rows)
			select {
			case free <- b.rows:
			default:
			}
		}
	}
}

// upsertRows streams one spool into the submissions table, adding to counts.
// It returns how many stored rows it deleted (legacy duplicates of re-keyed
// rows) so that the form's row counter stays equal to its stored rows.
func upsertRows(ctx context.Context, st *commitStmts, formID string, spool *sink.Spool, syncedAt string, counts *sink.Counts) (removed int64, err error) {
	// Statements run under a context that is never cancelled; ctx is
	// checked every ctxCheckEvery rows and again by tx.Commit, and its
	// cancellation rolls the transaction back.
	bg := context.WithoutCancel(ctx)
	var hasLegacy bool
	if err := st.hasLegacy.QueryRowContext(ctx, formID).Scan(&hasLegacy); err != nil {
		return 0, fmt.Errorf("looking for rows keyed by content: %w", err)
	}
	exec := func(stmt *sql.Stmt, args ...any) (int64, error) {
		r, err := stmt.ExecContext(bg, args...)
		if err != nil {
			return 0, err
		}
		return r.RowsAffected()
	}
	// A spool read newest first holds each submission once, ids
	// descending: read backwards, it inserts in ascending key order, and
	// the B-trees grow at one edge instead of splitting pages everywhere
	// (a quarter less time into an empty table, BENCHMARKS.md section 8).
	// Rows with distinct keys do not depend on each other's order, unless
	// some are re-keyed from content keys, which only a form holding such
	// rows does.
	rows := spool.Rows()
	if !hasLegacy && spool.DescendingIDs() {
		rows = spool.RowsReversed()
	}
	n := 0
	for sr, err := range prefetch(rows) {
		if err != nil {
			return removed, err
		}
		r := &sr.Row
		if n++; n%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return removed, err
			}
		}
		if r.FormID != formID {
			return removed, fmt.Errorf("spool row %d belongs to form %q", n, r.FormID)
		}
		var id sql.NullInt64
		if r.SubmissionID != nil {
			id = sql.NullInt64{Int64: *r.SubmissionID, Valid: true}
		}
		spam := 0
		if r.IsSpam {
			spam = 1
		}
		var raw sql.NullString
		if r.Raw != "" {
			raw = sql.NullString{String: r.Raw, Valid: true}
		}
		created := sr.created
		if id.Valid && hasLegacy && r.ContentKey != "" && r.ContentKey != r.SubmissionKey {
			k, err := exec(st.rekey, id, r.SubmissionKey, spam, r.Fields, r.Files, raw, syncedAt,
				formID, r.ContentKey, formID, r.SubmissionKey)
			if err != nil {
				return removed, fmt.Errorf("re-keying submission %s: %w", r.SubmissionKey, err)
			}
			if k > 0 {
				counts.Updated++
				continue
			}
			// The id key is taken already: a legacy twin must not stay.
			k, err = exec(st.deleteLegacy, formID, r.ContentKey)
			if err != nil {
				return removed, fmt.Errorf("deleting content-keyed twin of submission %s: %w", r.SubmissionKey, err)
			}
			removed += k
		}
		k, err := exec(st.insert, formID, id, r.SubmissionKey, created, spam, r.Fields, r.Files, raw, syncedAt)
		if err != nil {
			return removed, fmt.Errorf("inserting submission %s: %w", r.SubmissionKey, err)
		}
		if k > 0 {
			counts.Inserted++
			if !id.Valid {
				hasLegacy = true
			}
			continue
		}
		k, err = exec(st.update, id, spam, r.Fields, r.Files, raw, created, syncedAt, formID, r.SubmissionKey)
		if err != nil {
			return removed, fmt.Errorf("updating submission %s: %w", r.SubmissionKey, err)
		}
		counts.Updated += k
	}
	return removed, ctx.Err()
}
