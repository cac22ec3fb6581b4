package bigquery

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state/fieldtype"
)

// Every SQL statement the sink sends is rendered here, from the templates
// below. Only validated identifiers (project, dataset, table names checked
// at Open, view and column names sanitised by sqlname.ViewName and
// sqlname.ColumnNames) are spliced into the text; every value travels as a
// query parameter, except in views, which cannot take parameters: there the
// form id and the field names enter as escaped string literals
// (stringLiteral). The golden files in testdata/ hold what each template
// renders to, and the BigQuery fake (bqfake) recognises exactly these
// shapes.

// tables names the fully qualified tables a statement refers to.
type tables struct {
	Submissions, State, Staging, Lock, Tombstones string
}

func ref(project, dataset, table string) string {
	return "`" + project + "." + dataset + "." + table + "`"
}

// stateRead is what readState reads from: WithoutCopies for a sync_state
// table a sync of this formsync has not migrated yet, read by a read-only
// Sink (OpenReadOnly), whose copies, max_submission_id and field_types
// read as NULL.
type stateRead struct {
	tables
	WithoutCopies bool
}

// script says which parts a commit's transaction has: Rows, the plan and
// the submissions MERGE of a loaded staging table; Deletions, the forget
// DELETE and the reconcile UPDATE (rendered only for commits that forget
// or reconcile, so that a plain sync runs the statements it always ran);
// TombstonesChanged, the MERGE of the tombstones that changed into
// sync_tombstones (rendered only for commits that change any).
type script struct {
	tables
	Rows, Deletions, TombstonesChanged bool
}

// removal says what a removal's transaction removes: with Rows, the
// form's rows too.
type removal struct {
	tables
	Rows bool
}

// allOfTime is the constant created_at range of a statement that reads
// every row of its forms, wherever it lies: it prunes no partition, but
// it is a filter on the partitioning column, so the statement runs on a
// table that requires one (bqMinTime..bqMaxTime).
const allOfTime = "BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'"

var sqlTemplates = template.Must(template.New("sql").Parse(`
{{define "readState"}}
SELECT form_id, wm_created_at, wm_id, TO_JSON_STRING(boundary) AS boundary, sort_order, last_total,
  row_count, TO_JSON_STRING(field_names) AS field_names, last_success_at, last_error_at, last_error,
  TO_JSON_STRING(backfill) AS backfill, COALESCE(revision, 0) AS revision,
  COALESCE(deleted_count, 0) AS deleted_count, last_reconcile_at, COALESCE(field_policy, '') AS field_policy,
  TO_JSON_STRING(forgotten) AS forgotten,
  {{if .WithoutCopies}}CAST(NULL AS STRING){{else}}TO_JSON_STRING(copies){{end}} AS copies,
  {{if .WithoutCopies}}CAST(NULL AS INT64){{else}}max_submission_id{{end}} AS max_submission_id,
  {{if .WithoutCopies}}CAST(NULL AS STRING){{else}}TO_JSON_STRING(field_types){{end}} AS field_types
FROM {{.State}}
WHERE COALESCE(ARRAY_LENGTH(@form_ids), 0) = 0 OR form_id IN UNNEST(@form_ids)
{{end}}

{{define "readCommits"}}
SELECT form_id, TO_JSON_STRING(last_commit) AS last_commit
FROM {{.State}}
WHERE form_id IN UNNEST(@form_ids)
{{end}}

{{define "viewForms"}}
SELECT form_id, TO_JSON_STRING(field_names) AS field_names
FROM {{.State}}
{{end}}

{{define "rowColumns"}}
SELECT submission_id, submission_key, created_at, is_spam,
  COALESCE(fields_text, TO_JSON_STRING(fields)) AS fields,
  COALESCE(files_text, TO_JSON_STRING(files)) AS files, raw, deleted_at
FROM {{.Submissions}}
{{- end}}

{{define "anyTime"}}created_at ` + allOfTime + `{{end}}

{{define "readRows"}}
{{- template "rowColumns" .}}
WHERE form_id = @form_id AND {{template "anyTime"}}
ORDER BY created_at, submission_key
{{end}}

{{define "find"}}
{{- template "rowColumns" .}}
WHERE form_id = @form_id AND {{template "anyTime"}}
  AND submission_key IN UNNEST(@keys)
ORDER BY created_at, submission_key
{{end}}

{{define "findField"}}
SELECT submission_key, TO_HEX(SHA256(JSON_VALUE(fields[@field]))) AS value_sha256
FROM {{.Submissions}}
WHERE form_id = @form_id AND {{template "anyTime"}}
  AND JSON_TYPE(fields[@field]) = 'string'
{{end}}

{{define "countRows"}}
SELECT COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM {{.Submissions}}
WHERE form_id = @form_id AND {{template "anyTime"}}
{{end}}

{{define "recount"}}
BEGIN TRANSACTION;
{{template "lock" .}}

CREATE TEMP TABLE _formsync_recount AS
SELECT form_id, COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM {{.Submissions}}
WHERE form_id IN UNNEST(@form_ids) AND {{template "anyTime"}}
GROUP BY form_id;

UPDATE {{.State}} AS t
SET row_count = COALESCE((SELECT c.live FROM _formsync_recount AS c WHERE c.form_id = t.form_id), 0),
  deleted_count = COALESCE((SELECT c.deleted FROM _formsync_recount AS c WHERE c.form_id = t.form_id), 0)
WHERE form_id IN UNNEST(@form_ids);

COMMIT TRANSACTION;
{{end}}

{{define "remove"}}
BEGIN TRANSACTION;
{{template "lock" .}}
SELECT IF(COALESCE((SELECT COALESCE(revision, 0) FROM {{.State}} WHERE form_id = @form_id), 0) != @revision,
  ERROR('formsync_state_conflict: the sync state of a form changed since it was read'), TRUE) AS revision_held;
{{- if .Rows}}

DELETE FROM {{.Submissions}}
WHERE form_id = @form_id AND {{template "anyTime"}};
{{- end}}

DELETE FROM {{.State}}
WHERE form_id = @form_id AND forgotten IS NULL;

UPDATE {{.State}}
SET wm_created_at = NULL, wm_id = 0, boundary = NULL, sort_order = '', last_total = -1,
  last_success_at = NULL, last_error_at = NULL, last_error = '', backfill = NULL, last_reconcile_at = NULL,
  copies = NULL, last_commit = NULL, updated_at = @synced_at, revision = COALESCE(revision, 0) + 1
{{- if .Rows}},
  row_count = 0, deleted_count = 0, field_names = NULL, field_types = NULL, field_policy = '', max_submission_id = NULL
{{- end}}
WHERE form_id = @form_id;

COMMIT TRANSACTION;
{{end}}

{{define "readTombstones"}}
SELECT form_id, tombstone, pending
FROM {{.Tombstones}}
WHERE form_id IN UNNEST(@form_ids)
{{end}}

{{define "writeTombstones"}}MERGE {{.Tombstones}} AS t
USING (SELECT * FROM UNNEST(@tombstones)) AS s
ON t.form_id = s.form_id AND t.tombstone = s.tombstone
WHEN MATCHED AND s.removed THEN DELETE
WHEN MATCHED THEN UPDATE SET pending = s.pending
WHEN NOT MATCHED AND NOT s.removed THEN
  INSERT (form_id, tombstone, pending, forgotten_at) VALUES (s.form_id, s.tombstone, s.pending, @synced_at);
{{- end}}

{{define "moveTombstones"}}
BEGIN TRANSACTION;
{{template "lock" .}}

INSERT INTO {{.Tombstones}} (form_id, tombstone, pending, forgotten_at)
SELECT s.form_id, k, k IN UNNEST(JSON_VALUE_ARRAY(s.forgotten, '$.pending')), @synced_at
FROM {{.State}} AS s, UNNEST(JSON_VALUE_ARRAY(s.forgotten, '$.keys')) AS k
WHERE NOT EXISTS (SELECT 1 FROM {{.Tombstones}} AS t WHERE t.form_id = s.form_id AND t.tombstone = k);

UPDATE {{.State}} SET
  forgotten = TO_JSON(STRUCT(JSON_VALUE(forgotten, '$.salt') AS salt, ARRAY<STRING>[] AS keys,
    CAST(JSON_VALUE(forgotten, '$.count') AS INT64) AS count)),
  revision = COALESCE(revision, 0) + 1, updated_at = @synced_at
WHERE ARRAY_LENGTH(JSON_VALUE_ARRAY(forgotten, '$.keys')) > 0;

COMMIT TRANSACTION;
{{end}}

{{define "seedLock"}}
INSERT INTO {{.Lock}} (commit_id, locked_at)
SELECT '', CURRENT_TIMESTAMP() FROM UNNEST([1])
WHERE NOT EXISTS (SELECT 1 FROM {{.Lock}})
{{end}}

{{define "lock"}}
UPDATE {{.Lock}} SET commit_id = @commit_id, locked_at = @synced_at WHERE TRUE;
{{- end}}

{{define "scrubStaging"}}
DELETE FROM {{.Staging}} AS s
WHERE EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = s.form_id AND f.submission_key = s.submission_key)
{{end}}

{{define "stateColumns"}}form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names, last_success_at, last_error_at, last_error, backfill, updated_at, revision, deleted_count, last_reconcile_at, field_policy, forgotten, copies, last_commit, max_submission_id, field_types{{end}}

{{define "stateUpdate"}}
  wm_created_at = NULLIF(s.wm_created_at, TIMESTAMP '0001-01-01 00:00:00+00'), wm_id = s.wm_id,
  boundary = PARSE_JSON(s.boundary), sort_order = s.sort_order, last_total = s.last_total,
  row_count = t.row_count + s.added_rows, deleted_count = COALESCE(t.deleted_count, 0) + s.added_deleted,
  field_names = PARSE_JSON(s.field_names),
  last_success_at = NULLIF(s.last_success_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  last_error_at = NULLIF(s.last_error_at, TIMESTAMP '0001-01-01 00:00:00+00'), last_error = s.last_error,
  backfill = PARSE_JSON(NULLIF(s.backfill, '')), updated_at = @synced_at, revision = s.revision + 1,
  last_reconcile_at = NULLIF(s.last_reconcile_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  field_policy = s.field_policy, forgotten = PARSE_JSON(NULLIF(s.forgotten, '')),
  copies = PARSE_JSON(NULLIF(s.copies, '')), last_commit = s.last_commit,
  max_submission_id = IF(s.max_id IS NULL, t.max_submission_id, GREATEST(COALESCE(t.max_submission_id, 0), s.max_id)),
  field_types = PARSE_JSON(NULLIF(s.field_types, ''))
{{- end}}

{{define "stateValues"}}
  s.form_id, NULLIF(s.wm_created_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.wm_id, PARSE_JSON(s.boundary),
  s.sort_order, s.last_total, s.added_rows, PARSE_JSON(s.field_names),
  NULLIF(s.last_success_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  NULLIF(s.last_error_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.last_error,
  PARSE_JSON(NULLIF(s.backfill, '')), @synced_at, s.revision + 1, s.added_deleted,
  NULLIF(s.last_reconcile_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.field_policy,
  PARSE_JSON(NULLIF(s.forgotten, '')), PARSE_JSON(NULLIF(s.copies, '')), s.last_commit, s.max_id,
  PARSE_JSON(NULLIF(s.field_types, ''))
{{- end}}

{{define "mergeState"}}
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET{{template "stateUpdate"}}
WHEN NOT MATCHED THEN INSERT ({{template "stateColumns"}})
VALUES ({{template "stateValues"}}
);
{{- end}}

{{define "assertRevisions"}}
SELECT IF(EXISTS (
  SELECT 1
  FROM UNNEST(@states) AS st
  LEFT JOIN {{.State}} AS t ON t.form_id = st.form_id
  WHERE COALESCE(t.revision, 0) != st.revision
), ERROR('formsync_state_conflict: the sync state of a form changed since it was read'), TRUE) AS revisions_held;
{{- end}}

{{define "rewritten"}}
  fields = SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), fields_text = IF(p.fields_inexact, p.fields, NULL),
  files = SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), files_text = IF(p.files_inexact, p.files, NULL),
  synced_at = @synced_at, deleted_at = NULL
{{- end}}

{{define "writeState"}}
BEGIN TRANSACTION;
{{template "lock" .}}
{{template "assertRevisions" .}}
{{- if .TombstonesChanged}}

{{template "writeTombstones" .}}
{{- end}}

MERGE {{.State}} AS t
USING (
  SELECT *, 0 AS added_rows, 0 AS added_deleted, CAST(NULL AS INT64) AS max_id,
    TO_JSON(STRUCT(@commit_id AS id, 0 AS inserted, 0 AS updated, 0 AS restored, 0 AS deleted, 0 AS forgotten)) AS last_commit
  FROM UNNEST(@states)
) AS s{{template "mergeState"}}

COMMIT TRANSACTION;
{{end}}

{{define "forgotten"}}created_at BETWEEN @forget_from AND @forget_to AND EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = t.form_id AND f.submission_key = t.submission_key){{end}}

{{define "unserved"}}form_id IN UNNEST(@reconcile_forms) AND created_at BETWEEN @reconcile_from AND @reconcile_to AND deleted_at IS NULL
{{- if .Rows}}
  AND NOT EXISTS (SELECT 1 FROM _formsync_plan AS p WHERE p.form_id = t.form_id AND p.submission_key = t.submission_key)
{{- end}}
{{- end}}

{{define "planCounts"}}(
  SELECT form_id, COUNTIF(action = 'insert') AS inserted, SUM(updates) AS updated, COUNTIF(restores) AS restored,
    0 AS deleted, 0 AS forgotten,
    COUNTIF(action = 'insert') + COUNTIF(restores) - COUNTIF(twin_removed AND NOT legacy_deleted) AS live_delta,
    -COUNTIF(restores) - COUNTIF(twin_removed AND legacy_deleted) AS deleted_delta
  FROM _formsync_plan
  GROUP BY form_id
){{end}}

{{define "rowRange"}}(t.created_at BETWEEN @created_from AND @created_to OR t.created_at < @outside_before OR t.created_at > @outside_after){{end}}

{{define "counts"}}{{if .Deletions}}_formsync_counts{{else}}{{template "planCounts"}}{{end}}{{end}}

{{define "commit"}}
BEGIN TRANSACTION;
{{template "lock" .}}
{{template "assertRevisions" .}}
{{- if .TombstonesChanged}}

{{template "writeTombstones" .}}
{{- end}}
{{- if .Deletions}}

CREATE TEMP TABLE _formsync_forgotten AS
SELECT form_id, COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM {{.Submissions}} AS t
WHERE form_id IN UNNEST(@form_ids) AND {{template "forgotten"}}
GROUP BY form_id;

DELETE FROM {{.Submissions}} AS t
WHERE form_id IN UNNEST(@form_ids) AND {{template "forgotten"}};
{{- end}}
{{- if .Rows}}

CREATE TEMP TABLE _formsync_plan AS
WITH staged AS (
  SELECT form_id, submission_id, submission_key, content_key, created_at, is_spam, fields, files,
    NULLIF(raw, '') AS raw, seq,
    COALESCE(TO_JSON_STRING(SAFE.PARSE_JSON(fields, wide_number_mode => 'exact')), fields) AS fields_cmp,
    COALESCE(TO_JSON_STRING(SAFE.PARSE_JSON(files, wide_number_mode => 'exact')), files) AS files_cmp,
    SAFE.PARSE_JSON(fields, wide_number_mode => 'exact') IS NULL AS fields_inexact,
    SAFE.PARSE_JSON(files, wide_number_mode => 'exact') IS NULL AS files_inexact
  FROM {{.Staging}}
),
versions AS (
  SELECT *,
    COALESCE(LAG(seq) OVER w IS NOT NULL AND (is_spam != LAG(is_spam) OVER w OR fields_cmp != LAG(fields_cmp) OVER w
      OR files_cmp != LAG(files_cmp) OVER w
      OR TIMESTAMP_TRUNC(created_at, MILLISECOND) != TIMESTAMP_TRUNC(LAG(created_at) OVER w, MILLISECOND)
      OR (raw IS NOT NULL AND raw IS DISTINCT FROM LAG(raw) OVER w)), FALSE) AS changed
  FROM staged
  WINDOW w AS (PARTITION BY form_id, submission_key ORDER BY seq)
),
batch AS (
  SELECT *,
    COUNTIF(changed) OVER k AS inner_changes,
    FIRST_VALUE(is_spam) OVER k AS first_spam, FIRST_VALUE(fields_cmp) OVER k AS first_fields,
    FIRST_VALUE(files_cmp) OVER k AS first_files, FIRST_VALUE(created_at) OVER k AS first_created,
    FIRST_VALUE(raw) OVER k AS first_raw, FIRST_VALUE(content_key) OVER k AS first_content_key,
    FIRST_VALUE(seq) OVER k AS first_seq
  FROM versions
  WHERE TRUE
  QUALIFY ROW_NUMBER() OVER (PARTITION BY form_id, submission_key ORDER BY seq DESC) = 1
  WINDOW k AS (PARTITION BY form_id, submission_key ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
),
stored AS (
  SELECT form_id, submission_id, submission_key, created_at, is_spam,
    COALESCE(fields_text, TO_JSON_STRING(fields)) AS fields,
    COALESCE(files_text, TO_JSON_STRING(files)) AS files, raw, deleted_at
  FROM {{.Submissions}}
  WHERE created_at BETWEEN @created_from AND @created_to AND form_id IN UNNEST(@form_ids)
),
claimed AS (
  SELECT *,
    IF(submission_id IS NOT NULL AND first_content_key != content_key AND EXISTS (
      SELECT 1 FROM stored AS l
      WHERE l.form_id = b.form_id AND l.submission_id IS NULL AND l.submission_key = b.first_content_key),
      first_content_key, content_key) AS claim_key
  FROM batch AS b
),
flagged AS (
  SELECT *,
    COALESCE(submission_id IS NULL AND seq < MAX(IF(submission_id IS NULL, NULL, seq)) OVER c, FALSE) AS superseded
  FROM claimed
  WINDOW c AS (PARTITION BY form_id, content_key)
),
ranked AS (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY form_id, claim_key
      ORDER BY submission_id IS NULL AND NOT superseded DESC, submission_id IS NULL, first_seq) AS content_rank,
    MAX(IF(superseded, created_at, NULL)) OVER (PARTITION BY form_id, content_key) AS absorbed_created
  FROM flagged
),
elsewhere AS (
  SELECT form_id, submission_key, deleted_at
  FROM {{.Submissions}}
  WHERE form_id IN UNNEST(@outside_forms) AND (created_at < @outside_before OR created_at > @outside_after)
),
joined AS (
  SELECT s.*, COALESCE(k.submission_key, e.submission_key) AS stored_key, l.submission_key AS legacy_key,
    e.submission_key IS NOT NULL OR k.submission_key IS NOT NULL AND (k.is_spam != s.first_spam OR k.fields != s.first_fields
      OR k.files != s.first_files
      OR TIMESTAMP_TRUNC(k.created_at, MILLISECOND) != TIMESTAMP_TRUNC(s.first_created, MILLISECOND)
      OR (s.first_raw IS NOT NULL AND (k.raw IS NULL OR k.raw != s.first_raw))
      OR (s.submission_id IS NOT NULL AND (k.submission_id IS NULL OR k.submission_id != s.submission_id))) AS first_differs,
    COALESCE(k.deleted_at, e.deleted_at) IS NOT NULL AS stored_deleted,
    l.deleted_at IS NOT NULL AS legacy_deleted,
    s.claim_key != s.first_content_key AS later_twin
  FROM ranked AS s
  LEFT JOIN stored AS k ON k.form_id = s.form_id AND k.submission_key = s.submission_key
  LEFT JOIN elsewhere AS e ON e.form_id = s.form_id AND e.submission_key = s.submission_key
  LEFT JOIN stored AS l ON s.submission_id IS NOT NULL AND s.content_rank = 1
    AND s.claim_key != s.submission_key AND l.form_id = s.form_id AND l.submission_id IS NULL
    AND l.submission_key = s.claim_key
)
SELECT form_id, submission_id, submission_key,
  IF(submission_id IS NOT NULL AND content_rank = 1 AND stored_key IS NULL AND legacy_key IS NULL AND absorbed_created IS NOT NULL,
    absorbed_created, created_at) AS created_at,
  is_spam, fields, files, raw, fields_inexact, files_inexact,
  CASE
    WHEN superseded THEN 'none'
    WHEN stored_key IS NULL AND legacy_key IS NOT NULL AND NOT later_twin THEN 'rekey'
    WHEN stored_key IS NULL THEN 'insert'
    WHEN first_differs OR inner_changes > 0 THEN 'update'
    WHEN stored_deleted THEN 'restore'
    ELSE 'none'
  END AS action,
  IF(superseded, IF(stored_key IS NULL OR first_differs, 1, 0),
    IF(stored_key IS NULL AND legacy_key IS NOT NULL AND NOT later_twin OR first_differs, 1, 0)) + inner_changes AS updates,
  NOT superseded AND IF(stored_key IS NULL, legacy_key IS NOT NULL AND legacy_deleted AND NOT later_twin, stored_deleted) AS restores,
  legacy_key IS NOT NULL AND (stored_key IS NOT NULL OR later_twin) AS twin_removed,
  legacy_key, legacy_deleted
FROM joined;

MERGE {{.Submissions}} AS t
USING (
  SELECT *, submission_key AS match_key, FALSE AS twin FROM _formsync_plan WHERE action != 'none'
  UNION ALL
  SELECT *, legacy_key AS match_key, TRUE AS twin FROM _formsync_plan WHERE legacy_key IS NOT NULL
) AS p
ON t.form_id = p.form_id AND t.submission_key = p.match_key AND {{template "rowRange"}}
WHEN MATCHED AND p.twin AND p.action = 'rekey' AND p.raw IS NOT NULL THEN UPDATE SET
  submission_id = p.submission_id, submission_key = p.submission_key, is_spam = p.is_spam, raw = p.raw,{{template "rewritten"}}
WHEN MATCHED AND p.twin AND p.action = 'rekey' THEN UPDATE SET
  submission_id = p.submission_id, submission_key = p.submission_key, is_spam = p.is_spam,{{template "rewritten"}}
WHEN MATCHED AND p.twin THEN DELETE
WHEN MATCHED AND p.action = 'update' AND p.raw IS NOT NULL THEN UPDATE SET
  submission_id = COALESCE(p.submission_id, t.submission_id),
  created_at = IF(TIMESTAMP_TRUNC(t.created_at, MILLISECOND) = TIMESTAMP_TRUNC(p.created_at, MILLISECOND), t.created_at, p.created_at),
  is_spam = p.is_spam, raw = p.raw,{{template "rewritten"}}
WHEN MATCHED AND p.action = 'update' THEN UPDATE SET
  submission_id = COALESCE(p.submission_id, t.submission_id),
  created_at = IF(TIMESTAMP_TRUNC(t.created_at, MILLISECOND) = TIMESTAMP_TRUNC(p.created_at, MILLISECOND), t.created_at, p.created_at),
  is_spam = p.is_spam,{{template "rewritten"}}
WHEN MATCHED AND p.action = 'restore' THEN UPDATE SET
  synced_at = @synced_at, deleted_at = NULL
WHEN NOT MATCHED BY TARGET AND NOT p.twin AND p.action = 'insert' THEN
  INSERT (form_id, submission_id, submission_key, created_at, is_spam, fields, fields_text, files, files_text, raw, synced_at)
  VALUES (p.form_id, p.submission_id, p.submission_key, p.created_at, p.is_spam,
    SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), IF(p.fields_inexact, p.fields, NULL),
    SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), IF(p.files_inexact, p.files, NULL),
    p.raw, @synced_at);
{{- end}}
{{- if .Deletions}}

CREATE TEMP TABLE _formsync_reconciled AS
SELECT form_id, COUNT(*) AS deleted
FROM {{.Submissions}} AS t
WHERE {{template "unserved" .}}
GROUP BY form_id;

UPDATE {{.Submissions}} AS t SET deleted_at = @synced_at
WHERE {{template "unserved" .}};

CREATE TEMP TABLE _formsync_counts AS
SELECT form_id, SUM(inserted) AS inserted, SUM(updated) AS updated, SUM(restored) AS restored, SUM(deleted) AS deleted,
  SUM(forgotten) AS forgotten, SUM(live_delta) AS live_delta, SUM(deleted_delta) AS deleted_delta
FROM (
{{- if .Rows}}
  SELECT * FROM {{template "planCounts"}}
  UNION ALL
{{- end}}
  SELECT form_id, 0 AS inserted, 0 AS updated, 0 AS restored, 0 AS deleted, live + deleted AS forgotten,
    -live AS live_delta, -deleted AS deleted_delta
  FROM _formsync_forgotten
  UNION ALL
  SELECT form_id, 0, 0, 0, deleted, 0, -deleted, deleted
  FROM _formsync_reconciled
)
GROUP BY form_id;
{{- end}}

MERGE {{.State}} AS t
USING (
  SELECT st.*, COALESCE(c.live_delta, 0) AS added_rows, COALESCE(c.deleted_delta, 0) AS added_deleted,
    {{if .Rows}}IF(st.form_id IN UNNEST(@bound_forms), COALESCE(k.max_id, 0), NULL){{else}}CAST(NULL AS INT64){{end}} AS max_id,
    TO_JSON(STRUCT(@commit_id AS id, COALESCE(c.inserted, 0) AS inserted, COALESCE(c.updated, 0) AS updated,
      COALESCE(c.restored, 0) AS restored, COALESCE(c.deleted, 0) AS deleted, COALESCE(c.forgotten, 0) AS forgotten)) AS last_commit
  FROM UNNEST(@states) AS st
  LEFT JOIN {{template "counts" .}} AS c ON c.form_id = st.form_id
{{- if .Rows}}
  LEFT JOIN (
    SELECT form_id, MAX(submission_id) AS max_id
    FROM {{.Submissions}} AS t
    WHERE form_id IN UNNEST(@form_ids) AND {{template "rowRange"}}
    GROUP BY form_id
  ) AS k ON k.form_id = st.form_id
{{- end}}
) AS s{{template "mergeState"}}

COMMIT TRANSACTION;

SELECT form_id, inserted, updated, restored, deleted, forgotten
FROM {{template "counts" .}};
{{end}}
`))

func render(name string, data any) string {
	var b strings.Builder
	if err := sqlTemplates.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("bigquery: rendering %s: %v", name, err)) // the templates are fixed
	}
	return strings.TrimSpace(b.String()) + "\n"
}

// viewDDL is the DDL of one form's view, and the description it gives the
// view. The view has a column per field name, of the type types gives it
// (viewColumnExpr), read with the JSON subscript operator so that no
// character of a field name is ever parsed as JSON path syntax. The
// description ends with a digest of the view's query, so that a commit can
// tell from the view's metadata alone whether the view in place is the one
// the stored field names and types call for (see Sink.viewInPlace): a
// column that widens changes the digest, and the view is replaced.
func viewDDL(project, dataset, formID string, fieldNames []string, types fieldtype.Columns) (ddl, description string) {
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(strings.Join(sqlname.ViewFixedColumns(), ", "))
	viewColumns(&b, fieldNames, types)
	b.WriteString("\nFROM ")
	b.WriteString(ref(project, dataset, submissionsTable))
	b.WriteString("\nWHERE form_id = ")
	b.WriteString(stringLiteral(formID))
	b.WriteString(" AND deleted_at IS NULL\n")
	query := b.String()
	sum := sha256.Sum256([]byte(query))
	description = "formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition " + hex.EncodeToString(sum[:12])
	return "CREATE OR REPLACE VIEW " + ref(project, dataset, sqlname.ViewName(formID)) +
		"\nOPTIONS(description = " + stringLiteral(description) + ") AS\n" + query, description
}

// stringLiteral makes a GoogleSQL string literal of s that holds only
// printable ASCII: quotes and backslashes are escaped, everything else
// outside printable ASCII is written as \u or \U escapes. A byte that is not
// UTF-8 becomes U+FFFD, as encoding/json does when the same id travels in
// the staged NDJSON, so the literal equals the stored value.
func stringLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
