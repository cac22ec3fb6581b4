{{define "formDays"}}
SELECT DISTINCT UNIX_DATE(DATE(created_at)) AS day
FROM {{.Submissions}}
WHERE form_id = @form_id AND {{template "anyTime"}}
ORDER BY day
{{end}}
