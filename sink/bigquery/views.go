package bigquery

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
)

// A form's view has one column per field, of the type state/fieldtype
// gives it (fieldtype.Columns.Type). A column's value is the field's value
// when that value fits the column's type by fieldtype's rules, and NULL
// otherwise, never an error: each cast is a SAFE_CAST behind a guard that
// holds it to the rules where BigQuery's cast would take more (SAFE_CAST
// reads '007', '+5' and '0x10' as INT64, rounds a NUMERIC past nine
// fractional digits, reads '2026-2-3' as a DATE, takes an offset of
// +15:00). So a column that widens never changes a value it showed, and a
// pinned column shows NULL where a value does not fit the pin.
//
// The view is two selects (viewQuery). The inner one reads each field's
// member once, as JSON text, and types it: from the row's exact text, fields_text
// when the row has one (the JSON column rounds numbers no INT64, UINT64 or
// FLOAT64 holds, and is NULL when one is beyond FLOAT64), else the JSON
// column's text, with the JSONPath $."<name>". GoogleSQL's JSONPath can
// spell that only for names without a double quote or a backslash; a
// field with such a name is read from the JSON column alone (a wide number
// in it shows rounded, and fails a DECIMAL's guard). The outer select
// names each column: each field name is written once, the column name
// once, and each type's guard once, so that a form of 1,000 fields with
// 100-character names stays within BigQuery's limit on a view's text
// (viewTextLimit).
//
// Per type (see docs/bigquery.md and docs/types.md):
//   - boolean: BOOL; JSON true/false or the strings true/false in any case.
//   - integer: INT64; JSON's integer syntax, no leading zeros or sign.
//   - decimal: NUMERIC; JSON's number syntax without exponent, at most 29
//     digits before the point and 9 after; or a JSON number the JSON
//     column writes with an exponent (1e-05), when NUMERIC holds it.
//   - date: DATE; YYYY-MM-DD.
//   - timestamp: TIMESTAMP; YYYY-MM-DD[(T| )hh:mm:ss[.ffffff][Z|±hh:mm]],
//     the offset at most 14:00; a date is its midnight, and a time without
//     an offset is UTC whatever the session's time zone (the offset is
//     written into the text before the cast).
//   - array: ARRAY<STRING>, the elements' text in order; [] when the field
//     is absent, null, not an array of scalars, or holds a null (BigQuery
//     returns a NULL array as [] anyway, and refuses NULL elements).
//   - string: STRING; a scalar's text, and an object or array as its JSON
//     text (not NULL: a String column shows every value).

// Guards of the typed columns: the text a value must have to fit the type,
// by state/fieldtype's rules (RE2 syntax, as REGEXP_CONTAINS takes it).
const (
	integerText = `^-?(0|[1-9][0-9]*)$`
	decimalText = `^-?(0|[1-9][0-9]{0,28})(\.[0-9]{1,9})?$`
	dateText    = `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// An offset runs to ±14:00, as far as BigQuery's cast reads one.
	timestampText = `^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)?)?$`
	zoneText      = `(Z|[+-][0-9]{2}:[0-9]{2})$`
	// floatText is how BigQuery's JSON type writes a FLOAT64 with an
	// exponent (0.00001 as 1e-05, 1e20 as 1e+20).
	floatText = `^-?[0-9]+(\.[0-9]+)?e[+-][0-9]+$`
)

// BigQuery's limits on the text of a view (quotas page, "View limits":
// 256 K characters of a view's query) and of a query (1,024 K characters
// of unresolved GoogleSQL: the CREATE VIEW statement is one), counted in
// characters, taken as thousands so as to stay within them however K is
// read. A view longer than that is not sent: the commit reports why
// (viewTooLongError), and the form's rows are stored all the same.
const (
	viewTextLimit  = 256_000
	queryTextLimit = 1_024_000
)

// memberExpr is the inner select's expression of field's member: its JSON
// text (a STRING), NULL when the row lacks it.
func memberExpr(field string) string {
	if path, ok := exactPath(field); ok {
		return "JSON_QUERY(d, " + path + ")"
	}
	return "TO_JSON_STRING(fields[" + stringLiteral(field) + "])"
}

// typedExpr is the outer select's expression of a column of type t, from
// m, the name of the inner column holding the member's JSON text.
func typedExpr(m string, t fieldtype.Type) string {
	text := "JSON_VALUE(" + m + ")"
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
		// when the NUMERIC holds the same number. A member that is not a
		// string and has a text is a number or a boolean.
		return "(SELECT n FROM UNNEST([" + text + "]) AS v, UNNEST([SAFE_CAST(v AS NUMERIC)]) AS n WHERE REGEXP_CONTAINS(v, r'" + decimalText +
			"') OR NOT STARTS_WITH(" + m + ", '\"') AND REGEXP_CONTAINS(v, r'" + floatText + "') AND SAFE_CAST(n AS FLOAT64) = SAFE_CAST(v AS FLOAT64))"
	case fieldtype.Date:
		return guarded("DATE", dateText)
	case fieldtype.Timestamp:
		return "(SELECT SAFE_CAST(IF(LENGTH(v) = 10, CONCAT(v, ' 00:00:00+00:00'), IF(REGEXP_CONTAINS(v, r'" + zoneText +
			"'), v, CONCAT(v, '+00:00'))) AS TIMESTAMP) FROM UNNEST([" + text + "]) AS v WHERE REGEXP_CONTAINS(v, r'" + timestampText + "'))"
	case fieldtype.Array:
		return "COALESCE((SELECT ARRAY_AGG(e ORDER BY o) FROM UNNEST(JSON_VALUE_ARRAY(" + m + ")) AS e WITH OFFSET AS o HAVING COUNTIF(e IS NULL) = 0), [])"
	}
	// A string's text; any other member's JSON text is its text (a
	// number as written, true, an object or array as JSON); null is NULL.
	return "IF(STARTS_WITH(" + m + ", '\"'), " + text + ", NULLIF(" + m + ", 'null'))"
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

// viewQuery is the query of form formID's view of fields named
// fieldNames typed by types, reading the table submissions. The inner
// select reads, per type, the members of the fields of that type (each
// member's JSON text, memberExpr) into one array of typed values,
// t_<type> (typedExpr applied to each); the outer select gives each field
// its element of its type's array, t_<type>[OFFSET(i)].v. So each field
// name and each column name is written once, and each type's guard once
// for the whole view: a form of 1,000 fields with 100-character names is
// about 222 K characters. An array holds a NULL element only inside the
// query, which BigQuery allows (the v of a STRUCT: an array's element may
// be an array).
//
// Lines: "  t_<type>[OFFSET(i)].v AS `name`" per column, and per type
// "    ARRAY(SELECT AS STRUCT <typed m> AS v FROM UNNEST([", a line
// "      <member>" per field, and "    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_<type>".
//
// The filter on created_at over all of time prunes nothing, and lets the
// view be read from a submissions table that requires a partition filter
// (BigQuery checks a view's query against the tables it reads).
func viewQuery(submissions, formID string, fieldNames []string, types fieldtype.Columns) string {
	fixed := strings.Join(sqlname.ViewFixedColumns(), ", ")
	groups := map[fieldtype.Type][]string{}
	var outer strings.Builder
	outer.WriteString("SELECT " + fixed)
	for _, c := range view.ColumnsOf(fieldNames, types) {
		t := c.Type
		if !slices.Contains(fieldtype.Types(), t) {
			t = fieldtype.String // a type of a newer formsync's
		}
		outer.WriteString(",\n  t_" + string(t) + "[OFFSET(" + strconv.Itoa(len(groups[t])) + ")].v AS `" + c.Name + "`") // sanitised: [a-z0-9_], quoted because it may be a keyword
		groups[t] = append(groups[t], memberExpr(c.Field))
	}
	var b strings.Builder
	b.WriteString(outer.String())
	b.WriteString("\nFROM (\n  SELECT " + fixed)
	for _, t := range fieldtype.Types() {
		members := groups[t]
		if len(members) == 0 {
			continue
		}
		b.WriteString(",\n    ARRAY(SELECT AS STRUCT " + typedExpr("m", t) + " AS v FROM UNNEST([")
		for i, m := range members {
			b.WriteString("\n      " + m)
			if i < len(members)-1 {
				b.WriteString(",")
			}
		}
		b.WriteString("\n    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_" + string(t))
	}
	b.WriteString("\n  FROM " + submissions + ", UNNEST([COALESCE(fields_text, TO_JSON_STRING(fields))]) AS d" +
		"\n  WHERE form_id = " + stringLiteral(formID) + " AND deleted_at IS NULL AND created_at " + allOfTime + "\n)\n")
	return b.String()
}

// viewDDL is the DDL of one form's view, and the description it gives the
// view (viewQuery). The description ends with a digest of the view's
// query, so that a commit can tell from the view's metadata alone whether
// the view in place is the one the stored field names and types call for
// (see Sink.viewInPlace): a column that widens changes the digest, and the
// view is replaced.
func viewDDL(project, dataset, formID string, fieldNames []string, types fieldtype.Columns) (ddl, description string) {
	query := viewQuery(ref(project, dataset, submissionsTable), formID, fieldNames, types)
	sum := sha256.Sum256([]byte(query))
	description = "formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition " + hex.EncodeToString(sum[:12])
	return "CREATE OR REPLACE VIEW " + ref(project, dataset, sqlname.ViewName(formID)) +
		"\nOPTIONS(description = " + stringLiteral(description) + ") AS\n" + query, description
}

// viewTooLong says why a view of the given DDL cannot be made, naming
// the limit it is beyond, or nil.
func viewTooLong(ddl string) error {
	query := ddl[strings.Index(ddl, ") AS\n")+len(") AS\n"):]
	switch n, q := utf8.RuneCountInString(query), utf8.RuneCountInString(ddl); {
	case n > viewTextLimit:
		return fmt.Errorf("its query is %d characters, beyond BigQuery's limit on a view's text (%d): too many fields, or too long field names", n, viewTextLimit)
	case q > queryTextLimit:
		return fmt.Errorf("its statement is %d characters, beyond BigQuery's limit on a query's text (%d)", q, queryTextLimit)
	}
	return nil
}

// ViewProblem says why the view of the form whose state is st cannot be
// made (its text beyond BigQuery's limits), naming the form; "" when it
// can. It reads nothing: status shows it beside the form.
func (s *Sink) ViewProblem(st state.Form) string {
	ddl, _ := viewDDL(s.cfg.Project, s.cfg.Dataset, st.FormID, st.FieldNames, st.FieldTypes)
	if err := viewTooLong(ddl); err != nil {
		return (&viewTooLongError{form: st.FormID, err: err}).Error()
	}
	return ""
}
