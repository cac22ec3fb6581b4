{{define "rowColumns"}}
SELECT submission_id, submission_key, created_at, is_spam,
  COALESCE(fields_text, TO_JSON_STRING(fields)) AS fields,
  COALESCE(files_text, TO_JSON_STRING(files)) AS files, raw, deleted_at
FROM {{.Submissions}}
{{- end}}
