package dbt

import (
	"strings"
	"testing"

	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/dbtcheck"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/zetasql"
)

// TestZetaSQLAcceptsTheModels has BigQuery's SQL front end, the ZetaSQL
// analyzer, analyze every staging model of the BigQuery project (forms and
// fields with hostile names, every field type), with each source resolved
// to the view it names, and every data test of the property files as dbt
// compiles it (the column as written, quoted only where the file says
// quote: true), over views whose columns have the types the forms' states
// give them, as the sink makes them. A model naming a column its view
// lacks must be refused, proving the check can fail.
func TestZetaSQLAcceptsTheModels(t *testing.T) {
	enginetest.Slow(t, "installs the ZetaSQL analyzer from npm, 354 MB, once")
	t.Parallel()
	p := testProject(BigQuery)
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	ref := func(table string) string { return "`my-project.formsync." + table + "`" }
	source := func(_, table string) string { return ref(table) }

	var scripts []zetasql.Script
	models := map[string]string{}
	for _, f := range p.Forms {
		sql := dbtcheck.Resolve(t, string(files[ModelPath(f.FormID)]), source, nil)
		models[ModelName(f.FormID)] = sql
		scripts = append(scripts, zetasql.Script{Name: ModelPath(f.FormID), SQL: sql})
	}
	tests := 0
	for _, dt := range dbtcheck.DataTests(t, files) {
		rel := ref(dt.Relation)
		if dt.Source == "" {
			rel = "(" + models[dt.Relation] + ")"
		}
		scripts = append(scripts, zetasql.Script{Name: "test " + dt.String(), SQL: dt.SQL(rel, dbtcheck.QuoteBigQuery)})
		tests++
	}
	if tests < 3*len(p.Forms) {
		t.Fatalf("only %d data tests", tests)
	}
	probe := "probe: a model naming a column its view lacks"
	f0 := p.Forms[0]
	scripts = append(scripts, zetasql.Script{Name: probe, SQL: strings.Replace(models[ModelName(f0.FormID)], "`synced_at`", "`synced_at`, `no_such_column`", 1)})

	// The views as the sinks make them: a column per field, of the type
	// the form's state gives it (docs/types.md).
	req := zetasql.Request{Scripts: scripts, Params: []zetasql.Column{}}
	for _, name := range []string{"submissions", "sync_state", "submission_files"} {
		req.Tables = append(req.Tables, zetasql.Table{Name: "my-project.formsync." + name, Columns: baseColumns(name)})
	}
	for _, f := range p.Forms {
		cols := []zetasql.Column{}
		for _, c := range fixedColumns {
			cols = append(cols, zetasql.Column{Name: c.name, Type: c.bigquery})
		}
		for _, c := range view.Columns(f) {
			cols = append(cols, zetasql.Column{Name: c.Name, Type: zetaType(c.Type)})
		}
		req.Tables = append(req.Tables, zetasql.Table{Name: "my-project.formsync." + view.Name(f.FormID), Columns: cols})
	}
	seen := map[string]bool{}
	for _, r := range zetasql.Analyze(t, req) {
		seen[r.Name] = true
		switch {
		case r.Name == probe && r.OK:
			t.Errorf("%s: accepted", r.Name)
		case r.Name == probe:
			t.Logf("%s: refused as it should be: %s", r.Name, r.Error)
		case !r.OK:
			t.Errorf("%s: ZetaSQL refuses it (byte %d): %s", r.Name, r.At, r.Error)
		}
	}
	for _, s := range scripts {
		if !seen[s.Name] {
			t.Errorf("%s: no answer from the analyzer", s.Name)
		}
	}
}

// baseColumns are the columns of formsync's tables that the property
// files name.
func baseColumns(table string) []zetasql.Column {
	switch table {
	case "submissions":
		return []zetasql.Column{{Name: "form_id", Type: "STRING"}, {Name: "submission_key", Type: "STRING"}, {Name: "synced_at", Type: "TIMESTAMP"}}
	case "sync_state":
		return []zetasql.Column{{Name: "form_id", Type: "STRING"}}
	}
	return []zetasql.Column{{Name: "form_id", Type: "STRING"}, {Name: "submission_key", Type: "STRING"}, {Name: "submission_id", Type: "INT64"},
		{Name: "input", Type: "STRING"}, {Name: "position", Type: "INT64"}, {Name: "name", Type: "STRING"}, {Name: "url", Type: "STRING"},
		{Name: "size", Type: "INT64"}, {Name: "type", Type: "STRING"}}
}

func zetaType(t fieldtype.Type) any {
	if t == fieldtype.Array {
		return map[string]any{"array": "STRING"}
	}
	return DataType(BigQuery, t)
}
