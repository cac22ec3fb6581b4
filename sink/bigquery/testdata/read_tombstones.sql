SELECT form_id, tombstone, pending
FROM `my-project.formsync.sync_tombstones`
WHERE form_id IN UNNEST(@form_ids)
