{{define "countRows"}}
SELECT COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM {{.Submissions}}
WHERE form_id = @form_id AND {{template "anyTime"}}
{{end}}
