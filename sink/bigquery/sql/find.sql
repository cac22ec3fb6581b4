{{define "find"}}
{{- template "rowColumns" .}}
WHERE form_id = @form_id AND {{template "anyTime"}}
  AND submission_key IN UNNEST(@keys)
ORDER BY created_at, submission_key
{{end}}
