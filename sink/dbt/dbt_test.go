package dbt

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	yaml "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/sink/view"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/dbtcheck"
)

// hostile are form ids and field names that must still make valid SQL,
// YAML and Jinja-free descriptions.
var hostile = []string{
	"contact", "a`b", `a"b`, "a'b", "x;DROP TABLE submissions;--", "É", "{{ exec('rm') }}",
	"{% raw %}", "#comment", "line\nbreak", "select", "created_at", ": colon", "- dash", "", "shop.o'rders",
	strings.Repeat("z", 200), "\u2028",
}

// testForms are forms with every field type and hostile names.
func testForms() []state.Form {
	types := fieldtype.Set{
		"agree": fieldtype.Boolean, "order": fieldtype.Boolean, "age": fieldtype.Integer, "price": fieldtype.Decimal,
		"born": fieldtype.Date, "when": fieldtype.Timestamp, "tags": fieldtype.Array, "name": fieldtype.String,
	}
	var typed []string
	for f := range types {
		typed = append(typed, f)
	}
	var forms []state.Form
	for i, id := range hostile {
		f := state.Form{FormID: id, FieldNames: append(append([]string{}, hostile...), typed...)}
		if i%2 == 0 { // the others keep no types yet: every column a string
			f.FieldTypes = fieldtype.Columns{Seen: types, Pinned: fieldtype.Set{"{{ exec('rm') }}": fieldtype.Boolean}}
		}
		forms = append(forms, f)
	}
	return forms
}

func testProject(a Adapter) Project {
	return Project{
		Adapter: a, SQLitePath: "/data/formsync.db", Dir: "/srv/formsync_dbt",
		BQProject: "my-project", BQDataset: "formsync", BQLocation: "EU",
		Forms: testForms(), Freshness: FreshnessFor(15 * time.Minute),
	}
}

func TestFilesHoldToDbtSchemas(t *testing.T) {
	t.Parallel()
	for _, a := range []Adapter{SQLite, BigQuery} {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			files, err := testProject(a).Files()
			if err != nil {
				t.Fatal(err)
			}
			dbtcheck.Validate(t, files)
			for name, b := range files {
				if !generated(b) {
					t.Errorf("%s does not start with the marker", name)
				}
			}
			want := 4 + len(hostile)
			if a == SQLite {
				want += 4 // the schema directory's .gitignore, two freshness tests and their properties
			}
			if n := len(files); n != want {
				t.Errorf("%d files, want %d: 4, a model per form and the adapter's", n, want)
			}
		})
	}
}

// TestSchemaCheckCanFail proves the schemas catch what dbt refuses, and
// the forms dbt 1.10 deprecates (and the dbt Fusion engine refuses): a
// source table's freshness and loaded_at_field outside config:, a generic
// test's inputs outside arguments:, a BigQuery target's project and
// dataset under those names.
func TestSchemaCheckCanFail(t *testing.T) {
	t.Parallel()
	for name, yml := range map[string]string{
		"dbt_project.yml":      "name: formsync\nmodels-paths: [models]\n",
		"models/old_fresh.yml": "version: 2\nsources:\n  - name: s\n    tables:\n      - name: t\n        loaded_at_field: synced_at\n        freshness: {warn_after: {count: 1, period: hour}}\n",
		"models/old_args.yml":  "version: 2\nmodels:\n  - name: m\n    columns:\n      - name: c\n        data_tests:\n          - accepted_values: {values: ['true'], quote: false}\n",
		"models/no_quote.yml":  "version: 2\nmodels:\n  - name: m\n    columns:\n      - name: c\n        quote: 'yes'\n",
		"profiles.yml":         "formsync:\n  target: bigquery\n  outputs:\n    bigquery: {type: bigquery, method: oauth, project: p, dataset: d}\n",
		"x/profiles.yml":       "formsync:\n  target: dev\n  outputs:\n    sqlite: {type: sqlite, database: d, schema: main, schemas_and_paths: {main: /x.db}, schema_directory: /s}\n",
		"y/profiles.yml":       "formsync:\n  target: sqlite\n  outputs:\n    sqlite: {type: sqlite, database: d, schema: main, schemas_and_paths: {main: /x.db}}\n",
		"models/x.yml":         "version: 2\nsources:\n  - name: s\n    freshness:\n      warn_after: {count: 1, period: week}\n",
		"models/columns.yml":   "version: 2\nmodels:\n  - name: m\n    columns:\n      - description: no name\n",
		"models/unknown.yml":   "version: 2\nmodel:\n  - name: m\n",
		"models/freshness.yml": "version: 2\nsources:\n  - name: s\n    tables:\n      - name: t\n        freshness: {warn_after: {count: 1}}\n",
	} {
		if err := dbtcheck.Check(name, []byte(yml)); err == nil {
			t.Errorf("%s: the schema accepts %q", name, yml)
		}
	}
}

// TestPropertiesKeepNames decodes the property files and finds every
// column under its sanitised name, described by its field's original name
// with no Jinja of its own, and the tests the issue asks for.
func TestPropertiesKeepNames(t *testing.T) {
	t.Parallel()
	p := testProject(BigQuery)
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	var models propertiesFile
	if err := yaml.Unmarshal(files[ModelDir+"/_formsync__models.yml"], &models); err != nil {
		t.Fatal(err)
	}
	var sources propertiesFile
	if err := yaml.Unmarshal(files[ModelDir+"/_formsync__sources.yml"], &sources); err != nil {
		t.Fatal(err)
	}
	if len(models.Models) != len(hostile) {
		t.Fatalf("%d models, want %d", len(models.Models), len(hostile))
	}
	tables := map[string]table{}
	for _, tb := range sources.Sources[0].Tables {
		tables[tb.Name] = tb
	}
	for _, name := range []string{"submissions", "sync_state", "submission_files"} {
		if _, ok := tables[name]; !ok {
			t.Errorf("no source table %s", name)
		}
	}
	if f := tables["submissions"].Config.Freshness; f == nil || *f.WarnAfter != (period{30, "minute"}) || *f.ErrorAfter != (period{1, "day"}) {
		t.Errorf("submissions freshness %+v, want warn after 30 minutes, error after a day", f)
	}
	byModel := map[string]model{}
	for _, m := range models.Models {
		byModel[m.Name] = m
	}
	for _, f := range testForms() {
		src, ok := tables[sqlname.ViewName(f.FormID)]
		if !ok {
			t.Errorf("form %q: no source for its view", f.FormID)
			continue
		}
		if src.Config == nil || src.Config.LoadedAtField != "synced_at" || src.Config.Freshness == nil {
			t.Errorf("form %q: view source without freshness on synced_at", f.FormID)
		}
		m := byModel[ModelName(f.FormID)]
		cols := map[string]column{}
		for _, c := range m.Columns {
			cols[c.Name] = c
		}
		if diff := cmp.Diff([]any{"unique", "not_null"}, cols["submission_key"].DataTests); diff != "" {
			t.Errorf("form %q: submission_key tests (-want +got):\n%s", f.FormID, diff)
		}
		for _, c := range sqlname.ViewColumns(f.FieldNames) {
			col, ok := cols[c.Name]
			if !ok {
				t.Errorf("form %q: no column %s for field %q", f.FormID, c.Name, c.Field)
				continue
			}
			if want := DataType(BigQuery, f.FieldTypes.Type(c.Field)); col.DataType != want {
				t.Errorf("form %q field %q: data_type %s, want %s", f.FormID, c.Field, col.DataType, want)
			}
			if unescaped := unJinja(col.Description); unescaped != fmt.Sprintf("field %q", c.Field) {
				t.Errorf("form %q field %q: description %q", f.FormID, c.Field, col.Description)
			}
			hasAccepted := len(col.DataTests) == 1
			if isBool := f.FieldTypes.Type(c.Field) == fieldtype.Boolean; isBool != hasAccepted {
				t.Errorf("form %q field %q (%s): tests %v", f.FormID, c.Field, col.DataType, col.DataTests)
			}
		}
	}
}

// unJinja is what dbt prints of a description jinjaText made: it must
// hold no Jinja but the brace expressions.
func unJinja(s string) string {
	return strings.NewReplacer(`{{ "{" }}`, "{", `{{ "}" }}`, "}").Replace(s)
}

func TestJinjaText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"plain", "{{ x }}", "{% raw %}{{", "}}{#", `{{ "{" }}`} {
		e := jinjaText(s)
		rest := strings.NewReplacer(`{{ "{" }}`, "", `{{ "}" }}`, "").Replace(e)
		if strings.ContainsAny(rest, "{}") {
			t.Errorf("jinjaText(%q) = %q leaves braces outside its escapes", s, e)
		}
		if got := unJinja(e); got != s {
			t.Errorf("jinjaText(%q) renders as %q", s, got)
		}
	}
}

func TestFreshnessFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		period     time.Duration
		warn, fail period
	}{
		{15 * time.Minute, period{30, "minute"}, period{1, "day"}},
		{time.Hour, period{2, "hour"}, period{1, "day"}},
		{90 * time.Second, period{3, "minute"}, period{1, "day"}},
		{100 * time.Second, period{4, "minute"}, period{1, "day"}}, // rounded up
		{24 * time.Hour, period{2, "day"}, period{3, "day"}},
		{14 * time.Hour, period{28, "hour"}, period{42, "hour"}},
	} {
		f := FreshnessFor(c.period)
		if w, e := dbtPeriod(f.WarnAfter), dbtPeriod(f.ErrorAfter); *w != c.warn || *e != c.fail {
			t.Errorf("FreshnessFor(%v): warn %v error %v, want %v and %v", c.period, *w, *e, c.warn, c.fail)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, p := range []Project{
		{Adapter: "postgres"},
		{Adapter: SQLite},
		{Adapter: BigQuery, BQProject: "p"},
		{Adapter: SQLite, SQLitePath: "/x.db", Dir: "/p", Forms: []state.Form{{FormID: "a"}, {FormID: "a"}}},
		{Adapter: SQLite, SQLitePath: "/x.db"},
		{Adapter: SQLite, SQLitePath: "/x.db", Dir: "relative"},
	} {
		if _, err := p.Files(); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}

func TestStagingSQLQuotes(t *testing.T) {
	t.Parallel()
	f := state.Form{FormID: "f", FieldNames: []string{"select", "n", "ok"},
		FieldTypes: fieldtype.Columns{Seen: fieldtype.Set{"n": fieldtype.Integer, "ok": fieldtype.Boolean}}}
	for a, want := range map[Adapter]string{
		SQLite: `-- generated by formsync dbt; edits are overwritten
-- form f: 3 field column(s)
select
    "form_id",
    "submission_id",
    "submission_key",
    "created_at",
    "is_spam",
    "synced_at",
    "select",
    "n",
    "ok"
from {{ source('formsync', 'form_f') }}
`,
		BigQuery: "-- generated by formsync dbt; edits are overwritten\n-- form f: 3 field column(s)\nselect\n" +
			"    `form_id`,\n    `submission_id`,\n    `submission_key`,\n    `created_at`,\n    `is_spam`,\n    `synced_at`,\n" +
			"    `select`,\n    `n`,\n    `ok`\n" +
			"from {{ source('formsync', 'form_f') }}\n",
	} {
		p := Project{Adapter: a}
		if diff := cmp.Diff(want, p.stagingSQL(f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", a, diff)
		}
	}
}

func TestNeedsQuote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name             string
		sqlite, bigquery bool
	}{
		{"form_id", false, false},
		{"email", false, false},
		{"order", true, true},
		{"select", true, true},
		{"true", true, true},
		{"pragma", true, false},     // SQLite's keyword only
		{"qualify", false, true},    // BigQuery's only
		{"Order_Total", true, true}, // mixed case
		{"9lives", true, true},
		{"a-b", true, true},
		{"_x", false, false},
		{"", true, true},
	} {
		if got := needsQuote(SQLite, c.name); got != c.sqlite {
			t.Errorf("SQLite %q: %v", c.name, got)
		}
		if got := needsQuote(BigQuery, c.name); got != c.bigquery {
			t.Errorf("BigQuery %q: %v", c.name, got)
		}
	}
}

// TestQuoteWhereNeeded: every column of the property files whose name dbt
// must quote says quote: true, and no other does; a boolean field named
// order, which gets accepted_values, among them.
func TestQuoteWhereNeeded(t *testing.T) {
	t.Parallel()
	for _, a := range []Adapter{SQLite, BigQuery} {
		files, err := testProject(a).Files()
		if err != nil {
			t.Fatal(err)
		}
		orderTests := 0
		for _, name := range []string{"_formsync__sources.yml", "_formsync__models.yml"} {
			var props propertiesFile
			if err := yaml.Unmarshal(files[ModelDir+"/"+name], &props); err != nil {
				t.Fatal(err)
			}
			var cols []column
			for _, s := range props.Sources {
				for _, tb := range s.Tables {
					cols = append(cols, tb.Columns...)
				}
			}
			for _, m := range props.Models {
				cols = append(cols, m.Columns...)
			}
			for _, c := range cols {
				if c.Quote != needsQuote(a, c.Name) {
					t.Errorf("%s %s: column %s has quote %v", a, name, c.Name, c.Quote)
				}
				if c.Name == "order" && len(c.DataTests) > 0 {
					orderTests++
					if !c.Quote {
						t.Errorf("%s: the tested column order is not quoted", a)
					}
				}
			}
		}
		if orderTests == 0 {
			t.Errorf("%s: no test of the boolean column order", a)
		}
	}
}

// TestFreshnessPerAdapter: BigQuery's sources carry freshness in dbt
// 1.10's form; a SQLite project's carry none, which dbt-sqlite cannot
// evaluate (it returns synced_at as text), and check the same rule with
// a warning and an error test over every relation instead.
func TestFreshnessPerAdapter(t *testing.T) {
	t.Parallel()
	for _, a := range []Adapter{SQLite, BigQuery} {
		p := testProject(a)
		files, err := p.Files()
		if err != nil {
			t.Fatal(err)
		}
		var sources propertiesFile
		if err := yaml.Unmarshal(files[ModelDir+"/_formsync__sources.yml"], &sources); err != nil {
			t.Fatal(err)
		}
		withFreshness := 0
		for _, tb := range sources.Sources[0].Tables {
			if tb.Config != nil && tb.Config.Freshness != nil {
				withFreshness++
			}
		}
		warn, hasWarn := files[TestDir+"/"+FreshnessWarnTest+".sql"]
		errTest, hasErr := files[TestDir+"/"+FreshnessErrorTest+".sql"]
		switch a {
		case SQLite:
			if withFreshness != 0 {
				t.Errorf("sqlite: %d source tables with a freshness dbt-sqlite cannot evaluate", withFreshness)
			}
			if !hasWarn || !hasErr {
				t.Fatalf("sqlite: no freshness tests among %d files", len(files))
			}
			for _, want := range []string{"{{ config(severity = 'warn') }}", "{{ source('formsync', 'submissions') }}", "newest_synced_at is null or", "* 86400 > 1800\n"} {
				if !strings.Contains(string(warn), want) {
					t.Errorf("the warning test lacks %q:\n%s", want, warn)
				}
			}
			for _, want := range []string{"{{ config(severity = 'error') }}", "* 86400 > 86400\n"} {
				if !strings.Contains(string(errTest), want) {
					t.Errorf("the error test lacks %q:\n%s", want, errTest)
				}
			}
			for _, f := range p.Forms {
				if !strings.Contains(string(warn), "{{ source('formsync', '"+view.Name(f.FormID)+"') }}") {
					t.Errorf("the warning test does not cover form %q", f.FormID)
				}
			}
		case BigQuery:
			if withFreshness != 1+len(p.Forms) {
				t.Errorf("bigquery: %d source tables with freshness, want submissions and every view", withFreshness)
			}
			if hasWarn || hasErr {
				t.Error("bigquery: freshness tests too")
			}
		}
	}
	p := testProject(SQLite)
	p.Freshness = Freshness{}
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if strings.HasPrefix(name, TestDir+"/") {
			t.Errorf("no freshness rule, yet %s", name)
		}
	}
}
