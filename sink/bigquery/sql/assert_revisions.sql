{{define "assertRevisions"}}
SELECT IF(EXISTS (
  SELECT 1
  FROM UNNEST(@states) AS st
  LEFT JOIN {{.State}} AS t ON t.form_id = st.form_id
  WHERE COALESCE(t.revision, 0) != st.revision
), ERROR('formsync_state_conflict: the sync state of a form changed since it was read'), TRUE) AS revisions_held;
{{- end}}
