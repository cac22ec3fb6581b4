{{define "writeState"}}
BEGIN TRANSACTION;
{{template "lock" .}}
{{template "assertRevisions" .}}
{{- if .TombstonesChanged}}

{{template "writeTombstones" .}}
{{- end}}

MERGE {{.State}} AS t
USING (
  SELECT *, 0 AS added_rows, 0 AS added_deleted, CAST(NULL AS INT64) AS max_id,
    TO_JSON(STRUCT(@commit_id AS id, 0 AS inserted, 0 AS updated, 0 AS restored, 0 AS deleted, 0 AS forgotten)) AS last_commit
  FROM UNNEST(@states)
) AS s{{template "mergeState"}}

COMMIT TRANSACTION;
{{end}}
