{{define "stateUpdate"}}
  wm_created_at = NULLIF(s.wm_created_at, TIMESTAMP '0001-01-01 00:00:00+00'), wm_id = s.wm_id,
  boundary = PARSE_JSON(s.boundary), sort_order = s.sort_order, last_total = s.last_total,
  row_count = t.row_count + s.added_rows, deleted_count = COALESCE(t.deleted_count, 0) + s.added_deleted,
  field_names = PARSE_JSON(s.field_names),
  last_success_at = NULLIF(s.last_success_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  last_error_at = NULLIF(s.last_error_at, TIMESTAMP '0001-01-01 00:00:00+00'), last_error = s.last_error,
  backfill = PARSE_JSON(NULLIF(s.backfill, '')), updated_at = @synced_at, revision = s.revision + 1,
  last_reconcile_at = NULLIF(s.last_reconcile_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  field_policy = s.field_policy, forgotten = PARSE_JSON(NULLIF(s.forgotten, '')),
  copies = PARSE_JSON(NULLIF(s.copies, '')), last_commit = s.last_commit,
  max_submission_id = IF(s.max_id IS NULL, t.max_submission_id, GREATEST(COALESCE(t.max_submission_id, 0), s.max_id)),
  field_types = PARSE_JSON(NULLIF(s.field_types, ''))
{{- end}}
