{{define "lock"}}
UPDATE {{.Lock}} SET commit_id = @commit_id, locked_at = @synced_at WHERE TRUE;
{{- end}}
