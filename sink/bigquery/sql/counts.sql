{{define "counts"}}{{if .Deletions}}_formsync_counts{{else}}{{template "planCounts"}}{{end}}{{end}}
