BEGIN TRANSACTION;

UPDATE `my-project.formsync.sync_lock` SET commit_id = @commit_id, locked_at = @synced_at WHERE TRUE;

CREATE TEMP TABLE _formsync_recount AS
SELECT form_id, COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM `my-project.formsync.submissions`
WHERE form_id IN UNNEST(@form_ids) AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
GROUP BY form_id;

UPDATE `my-project.formsync.sync_state` AS t
SET row_count = COALESCE((SELECT c.live FROM _formsync_recount AS c WHERE c.form_id = t.form_id), 0),
  deleted_count = COALESCE((SELECT c.deleted FROM _formsync_recount AS c WHERE c.form_id = t.form_id), 0)
WHERE form_id IN UNNEST(@form_ids);

COMMIT TRANSACTION;
