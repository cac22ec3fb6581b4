package bigquery

import (
	"fmt"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/formsync/formsync/sink/internal/sqlname"
)

// Every SQL statement the sink sends is rendered here, from the templates
// below. Only validated identifiers (project, dataset, table names checked
// at Open, view and column names sanitised by sqlname.ViewName and
// sqlname.ColumnNames) are spliced into the text; every value travels as a
// query parameter, except in views, which cannot take parameters: there the
// form id and the field names enter as escaped string literals
// (stringLiteral). The golden files in testdata/ hold what each template
// renders to, and the BigQuery fake (bqfake) recognises exactly these
// shapes.

// tables names the fully qualified tables a statement refers to.
type tables struct {
	Submissions, State, Staging string
}

func ref(project, dataset, table string) string {
	return "`" + project + "." + dataset + "." + table + "`"
}

var sqlTemplates = template.Must(template.New("sql").Parse(`
{{define "readState"}}
SELECT form_id, wm_created_at, wm_id, TO_JSON_STRING(boundary) AS boundary, sort_order, last_total,
  row_count, TO_JSON_STRING(field_names) AS field_names, last_success_at, last_error_at, last_error,
  TO_JSON_STRING(backfill) AS backfill
FROM {{.State}}
WHERE COALESCE(ARRAY_LENGTH(@form_ids), 0) = 0 OR form_id IN UNNEST(@form_ids)
{{end}}

{{define "readRows"}}
SELECT submission_id, submission_key, created_at, is_spam, TO_JSON_STRING(fields) AS fields,
  TO_JSON_STRING(files) AS files
FROM {{.Submissions}}
WHERE form_id = @form_id
ORDER BY created_at, submission_key
{{end}}

{{define "stateColumns"}}form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names, last_success_at, last_error_at, last_error, backfill, updated_at{{end}}

{{define "stateUpdate"}}
  wm_created_at = s.wm_created_at, wm_id = s.wm_id, boundary = PARSE_JSON(s.boundary),
  sort_order = s.sort_order, last_total = s.last_total, row_count = {{.}},
  field_names = PARSE_JSON(s.field_names), last_success_at = s.last_success_at,
  last_error_at = s.last_error_at, last_error = s.last_error, backfill = PARSE_JSON(s.backfill),
  updated_at = @synced_at
{{- end}}

{{define "stateValues"}}
  s.form_id, s.wm_created_at, s.wm_id, PARSE_JSON(s.boundary), s.sort_order, s.last_total, {{.}},
  PARSE_JSON(s.field_names), s.last_success_at, s.last_error_at, s.last_error, PARSE_JSON(s.backfill),
  @synced_at
{{- end}}

{{define "writeState"}}
MERGE {{.State}} AS t
USING (SELECT * FROM UNNEST(@states)) AS s
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET{{template "stateUpdate" "t.row_count"}}
WHEN NOT MATCHED THEN INSERT ({{template "stateColumns"}})
VALUES ({{template "stateValues" "0"}}
)
{{end}}

{{define "commit"}}
BEGIN TRANSACTION;

CREATE TEMP TABLE _formsync_plan AS
WITH staged AS (
  SELECT form_id, submission_id, submission_key, content_key, created_at, is_spam, fields, files
  FROM {{.Staging}}
  WHERE TRUE
  QUALIFY ROW_NUMBER() OVER (PARTITION BY form_id, submission_key ORDER BY is_spam DESC, fields, files, created_at) = 1
),
ranked AS (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY form_id, content_key ORDER BY submission_id IS NULL DESC, submission_id) AS content_rank
  FROM staged
),
stored AS (
  SELECT form_id, submission_id, submission_key, is_spam, TO_JSON_STRING(fields) AS fields,
    TO_JSON_STRING(files) AS files
  FROM {{.Submissions}}
  WHERE created_at BETWEEN @created_from AND @created_to
    AND form_id IN (SELECT DISTINCT form_id FROM staged)
)
SELECT s.form_id, s.submission_id, s.submission_key, s.created_at, s.is_spam, s.fields, s.files,
  CASE
    WHEN k.submission_key IS NULL AND l.submission_key IS NOT NULL THEN 'rekey'
    WHEN k.submission_key IS NULL THEN 'insert'
    WHEN k.is_spam != s.is_spam
      OR k.fields != TO_JSON_STRING(PARSE_JSON(s.fields, wide_number_mode => 'round'))
      OR k.files != TO_JSON_STRING(PARSE_JSON(s.files, wide_number_mode => 'round'))
      OR (s.submission_id IS NOT NULL AND (k.submission_id IS NULL OR k.submission_id != s.submission_id)) THEN 'update'
    ELSE 'none'
  END AS action,
  l.submission_key AS legacy_key
FROM ranked AS s
LEFT JOIN stored AS k ON k.form_id = s.form_id AND k.submission_key = s.submission_key
LEFT JOIN stored AS l ON s.submission_id IS NOT NULL AND s.content_rank = 1
  AND s.content_key != s.submission_key AND l.form_id = s.form_id AND l.submission_id IS NULL
  AND l.submission_key = s.content_key;

MERGE {{.Submissions}} AS t
USING (SELECT * FROM _formsync_plan WHERE action != 'none' OR legacy_key IS NOT NULL) AS p
ON t.form_id = p.form_id
  AND t.created_at BETWEEN @created_from AND @created_to
  AND (t.submission_key = p.submission_key OR (t.submission_id IS NULL AND t.submission_key = p.legacy_key))
WHEN MATCHED AND t.submission_key = p.legacy_key AND p.action = 'rekey' THEN UPDATE SET
  submission_id = p.submission_id, submission_key = p.submission_key, is_spam = p.is_spam,
  fields = PARSE_JSON(p.fields, wide_number_mode => 'round'),
  files = PARSE_JSON(p.files, wide_number_mode => 'round'), synced_at = @synced_at
WHEN MATCHED AND t.submission_key = p.legacy_key THEN DELETE
WHEN MATCHED AND p.action = 'update' THEN UPDATE SET
  submission_id = COALESCE(p.submission_id, t.submission_id), is_spam = p.is_spam,
  fields = PARSE_JSON(p.fields, wide_number_mode => 'round'),
  files = PARSE_JSON(p.files, wide_number_mode => 'round'), synced_at = @synced_at
WHEN NOT MATCHED BY TARGET AND p.action = 'insert' THEN
  INSERT (form_id, submission_id, submission_key, created_at, is_spam, fields, files, synced_at)
  VALUES (p.form_id, p.submission_id, p.submission_key, p.created_at, p.is_spam,
    PARSE_JSON(p.fields, wide_number_mode => 'round'), PARSE_JSON(p.files, wide_number_mode => 'round'),
    @synced_at);

MERGE {{.State}} AS t
USING (
  SELECT st.*, COALESCE(c.inserted, 0) - COALESCE(c.removed, 0) AS added_rows
  FROM UNNEST(@states) AS st
  LEFT JOIN (
    SELECT form_id, COUNTIF(action = 'insert') AS inserted,
      COUNTIF(action != 'rekey' AND legacy_key IS NOT NULL) AS removed
    FROM _formsync_plan
    GROUP BY form_id
  ) AS c ON c.form_id = st.form_id
) AS s
ON t.form_id = s.form_id
WHEN MATCHED THEN UPDATE SET{{template "stateUpdate" "t.row_count + s.added_rows"}}
WHEN NOT MATCHED THEN INSERT ({{template "stateColumns"}})
VALUES ({{template "stateValues" "s.added_rows"}}
);

COMMIT TRANSACTION;

SELECT form_id, COUNTIF(action = 'insert') AS inserted, COUNTIF(action IN ('rekey', 'update')) AS updated
FROM _formsync_plan
GROUP BY form_id;
{{end}}
`))

func render(name string, data any) string {
	var b strings.Builder
	if err := sqlTemplates.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("bigquery: rendering %s: %v", name, err)) // the templates are fixed
	}
	return strings.TrimSpace(b.String()) + "\n"
}

// viewSQL is the DDL of one form's view: a column per field name, read with
// the JSON subscript operator so that no character of a field name is ever
// parsed as JSON path syntax.
func viewSQL(project, dataset, formID string, fieldNames []string) string {
	var b strings.Builder
	b.WriteString("CREATE OR REPLACE VIEW ")
	b.WriteString(ref(project, dataset, sqlname.ViewName(formID)))
	b.WriteString(" AS\nSELECT ")
	b.WriteString(strings.Join(sqlname.ViewFixedColumns(), ", "))
	for _, c := range sqlname.ViewColumns(fieldNames) {
		b.WriteString(",\n  JSON_VALUE(fields[")
		b.WriteString(stringLiteral(c.Field))
		b.WriteString("]) AS `")
		b.WriteString(c.Name) // sanitised: [a-z0-9_], quoted because it may be a keyword
		b.WriteString("`")
	}
	b.WriteString("\nFROM ")
	b.WriteString(ref(project, dataset, submissionsTable))
	b.WriteString("\nWHERE form_id = ")
	b.WriteString(stringLiteral(formID))
	b.WriteString("\n")
	return b.String()
}

// stringLiteral makes a GoogleSQL string literal of s that holds only
// printable ASCII: quotes and backslashes are escaped, everything else
// outside printable ASCII is written as \u or \U escapes. A byte that is not
// UTF-8 becomes U+FFFD, as encoding/json does when the same id travels in
// the staged NDJSON, so the literal equals the stored value.
func stringLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
