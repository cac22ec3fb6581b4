SELECT DISTINCT UNIX_DATE(DATE(created_at)) AS day
FROM `my-project.formsync.submissions`
WHERE form_id = @form_id AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
ORDER BY day
