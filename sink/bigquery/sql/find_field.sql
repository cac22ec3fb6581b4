{{define "findField"}}
SELECT submission_key, TO_HEX(SHA256(JSON_VALUE(fields[@field]))) AS value_sha256
FROM {{.Submissions}}
WHERE form_id = @form_id AND {{template "anyTime"}}
  AND JSON_TYPE(fields[@field]) = 'string'
{{end}}
