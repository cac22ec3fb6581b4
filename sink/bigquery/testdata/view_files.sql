CREATE OR REPLACE VIEW `my-project.formsync.submission_files`
OPTIONS(description = 'formsync: one row per file attached to a submission, whatever shape its files arrived in, with where it stands in the files store; rows deleted upstream left out. Definition fc98b05bba21233053d0789c') AS
SELECT v.*, c.object_uri, c.sha256, c.size AS stored_size, c.content_type, c.stored_at, c.reason AS not_stored_reason
FROM (
SELECT s.form_id, s.submission_key, s.submission_id, i.input, f.position,
  IF(JSON_TYPE(f.file['name']) IN ('string', 'number'), JSON_VALUE(f.file['name']), NULL) AS name, IF(JSON_TYPE(f.file['url']) IN ('string', 'number'), JSON_VALUE(f.file['url']), NULL) AS url,
  (SELECT SAFE_CAST(v AS INT64) FROM UNNEST([JSON_VALUE(f.file['size'])]) AS v WHERE REGEXP_CONTAINS(v, r'^-?(0|[1-9][0-9]*)$')) AS size,
  IF(JSON_TYPE(f.file['type']) IN ('string', 'number'), JSON_VALUE(f.file['type']), NULL) AS type
FROM `my-project.formsync.submissions` AS s,
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
  AND s.created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
) AS v
LEFT JOIN (
  SELECT form_id, submission_key, url, sha256, object_uri, size, content_type, stored_at, reason, recorded_at
  FROM `my-project.formsync.submission_file_copies`
  WHERE TRUE
  QUALIFY ROW_NUMBER() OVER (PARTITION BY form_id, submission_key, url ORDER BY recorded_at DESC, sha256 DESC, reason DESC) = 1
) AS c
  ON c.form_id = v.form_id AND c.submission_key = v.submission_key AND c.url = v.url
