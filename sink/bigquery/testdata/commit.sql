BEGIN TRANSACTION;

CREATE TEMP TABLE _formsync_plan AS
WITH staged AS (
  SELECT form_id, submission_id, submission_key, content_key, created_at, is_spam, fields, files
  FROM `my-project.formsync._formsync_staging`
  WHERE TRUE
  QUALIFY ROW_NUMBER() OVER (PARTITION BY form_id, submission_key ORDER BY is_spam DESC, fields, files, created_at) = 1
),
ranked AS (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY form_id, content_key ORDER BY submission_id IS NULL DESC, submission_id) AS content_rank
  FROM staged
),
stored AS (
  SELECT form_id, submission_id, submission_key, is_spam, TO_JSON_STRING(fields) AS fields,
    TO_JSON_STRING(files) AS files
  FROM `my-project.formsync.submissions`
  WHERE created_at BETWEEN @created_from AND @created_to
    AND form_id IN (SELECT DISTINCT form_id FROM staged)
)
SELECT s.form_id, s.submission_id, s.submission_key, s.created_at, s.is_spam, s.fields, s.files,
  CASE
    WHEN k.submission_key IS NULL AND l.submission_key IS NOT NULL THEN 'rekey'
    WHEN k.submission_key IS NULL THEN 'insert'
    WHEN k.is_spam != s.is_spam
      OR k.fields != TO_JSON_STRING(PARSE_JSON(s.fields, wide_number_mode => 'round'))
      OR k.files != TO_JSON_STRING(PARSE_JSON(s.files, wide_number_mode => 'round'))
      OR (s.submission_id IS NOT NULL AND (k.submission_id IS NULL OR k.submission_id != s.submission_id)) THEN 'update'
    ELSE 'none'
  END AS action,
  l.submission_key AS legacy_key
FROM ranked AS s
LEFT JOIN stored AS k ON k.form_id = s.form_id AND k.submission_key = s.submission_key
LEFT JOIN stored AS l ON s.submission_id IS NOT NULL AND s.content_rank = 1
  AND s.content_key != s.submission_key AND l.form_id = s.form_id AND l.submission_id IS NULL
  AND l.submission_key = s.content_key;

MERGE `my-project.formsync.submissions` AS t
USING (SELECT * FROM _formsync_plan WHERE action != 'none' OR legacy_key IS NOT NULL) AS p
ON t.form_id = p.form_id
  AND t.created_at BETWEEN @created_from AND @created_to
  AND (t.submission_key = p.submission_key OR (t.submission_id IS NULL AND t.submission_key = p.legacy_key))
WHEN MATCHED AND t.submission_key = p.legacy_key AND p.action = 'rekey' THEN UPDATE SET
  submission_id = p.submission_id, submission_key = p.submission_key, is_spam = p.is_spam,
  fields = PARSE_JSON(p.fields, wide_number_mode => 'round'),
  files = PARSE_JSON(p.files, wide_number_mode => 'round'), synced_at = @synced_at
WHEN MATCHED AND t.submission_key = p.legacy_key THEN DELETE
WHEN MATCHED AND p.action = 'update' THEN UPDATE SET
  submission_id = COALESCE(p.submission_id, t.submission_id), is_spam = p.is_spam,
  fields = PARSE_JSON(p.fields, wide_number_mode => 'round'),
  files = PARSE_JSON(p.files, wide_number_mode => 'round'), synced_at = @synced_at
WHEN NOT MATCHED BY TARGET AND p.action = 'insert' THEN
  INSERT (form_id, submission_id, submission_key, created_at, is_spam, fields, files, synced_at)
  VALUES (p.form_id, p.submission_id, p.submission_key, p.created_at, p.is_spam,
    PARSE_JSON(p.fields, wide_number_mode => 'round'), PARSE_JSON(p.files, wide_number_mode => 'round'),
    @synced_at);

MERGE `my-project.formsync.sync_state` AS t
USING (
  SELECT st.*, COALESCE(c.inserted, 0) - COALESCE(c.removed, 0) AS added_rows
  FROM UNNEST(@states) AS st
  LEFT JOIN (
    SELECT form_id, COUNTIF(action = 'insert') AS inserted,
      COUNTIF(action != 'rekey' AND legacy_key IS NOT NULL) AS removed
    FROM _formsync_plan
    GROUP BY form_id
  ) AS c ON c.form_id = st.form_id
) AS s
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET
  wm_created_at = s.wm_created_at, wm_id = s.wm_id, boundary = PARSE_JSON(s.boundary),
  sort_order = s.sort_order, last_total = s.last_total, row_count = t.row_count + s.added_rows,
  field_names = PARSE_JSON(s.field_names), last_success_at = s.last_success_at,
  last_error_at = s.last_error_at, last_error = s.last_error, backfill = PARSE_JSON(s.backfill),
  updated_at = @synced_at
WHEN NOT MATCHED THEN INSERT (form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names, last_success_at, last_error_at, last_error, backfill, updated_at)
VALUES (
  s.form_id, s.wm_created_at, s.wm_id, PARSE_JSON(s.boundary), s.sort_order, s.last_total, s.added_rows,
  PARSE_JSON(s.field_names), s.last_success_at, s.last_error_at, s.last_error, PARSE_JSON(s.backfill),
  @synced_at
);

COMMIT TRANSACTION;

SELECT form_id, COUNTIF(action = 'insert') AS inserted, COUNTIF(action IN ('rekey', 'update')) AS updated
FROM _formsync_plan
GROUP BY form_id;
