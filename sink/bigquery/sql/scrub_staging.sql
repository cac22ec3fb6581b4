{{define "scrubStaging"}}
DELETE FROM {{.Staging}} AS s
WHERE EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = s.form_id AND f.submission_key = s.submission_key)
{{end}}
