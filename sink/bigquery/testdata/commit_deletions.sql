BEGIN TRANSACTION;

UPDATE `my-project.formsync.sync_lock` SET commit_id = @commit_id, locked_at = @synced_at WHERE TRUE;

SELECT IF(EXISTS (
  SELECT 1
  FROM UNNEST(@states) AS st
  LEFT JOIN `my-project.formsync.sync_state` AS t ON t.form_id = st.form_id
  WHERE COALESCE(t.revision, 0) != st.revision
), ERROR('formsync_state_conflict: the sync state of a form changed since it was read'), TRUE) AS revisions_held;

CREATE TEMP TABLE _formsync_forgotten AS
SELECT form_id, COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM `my-project.formsync.submissions` AS t
WHERE form_id IN UNNEST(@form_ids) AND created_at BETWEEN @forget_from AND @forget_to AND EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = t.form_id AND f.submission_key = t.submission_key)
GROUP BY form_id;

DELETE FROM `my-project.formsync.submissions` AS t
WHERE form_id IN UNNEST(@form_ids) AND created_at BETWEEN @forget_from AND @forget_to AND EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = t.form_id AND f.submission_key = t.submission_key);

DELETE FROM `my-project.formsync.submission_file_copies` AS c
WHERE EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = c.form_id AND f.submission_key = c.submission_key);

CREATE TEMP TABLE _formsync_plan AS
WITH staged AS (
  SELECT form_id, submission_id, submission_key, content_key, created_at, is_spam, fields, files,
    NULLIF(raw, '') AS raw, seq,
    COALESCE(TO_JSON_STRING(SAFE.PARSE_JSON(fields, wide_number_mode => 'exact')), fields) AS fields_cmp,
    COALESCE(TO_JSON_STRING(SAFE.PARSE_JSON(files, wide_number_mode => 'exact')), files) AS files_cmp,
    SAFE.PARSE_JSON(fields, wide_number_mode => 'exact') IS NULL AS fields_inexact,
    SAFE.PARSE_JSON(files, wide_number_mode => 'exact') IS NULL AS files_inexact
  FROM `my-project.formsync_staging._formsync_staging_formsync_0123456789abcdef01234567`
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
  FROM `my-project.formsync.submissions`
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
  FROM `my-project.formsync.submissions`
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

MERGE `my-project.formsync.submissions` AS t
USING (
  SELECT *, submission_key AS match_key, FALSE AS twin FROM _formsync_plan WHERE action != 'none'
  UNION ALL
  SELECT *, legacy_key AS match_key, TRUE AS twin FROM _formsync_plan WHERE legacy_key IS NOT NULL
) AS p
ON t.form_id = p.form_id AND t.submission_key = p.match_key AND (t.created_at BETWEEN @created_from AND @created_to OR t.created_at < @outside_before OR t.created_at > @outside_after)
WHEN MATCHED AND p.twin AND p.action = 'rekey' AND p.raw IS NOT NULL THEN UPDATE SET
  submission_id = p.submission_id, submission_key = p.submission_key, is_spam = p.is_spam, raw = p.raw,
  fields = SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), fields_text = IF(p.fields_inexact, p.fields, NULL),
  files = SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), files_text = IF(p.files_inexact, p.files, NULL),
  synced_at = @synced_at, deleted_at = NULL
WHEN MATCHED AND p.twin AND p.action = 'rekey' THEN UPDATE SET
  submission_id = p.submission_id, submission_key = p.submission_key, is_spam = p.is_spam,
  fields = SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), fields_text = IF(p.fields_inexact, p.fields, NULL),
  files = SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), files_text = IF(p.files_inexact, p.files, NULL),
  synced_at = @synced_at, deleted_at = NULL
WHEN MATCHED AND p.twin THEN DELETE
WHEN MATCHED AND p.action = 'update' AND p.raw IS NOT NULL THEN UPDATE SET
  submission_id = COALESCE(p.submission_id, t.submission_id),
  created_at = IF(TIMESTAMP_TRUNC(t.created_at, MILLISECOND) = TIMESTAMP_TRUNC(p.created_at, MILLISECOND), t.created_at, p.created_at),
  is_spam = p.is_spam, raw = p.raw,
  fields = SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), fields_text = IF(p.fields_inexact, p.fields, NULL),
  files = SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), files_text = IF(p.files_inexact, p.files, NULL),
  synced_at = @synced_at, deleted_at = NULL
WHEN MATCHED AND p.action = 'update' THEN UPDATE SET
  submission_id = COALESCE(p.submission_id, t.submission_id),
  created_at = IF(TIMESTAMP_TRUNC(t.created_at, MILLISECOND) = TIMESTAMP_TRUNC(p.created_at, MILLISECOND), t.created_at, p.created_at),
  is_spam = p.is_spam,
  fields = SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), fields_text = IF(p.fields_inexact, p.fields, NULL),
  files = SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), files_text = IF(p.files_inexact, p.files, NULL),
  synced_at = @synced_at, deleted_at = NULL
WHEN MATCHED AND p.action = 'restore' THEN UPDATE SET
  synced_at = @synced_at, deleted_at = NULL
WHEN NOT MATCHED BY TARGET AND NOT p.twin AND p.action = 'insert' THEN
  INSERT (form_id, submission_id, submission_key, created_at, is_spam, fields, fields_text, files, files_text, raw, synced_at)
  VALUES (p.form_id, p.submission_id, p.submission_key, p.created_at, p.is_spam,
    SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), IF(p.fields_inexact, p.fields, NULL),
    SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), IF(p.files_inexact, p.files, NULL),
    p.raw, @synced_at);

CREATE TEMP TABLE _formsync_reconciled AS
SELECT form_id, COUNT(*) AS deleted
FROM `my-project.formsync.submissions` AS t
WHERE form_id IN UNNEST(@reconcile_forms) AND created_at BETWEEN @reconcile_from AND @reconcile_to AND deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM _formsync_plan AS p WHERE p.form_id = t.form_id AND p.submission_key = t.submission_key)
GROUP BY form_id;

UPDATE `my-project.formsync.submissions` AS t SET deleted_at = @synced_at
WHERE form_id IN UNNEST(@reconcile_forms) AND created_at BETWEEN @reconcile_from AND @reconcile_to AND deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM _formsync_plan AS p WHERE p.form_id = t.form_id AND p.submission_key = t.submission_key);

CREATE TEMP TABLE _formsync_counts AS
SELECT form_id, SUM(inserted) AS inserted, SUM(updated) AS updated, SUM(restored) AS restored, SUM(deleted) AS deleted,
  SUM(forgotten) AS forgotten, SUM(live_delta) AS live_delta, SUM(deleted_delta) AS deleted_delta
FROM (
  SELECT * FROM (
  SELECT form_id, COUNTIF(action = 'insert') AS inserted, SUM(updates) AS updated, COUNTIF(restores) AS restored,
    0 AS deleted, 0 AS forgotten,
    COUNTIF(action = 'insert') + COUNTIF(restores) - COUNTIF(twin_removed AND NOT legacy_deleted) AS live_delta,
    -COUNTIF(restores) - COUNTIF(twin_removed AND legacy_deleted) AS deleted_delta
  FROM _formsync_plan
  GROUP BY form_id
)
  UNION ALL
  SELECT form_id, 0 AS inserted, 0 AS updated, 0 AS restored, 0 AS deleted, live + deleted AS forgotten,
    -live AS live_delta, -deleted AS deleted_delta
  FROM _formsync_forgotten
  UNION ALL
  SELECT form_id, 0, 0, 0, deleted, 0, -deleted, deleted
  FROM _formsync_reconciled
)
GROUP BY form_id;

MERGE `my-project.formsync.sync_state` AS t
USING (
  SELECT st.*, COALESCE(c.live_delta, 0) AS added_rows, COALESCE(c.deleted_delta, 0) AS added_deleted,
    IF(st.form_id IN UNNEST(@bound_forms), COALESCE(k.max_id, 0), NULL) AS max_id,
    TO_JSON(STRUCT(@commit_id AS id, COALESCE(c.inserted, 0) AS inserted, COALESCE(c.updated, 0) AS updated,
      COALESCE(c.restored, 0) AS restored, COALESCE(c.deleted, 0) AS deleted, COALESCE(c.forgotten, 0) AS forgotten)) AS last_commit
  FROM UNNEST(@states) AS st
  LEFT JOIN _formsync_counts AS c ON c.form_id = st.form_id
  LEFT JOIN (
    SELECT form_id, MAX(submission_id) AS max_id
    FROM `my-project.formsync.submissions` AS t
    WHERE form_id IN UNNEST(@form_ids) AND (t.created_at BETWEEN @created_from AND @created_to OR t.created_at < @outside_before OR t.created_at > @outside_after)
    GROUP BY form_id
  ) AS k ON k.form_id = st.form_id
) AS s
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET
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
WHEN NOT MATCHED THEN INSERT (form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names, last_success_at, last_error_at, last_error, backfill, updated_at, revision, deleted_count, last_reconcile_at, field_policy, forgotten, copies, last_commit, max_submission_id, field_types)
VALUES (
  s.form_id, NULLIF(s.wm_created_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.wm_id, PARSE_JSON(s.boundary),
  s.sort_order, s.last_total, s.added_rows, PARSE_JSON(s.field_names),
  NULLIF(s.last_success_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  NULLIF(s.last_error_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.last_error,
  PARSE_JSON(NULLIF(s.backfill, '')), @synced_at, s.revision + 1, s.added_deleted,
  NULLIF(s.last_reconcile_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.field_policy,
  PARSE_JSON(NULLIF(s.forgotten, '')), PARSE_JSON(NULLIF(s.copies, '')), s.last_commit, s.max_id,
  PARSE_JSON(NULLIF(s.field_types, ''))
);

COMMIT TRANSACTION;

SELECT form_id, inserted, updated, restored, deleted, forgotten
FROM _formsync_counts;
