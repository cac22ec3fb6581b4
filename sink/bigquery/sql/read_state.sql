{{define "readState"}}
SELECT form_id, wm_created_at, wm_id, TO_JSON_STRING(boundary) AS boundary, sort_order, last_total,
  row_count, TO_JSON_STRING(field_names) AS field_names, last_success_at, last_error_at, last_error,
  TO_JSON_STRING(backfill) AS backfill, COALESCE(revision, 0) AS revision,
  COALESCE(deleted_count, 0) AS deleted_count, last_reconcile_at, COALESCE(field_policy, '') AS field_policy,
  TO_JSON_STRING(forgotten) AS forgotten,
  {{if .WithoutCopies}}CAST(NULL AS STRING){{else}}TO_JSON_STRING(copies){{end}} AS copies,
  {{if .WithoutCopies}}CAST(NULL AS INT64){{else}}max_submission_id{{end}} AS max_submission_id,
  {{if .WithoutCopies}}CAST(NULL AS STRING){{else}}TO_JSON_STRING(field_types){{end}} AS field_types
FROM {{.State}}
WHERE COALESCE(ARRAY_LENGTH(@form_ids), 0) = 0 OR form_id IN UNNEST(@form_ids)
{{end}}
