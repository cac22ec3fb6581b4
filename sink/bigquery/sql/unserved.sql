{{define "unserved"}}form_id IN UNNEST(@reconcile_forms) AND created_at BETWEEN @reconcile_from AND @reconcile_to AND deleted_at IS NULL
{{- if .Rows}}
  AND NOT EXISTS (SELECT 1 FROM _formsync_plan AS p WHERE p.form_id = t.form_id AND p.submission_key = t.submission_key)
{{- end}}
{{- end}}
