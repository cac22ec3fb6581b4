{{define "forgotten"}}created_at BETWEEN @forget_from AND @forget_to AND EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = t.form_id AND f.submission_key = t.submission_key){{end}}
