package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/sinktest"
)

// typedState is the state of form formID after rows: every field name
// they hold, each typed by its values as the worker types them.
func typedState(formID string, rows ...sink.Row) state.Form {
	st := state.New(formID)
	names := map[string]bool{}
	for _, r := range rows {
		st.FieldTypes.Seen = st.FieldTypes.Seen.Observe([]byte(r.Fields))
		var m map[string]json.RawMessage
		json.Unmarshal([]byte(r.Fields), &m)
		for n := range m {
			names[n] = true
		}
	}
	for n := range names {
		st.FieldNames = append(st.FieldNames, n)
	}
	slices.Sort(st.FieldNames)
	return st
}

// column is one field column of a view as a query sees it.
type column struct {
	Type  string // typeof()
	Value any
}

// viewRow reads the field columns of form formID's view for one
// submission, by field name.
func viewRow(t *testing.T, db *sql.DB, formID string, fieldNames []string, id int64) map[string]column {
	t.Helper()
	out := map[string]column{}
	for _, c := range sqlname.ViewColumns(fieldNames) {
		var v any
		var typ string
		col := quoteIdent(c.Name)
		err := db.QueryRow(`SELECT `+col+`, typeof(`+col+`) FROM `+quoteIdent(sqlname.ViewName(formID))+` WHERE submission_id = ?`, id).Scan(&v, &typ)
		if err != nil {
			t.Fatalf("column %s: %v", c.Name, err)
		}
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		out[c.Field] = column{typ, v}
	}
	return out
}

// TestTypedViewWidens: a form's view has a column of each field's type,
// hostile field names included; a value that does not fit widens the
// column in the commit that stores it, which succeeds, and every value
// stored before is still there, as text, for a query written before.
func TestTypedViewWidens(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	const f = "types"
	// Names that collide once sanitised, and names an older SQLite reads
	// wrong by path.
	first := row(t, f, ptr(1), t0, false, `{"age":"41","price":"9.5","consent":true,"born":"1990-05-17","seen":"2026-03-01T10:00:00+02:00",`+
		`"colours":["red","blue"],"note":"hello","it's \"quoted\"":7,"back\\slash":"2026-01-02","日本語":"false","Age":"x","AGE":12}`)
	second := row(t, f, ptr(2), t0, false, `{"age":7,"price":3,"consent":"FALSE","born":"2000-02-29","seen":"2026-03-02 08:00:00",`+
		`"colours":["green"],"note":"","it's \"quoted\"":"-3","back\\slash":"2026-12-31","日本語":true,"Age":"y","AGE":"13"}`)
	st := typedState(f, first, second)
	commit(t, s, sink.FormCommit{State: st, Rows: sinktest.Spool(t, first, second)})

	wantTypes := map[string]string{
		"age": "integer", "price": "real", "consent": "integer", "born": "text", "seen": "text", "colours": "text",
		"note": "text", `it's "quoted"`: "integer", `back\slash`: "text", "日本語": "integer", "Age": "text", "AGE": "integer",
	}
	got := viewRow(t, s.db, f, st.FieldNames, 1)
	want := map[string]column{
		"age": {"integer", int64(41)}, "price": {"real", 9.5}, "consent": {"integer", int64(1)}, "born": {"text", "1990-05-17"},
		"seen": {"text", "2026-03-01T08:00:00.000000Z"}, "colours": {"text", `["red","blue"]`}, "note": {"text", "hello"},
		`it's "quoted"`: {"integer", int64(7)}, `back\slash`: {"text", "2026-01-02"}, "日本語": {"integer", int64(0)},
		"Age": {"text", "x"}, "AGE": {"integer", int64(12)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first row (-want +got):\n%s", diff)
	}
	for field, typ := range wantTypes {
		if got[field].Type != typ {
			t.Errorf("%q: %s, want %s", field, got[field].Type, typ)
		}
	}
	if got := viewRow(t, s.db, f, st.FieldNames, 2); got["note"].Value != "" || got["age"].Value != int64(7) || got["price"].Value != 3.0 {
		t.Errorf("second row: %v", got)
	}
	view := quoteIdent(sqlname.ViewName(f))
	query := `SELECT count(*) FROM ` + view + ` WHERE age > 10 AND consent = 1`
	var n int
	if err := s.db.QueryRow(query).Scan(&n); err != nil || n != 1 {
		t.Fatalf("a query of the typed view: %d, %v", n, err)
	}

	// "n/a" in the integer column: the commit types it, and the column
	// becomes text.
	third := row(t, f, ptr(3), t0, false, `{"age":"n/a","price":"cheap"}`)
	st.FieldTypes.Seen = st.FieldTypes.Seen.Observe([]byte(third.Fields))
	commit(t, s, sink.FormCommit{State: st, Rows: sinktest.Spool(t, third)})
	var ages []any
	rows, err := s.db.Query(`SELECT age FROM ` + view + ` ORDER BY submission_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a any
		rows.Scan(&a)
		if b, ok := a.([]byte); ok {
			a = string(b)
		}
		ages = append(ages, a)
	}
	rows.Close()
	if diff := cmp.Diff([]any{"41", "7", "n/a"}, ages); diff != "" {
		t.Errorf("age after it widened (-want +got):\n%s", diff)
	}
	if got := viewRow(t, s.db, f, st.FieldNames, 1); got["age"].Type != "text" || got["price"] != (column{"text", "9.5"}) || got["consent"].Type != "integer" {
		t.Errorf("first row after the widening: %v", got)
	}
	// The query written before still runs (SQLite compares text with a
	// number as text is greater: what it means changes, not that it runs).
	if err := s.db.QueryRow(query).Scan(&n); err != nil {
		t.Errorf("the query written before: %v", err)
	}
}

// TestPinnedType: a pin makes a field's column the type pinned whatever
// the values seen, casting only the values that fit it; removing the pin
// gives the column back its seen type.
func TestPinnedType(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	const f = "pins"
	rows := []sink.Row{
		row(t, f, ptr(1), t0, false, `{"zip":"02134","rating":"4"}`),
		row(t, f, ptr(2), t0, false, `{"zip":"10001","rating":"n/a"}`),
	}
	st := typedState(f, rows...)
	st.FieldTypes.Pinned = fieldtype.Set{"zip": fieldtype.String, "rating": fieldtype.Integer}
	commit(t, s, sink.FormCommit{State: st, Rows: sinktest.Spool(t, rows...)})
	got := viewRow(t, s.db, f, st.FieldNames, 1)
	if got["zip"] != (column{"text", "02134"}) || got["rating"] != (column{"integer", int64(4)}) {
		t.Errorf("pinned, first row: %v", got)
	}
	if got := viewRow(t, s.db, f, st.FieldNames, 2); got["rating"] != (column{"null", nil}) {
		t.Errorf("pinned integer, n/a: %v, want NULL", got["rating"])
	}
	stored, err := s.ReadState(t.Context(), []string{f})
	if err != nil || !cmp.Equal(stored[f].FieldTypes, st.FieldTypes) {
		t.Errorf("stored field types %v (%v), want %v", stored[f].FieldTypes, err, st.FieldTypes)
	}

	st.FieldTypes.Pinned = nil
	commit(t, s, sink.FormCommit{State: st})
	if got := viewRow(t, s.db, f, st.FieldNames, 2); got["rating"] != (column{"text", "n/a"}) {
		t.Errorf("pin removed: %v, want the text", got["rating"])
	}
}

// TestMigrationTypesStoredRows: a file of schema version 6 (untyped
// views, no field_types) gets, when opened, the types its stored rows
// have, and typed views.
func TestMigrationTypesStoredRows(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	rows := []sink.Row{
		row(t, "f", ptr(1), t0, false, `{"n":"1","d":"2026-03-01","gone":"x"}`),
		row(t, "f", ptr(2), t0, false, `{"n":2,"d":"2026-03-02","gone":"y"}`),
	}
	commit(t, s, sink.FormCommit{State: stateOf("f", "d", "n"), Rows: sinktest.Spool(t, rows...)})
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(undoVersion8, `ALTER TABLE sync_state DROP COLUMN field_types`, `DROP VIEW submission_files`,
		`DROP VIEW `+quoteIdent(sqlname.ViewName("f")), `CREATE VIEW `+quoteIdent(sqlname.ViewName("f"))+` AS SELECT 1 AS untyped`,
		`PRAGMA user_version = 6`) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err = Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.ReadState(t.Context(), []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	// "gone" is no field name of the state (a policy dropped it): no type.
	want := fieldtype.Columns{Seen: fieldtype.Set{"n": fieldtype.Integer, "d": fieldtype.Date}}
	if diff := cmp.Diff(want, st["f"].FieldTypes); diff != "" {
		t.Errorf("types after the migration (-want +got):\n%s", diff)
	}
	if got := viewRow(t, s.db, "f", []string{"d", "n"}, 1); got["n"] != (column{"integer", int64(1)}) {
		t.Errorf("view after the migration: %v", got)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM submission_files`).Scan(&n); err != nil {
		t.Errorf("submission_files after the migration: %v", err)
	}
}

// TestWidestTypedView: a view of as many field columns as a view takes,
// each of the type whose cast is longest, half of them named so that they
// are read through json_each, is made and read. It is slow (seconds: the
// view's SQL is megabytes, parsed by every statement on the view), and
// runs only with the slow tests.
func TestWidestTypedView(t *testing.T) {
	enginetest.Slow(t, "a view of 1,900 timestamp columns: seconds to create and to query")
	t.Parallel()
	s, _ := open(t)
	fields := map[string]string{}
	st := state.New("wide")
	st.FieldTypes.Seen = fieldtype.Set{}
	for i := range sink.MaxViewFields {
		name := fmt.Sprintf("when %d", i)
		if i%2 == 1 {
			name = fmt.Sprintf(`when "%d"`, i)
		}
		fields[name] = "2026-03-01T10:00:00.5+02:00"
		st.FieldNames = append(st.FieldNames, name)
		st.FieldTypes.Seen[name] = fieldtype.Timestamp
	}
	slices.Sort(st.FieldNames)
	j, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, sink.FormCommit{State: st, Rows: sinktest.Spool(t, row(t, "wide", ptr(1), t0, false, string(j)))})
	var n int
	var sqlText string
	if err := s.db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'form_wide'`).Scan(&sqlText); err != nil {
		t.Fatal(err)
	}
	cols := sqlname.ViewColumns(st.FieldNames)
	last := quoteIdent(cols[len(cols)-1].Name)
	var v string
	if err := s.db.QueryRow(`SELECT count(*), `+last+` FROM form_wide`).Scan(&n, &v); err != nil || n != 1 || v != "2026-03-01T08:00:00.500000Z" {
		t.Errorf("the widest view: %d rows, last column %q, %v", n, v, err)
	}
	t.Logf("%d columns, %d bytes of view SQL", len(cols), len(sqlText))
}
