{{define "readRows"}}
{{- template "rowColumns" .}}
WHERE form_id = @form_id AND {{template "anyTime"}}
ORDER BY created_at, submission_key
{{end}}
