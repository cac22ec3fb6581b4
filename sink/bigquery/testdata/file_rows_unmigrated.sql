SELECT s.form_id, s.submission_key, s.created_at, s.deleted_at IS NOT NULL AS deleted, s.files,
  c.url, c.sha256, c.object_uri, c.size, c.content_type, c.stored_at, c.reason, c.recorded_at
FROM (
  SELECT form_id, submission_key, created_at, deleted_at, COALESCE(files_text, TO_JSON_STRING(files)) AS files
  FROM `my-project.formsync.submissions`
  WHERE (COALESCE(ARRAY_LENGTH(@form_ids), 0) = 0 OR form_id IN UNNEST(@form_ids)) AND created_at BETWEEN @since AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
) AS s
LEFT JOIN (
  SELECT * FROM UNNEST(ARRAY<STRUCT<form_id STRING, submission_key STRING, url STRING, sha256 STRING, object_uri STRING, size INT64,
    content_type STRING, stored_at TIMESTAMP, reason STRING, recorded_at TIMESTAMP>>[])
) AS c
  ON c.form_id = s.form_id AND c.submission_key = s.submission_key
WHERE s.files NOT IN ('[]', '{}', 'null')
ORDER BY s.form_id, s.created_at, s.submission_key, c.url
