{{define "readCommits"}}
SELECT form_id, TO_JSON_STRING(last_commit) AS last_commit
FROM {{.State}}
WHERE form_id IN UNNEST(@form_ids)
{{end}}
