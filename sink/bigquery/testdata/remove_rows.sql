BEGIN TRANSACTION;

UPDATE `my-project.formsync.sync_lock` SET commit_id = @commit_id, locked_at = @synced_at WHERE TRUE;
SELECT IF(COALESCE((SELECT COALESCE(revision, 0) FROM `my-project.formsync.sync_state` WHERE form_id = @form_id), 0) != @revision,
  ERROR('formsync_state_conflict: the sync state of a form changed since it was read'), TRUE) AS revision_held;

DELETE FROM `my-project.formsync.submissions`
WHERE form_id = @form_id AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00';

DELETE FROM `my-project.formsync.submission_file_copies`
WHERE form_id = @form_id;

DELETE FROM `my-project.formsync.sync_state`
WHERE form_id = @form_id AND forgotten IS NULL;

UPDATE `my-project.formsync.sync_state`
SET wm_created_at = NULL, wm_id = 0, boundary = NULL, sort_order = '', last_total = -1,
  last_success_at = NULL, last_error_at = NULL, last_error = '', backfill = NULL, last_reconcile_at = NULL,
  copies = NULL, last_commit = NULL, updated_at = @synced_at, revision = COALESCE(revision, 0) + 1,
  row_count = 0, deleted_count = 0, field_names = NULL, field_types = NULL, field_policy = '', max_submission_id = NULL
WHERE form_id = @form_id;

COMMIT TRANSACTION;
