{{define "removeDays"}}
DELETE FROM {{.Submissions}}
WHERE form_id = @form_id AND created_at BETWEEN @removed_from AND @removed_to
{{end}}
