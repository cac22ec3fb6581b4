{{define "mergeState"}}
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET{{template "stateUpdate"}}
WHEN NOT MATCHED THEN INSERT ({{template "stateColumns"}})
VALUES ({{template "stateValues"}}
);
{{- end}}
