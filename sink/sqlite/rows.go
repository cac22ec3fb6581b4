package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/formsync/formsync/sink"
)

const rowColumns = `submission_id, submission_key, created_at, is_spam, fields, files, coalesce(raw, ''), deleted_at`

// ReadRows returns every stored row of a form ordered by created_at, then
// submission_key, those marked deleted upstream included. It holds them all
// in memory: it is meant for tests, the contract suite and small tools.
func (s *Sink) ReadRows(ctx context.Context, formID string) ([]sink.Row, error) {
	return s.queryRows(ctx, formID, `SELECT `+rowColumns+`
		FROM submissions WHERE form_id = ? ORDER BY created_at, submission_key`, formID)
}

// Find returns the stored rows of a form that m selects, those marked
// deleted upstream included, ordered like ReadRows: the rows whose
// submission key is one of m.Keys and, when m.Field is set, those whose
// fields object has a member named m.Field (exactly) holding the JSON
// string m.Value. The member is looked up with json_each rather than a
// JSON path, so that no character of the name is read as path syntax. A
// match that selects nothing finds nothing.
func (s *Sink) Find(ctx context.Context, formID string, m sink.Match) ([]sink.Row, error) {
	if m.Empty() {
		return nil, nil
	}
	var (
		where []string
		args  = []any{formID}
	)
	if len(m.Keys) > 0 {
		keys, err := json.Marshal(m.Keys)
		if err != nil {
			return nil, fmt.Errorf("sqlite: encoding keys: %w", err)
		}
		// One parameter however many keys are asked for.
		where = append(where, `submission_key IN (SELECT value FROM json_each(?))`)
		args = append(args, string(keys))
	}
	if m.Field != "" {
		where = append(where, `EXISTS (SELECT 1 FROM json_each(submissions.fields) AS f
			WHERE f.key = ? AND f.type = 'text' AND f.value = ?)`)
		args = append(args, m.Field, m.Value)
	}
	return s.queryRows(ctx, formID, `SELECT `+rowColumns+`
		FROM submissions WHERE form_id = ? AND (`+strings.Join(where, " OR ")+`)
		ORDER BY created_at, submission_key`, args...)
}

// queryRows runs a query of rowColumns over one form's rows.
func (s *Sink) queryRows(ctx context.Context, formID, query string, args ...any) ([]sink.Row, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: reading rows of form %s: %w", formID, err)
	}
	defer rows.Close()
	var out []sink.Row
	for rows.Next() {
		var (
			r         = sink.Row{FormID: formID}
			id        sql.NullInt64
			createdAt string
			deletedAt sql.NullString
		)
		if err := rows.Scan(&id, &r.SubmissionKey, &createdAt, &r.IsSpam, &r.Fields, &r.Files, &r.Raw, &deletedAt); err != nil {
			return nil, fmt.Errorf("sqlite: reading rows of form %s: %w", formID, err)
		}
		if id.Valid {
			v := id.Int64
			r.SubmissionID = &v
		}
		if r.CreatedAt, err = time.Parse(sink.TimeLayout, createdAt); err != nil {
			return nil, fmt.Errorf("sqlite: reading rows of form %s: submission %s: created_at: %w", formID, r.SubmissionKey, err)
		}
		if r.DeletedAt, err = parseTime(deletedAt); err != nil {
			return nil, fmt.Errorf("sqlite: reading rows of form %s: submission %s: deleted_at: %w", formID, r.SubmissionKey, err)
		}
		r.ContentKey = sink.ContentKey(r.CreatedAt, r.Fields, r.Files)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: reading rows of form %s: %w", formID, err)
	}
	return out, nil
}
