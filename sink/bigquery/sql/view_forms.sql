{{define "viewForms"}}
SELECT form_id, TO_JSON_STRING(field_names) AS field_names
FROM {{.State}}
{{end}}
