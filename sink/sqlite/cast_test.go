package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/state/fieldtype"
)

// castValues are values of a field, as JSON, that each type's cast must
// take or refuse.
var castValues = []string{
	`null`, `""`, `[]`, `{}`, `{"a":1}`, `true`, `false`, `"true"`, `"FALSE"`, `"falſe"`, `"yes"`,
	`0`, `41`, `-7`, `"41"`, `"-0"`, `"007"`, `"+5"`, `" 5"`, `"5 "`, `"n/a"`, `"1e3"`, `1e3`, `"5.0"`,
	`9223372036854775807`, `-9223372036854775808`, `"9223372036854775807"`, `"9223372036854775808"`, `"-9223372036854775809"`,
	`9223372036854775808`, `1.5`, `"0.25"`, `"-0.5"`, `"1."`, `".5"`, `"1.2.3"`, `"1-2"`, `"0.1234567891"`,
	`"12345678901234567890123456789"`, `"123456789012345678901234567890"`, `"12345678901234567890123456789.123456789"`,
	`"2026-03-01"`, `"2026-02-30"`, `"2024-02-29"`, `"0000-01-01"`, `"2026-3-01"`, `"2026-03-01 "`,
	`"2026-03-01T10:00:00Z"`, `"2026-03-01 10:00:00"`, `"2026-03-01T10:00:00.5+02:00"`, `"2026-03-01T23:30:00.123456-14:00"`, `"2026-03-01T23:30:00-14:59"`, `"2026-03-01T23:30:00+14:01"`,
	`"2026-03-01T10:00:00.1234567Z"`, `"2026-03-01T24:00:00Z"`, `"2026-03-01T10:00:00+15:00"`, `"2026-03-01T10:00:00z"`,
	`"2026-03-01T10:00:00.Z"`, `"2026-03-01T10:00:00+0200"`, `"2026-03-01T10:00:00 Z"`, `"2026-03-01T10:00:59.9999999Z"`,
	`"2026-03-01T10:00:00.5+02:00Z"`, `"2026-03-01T10:00:00ZZ"`, `"2026-03-01T10:00:00+02:00:00"`, `"2026-03-01T10:60:00Z"`,
	`["a","b"]`, `[1,true]`, `["a",null]`, `[["a"]]`, `[null]`, `[{}]`, `"Ada \"Lovelace\""`, `"日本語"`,
}

// evalCast evaluates the view column of field k, typed t, over the fields
// object {k: value}, as the view does.
func evalCast(t *testing.T, db *sql.DB, key string, typ fieldtype.Type, value string) (any, string) {
	t.Helper()
	k, _ := json.Marshal(key)
	fields := `{` + string(k) + `:` + value + `}`
	var got any
	var kind string
	q := `SELECT v, typeof(v) FROM (SELECT ` + columnSQL(key, typ) + ` AS v FROM (SELECT ? AS fields))`
	if err := db.QueryRow(q, fields).Scan(&got, &kind); err != nil {
		t.Fatalf("%s %s: %v", typ, fields, err)
	}
	if b, ok := got.([]byte); ok {
		got = string(b)
	}
	return got, kind
}

// TestCastsFollowTheTypeRules: in every view column, a value that fits
// the column's type by fieldtype's rules is cast, to the SQL type the
// column has; one that does not is NULL, never a wrong value nor an
// error, whether the key is read by path or, for a key an older SQLite
// reads wrong, by json_each. Pins make a column any type, so every value
// meets every type.
func TestCastsFollowTheTypeRules(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	sqlType := map[fieldtype.Type]string{
		fieldtype.Boolean: "integer", fieldtype.Integer: "integer", fieldtype.Decimal: "real",
		fieldtype.Date: "text", fieldtype.Timestamp: "text", fieldtype.Array: "text", fieldtype.String: "text",
	}
	for _, key := range []string{"plain", `say "hi" \ there`} {
		for _, typ := range fieldtype.Types() {
			for _, v := range castValues {
				got, kind := evalCast(t, s.db, key, typ, v)
				of := fieldtype.Of([]byte(v))
				fits := of != fieldtype.Unknown && fieldtype.Widen(of, typ) == typ
				switch {
				case typ == fieldtype.String && v != `null`:
					fits = true // every value has a text
				case typ == fieldtype.Array && v[0] == '[':
					fits = of == fieldtype.Array || v == `[]` // an array of scalars, pinned
				case typ == fieldtype.Decimal && (v == `1e3` || v == `9223372036854775808`):
					fits = true // a JSON number is a number
				}
				if fits && (got == nil || kind != sqlType[typ]) {
					t.Errorf("key %q, %s column: %s gives %v (%s), want a %s", key, typ, v, got, kind, sqlType[typ])
				}
				if !fits && got != nil {
					t.Errorf("key %q, %s column: %s gives %v (%s), want NULL: it does not fit", key, typ, v, got, kind)
				}
			}
		}
	}
}

// TestCastValues: what each cast gives, value by value.
func TestCastValues(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	for _, c := range []struct {
		typ   fieldtype.Type
		value string
		want  any
	}{
		{fieldtype.Boolean, `true`, int64(1)}, {fieldtype.Boolean, `"False"`, int64(0)}, {fieldtype.Boolean, `1`, nil},
		{fieldtype.Integer, `"41"`, int64(41)}, {fieldtype.Integer, `-9223372036854775808`, int64(-9223372036854775808)},
		{fieldtype.Integer, `"-0"`, int64(0)}, {fieldtype.Integer, `true`, nil}, {fieldtype.Integer, `"n/a"`, nil},
		{fieldtype.Integer, `""`, nil}, {fieldtype.Integer, `"9223372036854775808"`, nil},
		{fieldtype.Decimal, `"0.25"`, 0.25}, {fieldtype.Decimal, `3`, 3.0}, {fieldtype.Decimal, `"-12.5"`, -12.5},
		{fieldtype.Date, `"2024-02-29"`, "2024-02-29"}, {fieldtype.Date, `"2026-03-01T10:00:00Z"`, nil},
		{fieldtype.Timestamp, `"2026-03-01"`, "2026-03-01T00:00:00.000000Z"},
		{fieldtype.Timestamp, `"2026-03-01 10:00:00"`, "2026-03-01T10:00:00.000000Z"},
		{fieldtype.Timestamp, `"2026-03-01T01:30:00.5+02:00"`, "2026-02-28T23:30:00.500000Z"},
		{fieldtype.Timestamp, `"2026-12-31T23:59:59.999999-14:00"`, "2027-01-01T13:59:59.999999Z"},
		{fieldtype.Timestamp, `"2026-12-31T23:59:59-14:59"`, nil}, {fieldtype.Timestamp, `"2026-03-01T10:00:00+15:00"`, nil},
		{fieldtype.Timestamp, `"2026-03-01T10:00:00.123Z"`, "2026-03-01T10:00:00.123000Z"},
		{fieldtype.Timestamp, `"2026-03-01T10:00:59.999999Z"`, "2026-03-01T10:00:59.999999Z"},
		{fieldtype.Timestamp, `"2026-03-01T10:00:00.000001-00:30"`, "2026-03-01T10:30:00.000001Z"},
		{fieldtype.Timestamp, `"2026-03-01T10:00:00.05"`, "2026-03-01T10:00:00.050000Z"},
		{fieldtype.Timestamp, `"2026-03-01T10:00:00+02:00 "`, nil}, {fieldtype.Timestamp, `"2026-03-01T10:00:00.1.2Z"`, nil},
		{fieldtype.Array, `["a", 1, true]`, `["a",1,true]`}, {fieldtype.Array, `"a"`, nil},
		{fieldtype.Array, `[["a"]]`, nil}, {fieldtype.Array, `[null]`, nil}, {fieldtype.Array, `["a",{}]`, nil}, {fieldtype.Array, `[]`, `[]`},
		{fieldtype.String, `true`, "true"}, {fieldtype.String, `41`, "41"}, {fieldtype.String, `1.5`, "1.5"},
		{fieldtype.String, `{"a": [1]}`, `{"a":[1]}`}, {fieldtype.String, `""`, ""}, {fieldtype.String, `"it's"`, "it's"},
	} {
		for _, key := range []string{"k", "k\"\\"} {
			if got, _ := evalCast(t, s.db, key, c.typ, c.value); !cmp.Equal(got, c.want) {
				t.Errorf("key %q, %s column: %s gives %#v, want %#v", key, c.typ, c.value, got, c.want)
			}
		}
	}
}

// TestCastsInOlderSQLite: the casts give the same in the older SQLite
// that Python carries (3.31 has every function they use).
func TestCastsInOlderSQLite(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	var queries []string
	var want []string
	for _, key := range []string{"plain", `say "hi" \ there`} {
		k, _ := json.Marshal(key)
		for _, typ := range fieldtype.Types() {
			for _, v := range castValues {
				if v == `9223372036854775808` && typ == fieldtype.String {
					// A number past 64 bits is a real to SQLite, and each
					// version writes a real's text with its own digits.
					continue
				}
				fields := `{` + string(k) + `:` + v + `}`
				// Reals as printf writes them: quote's digits differ between
				// versions.
				q := `SELECT CASE typeof(v) WHEN 'real' THEN printf('%.15g', v) ELSE quote(v) END FROM (SELECT ` +
					columnSQL(key, typ) + ` AS v FROM (SELECT ` + quoteString(fields) + ` AS fields))`
				var got string
				if err := s.db.QueryRow(q).Scan(&got); err != nil {
					t.Fatal(err)
				}
				queries = append(queries, q)
				want = append(want, got)
			}
		}
	}
	got, version := pythonSQLite(t, queries)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Python's SQLite %s casts otherwise (-formsync's +Python's):\n%s", version, diff)
	}
}

// pythonSQLite runs each query, whose one row has one column, in the
// SQLite Python carries, and returns its results as text and its version.
func pythonSQLite(t *testing.T, queries []string) ([]string, string) {
	t.Helper()
	script := `
import json, sqlite3, sys
db = sqlite3.connect(":memory:")
out = [str(db.execute(q).fetchone()[0]) for q in json.load(sys.stdin)]
print(json.dumps({"version": sqlite3.sqlite_version, "rows": out}))
`
	out := runPython(t, script, queries)
	var res struct {
		Version string
		Rows    []string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("python3 said %s: %v", out, err)
	}
	return res.Rows, res.Version
}

func runPython(t *testing.T, script string, input any) []byte {
	t.Helper()
	py := lookPython(t)
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	cmd := execCommand(t, py, "-c", script)
	cmd.Stdin = bytesReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, fmt.Sprint(out))
	}
	return out
}

func lookPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: no other SQLite to compare with")
	}
	return py
}

func execCommand(t *testing.T, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(t.Context(), name, args...)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// FuzzCasts: whatever a field's value, each column type's cast gives a
// value exactly when fieldtype's rules say the value fits the type (the
// exceptions as in TestCastsFollowTheTypeRules), and never an error.
func FuzzCasts(f *testing.F) {
	for _, v := range castValues {
		f.Add(v)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	f.Fuzz(func(t *testing.T, value string) {
		if !json.Valid([]byte(value)) {
			return
		}
		of := fieldtype.Of([]byte(value))
		for _, typ := range fieldtype.Types() {
			if typ == fieldtype.String || typ == fieldtype.Array {
				continue
			}
			got, _ := evalCast(t, db, "k", typ, value)
			fits := of != fieldtype.Unknown && fieldtype.Widen(of, typ) == typ
			if typ == fieldtype.Decimal && len(value) > 0 && (value[0] == '-' || value[0] >= '0' && value[0] <= '9') {
				continue // a JSON number is a number to a decimal column
			}
			if fits != (got != nil) {
				t.Errorf("%s column: %s (typed %q) gives %v", typ, value, of, got)
			}
		}
	})
}
