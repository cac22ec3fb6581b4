SELECT form_id, submission_key
FROM `my-project.formsync.submissions` AS t
WHERE form_id IN UNNEST(@form_ids) AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
  AND EXISTS (SELECT 1 FROM UNNEST(@rows) AS r WHERE r.form_id = t.form_id AND r.submission_key = t.submission_key)
