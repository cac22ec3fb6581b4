{{define "remove"}}
BEGIN TRANSACTION;
{{template "lock" .}}
SELECT IF(COALESCE((SELECT COALESCE(revision, 0) FROM {{.State}} WHERE form_id = @form_id), 0) != @revision,
  ERROR('formsync_state_conflict: the sync state of a form changed since it was read'), TRUE) AS revision_held;
{{- if .Rows}}

DELETE FROM {{.Submissions}}
WHERE form_id = @form_id AND {{template "anyTime"}};

DELETE FROM {{.Copies}}
WHERE form_id = @form_id;
{{- end}}

DELETE FROM {{.State}}
WHERE form_id = @form_id AND forgotten IS NULL;

UPDATE {{.State}}
SET wm_created_at = NULL, wm_id = 0, boundary = NULL, sort_order = '', last_total = -1,
  last_success_at = NULL, last_error_at = NULL, last_error = '', backfill = NULL, last_reconcile_at = NULL,
  copies = NULL, last_commit = NULL, updated_at = @synced_at, revision = COALESCE(revision, 0) + 1
{{- if .Rows}},
  row_count = 0, deleted_count = 0, field_names = NULL, field_types = NULL, field_policy = '', max_submission_id = NULL
{{- end}}
WHERE form_id = @form_id;

COMMIT TRANSACTION;
{{end}}
