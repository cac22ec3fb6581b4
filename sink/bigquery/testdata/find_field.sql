SELECT submission_key, TO_HEX(SHA256(JSON_VALUE(fields[@field]))) AS value_sha256
FROM `my-project.formsync.submissions`
WHERE form_id = @form_id AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
  AND JSON_TYPE(fields[@field]) = 'string'
