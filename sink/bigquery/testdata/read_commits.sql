SELECT form_id, TO_JSON_STRING(last_commit) AS last_commit
FROM `my-project.formsync.sync_state`
WHERE form_id IN UNNEST(@form_ids)
