{{define "anyTime"}}created_at {{allOfTime}}{{end}}
