package bigquery

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/testkit/bqfake"
)

// wideForm is a submission of form with n fields named by name(i), their
// values cycling through every type, and the state that commits it.
func wideForm(t *testing.T, b *bundle, form string, n int, name func(i int) string) formRows {
	t.Helper()
	values := []any{true, 41, "12.50", "2026-03-01", "2026-03-01T10:00:00Z", []string{"a", "b"}, "free text"}
	fields := map[string]any{}
	var names []string
	for i := range n {
		fields[name(i)] = values[i%len(values)]
		names = append(names, name(i))
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	r := b.typedRow(t, form, 1, string(raw))
	st := typedState(t, formState(form, nil), []sink.Row{r})
	st.FieldNames = names
	return formRows{st, []sink.Row{r}}
}

// TestWideFormsView: a survey of 1,000 fields with 100-character names
// gets its view, within BigQuery's limits on a view's text (which the
// fake enforces), and the view answers, every column typed; a form of
// 1,900 fields with short names gets a view of 1,906 columns that
// answers. A form of 1,900 such long names is beyond the limit: its rows
// are stored, and the commit's report names the form and why its view is
// missing.
func TestWideFormsView(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	long := func(i int) string {
		p := fmt.Sprintf("Question %04d: how would you rate ", i)
		return p + strings.Repeat("x", 100-len(p))
	}
	short := func(i int) string { return fmt.Sprintf("f%04d", i) }

	for _, c := range []struct {
		form string
		n    int
		name func(int) string
	}{{"survey", 1000, long}, {"grid", 1900, short}} {
		fr := wideForm(t, b, c.form, c.n, c.name)
		ddl, _ := viewDDL(b.cfg.Project, b.cfg.Dataset, c.form, fr.state.FieldNames, fr.state.FieldTypes)
		counts := b.mustCommit(t, b.t0.Add(time.Hour), fr)
		if v := counts[c.form].View; v != nil {
			t.Fatalf("form %s (%d fields, a view of %d characters): %v", c.form, c.n, len(ddl), v)
		}
		rows := readView(t, b, c.form)
		if len(rows) != 1 || len(rows[0]) != c.n+len(sqlname.ViewFixedColumns()) {
			t.Fatalf("form %s: %d rows, the first of %d columns; want 1 of %d", c.form, len(rows), len(rows[0]), c.n+6)
		}
		cols := sqlname.ColumnNames(fr.state.FieldNames, sqlname.ViewFixedColumns())
		for i, want := range []string{"true", "41", "25/2", "2026-03-01", "2026-03-01 10:00:00 +0000 UTC", "[a b]", "free text"} {
			if got := fmt.Sprint(rows[0][cols[c.name(i)]]); got != want {
				t.Errorf("form %s, column of %q (%s): %v, want %v", c.form, c.name(i), fr.state.FieldTypes.Type(c.name(i)), got, want)
			}
		}
		t.Logf("form %s: %d fields, view DDL of %d characters", c.form, c.n, len(ddl))
	}

	fr := wideForm(t, b, "census", 1900, long)
	counts := b.mustCommit(t, b.t0.Add(2*time.Hour), fr)
	v := counts["census"].View
	if v == nil || !strings.Contains(v.Error(), "census") || !strings.Contains(v.Error(), "beyond BigQuery's limit on a view's text") {
		t.Fatalf("a view beyond the limit: the commit reports %v, want the form and the limit named", v)
	}
	checkRows(t, b.sink, "census", fr.rows)
	// status says it too, from the state alone.
	if p := b.sink.ViewProblem(fr.state); !strings.Contains(p, "census") || !strings.Contains(p, "beyond BigQuery's limit on a view's text") {
		t.Errorf("ViewProblem of the census: %q, want the form and the limit named", p)
	}
	if p := b.sink.ViewProblem(wideForm(t, b, "survey", 1000, long).state); p != "" {
		t.Errorf("ViewProblem of the survey: %q, want none", p)
	}

}
