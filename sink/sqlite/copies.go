package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/formsync/formsync/sink"
)

var _ sink.FileKeeper = (*Sink)(nil)

// A copy belongs to its row: the triggers of schema version 8 remove it
// with the row and carry it to the row's new key when the row is re-keyed,
// so that Commit and Remove need no statement of their own for it.
const (
	// recordCopySQL writes one copy, replacing the copy of its key, when
	// its row is stored. The WHERE also keeps SQLite's parser from reading
	// ON CONFLICT as a join's constraint.
	recordCopySQL = `INSERT INTO submission_file_copies
	(form_id, submission_key, url, sha256, object_uri, size, content_type, stored_at, reason, recorded_at)
	SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10
	WHERE EXISTS (SELECT 1 FROM submissions WHERE form_id = ?1 AND submission_key = ?2)
	ON CONFLICT (form_id, submission_key, url) DO UPDATE SET
		sha256 = excluded.sha256, object_uri = excluded.object_uri, size = excluded.size,
		content_type = excluded.content_type, stored_at = excluded.stored_at,
		reason = excluded.reason, recorded_at = excluded.recorded_at`
	// fileRowsSQL reads the rows whose files name something, each with its
	// copies (none: one line of NULLs). %s is the form filter.
	fileRowsSQL = `SELECT s.form_id, s.submission_key, s.created_at, s.deleted_at IS NOT NULL, s.files,
		c.url, c.sha256, c.object_uri, c.size, c.content_type, c.stored_at, c.reason, c.recorded_at
	FROM submissions AS s
	LEFT JOIN submission_file_copies AS c ON c.form_id = s.form_id AND c.submission_key = s.submission_key
	WHERE s.files NOT IN ('[]', '{}', 'null', '')%s
	ORDER BY s.form_id, s.created_at, s.submission_key, c.url`
	// fileRowsOlderSQL is fileRowsSQL on a file of a schema before copies
	// were kept (a read-only open): the rows, without copies.
	fileRowsOlderSQL = `SELECT s.form_id, s.submission_key, s.created_at, s.deleted_at IS NOT NULL, s.files,
		NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
	FROM submissions AS s
	WHERE s.files NOT IN ('[]', '{}', 'null', '')%s
	ORDER BY s.form_id, s.created_at, s.submission_key`
	// namedDigestsSQL reads which digests a copy of a stored row names;
	// sha256 IS NOT NULL lets it use the partial index.
	namedDigestsSQL = `SELECT DISTINCT c.sha256 FROM submission_file_copies AS c
	WHERE c.sha256 IS NOT NULL AND c.sha256 IN (SELECT value FROM json_each(?))
	  AND EXISTS (SELECT 1 FROM submissions AS s WHERE s.form_id = c.form_id AND s.submission_key = c.submission_key)`
)

// copiesSince is the schema version from which a file keeps copies.
const copiesSince = 8

// FileRows returns the stored rows of formIDs (every form when empty)
// whose files name something (neither [] nor {}), those marked deleted
// upstream included, ordered by form, created_at and submission key, each
// with its recorded copies by URL. On a read-only file of a schema before
// copies were kept, the rows have none.
func (s *Sink) FileRows(ctx context.Context, formIDs []string, since time.Time) ([]sink.FileRow, error) {
	query := fileRowsSQL
	if s.version != 0 && s.version < copiesSince {
		query = fileRowsOlderSQL
	}
	filter, args := "", []any(nil)
	if len(formIDs) > 0 {
		ids, err := json.Marshal(formIDs)
		if err != nil {
			return nil, fmt.Errorf("sqlite: encoding form ids: %w", err)
		}
		filter, args = ` AND s.form_id IN (SELECT value FROM json_each(?))`, []any{string(ids)}
	}
	if !since.IsZero() {
		filter += ` AND s.created_at >= ?`
		args = append(args, since.UTC().Format(sink.TimeLayout))
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(query, filter), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: reading rows with files: %w", err)
	}
	defer rows.Close()
	var out []sink.FileRow
	for rows.Next() {
		var (
			r                                  sink.FileRow
			created                            string
			url, digest, uri, ctype, why, stAt sql.NullString
			recAt                              sql.NullString
			size                               sql.NullInt64
		)
		if err := rows.Scan(&r.FormID, &r.SubmissionKey, &created, &r.Deleted, &r.Files,
			&url, &digest, &uri, &size, &ctype, &stAt, &why, &recAt); err != nil {
			return nil, fmt.Errorf("sqlite: reading rows with files: %w", err)
		}
		// A row with several copies comes on as many lines, one after the
		// other.
		if n := len(out); n == 0 || out[n-1].FormID != r.FormID || out[n-1].SubmissionKey != r.SubmissionKey {
			if r.CreatedAt, err = time.Parse(sink.TimeLayout, created); err != nil {
				return nil, fmt.Errorf("sqlite: reading rows with files: form %s submission %s: created_at: %w", r.FormID, r.SubmissionKey, err)
			}
			out = append(out, r)
		}
		if !url.Valid {
			continue
		}
		c := sink.FileCopy{FormID: r.FormID, SubmissionKey: r.SubmissionKey, URL: url.String,
			SHA256: digest.String, ObjectURI: uri.String, Size: size.Int64, ContentType: ctype.String, Reason: why.String}
		if c.StoredAt, err = parseTime(stAt); err != nil {
			return nil, fmt.Errorf("sqlite: reading the copies of form %s submission %s: stored_at: %w", r.FormID, r.SubmissionKey, err)
		}
		if c.RecordedAt, err = parseTime(recAt); err != nil {
			return nil, fmt.Errorf("sqlite: reading the copies of form %s submission %s: recorded_at: %w", r.FormID, r.SubmissionKey, err)
		}
		last := &out[len(out)-1]
		last.Copies = append(last.Copies, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: reading rows with files: %w", err)
	}
	return out, nil
}

// RecordFiles writes copies in one transaction, each replacing the copy
// of its key; a copy whose row is not stored (forgotten or removed
// meanwhile) is not written. A copy without its RecordedAt is recorded at
// the sink's clock.
func (s *Sink) RecordFiles(ctx context.Context, copies []sink.FileCopy) error {
	if len(copies) == 0 {
		return ctx.Err()
	}
	for _, c := range copies {
		if c.FormID == "" || c.SubmissionKey == "" || c.URL == "" {
			return fmt.Errorf("sqlite: recording files: a copy without its form, submission key or URL: %+v", c)
		}
	}
	now := s.now()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: recording files: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, recordCopySQL)
	if err != nil {
		return fmt.Errorf("sqlite: recording files: %w", err)
	}
	defer stmt.Close()
	for i, c := range copies {
		if i%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if _, err := stmt.ExecContext(context.WithoutCancel(ctx), copyArgs(c, now)...); err != nil {
			return fmt.Errorf("sqlite: recording the copy of %s of form %s submission %s: %w", c.URL, c.FormID, c.SubmissionKey, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: recording files: %w", err)
	}
	return nil
}

// copyArgs are the arguments of recordCopySQL for c, recorded at now when
// it says not when. A zero string or time is NULL, and size is NULL when
// nothing is stored (no digest), as sink.FileCopy says.
func copyArgs(c sink.FileCopy, now time.Time) []any {
	null := func(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
	recorded := c.RecordedAt
	if recorded.IsZero() {
		recorded = now
	}
	return []any{c.FormID, c.SubmissionKey, c.URL, null(c.SHA256), null(c.ObjectURI),
		sql.NullInt64{Int64: c.Size, Valid: c.SHA256 != ""}, null(c.ContentType),
		formatTime(c.StoredAt), null(c.Reason), formatTime(recorded)}
}

// NamedDigests returns which of digests a copy of a stored row names, in
// any form.
func (s *Sink) NamedDigests(ctx context.Context, digests []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(digests) == 0 || (s.version != 0 && s.version < copiesSince) {
		return out, ctx.Err()
	}
	j, err := json.Marshal(digests)
	if err != nil {
		return nil, fmt.Errorf("sqlite: encoding digests: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, namedDigestsSQL, string(j))
	if err != nil {
		return nil, fmt.Errorf("sqlite: looking for named digests: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("sqlite: looking for named digests: %w", err)
		}
		out[d] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: looking for named digests: %w", err)
	}
	return out, nil
}
