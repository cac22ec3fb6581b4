package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/formsync/formsync/sink"
)

// Per-row statements. Arguments are repeated rather than numbered so that
// every statement reads left to right.
const (
	insertRowSQL = `INSERT INTO submissions
	(form_id, submission_id, submission_key, created_at, is_spam, fields, files, synced_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (form_id, submission_key) DO NOTHING`
	// updateRowSQL changes a stored row only when something differs, so
	// that RowsAffected says whether it was updated.
	updateRowSQL = `UPDATE submissions
	SET submission_id = coalesce(?, submission_id), is_spam = ?, fields = ?, files = ?, synced_at = ?
	WHERE form_id = ? AND submission_key = ?
	  AND (is_spam IS NOT ? OR fields IS NOT ? OR files IS NOT ?
	       OR (? IS NOT NULL AND submission_id IS NOT ?))`
	// rekeyRowSQL moves a row loaded from the older response form (keyed
	// by content) to its id key, keeping its created_at (six digits where
	// the newer form prints three), unless the id key is already taken.
	rekeyRowSQL = `UPDATE submissions
	SET submission_id = ?, submission_key = ?, is_spam = ?, fields = ?, files = ?, synced_at = ?
	WHERE form_id = ? AND submission_key = ? AND submission_id IS NULL
	  AND NOT EXISTS (SELECT 1 FROM submissions WHERE form_id = ? AND submission_key = ?)`
	deleteLegacySQL = `DELETE FROM submissions WHERE form_id = ? AND submission_key = ? AND submission_id IS NULL`
	hasLegacySQL    = `SELECT EXISTS (SELECT 1 FROM submissions WHERE form_id = ? AND submission_id IS NULL)`
	prevStateSQL    = `SELECT row_count, field_names FROM sync_state WHERE form_id = ?`
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
	for _, fc := range c.Forms {
		counts, err := s.commitForm(ctx, tx, st, fc, syncedAt)
		if err != nil {
			return nil, fmt.Errorf("sqlite: committing form %s: %w", fc.State.FormID, err)
		}
		prev := res[fc.State.FormID]
		res[fc.State.FormID] = sink.Counts{Inserted: prev.Inserted + counts.Inserted, Updated: prev.Updated + counts.Updated}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: committing: %w", err)
	}
	return res, nil
}

func (s *Sink) commitForm(ctx context.Context, tx *sql.Tx, st *commitStmts, fc sink.FormCommit, syncedAt time.Time) (sink.Counts, error) {
	formID := fc.State.FormID
	var (
		counts     sink.Counts
		prevRows   int64
		prevFields []string
		existed    = true
	)
	var fieldsJSON string
	err := st.prevState.QueryRowContext(ctx, formID).Scan(&prevRows, &fieldsJSON)
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
	var removed int64
	if fc.Rows != nil {
		var err error
		removed, err = upsertRows(ctx, st, formID, fc.Rows, formatTime(syncedAt).String, &counts)
		if err != nil {
			return counts, err
		}
	}
	rows := prevRows + counts.Inserted - removed
	args, err := stateArgs(fc.State, rows, syncedAt)
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
	n := 0
	for r, err := range spool.Rows() {
		if err != nil {
			return removed, err
		}
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
		if id.Valid && hasLegacy && r.ContentKey != "" && r.ContentKey != r.SubmissionKey {
			k, err := exec(st.rekey, id, r.SubmissionKey, spam, r.Fields, r.Files, syncedAt,
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
		k, err := exec(st.insert, formID, id, r.SubmissionKey, r.CreatedAt.UTC().Format(sink.TimeLayout),
			spam, r.Fields, r.Files, syncedAt)
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
		k, err = exec(st.update, id, spam, r.Fields, r.Files, syncedAt, formID, r.SubmissionKey,
			spam, r.Fields, r.Files, id, id)
		if err != nil {
			return removed, fmt.Errorf("updating submission %s: %w", r.SubmissionKey, err)
		}
		counts.Updated += k
	}
	return removed, ctx.Err()
}
