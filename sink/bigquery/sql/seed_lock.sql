{{define "seedLock"}}
INSERT INTO {{.Lock}} (commit_id, locked_at)
SELECT '', CURRENT_TIMESTAMP() FROM UNNEST([1])
WHERE NOT EXISTS (SELECT 1 FROM {{.Lock}})
{{end}}
