DELETE FROM `my-project.formsync.submission_file_copies` AS c
WHERE EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = c.form_id AND f.submission_key = c.submission_key);
