{{define "stateValues"}}
  s.form_id, NULLIF(s.wm_created_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.wm_id, PARSE_JSON(s.boundary),
  s.sort_order, s.last_total, s.added_rows, PARSE_JSON(s.field_names),
  NULLIF(s.last_success_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  NULLIF(s.last_error_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.last_error,
  PARSE_JSON(NULLIF(s.backfill, '')), @synced_at, s.revision + 1, s.added_deleted,
  NULLIF(s.last_reconcile_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.field_policy,
  PARSE_JSON(NULLIF(s.forgotten, '')), PARSE_JSON(NULLIF(s.copies, '')), s.last_commit, s.max_id,
  PARSE_JSON(NULLIF(s.field_types, ''))
{{- end}}
