{{define "planCounts"}}(
  SELECT form_id, COUNTIF(action = 'insert') AS inserted, SUM(updates) AS updated, COUNTIF(restores) AS restored,
    0 AS deleted, 0 AS forgotten,
    COUNTIF(action = 'insert') + COUNTIF(restores) - COUNTIF(twin_removed AND NOT legacy_deleted) AS live_delta,
    -COUNTIF(restores) - COUNTIF(twin_removed AND legacy_deleted) AS deleted_delta
  FROM _formsync_plan
  GROUP BY form_id
){{end}}
