{{define "moveTombstones"}}
BEGIN TRANSACTION;
{{template "lock" .}}

INSERT INTO {{.Tombstones}} (form_id, tombstone, pending, forgotten_at)
SELECT s.form_id, k, k IN UNNEST(JSON_VALUE_ARRAY(s.forgotten, '$.pending')), @synced_at
FROM {{.State}} AS s, UNNEST(JSON_VALUE_ARRAY(s.forgotten, '$.keys')) AS k
WHERE NOT EXISTS (SELECT 1 FROM {{.Tombstones}} AS t WHERE t.form_id = s.form_id AND t.tombstone = k);

UPDATE {{.State}} SET
  forgotten = TO_JSON(STRUCT(JSON_VALUE(forgotten, '$.salt') AS salt, ARRAY<STRING>[] AS keys,
    CAST(JSON_VALUE(forgotten, '$.count') AS INT64) AS count)),
  revision = COALESCE(revision, 0) + 1, updated_at = @synced_at
WHERE ARRAY_LENGTH(JSON_VALUE_ARRAY(forgotten, '$.keys')) > 0;

COMMIT TRANSACTION;
{{end}}
