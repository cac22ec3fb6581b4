package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/formsync/formsync/state/fieldtype"
)

// filesViewBase is the query of the submission_files view of schema
// version 7 (its migration's text: it never changes), the first nine
// columns of the view since: one row per
// file, an object in files, of every row not marked deleted, whatever
// shape files has: an array of files (input NULL, position its place in
// the array), or an object keyed by input name whose values are a file
// (position 0) or an array of files. Its columns and values are those of
// BigQuery's view: name, url and type a file's members of those names
// when they are scalars, size when it is an integer (a number, or text
// in JSON's integer syntax); an element that is not an object has no row.
var filesViewBase = `SELECT e.form_id, e.submission_key, e.submission_id, e.input, e.position,
	` + fileMember("name") + ` AS name,
	` + fileMember("url") + ` AS url,
	` + castSQL(fieldtype.Integer, "json_type(e.file, '$.size')", "json_extract(e.file, '$.size')") + ` AS size,
	` + fileMember("type") + ` AS type
FROM (
	SELECT s.form_id, s.submission_key, s.submission_id, NULL AS input, f.key AS position, f.type AS kind, f.value AS file
	FROM submissions AS s, json_each(s.files) AS f
	WHERE s.deleted_at IS NULL AND substr(s.files, 1, 1) = '['
	UNION ALL
	SELECT s.form_id, s.submission_key, s.submission_id, i.key, 0, i.type, i.value
	FROM submissions AS s, json_each(s.files) AS i
	WHERE s.deleted_at IS NULL AND substr(s.files, 1, 1) = '{' AND i.type <> 'array'
	UNION ALL
	SELECT s.form_id, s.submission_key, s.submission_id, i.key, f.key, f.type, f.value
	FROM submissions AS s, json_each(s.files) AS i, json_each(i.value) AS f
	WHERE s.deleted_at IS NULL AND substr(s.files, 1, 1) = '{' AND i.type = 'array'
) AS e
WHERE e.kind = 'object'`

// filesViewQuery is the query of the submission_files view: the columns
// of filesViewBase, then where the file stands in the user's files store,
// from its copy in submission_file_copies (the file's row's, for its url):
// object_uri, sha256, stored_size (the bytes stored), content_type,
// stored_at (text in sink.TimeLayout, as every time the file holds) and
// not_stored_reason; all NULL while no copy is recorded (the file is
// pending). Its columns and values are BigQuery's view's.
var filesViewQuery = `SELECT v.form_id, v.submission_key, v.submission_id, v.input, v.position, v.name, v.url, v.size, v.type,
	c.object_uri, c.sha256, c.size AS stored_size, c.content_type, c.stored_at, c.reason AS not_stored_reason
FROM (` + filesViewBase + `) AS v
LEFT JOIN submission_file_copies AS c
	ON c.form_id = v.form_id AND c.submission_key = v.submission_key AND c.url = v.url`

// filesViewSince is the schema version whose submission_files view is
// filesViewQuery.
const filesViewSince = 8

// filesViewCopies makes submission_files the view of filesViewQuery, in
// the place of the view of filesViewBase (schema version 7) or where none
// is. Something else holding its name (a table or view of the user's,
// which version 7 left alone) is left alone.
func filesViewCopies(ctx context.Context, tx *sql.Tx) error {
	var kind, stored sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT type, sql FROM sqlite_schema
		WHERE name = 'submission_files' COLLATE NOCASE AND type IN ('table', 'view', 'index')`).Scan(&kind, &stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("looking for view submission_files: %w", err)
	case kind.String != "view" || !strings.HasSuffix(stored.String, filesViewBase):
		return nil
	default:
		if _, err := tx.ExecContext(ctx, `DROP VIEW submission_files`); err != nil {
			return fmt.Errorf("dropping view submission_files: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE VIEW submission_files AS `+filesViewQuery); err != nil {
		return fmt.Errorf("creating view submission_files: %w", err)
	}
	return nil
}

// fileMember is a file's member name as text when it is a string or a
// number, NULL otherwise, as BigQuery's JSON_VALUE reads it.
func fileMember(name string) string {
	path := "'$." + name + "'"
	return "CASE WHEN json_type(e.file, " + path + ") IN ('text', 'integer', 'real') THEN CAST(json_extract(e.file, " + path + ") AS TEXT) END"
}
