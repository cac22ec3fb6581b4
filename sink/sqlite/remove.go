package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
)

const (
	// countRowsSQL counts a form's rows, not marked deleted upstream and
	// marked: a range of the primary key, which begins with form_id.
	countRowsSQL = `SELECT coalesce(sum(deleted_at IS NULL), 0), coalesce(sum(deleted_at IS NOT NULL), 0)
	FROM submissions WHERE form_id = ?`
	// recountSQL sets a form's counters to the rows counted. The revision
	// stays: the state says nothing new, and a commit that read it before
	// keeps its right to write it.
	recountSQL = `UPDATE sync_state SET row_count = ?, deleted_count = ? WHERE form_id = ?`
	// removalStateSQL is what a removal reads of the form's state.
	removalStateSQL = `SELECT revision, forgotten FROM sync_state WHERE form_id = ?`
	removeStateSQL  = `DELETE FROM sync_state WHERE form_id = ?`
	removeRowsSQL   = `DELETE FROM submissions WHERE form_id = ?`
	// tombstonesOnlySQL reduces a form's state to its tombstones, as
	// state.New(form) would be with them: nothing of the sync is left.
	// With the rows removed (?1) the counters, field names, field types and field
	// policy go too; kept rows keep them, since they describe those rows.
	tombstonesOnlySQL = `UPDATE sync_state SET wm_created_at = NULL, wm_id = 0, boundary = 'null', sort_order = '',
	last_total = -1, last_success_at = NULL, last_error_at = NULL, last_error = '', backfill = NULL,
	last_reconcile_at = NULL, copies = NULL, last_commit = NULL, revision = revision + 1, updated_at = ?2,
	row_count = CASE WHEN ?1 THEN 0 ELSE row_count END, deleted_count = CASE WHEN ?1 THEN 0 ELSE deleted_count END,
	field_names = CASE WHEN ?1 THEN 'null' ELSE field_names END, field_types = CASE WHEN ?1 THEN '{}' ELSE field_types END, field_policy = CASE WHEN ?1 THEN '' ELSE field_policy END
	WHERE form_id = ?3`
)

// querier is what a removal reads through: the transaction, or for a dry
// run the database.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Remove removes a form from the database (sink.Removal): its sync state,
// reduced to its tombstones when it has some, and with r.Rows its rows
// and its view, in one transaction that checks the form's revision first.
// A dry run only reads, and works on a sink opened read-only.
func (s *Sink) Remove(ctx context.Context, r sink.Removal) (sink.Removed, error) {
	if r.FormID == "" {
		return sink.Removed{}, errors.New("sqlite: removing a form: empty form id")
	}
	if r.DryRun {
		_, out, err := removalOf(ctx, s.db, r.FormID)
		if err != nil {
			return sink.Removed{}, err
		}
		return out, nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return sink.Removed{}, fmt.Errorf("sqlite: removing form %s: %w", r.FormID, err)
	}
	defer tx.Rollback()
	revision, out, err := removalOf(ctx, tx, r.FormID)
	if err != nil {
		return sink.Removed{}, err
	}
	if revision != r.Revision {
		return sink.Removed{}, fmt.Errorf("sqlite: %w", &sink.ConflictError{Forms: []string{r.FormID}})
	}
	wrap := func(what string, err error) error {
		return fmt.Errorf("sqlite: removing form %s: %s: %w", r.FormID, what, err)
	}
	if r.Rows {
		if _, err := tx.ExecContext(ctx, removeRowsSQL, r.FormID); err != nil {
			return sink.Removed{}, wrap("rows", err)
		}
		if err := dropView(ctx, tx, r.FormID); err != nil {
			return sink.Removed{}, wrap("view", err)
		}
	}
	switch {
	case out.Tombstones:
		if _, err := tx.ExecContext(ctx, tombstonesOnlySQL, r.Rows, formatTime(s.now()).String, r.FormID); err != nil {
			return sink.Removed{}, wrap("state", err)
		}
	case out.State:
		if _, err := tx.ExecContext(ctx, removeStateSQL, r.FormID); err != nil {
			return sink.Removed{}, wrap("state", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return sink.Removed{}, wrap("committing", err)
	}
	return out, nil
}

// removalOf reads what removing a form concerns: its stored revision (0
// without a state), whether it has a state and tombstones, and its rows.
func removalOf(ctx context.Context, q querier, formID string) (int64, sink.Removed, error) {
	var (
		out       sink.Removed
		revision  int64
		forgotten sql.NullString
	)
	switch err := q.QueryRowContext(ctx, removalStateSQL, formID).Scan(&revision, &forgotten); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, out, fmt.Errorf("sqlite: reading the state of form %s: %w", formID, err)
	default:
		out.State = true
	}
	if forgotten.Valid {
		var fg state.Forgotten
		if err := json.Unmarshal([]byte(forgotten.String), &fg); err != nil {
			return 0, out, fmt.Errorf("sqlite: reading the tombstones of form %s: %w", formID, err)
		}
		out.Tombstones, out.Forgotten = true, fg.Count
	}
	if err := q.QueryRowContext(ctx, countRowsSQL, formID).Scan(&out.Rows, &out.Deleted); err != nil {
		return 0, out, fmt.Errorf("sqlite: counting the rows of form %s: %w", formID, err)
	}
	return revision, out, nil
}

// dropView drops the form's view, if there is one: it would show nothing.
// A table or an index of that name is the user's, and stays.
func dropView(ctx context.Context, tx *sql.Tx, formID string) error {
	name := sqlname.ViewName(formID)
	var stored string
	err := tx.QueryRowContext(ctx, `SELECT name FROM sqlite_schema WHERE name = ? COLLATE NOCASE AND type = 'view'`, name).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	_, err = tx.ExecContext(ctx, "DROP VIEW "+quoteIdent(stored))
	return err
}

// Recount sets the row counters of the given forms' states (row_count,
// deleted_count) to the rows the table holds. The commits keep them
// without counting, from the stored state (a commit counts the rows only
// when it finds no state row or a negative counter): one whose counter a
// person changed holds a count the rows do not bear out until it is
// recounted. The
// engine recounts a form whose count falls short of the API's total
// before it calls the form incomplete.
func (s *Sink) Recount(ctx context.Context, formIDs []string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: recounting rows: %w", err)
	}
	defer tx.Rollback()
	for _, id := range formIDs {
		var live, deleted int64
		if err := tx.QueryRowContext(ctx, countRowsSQL, id).Scan(&live, &deleted); err != nil {
			return fmt.Errorf("sqlite: counting the rows of form %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, recountSQL, live, deleted, id); err != nil {
			return fmt.Errorf("sqlite: recounting the rows of form %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: recounting rows: %w", err)
	}
	return nil
}
