package bqfake

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	bqv2 "google.golang.org/api/bigquery/v2"
	"modernc.org/sqlite"
)

// The views the sink makes: one per form, a column per field, and
// submission_files. A form view's columns are recognised one by one, each
// against the shapes below (the sink's sql of each column type, with the
// field's key, its JSONPath and the guards' patterns captured), and
// translated into SQLite calling functions that each do what one
// BigQuery function does (registered in init):
//
//	bqfake_json_value(json, key)        JSON_VALUE of the member key: a scalar's text, NULL otherwise
//	bqfake_json_value_array(json, key)  JSON_VALUE_ARRAY: a JSON array of the elements' text (null for null)
//	bqfake_json_query(json, key)        JSON_QUERY / TO_JSON_STRING of the member: its JSON text
//	bqfake_json_type(json, key)         JSON_TYPE of the member
//	bqfake_safe_cast(text, type)        SAFE_CAST(text AS type): BOOL, INT64, NUMERIC, DATE or TIMESTAMP
//	bqfake_regexp_contains(text, re)    REGEXP_CONTAINS (RE2, as Go's regexp)
//
// json is a JSON column's text (the fake keeps JSON as text, wide numbers
// rounded) or fields_text's exact text; member access is by key, which is
// what the sink's JSON subscript and its $."key" paths say. A query of a
// view returns each column with the type of its cast, and an array column
// as REPEATED STRING; tables.get shows that schema.

var (
	viewRE = regexp.MustCompile("^CREATE OR REPLACE VIEW `\\?`(?: OPTIONS\\(description = ('(?:[^'\\\\]|\\\\.)*')\\))? AS SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at" +
		"(.*)" +
		" FROM `\\?` WHERE form_id = ('(?:[^'\\\\]|\\\\.)*') AND deleted_at IS NULL" +
		"( AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00\\+00' AND TIMESTAMP '9999-12-31 23:59:59\\.999999\\+00')?$")
	selectAllRE = regexp.MustCompile("^SELECT \\* FROM `\\?`$")
)

// The pieces of a column's shape. Each member access captures the key's
// literal and, read from fields_text, the JSONPath literal.
const (
	litRE  = `'(?:[^'\\]|\\.)*'`
	rawRE  = `r'([^']*)'`
	nameRE = " AS `([a-z][a-z0-9_]*)`"
)

// access is the shape of one member read: fn(fields[key]), or
// IF(fields_text IS NULL, fn(fields[key]), textFn(fields_text, path)).
func access(fn, textFn string) string {
	return `(?:` + fn + `\(fields\[(` + litRE + `)\]\)|IF\(fields_text IS NULL, ` + fn + `\(fields\[(` + litRE + `)\]\), ` +
		textFn + `\(fields_text, (` + litRE + `)\)\))`
}

var (
	textAccess  = access(`JSON_VALUE`, `JSON_VALUE`)
	viewColumns = []struct {
		kind string
		re   *regexp.Regexp
	}{
		// A column of a formsync before typed columns.
		{"plain", regexp.MustCompile(`^, JSON_VALUE\(fields\[(` + litRE + `)\]\)` + nameRE)},
		{"bool", regexp.MustCompile(`^, SAFE_CAST\(` + textAccess + ` AS BOOL\)` + nameRE)},
		{"decimal", regexp.MustCompile(`^, \(SELECT n FROM UNNEST\(\[` + textAccess + `\]\) AS v, UNNEST\(\[SAFE_CAST\(v AS NUMERIC\)\]\) AS n WHERE REGEXP_CONTAINS\(v, ` +
			rawRE + `\) OR JSON_TYPE\(fields\[(` + litRE + `)\]\) = 'number' AND REGEXP_CONTAINS\(v, ` + rawRE +
			`\) AND SAFE_CAST\(n AS FLOAT64\) = SAFE_CAST\(v AS FLOAT64\)\)` + nameRE)},
		{"guarded", regexp.MustCompile(`^, \(SELECT SAFE_CAST\(v AS (INT64|NUMERIC|DATE)\) FROM UNNEST\(\[` + textAccess +
			`\]\) AS v WHERE REGEXP_CONTAINS\(v, ` + rawRE + `\)\)` + nameRE)},
		{"timestamp", regexp.MustCompile(`^, \(SELECT SAFE_CAST\(IF\(LENGTH\(v\) = 10, CONCAT\(v, ' 00:00:00\+00:00'\), IF\(REGEXP_CONTAINS\(v, ` + rawRE +
			`\), v, CONCAT\(v, '\+00:00'\)\)\) AS TIMESTAMP\) FROM UNNEST\(\[` + textAccess + `\]\) AS v WHERE REGEXP_CONTAINS\(v, ` + rawRE + `\)\)` + nameRE)},
		{"array", regexp.MustCompile(`^, COALESCE\(\(SELECT ARRAY_AGG\(e ORDER BY o\) FROM UNNEST\(` + access(`JSON_VALUE_ARRAY`, `JSON_VALUE_ARRAY`) +
			`\) AS e WITH OFFSET AS o HAVING COUNTIF\(e IS NULL\) = 0\), \[\]\)` + nameRE)},
		{"string", regexp.MustCompile(`^, IF\(JSON_TYPE\(fields\[(` + litRE + `)\]\) IN \('object', 'array'\), ` + access(`TO_JSON_STRING`, `JSON_QUERY`) +
			`, ` + textAccess + `\)` + nameRE)},
	}
)

// viewColumn is one recognised column: its name, BigQuery type and mode,
// and its SQLite expression.
type viewColumn struct {
	name, typ, mode, expr string
}

// memberSQL translates one captured member access (the key's literal
// alone, or the key's and the path's) into SQLite calling fn.
func memberSQL(fn, plainKey, exactKey, path string) (string, string, error) {
	if plainKey != "" {
		key, err := unquote(plainKey)
		if err != nil {
			return "", "", err
		}
		return fn + "(fields, " + sqliteLiteral(key) + ")", key, nil
	}
	key, err := unquote(exactKey)
	if err != nil {
		return "", "", err
	}
	p, err := unquote(path)
	if err != nil {
		return "", "", err
	}
	if p != `$."`+key+`"` || strings.ContainsAny(key, `"\`) {
		return "", "", invalidQuery(`bqfake: unsupported JSONPath %s for the member %s (the fake reads $."key" of a key without " or \)`, path, exactKey)
	}
	k := sqliteLiteral(key)
	return "CASE WHEN fields_text IS NULL THEN " + fn + "(fields, " + k + ") ELSE " + fn + "_text(fields_text, " + k + ") END", key, nil
}

// castTypes are the BigQuery types a guarded cast names, as a schema
// names them.
var castTypes = map[string]string{"BOOL": "BOOLEAN", "INT64": "INTEGER", "NUMERIC": "NUMERIC", "DATE": "DATE", "TIMESTAMP": "TIMESTAMP"}

// parseViewColumn recognises the column at the start of rest; n is the
// length of its text.
func parseViewColumn(rest string) (c viewColumn, n int, err error) {
	for _, shape := range viewColumns {
		m := shape.re.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		c = viewColumn{name: m[len(m)-1], mode: "NULLABLE", typ: "STRING"}
		var text string
		switch shape.kind {
		case "plain":
			text, _, err = memberSQL("bqfake_json_value", m[1], "", "")
			c.expr = text
		case "bool":
			text, _, err = memberSQL("bqfake_json_value", m[1], m[2], m[3])
			c.typ, c.expr = "BOOLEAN", "bqfake_safe_cast("+text+", 'BOOL')"
		case "guarded":
			text, _, err = memberSQL("bqfake_json_value", m[2], m[3], m[4])
			c.typ = castTypes[m[1]]
			c.expr = "(SELECT bqfake_safe_cast(v, '" + m[1] + "') FROM (SELECT " + text + " AS v) WHERE bqfake_regexp_contains(v, " + sqliteLiteral(m[5]) + "))"
		case "decimal":
			var key, typeKey string
			text, key, err = memberSQL("bqfake_json_value", m[1], m[2], m[3])
			if err == nil {
				typeKey, err = unquote(m[5])
			}
			if err == nil && key != typeKey {
				err = invalidQuery("bqfake: a decimal column reads two members, %s and %s", m[1]+m[2], m[5])
			}
			c.typ = "NUMERIC"
			c.expr = "(SELECT n FROM (SELECT v, bqfake_safe_cast(v, 'NUMERIC') AS n FROM (SELECT " + text + " AS v)) WHERE bqfake_regexp_contains(v, " + sqliteLiteral(m[4]) +
				") OR bqfake_json_type(fields, " + sqliteLiteral(typeKey) + ") = 'number' AND bqfake_regexp_contains(v, " + sqliteLiteral(m[6]) +
				") AND bqfake_safe_cast(n, 'FLOAT64') = bqfake_safe_cast(v, 'FLOAT64'))"
		case "timestamp":
			text, _, err = memberSQL("bqfake_json_value", m[2], m[3], m[4])
			c.typ = "TIMESTAMP"
			c.expr = "(SELECT bqfake_safe_cast(CASE WHEN length(v) = 10 THEN v || ' 00:00:00+00:00' WHEN bqfake_regexp_contains(v, " + sqliteLiteral(m[1]) +
				") THEN v ELSE v || '+00:00' END, 'TIMESTAMP') FROM (SELECT " + text + " AS v) WHERE bqfake_regexp_contains(v, " + sqliteLiteral(m[5]) + "))"
		case "array":
			var arr string
			arr, _, err = memberSQL("bqfake_json_value_array", m[1], m[2], m[3])
			c.mode = "REPEATED"
			// ARRAY_AGG of no element is NULL, and COALESCE makes it [].
			c.expr = "COALESCE((SELECT CASE WHEN count(*) > 0 AND sum(e.type = 'null') = 0 THEN json_group_array(e.value) END FROM json_each(" + arr + ") AS e), '[]')"
		case "string":
			var key, typeKey, jsonText string
			if typeKey, err = unquote(m[1]); err != nil {
				return c, 0, err
			}
			if jsonText, key, err = memberSQL("bqfake_json_query", m[2], m[3], m[4]); err != nil {
				return c, 0, err
			}
			if key != typeKey {
				return c, 0, invalidQuery("bqfake: a string column reads two members, %s and %s", m[1], m[2]+m[3])
			}
			text, _, err = memberSQL("bqfake_json_value", m[5], m[6], m[7])
			c.expr = "CASE WHEN bqfake_json_type(fields, " + sqliteLiteral(key) + ") IN ('object', 'array') THEN " + jsonText + " ELSE " + text + " END"
		}
		return c, len(m[0]), err
	}
	return c, 0, invalidQuery("bqfake: unsupported view column near %.60q", rest)
}

// recogniseView prepares a CREATE OR REPLACE VIEW of the sink's shape. The
// field names and the form id arrive as string literals; they are decoded
// here exactly as GoogleSQL decodes them, and reach SQLite as literals of
// its own syntax.
func (s *Server) recogniseView(refs []string, descLit, colsText, formLit string, allOfTime bool) (*statement, error) {
	formID, err := unquote(formLit)
	if err != nil {
		return nil, err
	}
	var desc string
	if descLit != "" {
		if desc, err = unquote(descLit); err != nil {
			return nil, err
		}
	}
	var cols []viewColumn
	for rest := colsText; rest != ""; {
		c, n, err := parseViewColumn(rest)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
		rest = rest[n:]
	}
	return &statement{kind: "CREATE_VIEW", refs: refs, run: func(s *Server, _ map[string]param) (*result, error) {
		b, fields, err := viewSelect(cols)
		if err != nil {
			return nil, err
		}
		b.WriteString(" FROM " + quoteIdent(refs[1]) + " WHERE form_id = " + sqliteLiteral(formID) + " AND deleted_at IS NULL")
		read := viewRead{table: refs[1], span: allPartitions,
			cols: []string{"form_id", "submission_id", "submission_key", "created_at", "is_spam", "synced_at", "deleted_at"}}
		if allOfTime {
			read.span = everyPartition
		}
		if len(cols) > 0 {
			read.cols = append(read.cols, "fields")
		}
		if strings.Contains(colsText, "fields_text") {
			read.cols = append(read.cols, "fields_text")
		}
		return s.createView(refs[0], b.String(), fields, desc, read)
	}}, nil
}

// createView (re)makes the SQLite view behind a BigQuery view, with the
// schema tables.get shows.
func (s *Server) createView(ref, query string, fields []*bqv2.TableFieldSchema, desc string, read viewRead) (*result, error) {
	p, d, t, _ := splitRef(ref)
	if old := s.tables[ref]; old != nil && old.Type != "VIEW" {
		return nil, invalidQuery("%s is not a view", ref)
	}
	return s.tx(func(tx *sql.Tx) (*result, error) {
		if _, err := exec(tx, "DROP VIEW IF EXISTS "+quoteIdent(ref)); err != nil {
			return nil, err
		}
		if _, err := exec(tx, "CREATE VIEW "+quoteIdent(ref)+" AS "+query); err != nil {
			return nil, err
		}
		s.tables[ref] = &bqv2.Table{
			Kind: "bigquery#table", Id: p + ":" + d + "." + t, Type: "VIEW",
			TableReference: &bqv2.TableReference{ProjectId: p, DatasetId: d, TableId: t},
			Schema:         &bqv2.TableSchema{Fields: fields},
			View:           &bqv2.ViewDefinition{Query: query},
			Description:    desc,
			CreationTime:   s.opts.Now().UnixMilli(),
		}
		s.viewReads[ref] = read
		s.stats.DDL[d+"."+t]++
		return nil, nil
	})
}

// viewRead is what a query of a view reads of its base table. BigQuery
// applies a view's query to the tables it names: a query of the view is
// billed for the columns of the table the view reads, in the partitions
// its filter on the partitioning column selects, and is refused when the
// table requires a partition filter and the view has none.
type viewRead struct {
	table string
	cols  []string
	span  span
	// also are the reads of the view's other tables.
	also []viewRead
}

// scanRead bills a query that reads every column of ref, a table or a
// view: a view's read is its base table's (viewRead), checked against a
// partition filter the table requires.
func (s *Server) scanRead(tx *sql.Tx, ref string) error {
	if t := s.tables[ref]; t != nil && t.Type == "VIEW" {
		if v, ok := s.viewReads[ref]; ok {
			for _, r := range v.also {
				if err := s.scan(tx, r.table, r.cols, r.span); err != nil {
					return err
				}
			}
			return s.scan(tx, v.table, v.cols, v.span)
		}
	}
	return s.scan(tx, ref, nil, allPartitions)
}

// member returns the member key of the JSON object text, as raw JSON with
// numbers as written; ok is false when text is not an object or lacks key.
func member(text, key string) (json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		return nil, false
	}
	v, ok := obj[key]
	return v, ok
}

// scalarText is JSON_VALUE's text of a JSON scalar; ok is false for null,
// an object or an array.
func scalarText(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	case 'n', '{', '[':
		return "", false
	}
	return string(v), true
}

// jsonType is JSON_TYPE of a JSON value.
func jsonType(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0:
		return ""
	case v[0] == '"':
		return "string"
	case v[0] == '{':
		return "object"
	case v[0] == '[':
		return "array"
	case v[0] == 't' || v[0] == 'f':
		return "boolean"
	case v[0] == 'n':
		return "null"
	}
	return "number"
}

var regexps sync.Map // pattern -> *regexp.Regexp

// jsonNumber is a JSON number as BigQuery's JSON type writes it: an
// integer an INT64 or a UINT64 holds in digits, anything else as the
// FLOAT64 it became, in 15 significant digits when they read back as the
// same FLOAT64, else 17, with an exponent below 1e-4 or from 1e15, and
// ".0" after a whole number (1e2 as 100.0, 0.00001 as 1e-05).
func jsonNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return strconv.FormatUint(n, 10)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	out := strconv.FormatFloat(f, 'g', 15, 64)
	if back, _ := strconv.ParseFloat(out, 64); back != f {
		out = strconv.FormatFloat(f, 'g', 17, 64)
	}
	if !strings.ContainsAny(out, ".eIN") {
		out += ".0"
	}
	return out
}

// rewriteNumbers is the compact JSON text of v with every number written
// by number.
func rewriteNumbers(v json.RawMessage, number func(string) string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return "", err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case json.Number:
			return json.Number(number(string(x)))
		}
		return v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(walk(x)); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func init() {
	text := func(v driver.Value) (string, bool) {
		switch x := v.(type) {
		case string:
			return x, true
		case []byte:
			return string(x), true
		case int64:
			return strconv.FormatInt(x, 10), true
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), true
		}
		return "", false
	}
	memberFn := func(name string, fn func(v json.RawMessage) (driver.Value, error)) {
		err := sqlite.RegisterDeterministicScalarFunction(name, 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			doc, ok1 := text(args[0])
			key, ok2 := text(args[1])
			if !ok1 || !ok2 {
				return nil, nil
			}
			v, ok := member(doc, key)
			if !ok {
				return nil, nil
			}
			return fn(v)
		})
		if err != nil {
			panic(err)
		}
	}
	// Each function twice: on the JSON column, whose numbers read as
	// BigQuery's JSON type writes them (jsonNumber), and on a STRING of
	// JSON text (fields_text, "_text"), whose numbers keep their text.
	for _, suffix := range []string{"", "_text"} {
		number := jsonNumber
		if suffix == "_text" {
			number = func(s string) string { return s }
		}
		memberFn("bqfake_json_value"+suffix, func(v json.RawMessage) (driver.Value, error) {
			if jsonType(v) == "number" {
				return number(string(bytes.TrimSpace(v))), nil
			}
			if s, ok := scalarText(v); ok {
				return s, nil
			}
			return nil, nil
		})
		memberFn("bqfake_json_query"+suffix, func(v json.RawMessage) (driver.Value, error) {
			if jsonType(v) == "null" {
				return nil, nil
			}
			out, err := rewriteNumbers(v, number)
			if err != nil {
				return nil, nil
			}
			return out, nil
		})
		// JSON_VALUE_ARRAY: NULL unless an array of scalars (JSON null
		// included, as a NULL element).
		memberFn("bqfake_json_value_array"+suffix, func(v json.RawMessage) (driver.Value, error) {
			var elems []json.RawMessage
			if jsonType(v) != "array" || json.Unmarshal(v, &elems) != nil {
				return nil, nil
			}
			out := make([]any, len(elems))
			for i, e := range elems {
				switch jsonType(e) {
				case "object", "array":
					return nil, nil
				case "null":
					out[i] = nil
				case "number":
					out[i] = number(string(bytes.TrimSpace(e)))
				default:
					out[i], _ = scalarText(e)
				}
			}
			b, err := json.Marshal(out)
			return string(b), err
		})
	}
	memberFn("bqfake_json_type", func(v json.RawMessage) (driver.Value, error) { return jsonType(v), nil })
	err := sqlite.RegisterDeterministicScalarFunction("bqfake_regexp_contains", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		s, ok1 := text(args[0])
		pattern, ok2 := text(args[1])
		if !ok1 || !ok2 {
			return nil, nil
		}
		re, ok := regexps.Load(pattern)
		if !ok {
			c, err := regexp.Compile(pattern)
			if err != nil {
				//lint:ignore ST1005 BigQuery's own wording, which a test comparing the fake's errors with BigQuery's sees
				return nil, fmt.Errorf("Cannot parse regular expression: %v", err)
			}
			re, _ = regexps.LoadOrStore(pattern, c)
		}
		if re.(*regexp.Regexp).MatchString(s) {
			return int64(1), nil
		}
		return int64(0), nil
	})
	if err != nil {
		panic(err)
	}
	err = sqlite.RegisterDeterministicScalarFunction("bqfake_safe_cast", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		s, ok1 := text(args[0])
		typ, ok2 := text(args[1])
		if !ok1 || !ok2 {
			return nil, nil
		}
		return safeCast(s, typ), nil
	})
	if err != nil {
		panic(err)
	}
}

// safeCast is SAFE_CAST(s AS typ) of a STRING, as BigQuery casts it, in
// the fake's storage form (BOOL 0/1, TIMESTAMP microseconds, NUMERIC and
// DATE as text); nil where the cast fails.
func safeCast(s, typ string) driver.Value {
	switch typ {
	case "BOOL":
		switch {
		case strings.EqualFold(s, "true"):
			return int64(1)
		case strings.EqualFold(s, "false"):
			return int64(0)
		}
	case "INT64":
		// Spaces around, a sign, and hexadecimal are accepted.
		t := strings.TrimSpace(s)
		neg := strings.HasPrefix(t, "-")
		t = strings.TrimPrefix(strings.TrimPrefix(t, "-"), "+")
		base := 10
		if h, ok := strings.CutPrefix(strings.ToLower(t), "0x"); ok {
			t, base = h, 16
		}
		if t == "" || strings.ContainsAny(t[:1], "+-") {
			return nil
		}
		if neg {
			t = "-" + t
		}
		if n, err := strconv.ParseInt(t, base, 64); err == nil {
			return n
		}
	case "NUMERIC":
		return numeric(strings.TrimSpace(s))
	case "FLOAT64":
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f
		}
	case "DATE":
		if m := castDateRE.FindStringSubmatch(s); m != nil {
			if d, ok := civilDate(m[1], m[2], m[3]); ok {
				return d.Format("2006-01-02")
			}
		}
	case "TIMESTAMP":
		if us, ok := castTimestamp(s); ok {
			return us
		}
	}
	return nil
}

var (
	castDateRE      = regexp.MustCompile(`^([0-9]{1,4})-([0-9]{1,2})-([0-9]{1,2})$`)
	castTimestampRE = regexp.MustCompile(`^([0-9]{1,4})-([0-9]{1,2})-([0-9]{1,2})(?:[Tt ]([0-9]{1,2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?)?(?:(Z|z)|([+-])([0-9]{1,2})(?::([0-9]{2}))?)?$`)
	numericRE       = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
)

// civilDate is the day y-m-d when it exists between 0001-01-01 and
// 9999-12-31.
func civilDate(y, m, d string) (time.Time, bool) {
	yy, _ := strconv.Atoi(y)
	mm, _ := strconv.Atoi(m)
	dd, _ := strconv.Atoi(d)
	t := time.Date(yy, time.Month(mm), dd, 0, 0, 0, 0, time.UTC)
	if yy < 1 || t.Year() != yy || int(t.Month()) != mm || t.Day() != dd {
		return time.Time{}, false
	}
	return t, true
}

// castTimestamp reads a timestamp as CAST(s AS TIMESTAMP) does with the
// default time zone, UTC: a date (midnight), 'T', 't' or ' ', up to nine
// fractional digits (microseconds kept), and Z or a numeric offset.
func castTimestamp(s string) (int64, bool) {
	m := castTimestampRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	t, ok := civilDate(m[1], m[2], m[3])
	if !ok {
		return 0, false
	}
	if m[4] != "" {
		h, _ := strconv.Atoi(m[4])
		mi, _ := strconv.Atoi(m[5])
		sec, _ := strconv.Atoi(m[6])
		if h > 23 || mi > 59 || sec > 59 {
			return 0, false
		}
		frac := (m[7] + "000000000")[:9]
		ns, _ := strconv.Atoi(frac)
		t = t.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second + time.Duration(ns))
	}
	if m[9] != "" {
		h, _ := strconv.Atoi(m[10])
		mi, _ := strconv.Atoi(m[11])
		off := time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute
		if m[9] == "+" {
			off = -off
		}
		t = t.Add(off)
	}
	if t.Year() < 1 || t.Year() > 9999 {
		return 0, false
	}
	return t.UnixMicro(), true
}

// numeric is s cast to NUMERIC (38 digits, 9 after the point, rounded
// half away from zero) as its canonical text, or nil.
func numeric(s string) driver.Value {
	if !numericRE.MatchString(s) {
		return nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil
	}
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(9), nil)
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(scale))
	n := new(big.Int).Quo(scaled.Num(), scaled.Denom())
	rem := new(big.Rat).Sub(scaled, new(big.Rat).SetInt(n))
	if rem.Abs(rem).Cmp(big.NewRat(1, 2)) >= 0 {
		if scaled.Sign() < 0 {
			n.Sub(n, big.NewInt(1))
		} else {
			n.Add(n, big.NewInt(1))
		}
	}
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(38), nil)
	if new(big.Int).Abs(n).Cmp(limit) >= 0 {
		return nil
	}
	out := new(big.Rat).SetFrac(n, scale).FloatString(9)
	out = strings.TrimRight(out, "0")
	out = strings.TrimSuffix(out, ".")
	if out == "-0" {
		out = "0"
	}
	return out
}

// The sink's view of two selects: the inner one reads, per type, the
// members of the fields of that type (JSON text, from d, the row's exact
// text or the JSON column's text) into an array of typed values,
// t_<type>; the outer one gives each column its element,
// t_<type>[OFFSET(i)].v. Each piece is recognised against the shapes
// below; in SQLite the inner select has a column per member (t_<type>_i,
// its JSON text) and the outer one types each.
var (
	splitViewRE = regexp.MustCompile("^CREATE OR REPLACE VIEW `\\?`(?: OPTIONS\\(description = (" + litRE + ")\\))? AS SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at" +
		"(.*)" +
		" FROM \\( SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at" +
		"(.*)" +
		" FROM `\\?`, UNNEST\\(\\[COALESCE\\(fields_text, TO_JSON_STRING\\(fields\\)\\)\\]\\) AS d WHERE form_id = (" + litRE + ") AND deleted_at IS NULL" +
		" AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00\\+00' AND TIMESTAMP '9999-12-31 23:59:59\\.999999\\+00' \\)$")
	elementRE   = regexp.MustCompile("^, (t_[a-z]+)\\[OFFSET\\(([0-9]+)\\)\\]\\.v" + nameRE)
	arrayHeadRE = regexp.MustCompile(`^, ARRAY\(SELECT AS STRUCT (.*?) AS v FROM UNNEST\(\[ `)
	arrayTailRE = regexp.MustCompile(`^ \]\) AS m WITH OFFSET AS o ORDER BY o\) AS (t_[a-z]+)`)
	memberRE    = regexp.MustCompile(`^(?:JSON_QUERY\(d, (` + litRE + `)\)|TO_JSON_STRING\(fields\[(` + litRE + `)\]\))`)
	mText       = `JSON_VALUE\(m\)`
	typedRE     = []struct {
		kind string
		re   *regexp.Regexp
	}{
		{"bool", regexp.MustCompile(`^SAFE_CAST\(` + mText + ` AS BOOL\)$`)},
		{"decimal", regexp.MustCompile(`^\(SELECT n FROM UNNEST\(\[` + mText + `\]\) AS v, UNNEST\(\[SAFE_CAST\(v AS NUMERIC\)\]\) AS n WHERE REGEXP_CONTAINS\(v, ` +
			rawRE + `\) OR NOT STARTS_WITH\(m, '"'\) AND REGEXP_CONTAINS\(v, ` + rawRE +
			`\) AND SAFE_CAST\(n AS FLOAT64\) = SAFE_CAST\(v AS FLOAT64\)\)$`)},
		{"guarded", regexp.MustCompile(`^\(SELECT SAFE_CAST\(v AS (INT64|NUMERIC|DATE)\) FROM UNNEST\(\[` + mText +
			`\]\) AS v WHERE REGEXP_CONTAINS\(v, ` + rawRE + `\)\)$`)},
		{"timestamp", regexp.MustCompile(`^\(SELECT SAFE_CAST\(IF\(LENGTH\(v\) = 10, CONCAT\(v, ' 00:00:00\+00:00'\), IF\(REGEXP_CONTAINS\(v, ` + rawRE +
			`\), v, CONCAT\(v, '\+00:00'\)\)\) AS TIMESTAMP\) FROM UNNEST\(\[` + mText + `\]\) AS v WHERE REGEXP_CONTAINS\(v, ` + rawRE + `\)\)$`)},
		{"array", regexp.MustCompile(`^COALESCE\(\(SELECT ARRAY_AGG\(e ORDER BY o\) FROM UNNEST\(JSON_VALUE_ARRAY\(m\)\) AS e WITH OFFSET AS o HAVING COUNTIF\(e IS NULL\) = 0\), \[\]\)$`)},
		{"string", regexp.MustCompile(`^IF\(STARTS_WITH\(m, '"'\), ` + mText + `, NULLIF\(m, 'null'\)\)$`)},
	}
)

// keyLiteral is a member's key as a SQLite blob: a key may hold a NUL,
// which a text literal would end at.
func keyLiteral(key string) string { return fmt.Sprintf("X'%x'", key) }

// parseMember recognises a member at the start of rest: the SQLite
// expression of its JSON text, and the length of its text.
func parseMember(rest string) (expr string, n int, err error) {
	g := memberRE.FindStringSubmatch(rest)
	if g == nil {
		return "", 0, invalidQuery("bqfake: unsupported view member near %.60q", rest)
	}
	if g[1] != "" {
		p, err := unquote(g[1])
		if err != nil {
			return "", 0, err
		}
		key, ok := strings.CutPrefix(p, `$."`)
		key, ok2 := strings.CutSuffix(key, `"`)
		if !ok || !ok2 || strings.ContainsAny(key, `"\`) {
			return "", 0, invalidQuery(`bqfake: unsupported JSONPath %s (the fake reads $."key" of a key without " or \)`, g[1])
		}
		return "bqfake_member(d, " + keyLiteral(key) + ")", len(g[0]), nil
	}
	key, err := unquote(g[2])
	if err != nil {
		return "", 0, err
	}
	// TO_JSON_STRING of the JSON column's member: its numbers as the
	// JSON type writes them.
	return "bqfake_to_json_string(bqfake_member(fields, " + keyLiteral(key) + "))", len(g[0]), nil
}

// typing is one array's typed expression: the column's BigQuery type and
// mode, and its SQLite expression of a member's JSON text m.
type typing struct {
	typ, mode string
	expr      func(m string) string
}

// parseTyping recognises the typed expression of an array's elements.
func parseTyping(expr string) (typing, error) {
	for _, shape := range typedRE {
		g := shape.re.FindStringSubmatch(expr)
		if g == nil {
			continue
		}
		text := func(m string) string { return "bqfake_json_value1(" + m + ")" }
		switch shape.kind {
		case "bool":
			return typing{"BOOLEAN", "NULLABLE", func(m string) string { return "bqfake_safe_cast(" + text(m) + ", 'BOOL')" }}, nil
		case "guarded":
			return typing{castTypes[g[1]], "NULLABLE", func(m string) string {
				return "(SELECT bqfake_safe_cast(v, '" + g[1] + "') FROM (SELECT " + text(m) + " AS v) WHERE bqfake_regexp_contains(v, " + sqliteLiteral(g[2]) + "))"
			}}, nil
		case "decimal":
			return typing{"NUMERIC", "NULLABLE", func(m string) string {
				return "(SELECT n FROM (SELECT v, bqfake_safe_cast(v, 'NUMERIC') AS n FROM (SELECT " + text(m) + " AS v)) WHERE bqfake_regexp_contains(v, " + sqliteLiteral(g[1]) +
					") OR NOT (substr(" + m + ", 1, 1) = '\"') AND bqfake_regexp_contains(v, " + sqliteLiteral(g[2]) +
					") AND bqfake_safe_cast(n, 'FLOAT64') = bqfake_safe_cast(v, 'FLOAT64'))"
			}}, nil
		case "timestamp":
			return typing{"TIMESTAMP", "NULLABLE", func(m string) string {
				return "(SELECT bqfake_safe_cast(CASE WHEN length(v) = 10 THEN v || ' 00:00:00+00:00' WHEN bqfake_regexp_contains(v, " + sqliteLiteral(g[1]) +
					") THEN v ELSE v || '+00:00' END, 'TIMESTAMP') FROM (SELECT " + text(m) + " AS v) WHERE bqfake_regexp_contains(v, " + sqliteLiteral(g[2]) + "))"
			}}, nil
		case "array":
			// ARRAY_AGG of no element is NULL, and COALESCE makes it [].
			return typing{"STRING", "REPEATED", func(m string) string {
				return "COALESCE((SELECT CASE WHEN count(*) > 0 AND sum(e.type = 'null') = 0 THEN json_group_array(e.value) END FROM json_each(bqfake_json_value_array1(" + m + ")) AS e), '[]')"
			}}, nil
		case "string":
			return typing{"STRING", "NULLABLE", func(m string) string {
				return "CASE WHEN substr(" + m + ", 1, 1) = '\"' THEN " + text(m) + " ELSE NULLIF(" + m + ", 'null') END"
			}}, nil
		}
	}
	return typing{}, invalidQuery("bqfake: unsupported typed expression of a view's array near %.60q", expr)
}

// viewArray is one t_<type> of the inner select: its typing and its
// members' SQLite expressions.
type viewArray struct {
	typing
	members []string
}

// parseArrays recognises the inner select's arrays.
func parseArrays(rest string) (map[string]*viewArray, []string, error) {
	arrays := map[string]*viewArray{}
	var order []string
	for rest != "" {
		g := arrayHeadRE.FindStringSubmatch(rest)
		if g == nil {
			return nil, nil, invalidQuery("bqfake: unsupported view array near %.60q", rest)
		}
		ty, err := parseTyping(g[1])
		if err != nil {
			return nil, nil, err
		}
		a := &viewArray{typing: ty}
		rest = rest[len(g[0]):]
		for {
			expr, n, err := parseMember(rest)
			if err != nil {
				return nil, nil, err
			}
			a.members = append(a.members, expr)
			rest = rest[n:]
			if next, ok := strings.CutPrefix(rest, ", "); ok {
				rest = next
				continue
			}
			break
		}
		t := arrayTailRE.FindStringSubmatch(rest)
		if t == nil {
			return nil, nil, invalidQuery("bqfake: unsupported view array end near %.60q", rest)
		}
		if arrays[t[1]] != nil {
			return nil, nil, invalidQuery("Duplicate column names in the result are not supported. Found duplicate(s): %s", t[1])
		}
		arrays[t[1]] = a
		order = append(order, t[1])
		rest = rest[len(t[0]):]
	}
	return arrays, order, nil
}

// recogniseSplitView prepares a CREATE OR REPLACE VIEW of the sink's
// two-select shape (splitViewRE's groups: the description, the outer
// columns, the inner arrays, the form id).
func (s *Server) recogniseSplitView(refs []string, descLit, outerText, innerText, formLit string) (*statement, error) {
	formID, err := unquote(formLit)
	if err != nil {
		return nil, err
	}
	var desc string
	if descLit != "" {
		if desc, err = unquote(descLit); err != nil {
			return nil, err
		}
	}
	arrays, order, err := parseArrays(innerText)
	if err != nil {
		return nil, err
	}
	var inner strings.Builder
	inner.WriteString("SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at")
	for _, name := range order {
		for i, m := range arrays[name].members {
			inner.WriteString(", " + m + " AS " + quoteIdent(name+"_"+strconv.Itoa(i)))
		}
	}
	var cols []viewColumn
	for rest := outerText; rest != ""; {
		g := elementRE.FindStringSubmatch(rest)
		if g == nil {
			return nil, invalidQuery("bqfake: unsupported view column near %.60q", rest)
		}
		a := arrays[g[1]]
		if a == nil {
			return nil, invalidQuery("Unrecognized name: %s", g[1])
		}
		i, err := strconv.Atoi(g[2])
		if err != nil || i >= len(a.members) {
			return nil, invalidQuery("Array index %s is out of bounds (overflow)", g[2])
		}
		cols = append(cols, viewColumn{name: g[3], typ: a.typ, mode: a.mode, expr: a.expr(quoteIdent(g[1] + "_" + g[2]))})
		rest = rest[len(g[0]):]
	}
	return &statement{kind: "CREATE_VIEW", refs: refs, run: func(s *Server, _ map[string]param) (*result, error) {
		b, fields, err := viewSelect(cols)
		if err != nil {
			return nil, err
		}
		b.WriteString(" FROM (" + inner.String() + " FROM (SELECT *, COALESCE(fields_text, bqfake_to_json_string(fields)) AS d FROM " + quoteIdent(refs[1]) +
			" WHERE form_id = " + sqliteLiteral(formID) + " AND deleted_at IS NULL))")
		read := viewRead{table: refs[1], span: everyPartition,
			cols: []string{"form_id", "submission_id", "submission_key", "created_at", "is_spam", "synced_at", "deleted_at", "fields", "fields_text"}}
		return s.createView(refs[0], b.String(), fields, desc, read)
	}}, nil
}

// lastDoc caches the members of the JSON object text a view's members were
// last read from: a view reads every member of one row's text in turn.
var lastDoc struct {
	sync.Mutex
	text    string
	members map[string]json.RawMessage
	ok      bool
}

// memberOf is member with the object's parse kept for the next call.
func memberOf(text, key string) (json.RawMessage, bool) {
	lastDoc.Lock()
	defer lastDoc.Unlock()
	if lastDoc.members == nil || lastDoc.text != text {
		var obj map[string]json.RawMessage
		lastDoc.ok = json.Unmarshal([]byte(text), &obj) == nil
		lastDoc.text, lastDoc.members = text, obj
	}
	if !lastDoc.ok {
		return nil, false
	}
	v, ok := lastDoc.members[key]
	return v, ok
}

// The functions of the two-select view:
//
//	bqfake_member(json, key)          the member's JSON text as written (JSON_QUERY of a STRING), NULL when absent
//	bqfake_to_json_string(json)       TO_JSON_STRING of a JSON value: numbers as the JSON type writes them
//	bqfake_json_value1(text)          JSON_VALUE of JSON text: a scalar's text, numbers as written, NULL otherwise
//	bqfake_json_value_array1(text)    JSON_VALUE_ARRAY of JSON text: a JSON array of the elements' text (null for null)
func init() {
	text := func(v driver.Value) (string, bool) {
		switch x := v.(type) {
		case string:
			return x, true
		case []byte:
			return string(x), true
		}
		return "", false
	}
	register := func(name string, nArgs int, fn func(args []string) (driver.Value, error)) {
		err := sqlite.RegisterDeterministicScalarFunction(name, int32(nArgs), func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			in := make([]string, len(args))
			for i, a := range args {
				s, ok := text(a)
				if !ok {
					return nil, nil
				}
				in[i] = s
			}
			return fn(in)
		})
		if err != nil {
			panic(err)
		}
	}
	register("bqfake_member", 2, func(a []string) (driver.Value, error) {
		v, ok := memberOf(a[0], a[1])
		if !ok {
			return nil, nil
		}
		return string(bytes.TrimSpace(v)), nil
	})
	// SQLite evaluates the view's d once per member that reads it: the
	// last text is kept.
	var lastJSON struct {
		sync.Mutex
		in, out string
		ok      bool
	}
	register("bqfake_to_json_string", 1, func(a []string) (driver.Value, error) {
		lastJSON.Lock()
		defer lastJSON.Unlock()
		if !lastJSON.ok || lastJSON.in != a[0] {
			out, err := rewriteNumbers(json.RawMessage(a[0]), jsonNumber)
			if err != nil {
				return nil, nil
			}
			lastJSON.in, lastJSON.out, lastJSON.ok = a[0], out, true
		}
		return lastJSON.out, nil
	})
	register("bqfake_json_value1", 1, func(a []string) (driver.Value, error) {
		v := json.RawMessage(a[0])
		if jsonType(v) == "number" {
			return string(bytes.TrimSpace(v)), nil
		}
		if s, ok := scalarText(v); ok {
			return s, nil
		}
		return nil, nil
	})
	register("bqfake_json_value_array1", 1, func(a []string) (driver.Value, error) {
		v := json.RawMessage(a[0])
		var elems []json.RawMessage
		if jsonType(v) != "array" || json.Unmarshal(v, &elems) != nil {
			return nil, nil
		}
		out := make([]any, len(elems))
		for i, e := range elems {
			switch jsonType(e) {
			case "object", "array":
				return nil, nil
			case "null":
				out[i] = nil
			case "number":
				out[i] = string(bytes.TrimSpace(e))
			default:
				out[i], _ = scalarText(e)
			}
		}
		b, err := json.Marshal(out)
		return string(b), err
	})
}

// BigQuery's limits on a query's text (quotas page, "Query jobs": 1,024 K
// characters of unresolved GoogleSQL) and on a view's ("View limits": 256
// K characters of its query), counted in characters and taken as
// thousands, as the sink takes them.
const (
	queryTextLimit = 1_024_000
	viewTextLimit  = 256_000
)

// viewHeadRE is the part of a CREATE VIEW statement before its query.
var viewHeadRE = regexp.MustCompile("(?is)^\\s*CREATE\\s+OR\\s+REPLACE\\s+VIEW\\s+`[^`]*`\\s*(?:OPTIONS\\s*\\(\\s*description\\s*=\\s*'(?:[^'\\\\]|\\\\.)*'\\s*\\)\\s*)?AS\\s")

// textLimits refuses, as BigQuery does, a query longer than it takes,
// and a view whose query is.
func textLimits(q string) error {
	if n := utf8.RuneCountInString(q); n > queryTextLimit {
		return invalidQuery("The query is too large. The maximum standard SQL query length is %d characters, including comments and white space characters.", queryTextLimit)
	}
	if m := viewHeadRE.FindStringIndex(q); m != nil {
		if n := utf8.RuneCountInString(q[m[1]:]); n > viewTextLimit {
			return invalidQuery("The view query is too long: %d characters, the maximum is %d", n, viewTextLimit)
		}
	}
	return nil
}

// viewSelect starts the SELECT of a form view with the row columns and
// cols, and returns it with the view's schema; two columns of one name are
// refused, as BigQuery refuses them.
func viewSelect(cols []viewColumn) (*strings.Builder, []*bqv2.TableFieldSchema, error) {
	fields := []*bqv2.TableFieldSchema{
		col("form_id", "STRING"), col("submission_id", "INTEGER"), col("submission_key", "STRING"),
		col("created_at", "TIMESTAMP"), col("is_spam", "BOOLEAN"), col("synced_at", "TIMESTAMP"),
	}
	seen := map[string]bool{}
	b := new(strings.Builder)
	b.WriteString("SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at")
	for _, c := range cols {
		if seen[c.name] {
			return nil, nil, invalidQuery("Duplicate column names in the result are not supported. Found duplicate(s): %s", c.name)
		}
		seen[c.name] = true
		b.WriteString(", " + c.expr + " AS " + quoteIdent(c.name))
		fields = append(fields, &bqv2.TableFieldSchema{Name: c.name, Type: c.typ, Mode: c.mode})
	}
	return b, fields, nil
}
