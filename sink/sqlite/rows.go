package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/formsync/formsync/sink"
)

// ReadRows returns every stored row of a form ordered by created_at, then
// submission_key. It holds them all in memory: it is meant for tests, the
// contract suite and small tools.
func (s *Sink) ReadRows(ctx context.Context, formID string) ([]sink.Row, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT submission_id, submission_key, created_at, is_spam, fields, files, coalesce(raw, '')
		FROM submissions WHERE form_id = ? ORDER BY created_at, submission_key`, formID)
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
		)
		if err := rows.Scan(&id, &r.SubmissionKey, &createdAt, &r.IsSpam, &r.Fields, &r.Files, &r.Raw); err != nil {
			return nil, fmt.Errorf("sqlite: reading rows of form %s: %w", formID, err)
		}
		if id.Valid {
			v := id.Int64
			r.SubmissionID = &v
		}
		if r.CreatedAt, err = time.Parse(sink.TimeLayout, createdAt); err != nil {
			return nil, fmt.Errorf("sqlite: reading rows of form %s: submission %s: created_at: %w", formID, r.SubmissionKey, err)
		}
		r.ContentKey = sink.ContentKey(r.CreatedAt, r.Fields, r.Files)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: reading rows of form %s: %w", formID, err)
	}
	return out, nil
}
