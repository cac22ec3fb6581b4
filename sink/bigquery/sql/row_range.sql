{{define "rowRange"}}(t.created_at BETWEEN @created_from AND @created_to OR t.created_at < @outside_before OR t.created_at > @outside_after){{end}}
