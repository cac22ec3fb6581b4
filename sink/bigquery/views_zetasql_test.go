package bigquery

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/zetasql"
)

// TestViewColumnsAgreeWithZetaSQL evaluates the expression of every typed
// view column, on values that fit and values that do not, with ZetaSQL's
// reference implementation of GoogleSQL (whose functions BigQuery runs),
// fields and fields_text made as the commit makes them; and compares each
// result with what the fake's view returns for the same row. The reference
// evaluator's default time zone is America/Los_Angeles, not BigQuery's
// UTC, so it also proves a timestamp without an offset is read as UTC
// whatever the session's zone.
func TestViewColumnsAgreeWithZetaSQL(t *testing.T) {
	enginetest.Slow(t, "installs the ZetaSQL analyzer from npm, 354 MB, once")
	t.Parallel()
	evaluate := zetaEvaluator(t)
	values := []string{
		`true`, `false`, `"TRUE"`, `"yes"`, `3`, `-7`, `"41"`, `"007"`, `"+5"`, `"0x10"`, `" 5"`, `5.0`, `"12.50"`, `0.1`,
		`0.00001`, `100000000000000000000`, `12345678901234567890.123456789`, `123456789012345678901234567890`,
		`"1e3"`, `1e3`, `"1.0000000001"`, `9223372036854775808`,
		`"1990-05-17"`, `"2026-2-3"`, `"2026-02-30"`, `"2026-03-01T10:00:00"`, `"2026-03-01 10:00:00.5+02:00"`,
		`"2026-03-01T10:00:00Z"`, `"2026-03-01t10:00:00z"`, `"2026-03-01T10:00:00.1234567"`,
		`["a",1,true]`, `[0.00001,"b"]`, `[]`, `[1,null]`, `[[1]]`, `{"a":[1,2.50]}`, `null`, `"hello"`, `""`,
		// Beyond FLOAT64: the JSON column is NULL, fields_text holds it.
		`{"a":1e400}`, `[1e400]`, `1e400`,
		`"2026-03-01T10:00:00+15:00"`, `"2026-03-01T10:00:00-14:59"`, `"2026-03-01T10:00:00+02:60"`,
	}
	// A plain name and one JSONPath cannot spell, per type.
	names := map[string]fieldtype.Type{}
	for _, typ := range fieldtype.Types() {
		names[string(typ)] = typ
		names[`q"`+string(typ)] = typ
	}
	var fieldNames []string
	for n := range names {
		fieldNames = append(fieldNames, n)
	}

	b := setup(t, bqfake.Options{})
	const form = "zeta"
	var rows []sink.Row
	for i, v := range values {
		var obj strings.Builder
		obj.WriteString("{")
		j := 0
		for n := range names {
			if j > 0 {
				obj.WriteString(",")
			}
			j++
			k, _ := json.Marshal(n)
			obj.Write(k)
			obj.WriteString(":" + v)
		}
		obj.WriteString("}")
		id := int64(i + 1)
		r, err := sink.NewRow(form, &id, b.t0.Add(time.Duration(i)*time.Second).Truncate(time.Millisecond), false, json.RawMessage(obj.String()), json.RawMessage(`[]`))
		if err != nil {
			t.Fatalf("value %s: %v", v, err)
		}
		rows = append(rows, r)
	}
	st := formState(form, rows, fieldNames...)
	st.FieldTypes.Pinned = fieldtype.Set(names)
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{st, rows})
	view := readView(t, b, form)
	cols := sqlname.ColumnNames(fieldNames, sqlname.ViewFixedColumns())

	type cell struct{ value, name string }
	var exprs []string
	var cells []cell
	for i, r := range rows {
		lit := stringLiteral(r.Fields)
		for n, typ := range names {
			exprs = append(exprs, fmt.Sprintf("(SELECT %s FROM (SELECT SAFE.PARSE_JSON(%s, wide_number_mode => 'round') AS fields, "+
				"IF(SAFE.PARSE_JSON(%s, wide_number_mode => 'exact') IS NULL, %s, NULL) AS fields_text))", asText(columnExpr(n, typ), typ), lit, lit, lit))
			cells = append(cells, cell{values[i], n})
		}
	}
	for i, res := range evaluate(exprs) {
		c := cells[i]
		typ := names[c.name]
		if res.Error != "" {
			t.Errorf("%s column %q, value %s: ZetaSQL fails: %s", typ, c.name, c.value, res.Error)
			continue
		}
		key := strconv.Itoa(i/len(names) + 1)
		got := fakeText(t, column(view, cols[c.name])[key])
		want := "NULL"
		if res.Value != nil {
			want = *res.Value
		}
		if got != want {
			t.Errorf("%s column %q, value %s: the fake's view has %s, ZetaSQL %s", typ, c.name, c.value, got, want)
		}
	}
}

// columnExpr is the view's column of field n, typed typ, as one
// expression over fields and fields_text: the inner select's member, typed
// into its type's array, and the element the outer select reads.
func columnExpr(n string, typ fieldtype.Type) string {
	return "(SELECT t[OFFSET(0)].v FROM (SELECT ARRAY(SELECT AS STRUCT " + typedExpr("m", typ) + " AS v FROM UNNEST([" + memberExpr(n) +
		"]) AS m WITH OFFSET AS o ORDER BY o) AS t FROM UNNEST([COALESCE(fields_text, TO_JSON_STRING(fields))]) AS d))"
}

// zetaEvaluator returns a function that evaluates STRING expressions with
// ZetaSQL's reference implementation, skipping the test without node and
// npm.
func zetaEvaluator(t *testing.T) func(exprs []string) []zetasql.Value {
	t.Helper()
	return func(exprs []string) []zetasql.Value { return zetasql.Evaluate(t, exprs) }
}

// asText wraps a column expression of type typ into a STRING that says
// exactly what it holds (the time of a TIMESTAMP in UTC).
func asText(expr string, typ fieldtype.Type) string {
	switch typ {
	case fieldtype.Timestamp:
		return "FORMAT_TIMESTAMP('%Y-%m-%dT%H:%M:%E6SZ', " + expr + ", 'UTC')"
	case fieldtype.Array:
		return "TO_JSON_STRING(" + expr + ")"
	case fieldtype.String:
		return expr
	}
	return "CAST(" + expr + " AS STRING)"
}

// fakeText is a value the fake's view returned, written as asText writes
// it in GoogleSQL.
func fakeText(t *testing.T, v bq.Value) string {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case *big.Rat:
		s := strings.TrimRight(x.FloatString(9), "0")
		return strings.TrimSuffix(s, ".")
	case civil.Date:
		return x.String()
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.000000Z")
	case []bq.Value:
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	case string:
		return x
	}
	t.Fatalf("a view value of type %T", v)
	return ""
}
