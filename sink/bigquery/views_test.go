package bigquery

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/bqfake"
)

// typedRow is a submission of form with the given fields, n seconds after
// t0, with id n.
func (b *bundle) typedRow(t *testing.T, form string, n int, fields string) sink.Row {
	t.Helper()
	id := int64(n)
	r, err := sink.NewRow(form, &id, b.t0.Add(time.Duration(n)*time.Second).Truncate(time.Millisecond), false, json.RawMessage(fields), json.RawMessage(`[]`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// typedState is the state a worker commits after reading rows on top of
// prev: the field names and the types seen widened by every row, as the
// worker fills them.
func typedState(t *testing.T, prev state.Form, rows []sink.Row) state.Form {
	t.Helper()
	next := prev
	names := slices.Clone(prev.FieldNames)
	next.FieldTypes.Seen = maps.Clone(prev.FieldTypes.Seen)
	for _, r := range rows {
		next.FieldTypes.Seen = next.FieldTypes.Seen.Observe([]byte(r.Fields))
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.Fields), &obj); err != nil {
			t.Fatal(err)
		}
		for k := range obj {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
		next.Watermark = next.Watermark.Advance(r.CreatedAt, *r.SubmissionID, r.SubmissionKey)
	}
	slices.Sort(names)
	next.FieldNames = names
	return next
}

// viewSchema reads a view's columns through tables.get: name to type, with
// "[]" after the type of a REPEATED one.
func viewSchema(t *testing.T, b *bundle, view string) map[string]string {
	t.Helper()
	client, err := bq.NewClient(t.Context(), b.cfg.Project, clientOptions(b.fake)...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	meta, err := client.Dataset(b.cfg.Dataset).Table(view).Metadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if meta.Type != bq.ViewTable {
		t.Fatalf("%s is a %s, not a view", view, meta.Type)
	}
	out := map[string]string{}
	for _, f := range meta.Schema {
		typ := string(f.Type)
		if f.Repeated {
			typ += "[]"
		}
		out[f.Name] = typ
	}
	return out
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// column is one view column's values, by submission_key.
func column(rows []map[string]bq.Value, name string) map[string]bq.Value {
	out := map[string]bq.Value{}
	for _, r := range rows {
		out[r["submission_key"].(string)] = r[name]
	}
	return out
}

var valueCmp = cmp.Comparer(func(a, b *big.Rat) bool { return a == nil && b == nil || a != nil && b != nil && a.Cmp(b) == 0 })

// TestTypedViewColumns: a form whose fields hold integers, decimals,
// booleans, dates, timestamps, checkbox arrays and free text gets view
// columns of those types (BigQuery's, as tables.get shows them) and values.
// Then a submission says "n/a" in the integer field: the commit succeeds,
// the column widens to STRING, every earlier value is still there (as
// text), and the query that read the view before still runs. A pin casts
// safely: a value that does not fit the pinned type is NULL, not an error.
func TestTypedViewColumns(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	const form = "typed"
	view := sqlname.ViewName(form)
	rows := []sink.Row{
		b.typedRow(t, form, 1, `{"count":3,"price":"12.50","agreed":true,"born":"1990-05-17","seen":"2026-03-01T10:00:00","colours":["red","blue"],"notes":"hello"}`),
		b.typedRow(t, form, 2, `{"count":"41","price":0.1,"agreed":"FALSE","born":"2000-02-29","seen":"2026-03-01 10:00:00.5+02:00","colours":[],"notes":{"a":[1,2]}}`),
		// A decimal the JSON column cannot hold exactly: the view reads
		// fields_text. A date in a timestamp column is its midnight, UTC.
		b.typedRow(t, form, 3, `{"count":-7,"price":12345678901234567890.123456789,"agreed":false,"born":"2026-12-31","seen":"2026-03-02","colours":["x",1,true],"notes":"7"}`),
		b.typedRow(t, form, 4, `{"notes":null,"colours":null}`),
	}
	st := typedState(t, formState(form, nil), rows)
	wantTypes := fieldtype.Set{"count": fieldtype.Integer, "price": fieldtype.Decimal, "agreed": fieldtype.Boolean, "born": fieldtype.Date,
		"seen": fieldtype.Timestamp, "colours": fieldtype.Array, "notes": fieldtype.String}
	if diff := cmp.Diff(wantTypes, st.FieldTypes.Seen); diff != "" {
		t.Fatalf("setup: the types the rows have (-want +got):\n%s", diff)
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{st, rows})

	wantSchema := map[string]string{
		"form_id": "STRING", "submission_id": "INTEGER", "submission_key": "STRING", "created_at": "TIMESTAMP", "is_spam": "BOOLEAN", "synced_at": "TIMESTAMP",
		"count": "INTEGER", "price": "NUMERIC", "agreed": "BOOLEAN", "born": "DATE", "seen": "TIMESTAMP", "colours": "STRING[]", "notes": "STRING",
	}
	if diff := cmp.Diff(wantSchema, viewSchema(t, b, view)); diff != "" {
		t.Errorf("view schema (-want +got):\n%s", diff)
	}
	got := readView(t, b, form)
	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := map[string]map[string]bq.Value{
		"count":   {"1": int64(3), "2": int64(41), "3": int64(-7), "4": nil},
		"price":   {"1": rat("12.5"), "2": rat("0.1"), "3": rat("12345678901234567890.123456789"), "4": nil},
		"agreed":  {"1": true, "2": false, "3": false, "4": nil},
		"born":    {"1": civil.Date{Year: 1990, Month: 5, Day: 17}, "2": civil.Date{Year: 2000, Month: 2, Day: 29}, "3": civil.Date{Year: 2026, Month: 12, Day: 31}, "4": nil},
		"seen":    {"1": ts("2026-03-01T10:00:00Z"), "2": ts("2026-03-01T08:00:00.5Z"), "3": ts("2026-03-02T00:00:00Z"), "4": nil},
		"colours": {"1": []bq.Value{"red", "blue"}, "2": []bq.Value{}, "3": []bq.Value{"x", "1", "true"}, "4": []bq.Value{}},
		"notes":   {"1": "hello", "2": `{"a":[1,2]}`, "3": "7", "4": nil},
	}
	checkColumns(t, got, want)

	// "n/a" in the integer field: it widens to a string.
	na := []sink.Row{b.typedRow(t, form, 5, `{"count":"n/a","price":"1.5"}`)}
	prev := readState(t, b.sink, form)[form]
	next := typedState(t, prev, na)
	if next.FieldTypes.Type("count") != fieldtype.String {
		t.Fatalf("setup: count is %s after n/a, want string", next.FieldTypes.Type("count"))
	}
	b.fake.ResetStats()
	res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{next, na})
	if res[form].View != nil || res[form].Inserted != 1 {
		t.Errorf("the commit of n/a: %+v", res[form])
	}
	if n := b.fake.Stats().DDL["formsync_test."+view]; n != 1 {
		t.Errorf("the view was made %d times by the commit that widened it, want 1", n)
	}
	wantSchema["count"] = "STRING"
	if diff := cmp.Diff(wantSchema, viewSchema(t, b, view)); diff != "" {
		t.Errorf("view schema after n/a (-want +got):\n%s", diff)
	}
	got = readView(t, b, form) // the query that read the view before
	want["count"] = map[string]bq.Value{"1": "3", "2": "41", "3": "-7", "4": nil, "5": "n/a"}
	for name, col := range want {
		if name != "count" {
			col["5"] = nil
		}
	}
	want["price"]["5"] = rat("1.5")
	want["colours"]["5"] = []bq.Value{}
	checkColumns(t, got, want)
	if st := readState(t, b.sink, form)[form]; st.FieldTypes.Type("count") != fieldtype.String {
		t.Errorf("stored type of count: %s", st.FieldTypes.Type("count"))
	}

	// Pinned back to an integer (and born to a timestamp): "n/a" does not
	// fit and is NULL; a date is its midnight.
	prev = readState(t, b.sink, form)[form]
	prev.FieldTypes.Pinned = fieldtype.Set{"count": fieldtype.Integer, "born": fieldtype.Timestamp, "notes": fieldtype.Boolean}
	b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{state: prev})
	wantSchema["count"], wantSchema["born"], wantSchema["notes"] = "INTEGER", "TIMESTAMP", "BOOLEAN"
	if diff := cmp.Diff(wantSchema, viewSchema(t, b, view)); diff != "" {
		t.Errorf("view schema with pins (-want +got):\n%s", diff)
	}
	got = readView(t, b, form)
	want["count"] = map[string]bq.Value{"1": int64(3), "2": int64(41), "3": int64(-7), "4": nil, "5": nil}
	want["born"] = map[string]bq.Value{"1": ts("1990-05-17T00:00:00Z"), "2": ts("2000-02-29T00:00:00Z"), "3": ts("2026-12-31T00:00:00Z"), "4": nil, "5": nil}
	want["notes"] = map[string]bq.Value{"1": nil, "2": nil, "3": nil, "4": nil, "5": nil}
	checkColumns(t, got, want)
}

func checkColumns(t *testing.T, rows []map[string]bq.Value, want map[string]map[string]bq.Value) {
	t.Helper()
	for name, w := range want {
		if diff := cmp.Diff(w, column(rows, name), valueCmp); diff != "" {
			t.Errorf("view column %s by submission (-want +got):\n%s", name, diff)
		}
	}
}

// TestTypedViewColumnsHostileNames: names JSONPath cannot spell, and ones
// it can, with values that do and do not fit, through every type.
func TestTypedViewColumnsHostileNames(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	const form = "hostile"
	fields := map[string]any{}
	for i, typ := range fieldtype.Types() {
		for _, name := range []string{string(typ), fmt.Sprintf(`say "%s" \%d`, typ, i)} {
			fields[name] = map[fieldtype.Type]any{
				fieldtype.Boolean: "True", fieldtype.Integer: json.Number("12345678901234"), fieldtype.Decimal: json.Number("-0.000000001"),
				fieldtype.Date: "2024-02-29", fieldtype.Timestamp: "2024-02-29T23:59:59.999999-01:00", fieldtype.Array: []any{"a", json.Number("2")},
				fieldtype.String: "it's `x`",
			}[typ]
		}
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	bad := b.typedRow(t, form, 2, `{"boolean":"yes","integer":"007","decimal":"1e3","date":"2024-2-29","timestamp":"2024-02-29T24:00:00","array":[["nested"]],"string":true}`)
	rows := []sink.Row{b.typedRow(t, form, 1, string(raw)), bad}
	st := typedState(t, formState(form, nil), rows[:1]) // the types of the first row, pinned
	st.FieldTypes.Pinned, st.FieldTypes.Seen = st.FieldTypes.Seen, nil
	st = typedState(t, st, rows[1:])
	st.FieldTypes.Seen = nil
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{st, rows})
	got := readView(t, b, form)
	cols := sqlname.ColumnNames(st.FieldNames, sqlname.ViewFixedColumns())
	schema := viewSchema(t, b, sqlname.ViewName(form))
	wantType := map[fieldtype.Type]string{fieldtype.Boolean: "BOOLEAN", fieldtype.Integer: "INTEGER", fieldtype.Decimal: "NUMERIC", fieldtype.Date: "DATE",
		fieldtype.Timestamp: "TIMESTAMP", fieldtype.Array: "STRING[]", fieldtype.String: "STRING"}
	wantFit := map[fieldtype.Type]bq.Value{
		fieldtype.Boolean: true, fieldtype.Integer: int64(12345678901234), fieldtype.Decimal: rat("-0.000000001"),
		fieldtype.Date: civil.Date{Year: 2024, Month: 2, Day: 29}, fieldtype.Timestamp: time.Date(2024, 3, 1, 0, 59, 59, 999999000, time.UTC),
		fieldtype.Array: []bq.Value{"a", "2"}, fieldtype.String: "it's `x`",
	}
	wantBad := map[fieldtype.Type]bq.Value{fieldtype.Array: []bq.Value{}, fieldtype.String: "true", fieldtype.Decimal: nil}
	for name := range fields {
		typ := st.FieldTypes.Type(name)
		c := cols[name]
		if schema[c] != wantType[typ] {
			t.Errorf("column %s of %q is %s, want %s", c, name, schema[c], wantType[typ])
		}
		if diff := cmp.Diff(wantFit[typ], column(got, c)["1"], valueCmp); diff != "" {
			t.Errorf("column %s of %q, a fitting value (-want +got):\n%s", c, name, diff)
		}
		if strings.HasPrefix(name, "say") {
			continue // the second row has the plain names only
		}
		if diff := cmp.Diff(wantBad[typ], column(got, c)["2"], valueCmp); diff != "" {
			t.Errorf("column %s of %q, a value that does not fit (-want +got):\n%s", c, name, diff)
		}
	}
}
