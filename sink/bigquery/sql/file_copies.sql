{{define "storedRows"}}
SELECT form_id, submission_key
FROM {{.Submissions}} AS t
WHERE form_id IN UNNEST(@form_ids) AND created_at {{allOfTime}}
  AND EXISTS (SELECT 1 FROM UNNEST(@rows) AS r WHERE r.form_id = t.form_id AND r.submission_key = t.submission_key)
{{end}}

{{define "fileRows"}}
SELECT s.form_id, s.submission_key, s.created_at, s.deleted_at IS NOT NULL AS deleted, s.files,
  c.url, c.sha256, c.object_uri, c.size, c.content_type, c.stored_at, c.reason, c.recorded_at
FROM (
  SELECT form_id, submission_key, created_at, deleted_at, COALESCE(files_text, TO_JSON_STRING(files)) AS files
  FROM {{.Submissions}}
  WHERE (COALESCE(ARRAY_LENGTH(@form_ids), 0) = 0 OR form_id IN UNNEST(@form_ids)) AND created_at BETWEEN @since AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
) AS s
LEFT JOIN {{if .WithoutCopies}}(
  SELECT * FROM UNNEST(ARRAY<STRUCT<form_id STRING, submission_key STRING, url STRING, sha256 STRING, object_uri STRING, size INT64,
    content_type STRING, stored_at TIMESTAMP, reason STRING, recorded_at TIMESTAMP>>[])
){{else}}{{latestCopies .Copies "COALESCE(ARRAY_LENGTH(@form_ids), 0) = 0 OR form_id IN UNNEST(@form_ids)"}}{{end}} AS c
  ON c.form_id = s.form_id AND c.submission_key = s.submission_key
WHERE s.files NOT IN ('[]', '{}', 'null')
ORDER BY s.form_id, s.created_at, s.submission_key, c.url
{{end}}

{{define "namedDigests"}}
SELECT DISTINCT c.sha256
FROM {{latestCopies .Copies "TRUE"}} AS c
JOIN (
  SELECT form_id, submission_key
  FROM {{.Submissions}}
  WHERE created_at {{allOfTime}}
) AS s ON s.form_id = c.form_id AND s.submission_key = c.submission_key
WHERE c.sha256 IN UNNEST(@digests)
{{end}}

{{define "forgetCopies"}}DELETE FROM {{.Copies}} AS c
WHERE EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = c.form_id AND f.submission_key = c.submission_key);{{end}}
