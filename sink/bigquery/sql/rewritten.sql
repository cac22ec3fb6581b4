{{define "rewritten"}}
  fields = SAFE.PARSE_JSON(p.fields, wide_number_mode => 'round'), fields_text = IF(p.fields_inexact, p.fields, NULL),
  files = SAFE.PARSE_JSON(p.files, wide_number_mode => 'round'), files_text = IF(p.files_inexact, p.files, NULL),
  synced_at = @synced_at, deleted_at = NULL
{{- end}}
