MERGE `my-project.formsync.sync_state` AS t
USING (SELECT * FROM UNNEST(@states)) AS s
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET
  wm_created_at = s.wm_created_at, wm_id = s.wm_id, boundary = PARSE_JSON(s.boundary),
  sort_order = s.sort_order, last_total = s.last_total, row_count = t.row_count,
  field_names = PARSE_JSON(s.field_names), last_success_at = s.last_success_at,
  last_error_at = s.last_error_at, last_error = s.last_error, backfill = PARSE_JSON(s.backfill),
  updated_at = @synced_at
WHEN NOT MATCHED THEN INSERT (form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names, last_success_at, last_error_at, last_error, backfill, updated_at)
VALUES (
  s.form_id, s.wm_created_at, s.wm_id, PARSE_JSON(s.boundary), s.sort_order, s.last_total, 0,
  PARSE_JSON(s.field_names), s.last_success_at, s.last_error_at, s.last_error, PARSE_JSON(s.backfill),
  @synced_at
)
