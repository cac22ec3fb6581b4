package bigquery

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state/fieldtype"
)

// A form's view has one column per field, of the type state/fieldtype
// gives it (fieldtype.Columns.Type). A column's value is the field's value
// when that value fits the column's type by fieldtype's rules, and NULL
// otherwise, never an error: each cast is a SAFE_CAST behind a guard that
// holds it to the rules where BigQuery's cast would take more (SAFE_CAST
// reads '007', '+5' and '0x10' as INT64, rounds a NUMERIC past nine
// fractional digits, reads '2026-2-3' as a DATE). So a column that widens
// never changes a value it showed, and a pinned column shows NULL where a
// value does not fit the pin.
//
// The value is read from its exact text: fields_text when the row has one
// (the JSON column rounds numbers no INT64, UINT64 or FLOAT64 holds), else
// the JSON column. fields_text is read with the JSONPath $."<name>", which
// GoogleSQL's JSONPath can spell only for names without a double quote or
// a backslash; a field with such a name is read from the JSON column alone
// (a wide number in it shows rounded, and fails a DECIMAL's guard).
//
// Per type (see docs/bigquery.md and docs/types.md):
//   - boolean: BOOL; JSON true/false or the strings true/false in any case.
//   - integer: INT64; JSON's integer syntax, no leading zeros or sign.
//   - decimal: NUMERIC; JSON's number syntax without exponent, at most 29
//     digits before the point and 9 after; or a JSON number the JSON
//     column writes with an exponent (1e-05), when NUMERIC holds it.
//   - date: DATE; YYYY-MM-DD.
//   - timestamp: TIMESTAMP; YYYY-MM-DD[(T| )hh:mm:ss[.ffffff][Z|±hh:mm]];
//     a date is its midnight, and a time without an offset is UTC whatever
//     the session's time zone (the offset is written into the text before
//     the cast).
//   - array: ARRAY<STRING>, the elements' text in order; [] when the field
//     is absent, null, not an array of scalars, or holds a null (BigQuery
//     returns a NULL array as [] anyway, and refuses NULL elements).
//   - string: STRING; a scalar's text, and an object or array as its JSON
//     text (not NULL: a String column shows every value).

// Guards of the typed columns: the text a value must have to fit the type,
// by state/fieldtype's rules (RE2 syntax, as REGEXP_CONTAINS takes it).
const (
	integerText   = `^-?(0|[1-9][0-9]*)$`
	decimalText   = `^-?(0|[1-9][0-9]{0,28})(\.[0-9]{1,9})?$`
	dateText      = `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	timestampText = `^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})?)?$`
	zoneText      = `(Z|[+-][0-9]{2}:[0-9]{2})$`
	// floatText is how BigQuery's JSON type writes a FLOAT64 with an
	// exponent (0.00001 as 1e-05, 1e20 as 1e+20).
	floatText = `^-?[0-9]+(\.[0-9]+)?e[+-][0-9]+$`
)

// viewColumnExpr is the SELECT expression of field's view column, of type
// t.
func viewColumnExpr(field string, t fieldtype.Type) string {
	key := stringLiteral(field)
	member := "fields[" + key + "]"
	// text is the field's scalar as text, json its JSON text, array its
	// elements as text: from the exact text where it can be spelled.
	text := "JSON_VALUE(" + member + ")"
	json := "TO_JSON_STRING(" + member + ")"
	array := "JSON_VALUE_ARRAY(" + member + ")"
	if path, ok := exactPath(field); ok {
		exact := func(fromJSON, fromText string) string {
			return "IF(fields_text IS NULL, " + fromJSON + ", " + fromText + ")"
		}
		text = exact(text, "JSON_VALUE(fields_text, "+path+")")
		json = exact(json, "JSON_QUERY(fields_text, "+path+")")
		array = exact(array, "JSON_VALUE_ARRAY(fields_text, "+path+")")
	}
	guarded := func(sqlType, guard string) string {
		return "(SELECT SAFE_CAST(v AS " + sqlType + ") FROM UNNEST([" + text + "]) AS v WHERE REGEXP_CONTAINS(v, r'" + guard + "'))"
	}
	switch t {
	case fieldtype.Boolean:
		return "SAFE_CAST(" + text + " AS BOOL)"
	case fieldtype.Integer:
		return guarded("INT64", integerText)
	case fieldtype.Decimal:
		// A JSON number the JSON column holds as a FLOAT64 reads with an
		// exponent when it is small or large (0.00001 as 1e-05): it fits
		// when the NUMERIC holds the same number.
		return "(SELECT n FROM UNNEST([" + text + "]) AS v, UNNEST([SAFE_CAST(v AS NUMERIC)]) AS n WHERE REGEXP_CONTAINS(v, r'" + decimalText +
			"') OR JSON_TYPE(" + member + ") = 'number' AND REGEXP_CONTAINS(v, r'" + floatText + "') AND SAFE_CAST(n AS FLOAT64) = SAFE_CAST(v AS FLOAT64))"
	case fieldtype.Date:
		return guarded("DATE", dateText)
	case fieldtype.Timestamp:
		return "(SELECT SAFE_CAST(IF(LENGTH(v) = 10, CONCAT(v, ' 00:00:00+00:00'), IF(REGEXP_CONTAINS(v, r'" + zoneText +
			"'), v, CONCAT(v, '+00:00'))) AS TIMESTAMP) FROM UNNEST([" + text + "]) AS v WHERE REGEXP_CONTAINS(v, r'" + timestampText + "'))"
	case fieldtype.Array:
		return "COALESCE((SELECT ARRAY_AGG(e ORDER BY o) FROM UNNEST(" + array + ") AS e WITH OFFSET AS o HAVING COUNTIF(e IS NULL) = 0), [])"
	}
	return "IF(JSON_TYPE(" + member + ") IN ('object', 'array'), " + json + ", " + text + ")"
}

// exactPath is the JSONPath literal of field's member ($."name"), and
// whether GoogleSQL's JSONPath can spell it: not with a double quote or a
// backslash in the name, which a quoted JSONPath key cannot be relied on
// to escape.
func exactPath(field string) (string, bool) {
	if strings.ContainsAny(field, `"\`) {
		return "", false
	}
	return stringLiteral(`$."` + field + `"`), true
}

// viewColumns writes the field columns of a form's view: one line per
// field, each ",\n  <expr> AS `name`".
func viewColumns(b *strings.Builder, fieldNames []string, types fieldtype.Columns) {
	for _, c := range view.ColumnsOf(fieldNames, types) {
		b.WriteString(",\n  ")
		b.WriteString(viewColumnExpr(c.Field, c.Type))
		b.WriteString(" AS `")
		b.WriteString(c.Name) // sanitised: [a-z0-9_], quoted because it may be a keyword
		b.WriteString("`")
	}
}

// viewDDL is the DDL of one form's view, and the description it gives the
// view. The view has a column per field name, of the type types gives it
// (viewColumnExpr), read with the JSON subscript operator so that no
// character of a field name is ever parsed as JSON path syntax. The
// description ends with a digest of the view's query, so that a commit can
// tell from the view's metadata alone whether the view in place is the one
// the stored field names and types call for (see Sink.viewInPlace): a
// column that widens changes the digest, and the view is replaced.
//
// The filter on created_at over all of time prunes nothing, and lets the
// view be read from a submissions table that requires a partition filter
// (BigQuery checks a view's query against the tables it reads).
func viewDDL(project, dataset, formID string, fieldNames []string, types fieldtype.Columns) (ddl, description string) {
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(strings.Join(sqlname.ViewFixedColumns(), ", "))
	viewColumns(&b, fieldNames, types)
	b.WriteString("\nFROM ")
	b.WriteString(ref(project, dataset, submissionsTable))
	b.WriteString("\nWHERE form_id = ")
	b.WriteString(stringLiteral(formID))
	b.WriteString(" AND deleted_at IS NULL AND created_at ")
	b.WriteString(allOfTime)
	b.WriteString("\n")
	query := b.String()
	sum := sha256.Sum256([]byte(query))
	description = "formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition " + hex.EncodeToString(sum[:12])
	return "CREATE OR REPLACE VIEW " + ref(project, dataset, sqlname.ViewName(formID)) +
		"\nOPTIONS(description = " + stringLiteral(description) + ") AS\n" + query, description
}
