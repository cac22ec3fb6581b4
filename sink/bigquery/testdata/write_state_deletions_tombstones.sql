BEGIN TRANSACTION;

UPDATE `my-project.formsync.sync_lock` SET commit_id = @commit_id, locked_at = @synced_at WHERE TRUE;

SELECT IF(EXISTS (
  SELECT 1
  FROM UNNEST(@states) AS st
  LEFT JOIN `my-project.formsync.sync_state` AS t ON t.form_id = st.form_id
  WHERE COALESCE(t.revision, 0) != st.revision
), ERROR('formsync_state_conflict: the sync state of a form changed since it was read'), TRUE) AS revisions_held;

MERGE `my-project.formsync.sync_tombstones` AS t
USING (SELECT * FROM UNNEST(@tombstones)) AS s
ON t.form_id = s.form_id AND t.tombstone = s.tombstone
WHEN MATCHED AND s.removed THEN DELETE
WHEN MATCHED THEN UPDATE SET pending = s.pending
WHEN NOT MATCHED AND NOT s.removed THEN
  INSERT (form_id, tombstone, pending, forgotten_at) VALUES (s.form_id, s.tombstone, s.pending, @synced_at);

CREATE TEMP TABLE _formsync_forgotten AS
SELECT form_id, COUNTIF(deleted_at IS NULL) AS live, COUNTIF(deleted_at IS NOT NULL) AS deleted
FROM `my-project.formsync.submissions` AS t
WHERE form_id IN UNNEST(@form_ids) AND created_at BETWEEN @forget_from AND @forget_to AND EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = t.form_id AND f.submission_key = t.submission_key)
GROUP BY form_id;

DELETE FROM `my-project.formsync.submissions` AS t
WHERE form_id IN UNNEST(@form_ids) AND created_at BETWEEN @forget_from AND @forget_to AND EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = t.form_id AND f.submission_key = t.submission_key);

DELETE FROM `my-project.formsync.submission_file_copies` AS c
WHERE EXISTS (SELECT 1 FROM UNNEST(@forget) AS f WHERE f.form_id = c.form_id AND f.submission_key = c.submission_key);

CREATE TEMP TABLE _formsync_reconciled AS
SELECT form_id, COUNT(*) AS deleted
FROM `my-project.formsync.submissions` AS t
WHERE form_id IN UNNEST(@reconcile_forms) AND created_at BETWEEN @reconcile_from AND @reconcile_to AND deleted_at IS NULL
GROUP BY form_id;

UPDATE `my-project.formsync.submissions` AS t SET deleted_at = @synced_at
WHERE form_id IN UNNEST(@reconcile_forms) AND created_at BETWEEN @reconcile_from AND @reconcile_to AND deleted_at IS NULL;

CREATE TEMP TABLE _formsync_counts AS
SELECT form_id, SUM(inserted) AS inserted, SUM(updated) AS updated, SUM(restored) AS restored, SUM(deleted) AS deleted,
  SUM(forgotten) AS forgotten, SUM(live_delta) AS live_delta, SUM(deleted_delta) AS deleted_delta
FROM (
  SELECT form_id, 0 AS inserted, 0 AS updated, 0 AS restored, 0 AS deleted, live + deleted AS forgotten,
    -live AS live_delta, -deleted AS deleted_delta
  FROM _formsync_forgotten
  UNION ALL
  SELECT form_id, 0, 0, 0, deleted, 0, -deleted, deleted
  FROM _formsync_reconciled
)
GROUP BY form_id;

MERGE `my-project.formsync.sync_state` AS t
USING (
  SELECT st.*, COALESCE(c.live_delta, 0) AS added_rows, COALESCE(c.deleted_delta, 0) AS added_deleted,
    CAST(NULL AS INT64) AS max_id,
    TO_JSON(STRUCT(@commit_id AS id, COALESCE(c.inserted, 0) AS inserted, COALESCE(c.updated, 0) AS updated,
      COALESCE(c.restored, 0) AS restored, COALESCE(c.deleted, 0) AS deleted, COALESCE(c.forgotten, 0) AS forgotten)) AS last_commit
  FROM UNNEST(@states) AS st
  LEFT JOIN _formsync_counts AS c ON c.form_id = st.form_id
) AS s
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET
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
WHEN NOT MATCHED THEN INSERT (form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names, last_success_at, last_error_at, last_error, backfill, updated_at, revision, deleted_count, last_reconcile_at, field_policy, forgotten, copies, last_commit, max_submission_id, field_types)
VALUES (
  s.form_id, NULLIF(s.wm_created_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.wm_id, PARSE_JSON(s.boundary),
  s.sort_order, s.last_total, s.added_rows, PARSE_JSON(s.field_names),
  NULLIF(s.last_success_at, TIMESTAMP '0001-01-01 00:00:00+00'),
  NULLIF(s.last_error_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.last_error,
  PARSE_JSON(NULLIF(s.backfill, '')), @synced_at, s.revision + 1, s.added_deleted,
  NULLIF(s.last_reconcile_at, TIMESTAMP '0001-01-01 00:00:00+00'), s.field_policy,
  PARSE_JSON(NULLIF(s.forgotten, '')), PARSE_JSON(NULLIF(s.copies, '')), s.last_commit, s.max_id,
  PARSE_JSON(NULLIF(s.field_types, ''))
);

COMMIT TRANSACTION;

SELECT form_id, inserted, updated, restored, deleted, forgotten
FROM _formsync_counts;
