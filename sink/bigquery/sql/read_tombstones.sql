{{define "readTombstones"}}
SELECT form_id, tombstone, pending
FROM {{.Tombstones}}
WHERE form_id IN UNNEST(@form_ids)
{{end}}
