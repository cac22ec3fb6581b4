DELETE FROM `my-project.formsync_staging._formsync_staging_formsync_0123456789abcdef01234567` AS s
WHERE EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = s.form_id AND f.submission_key = s.submission_key)
