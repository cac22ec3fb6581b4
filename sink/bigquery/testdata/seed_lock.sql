INSERT INTO `my-project.formsync.sync_lock` (commit_id, locked_at)
SELECT '', CURRENT_TIMESTAMP() FROM UNNEST([1])
WHERE NOT EXISTS (SELECT 1 FROM `my-project.formsync.sync_lock`)
