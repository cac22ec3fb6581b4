{{define "recount"}}
BEGIN TRANSACTION;
{{template "lock" .}}

CREATE TEMP TABLE _formsync_recount AS
SELECT form_id, COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM {{.Submissions}}
WHERE form_id IN UNNEST(@form_ids) AND {{template "anyTime"}}
GROUP BY form_id;

UPDATE {{.State}} AS t
SET row_count = COALESCE((SELECT c.live FROM _formsync_recount AS c WHERE c.form_id = t.form_id), 0),
  deleted_count = COALESCE((SELECT c.deleted FROM _formsync_recount AS c WHERE c.form_id = t.form_id), 0)
WHERE form_id IN UNNEST(@form_ids);

COMMIT TRANSACTION;
{{end}}
