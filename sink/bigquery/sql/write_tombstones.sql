{{define "writeTombstones"}}MERGE {{.Tombstones}} AS t
USING (SELECT * FROM UNNEST(@tombstones)) AS s
ON t.form_id = s.form_id AND t.tombstone = s.tombstone
WHEN MATCHED AND s.removed THEN DELETE
WHEN MATCHED THEN UPDATE SET pending = s.pending
WHEN NOT MATCHED AND NOT s.removed THEN
  INSERT (form_id, tombstone, pending, forgotten_at) VALUES (s.form_id, s.tombstone, s.pending, @synced_at);
{{- end}}
