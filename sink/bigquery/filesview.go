package bigquery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/formsync/formsync/sink"
)

// filesView is the view with one row per file attached to a submission.
const filesView = "submission_files"

// filesViewDDL is the DDL of the submission_files view, and the
// description it gives the view (ending, as a form view's, with a digest
// of its query, so that Open can tell the view in place is this one).
//
// files arrives in any of the shapes the API decoder accepts: an array of
// file objects ({name, url, ...}), or an object keyed by input name whose
// values are one file object or an array of them. A row has the input
// name (NULL for the array shape), the file's 0-based position within its
// input (or the array), and the file's name, url, size (INT64 when it is
// an integer, NULL otherwise) and type (text when a string or a number,
// NULL otherwise); an element that is not an object
// is not a file and gives no row (its position is skipped). Rows deleted
// upstream are left out.
//
// BigQuery has JSON_KEYS (in preview since 2024-08), but the ZetaSQL
// analyzer formsync checks against lacks it, so an object's keys are read from the
// object's JSON text: every JSON string token, taken whole from left to
// right (a match never starts inside a string), is a key when a colon
// follows it. That lists the keys of nested objects too; only those that
// are keys of files itself (files[k] IS NOT NULL) give rows, once each.
// The filter on created_at over all of time prunes nothing, and lets the
// view be read from a submissions table that requires a partition filter.
func filesViewDDL(project, dataset string) (ddl, description string) {
	// The digest is of the definition wherever it lives: the statement's
	// text is then the same for every dataset but for its references.
	sum := sha256.Sum256([]byte(filesViewQuery("submissions", sink.FilesTable)))
	description = "formsync: one row per file attached to a submission, whatever shape its files arrived in, with where it stands in the files store; rows deleted upstream left out. Definition " + hex.EncodeToString(sum[:12])
	return "CREATE OR REPLACE VIEW " + ref(project, dataset, filesView) +
		"\nOPTIONS(description = " + stringLiteral(description) + ") AS\n" + filesViewQuery(ref(project, dataset, submissionsTable), ref(project, dataset, sink.FilesTable)), description
}

// filesViewQuery is the query of the submission_files view, reading the
// tables submissions and copies (submission_file_copies): each file with
// the copy of its (form_id, submission_key, url) as it stands
// (latestCopies), NULLs when none is recorded (the file is pending).
func filesViewQuery(submissions, copies string) string {
	return `SELECT v.*, c.object_uri, c.sha256, c.size AS stored_size, c.content_type, c.stored_at, c.reason AS not_stored_reason
FROM (
` + filesQuery(submissions) + `) AS v
LEFT JOIN ` + latestCopies(copies, "TRUE") + ` AS c
  ON c.form_id = v.form_id AND c.submission_key = v.submission_key AND c.url = v.url
`
}

// filesQuery is one row per file of the rows of submissions.
func filesQuery(submissions string) string {
	return `SELECT s.form_id, s.submission_key, s.submission_id, i.input, f.position,
  ` + fileMember("name") + ` AS name, ` + fileMember("url") + ` AS url,
  (SELECT SAFE_CAST(v AS INT64) FROM UNNEST([JSON_VALUE(f.file['size'])]) AS v WHERE REGEXP_CONTAINS(v, r'` + integerText + `')) AS size,
  ` + fileMember("type") + ` AS type
FROM ` + submissions + ` AS s,
  UNNEST(CASE JSON_TYPE(s.files)
    WHEN 'array' THEN [STRUCT(CAST(NULL AS STRING) AS input, s.files AS value)]
    WHEN 'object' THEN ARRAY(
      SELECT AS STRUCT k AS input, s.files[k] AS value
      FROM (
        SELECT DISTINCT JSON_VALUE(SUBSTR(t, 1, LENGTH(t) - 1)) AS k
        FROM UNNEST(REGEXP_EXTRACT_ALL(TO_JSON_STRING(s.files), r'"(?:[^"\\]|\\.)*":?')) AS t
        WHERE ENDS_WITH(t, ':')
      )
      WHERE s.files[k] IS NOT NULL)
  END) AS i,
  UNNEST(CASE JSON_TYPE(i.value)
    WHEN 'array' THEN ARRAY(SELECT AS STRUCT e AS file, o AS position FROM UNNEST(JSON_QUERY_ARRAY(i.value)) AS e WITH OFFSET AS o)
    WHEN 'object' THEN [STRUCT(i.value AS file, 0 AS position)]
  END) AS f
WHERE s.deleted_at IS NULL AND JSON_TYPE(f.file) = 'object'
  AND s.created_at ` + allOfTime + `
`
}

// fileMember is a file's member name as text when it is a string or a
// number, NULL otherwise (JSON_VALUE alone reads a boolean as 'true'), as
// docs/types.md says and the SQLite sink reads it.
func fileMember(name string) string {
	m := "f.file['" + name + "']"
	return "IF(JSON_TYPE(" + m + ") IN ('string', 'number'), JSON_VALUE(" + m + "), NULL)"
}

// ensureFilesView makes the submission_files view when it is missing or is
// not the one filesViewDDL makes (its description differs: made by an
// earlier formsync, or replaced by hand). In the steady state it only
// reads the view's metadata. Something else under its name (a table of
// the user's) is refused by checkFilesView.
func (s *Sink) ensureFilesView(ctx context.Context) error {
	ddl, desc := filesViewDDL(s.cfg.Project, s.cfg.Dataset)
	res := "view " + s.cfg.Project + "." + s.cfg.Dataset + "." + filesView
	meta, err := s.viewMeta(ctx, filesView)
	if err != nil {
		return err
	}
	if meta != nil {
		if err := checkFilesView(res, meta); err != nil {
			return err
		}
		if meta.Description == desc {
			return nil
		}
	}
	// CREATE OR REPLACE is idempotent: like seedLock, it is run again on
	// a retry rather than under a job id of its own.
	return s.retry(ctx, func() error {
		_, err := s.query(ddl).Read(ctx)
		return s.scope.classify("creating the view of the submissions' files", res, err)
	})
}
