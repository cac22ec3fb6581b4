package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

const stateColumns = `form_id, wm_created_at, wm_id, boundary, sort_order,
	last_total, row_count, field_names, last_success_at, last_error_at, last_error, backfill, revision,
	deleted_count, last_reconcile_at, field_policy, forgotten, copies, field_types`

// ReadState returns the stored state of the given forms (every form when
// formIDs is empty). Forms never synced are absent from the map.
func (s *Sink) ReadState(ctx context.Context, formIDs []string) (map[string]state.Form, error) {
	query := `SELECT ` + cmp.Or(s.stateSelect, stateColumns) + ` FROM sync_state`
	var args []any
	if len(formIDs) > 0 {
		ids, err := json.Marshal(formIDs)
		if err != nil {
			return nil, fmt.Errorf("sqlite: encoding form ids: %w", err)
		}
		// One parameter however many forms are asked for.
		query += ` WHERE form_id IN (SELECT value FROM json_each(?))`
		args = append(args, string(ids))
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: reading sync state: %w", err)
	}
	defer rows.Close()
	out := make(map[string]state.Form)
	for rows.Next() {
		f, err := scanState(rows)
		if err != nil {
			return nil, err
		}
		out[f.FormID] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: reading sync state: %w", err)
	}
	return out, nil
}

func scanState(rows *sql.Rows) (state.Form, error) {
	var (
		f                                 state.Form
		wmAt, successAt, errorAt, backfil sql.NullString
		reconcileAt, forgotten, copies    sql.NullString
		fieldTypes                        sql.NullString
		boundary, fieldNames, order       string
	)
	err := rows.Scan(&f.FormID, &wmAt, &f.Watermark.ID, &boundary, &order,
		&f.LastTotal, &f.Rows, &fieldNames, &successAt, &errorAt, &f.LastError, &backfil, &f.Revision,
		&f.Deleted, &reconcileAt, &f.FieldPolicy, &forgotten, &copies, &fieldTypes)
	if err != nil {
		return f, fmt.Errorf("sqlite: reading sync state: %w", err)
	}
	f.Order = state.Order(order)
	wrap := func(what string, err error) error {
		return fmt.Errorf("sqlite: reading sync state of form %s: %s: %w", f.FormID, what, err)
	}
	if f.Watermark.CreatedAt, err = parseTime(wmAt); err != nil {
		return f, wrap("watermark", err)
	}
	if f.LastSuccessAt, err = parseTime(successAt); err != nil {
		return f, wrap("last_success_at", err)
	}
	if f.LastErrorAt, err = parseTime(errorAt); err != nil {
		return f, wrap("last_error_at", err)
	}
	if f.LastReconcileAt, err = parseTime(reconcileAt); err != nil {
		return f, wrap("last_reconcile_at", err)
	}
	if err := json.Unmarshal([]byte(boundary), &f.Watermark.Boundary); err != nil {
		return f, wrap("watermark boundary", err)
	}
	if err := json.Unmarshal([]byte(fieldNames), &f.FieldNames); err != nil {
		return f, wrap("field names", err)
	}
	if backfil.Valid {
		f.Backfill = new(state.Backfill)
		if err := json.Unmarshal([]byte(backfil.String), f.Backfill); err != nil {
			return f, wrap("backfill", err)
		}
	}
	if forgotten.Valid {
		f.Forgotten = new(state.Forgotten)
		if err := json.Unmarshal([]byte(forgotten.String), f.Forgotten); err != nil {
			return f, wrap("forgotten", err)
		}
		if f.Forgotten.Keys == nil {
			f.Forgotten.Keys = []string{}
		}
	}
	if copies.Valid {
		if err := json.Unmarshal([]byte(copies.String), &f.Copies); err != nil {
			return f, wrap("copies", err)
		}
	}
	// NULL in a file of an older schema read without migrating it.
	if fieldTypes.Valid {
		if err := json.Unmarshal([]byte(fieldTypes.String), &f.FieldTypes); err != nil {
			return f, wrap("field types", err)
		}
	}
	return f, nil
}

// formatTime stores a time as sink.TimeLayout text; the zero time is NULL.
func formatTime(t time.Time) sql.NullString {
	if t.IsZero() {
		return sql.NullString{}
	}
	return sql.NullString{String: t.UTC().Format(sink.TimeLayout), Valid: true}
}

func parseTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return time.Parse(sink.TimeLayout, s.String)
}

// stateArgs are the arguments of writeStateSQL for one form, stored at
// revision with the row counts the sink keeps (rows not marked deleted,
// rows marked) and what the commit did (last_commit).
func stateArgs(f state.Form, rows, deleted, revision int64, updatedAt time.Time, did sink.Counts) ([]any, error) {
	// nil and empty slices are stored as null and [] so that they read
	// back exactly as written.
	boundary, err := json.Marshal(f.Watermark.Boundary)
	if err != nil {
		return nil, err
	}
	fieldNames, err := json.Marshal(f.FieldNames)
	if err != nil {
		return nil, err
	}
	backfill, err := nullJSON(f.Backfill, f.Backfill != nil)
	if err != nil {
		return nil, err
	}
	fg := f.Forgotten
	if fg != nil && fg.Keys == nil {
		// Read back as the empty set it is, not as null.
		fg = fg.Clone()
	}
	forgotten, err := nullJSON(fg, fg != nil)
	if err != nil {
		return nil, err
	}
	copies, err := nullJSON(f.Copies, len(f.Copies) > 0)
	if err != nil {
		return nil, err
	}
	lastCommit, err := json.Marshal(did)
	if err != nil {
		return nil, err
	}
	fieldTypes, err := json.Marshal(f.FieldTypes)
	if err != nil {
		return nil, err
	}
	return []any{
		f.FormID, formatTime(f.Watermark.CreatedAt), f.Watermark.ID, string(boundary), string(f.Order),
		f.LastTotal, rows, string(fieldNames), formatTime(f.LastSuccessAt), formatTime(f.LastErrorAt),
		f.LastError, backfill, revision,
		deleted, formatTime(f.LastReconcileAt), f.FieldPolicy, forgotten, copies, string(fieldTypes),
		formatTime(updatedAt), string(lastCommit),
	}, nil
}

// nullJSON is v as JSON text when present, NULL otherwise.
func nullJSON(v any, present bool) (sql.NullString, error) {
	if !present {
		return sql.NullString{}, nil
	}
	j, err := json.Marshal(v)
	return sql.NullString{String: string(j), Valid: err == nil}, err
}

const writeStateSQL = `INSERT OR REPLACE INTO sync_state (` + stateColumns + `, updated_at, last_commit)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
