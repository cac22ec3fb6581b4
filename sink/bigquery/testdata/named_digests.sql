SELECT DISTINCT c.sha256
FROM (
  SELECT form_id, submission_key, url, sha256, object_uri, size, content_type, stored_at, reason, recorded_at
  FROM `my-project.formsync.submission_file_copies`
  WHERE TRUE
  QUALIFY ROW_NUMBER() OVER (PARTITION BY form_id, submission_key, url ORDER BY recorded_at DESC, sha256 DESC, reason DESC) = 1
) AS c
JOIN (
  SELECT form_id, submission_key
  FROM `my-project.formsync.submissions`
  WHERE created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
) AS s ON s.form_id = c.form_id AND s.submission_key = c.submission_key
WHERE c.sha256 IN UNNEST(@digests)
