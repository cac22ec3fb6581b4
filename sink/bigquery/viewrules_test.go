package bigquery

import (
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/bqfake"
)

// TestViewReadsWhatTheRulesSay: values and names docs/types.md has rules
// for, read through the fake as BigQuery reads them. An object holding a
// number beyond FLOAT64 (the JSON column is NULL, fields_text holds the
// row) shows its JSON text in a string column; a pinned timestamp with an
// offset beyond 14:00 is NULL; fields named with a NUL, and fields named
// true and false, read their values.
func TestViewReadsWhatTheRulesSay(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	const form = "rules"
	rows := []sink.Row{
		b.typedRow(t, form, 1, `{"obj":{"a":1e400},"when":"2026-03-01T10:00:00+15:00","late":"2026-03-01T10:00:00+14:30","a\u0000b":"nul inside","\u0000":"nul alone","true":"yes","false":7}`),
		b.typedRow(t, form, 2, `{"obj":{"a":1},"when":"2026-03-01T10:00:00-14:00","late":"2026-03-01T10:00:00+14:00","a\u0000b":"second","\u0000":"","true":"no","false":8}`),
	}
	st := typedState(t, formState(form, nil), rows)
	st.FieldTypes.Pinned = fieldtype.Set{"when": fieldtype.Timestamp, "late": fieldtype.Timestamp}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{st, rows})

	cols := sqlname.ColumnNames(st.FieldNames, sqlname.ViewFixedColumns())
	got := map[string]map[string]bq.Value{}
	for _, r := range readView(t, b, form) {
		row := map[string]bq.Value{}
		for _, f := range st.FieldNames {
			row[f] = r[cols[f]]
		}
		got[r["submission_key"].(string)] = row
	}
	ts := func(s string) bq.Value {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := map[string]map[string]bq.Value{
		"1": {"obj": `{"a":1e400}`, "when": nil, "late": nil, "a\x00b": "nul inside", "\x00": "nul alone", "true": "yes", "false": int64(7)},
		"2": {"obj": `{"a":1}`, "when": ts("2026-03-02T00:00:00Z"), "late": ts("2026-02-28T20:00:00Z"), "a\x00b": "second", "\x00": "", "true": "no", "false": int64(8)},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("the view (-want +got):\n%s", diff)
	}
}
