SELECT submission_id, submission_key, created_at, is_spam,
  COALESCE(fields_text, TO_JSON_STRING(fields)) AS fields,
  COALESCE(files_text, TO_JSON_STRING(files)) AS files, raw, deleted_at
FROM `my-project.formsync.submissions`
WHERE form_id = @form_id AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
  AND submission_key IN UNNEST(@keys)
ORDER BY created_at, submission_key
