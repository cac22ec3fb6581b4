package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	yaml "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/formsync/formsync/internal/testkit/apisim"
	"github.com/formsync/formsync/internal/testkit/dbtcheck"
	"github.com/formsync/formsync/sink/dbt"
)

// typedSubmissions are submissions whose fields have every type, under
// names a column cannot carry as they are.
func typedSubmissions() []apisim.Submission {
	at := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
	fields := []string{
		`{"agree":true,"Age":"41","price":"12.50","born":"1990-05-17","when":"2026-03-01T10:00:00Z","tags":["a","b"],"How did you hear?":"Friend","{{ x }}":"y","select":"s","quote\"d":1}`,
		`{"agree":"False","Age":7,"price":3,"born":"2001-01-01","when":"2026-03-01 11:00:00","tags":["c"],"How did you hear?":"","{{ x }}":"z","select":"t","quote\"d":2}`,
		`{"agree":false,"Age":null,"price":null,"tags":[],"select":null}`,
	}
	var out []apisim.Submission
	for i, f := range fields {
		out = append(out, apisim.Submission{ID: int64(101 + i), CreatedAt: at.Add(time.Duration(i) * time.Minute), Fields: json.RawMessage(f), Files: json.RawMessage(`[]`)})
	}
	return out
}

// readProject reads every file under dir, by slash path.
func readProject(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDBTProjectRunsOnSyncedSQLite syncs simulated forms into SQLite,
// writes the dbt project, and holds it to dbt's rules without dbt: the
// YAML against dbt's JSON schemas, each model's SQL (relations resolved)
// run on the synced file, and the project's data tests, as dbt compiles
// them, passing on the synced rows. It does so for the project the command
// writes (with the types the sink keeps) and for one whose forms carry
// the types their values have, whether or not the sink keeps them yet.
func TestDBTProjectRunsOnSyncedSQLite(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 11, Variant: apisim.Newer, Forms: []string{"contact", "feedback"}, SubmissionsPerForm: 40})
	sim.SetSubmissions("typed-form", typedSubmissions()...)
	db := syncEnv(t, sim, "contact", "feedback", "typed-form")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	dir := filepath.Join(t.TempDir(), "proj")
	code, out, errOut := run(t, "dbt", "--dir", dir)
	if code != exitOK {
		t.Fatalf("dbt: exit %d: %s%s", code, out, errOut)
	}
	files := readProject(t, dir)
	if len(files) != 7 {
		t.Errorf("%d files, want 7 (4 and a model per form): %s", len(files), out)
	}
	var profile map[string]struct {
		Target  string                    `yaml:"target"`
		Outputs map[string]map[string]any `yaml:"outputs"`
	}
	if err := yaml.Unmarshal(files["profiles.yml"], &profile); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(db)
	if got := profile["formsync"].Outputs["sqlite"]; profile["formsync"].Target != "sqlite" || got["type"] != "sqlite" || got["schema"] != "main" ||
		fmt.Sprint(got["schemas_and_paths"]) != fmt.Sprint(map[string]any{"main": abs}) {
		t.Errorf("profile %v, want dbt-sqlite's with main at %s", got, abs)
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checkSQLiteProject(t, conn, files)

	// The sync typed the fields by their values, and the model carries
	// those types: the view casts, the model selects.
	var props struct {
		Models []struct {
			Name    string `yaml:"name"`
			Columns []struct {
				Name     string `yaml:"name"`
				DataType string `yaml:"data_type"`
			} `yaml:"columns"`
		} `yaml:"models"`
	}
	if err := yaml.Unmarshal(files[dbt.ModelDir+"/_formsync__models.yml"], &props); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, m := range props.Models {
		if m.Name == dbt.ModelName("typed-form") {
			for _, c := range m.Columns {
				types[c.Name] = c.DataType
			}
		}
	}
	for col, want := range map[string]string{"agree": "INTEGER", "price": "REAL", "born": "TEXT", "when": "TEXT", "tags": "TEXT", "select": "TEXT"} {
		if types[col] != want {
			t.Errorf("column %s: data_type %q, want %q (all: %v)", col, types[col], want, types)
		}
	}
	rows := queryModel(t, conn, files[dbt.ModelPath("typed-form")], `"agree", typeof("price"), "price", "tags"`)
	want := []string{"1 real 12.5 [\"a\",\"b\"]", "0 real 3 [\"c\"]", "0 null <nil> []"}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("typed rows %q, want %q", rows, want)
	}
}

// resolveSQLite is a relation as dbt-sqlite names it, every source being
// in schema main.
func resolveSQLite(t *testing.T, files map[string][]byte) func(string) string {
	return func(model string) string {
		b, ok := files[dbt.ModelDir+"/"+model+".sql"]
		if !ok {
			t.Errorf("ref(%q): no such model", model)
		}
		return "(" + dbtcheck.Resolve(t, string(b), sourceSQLite, nil) + ")"
	}
}

func sourceSQLite(_, table string) string { return `"main"."` + table + `"` }

// queryModel runs a model's SQL and returns cols of each row, ordered by
// the submission key, as text.
func queryModel(t *testing.T, conn *sql.DB, model []byte, cols string) []string {
	t.Helper()
	q := "SELECT " + cols + " FROM (" + dbtcheck.Resolve(t, string(model), sourceSQLite, nil) + ") ORDER BY submission_key"
	rows, err := conn.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	n := len(strings.Split(cols, ","))
	var out []string
	for rows.Next() {
		vals := make([]any, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			parts = append(parts, fmt.Sprint(v))
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSQLiteProject validates files' YAML, runs every model on conn and
// checks it has its view's rows, and runs every data test of the property
// files as dbt's generic tests compile it: a test fails when its query
// returns rows.
func checkSQLiteProject(t *testing.T, conn *sql.DB, files map[string][]byte) {
	t.Helper()
	ctx := t.Context()
	dbtcheck.Validate(t, files)
	models := 0
	for name, b := range files {
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		models++
		q := dbtcheck.Resolve(t, string(b), sourceSQLite, nil)
		view := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), dbt.ModelPrefix), ".sql")
		var got, want int
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM ("+q+")").Scan(&got); err != nil {
			t.Errorf("%s does not run on the synced file: %v\n%s", name, err, q)
			continue
		}
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM "`+view+`"`).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got != want || got == 0 {
			t.Errorf("%s: %d rows, its view %s has %d", name, got, view, want)
		}
	}
	if models != 3 {
		t.Errorf("%d models, want 3", models)
	}
	ref := resolveSQLite(t, files)
	ran := map[string]int{}
	for _, tc := range dataTests(t, files) {
		var rel string
		if tc.source {
			if tc.relation == "submission_files" {
				continue // not in every sink's schema yet
			}
			rel = sourceSQLite("", tc.relation)
		} else {
			rel = ref(tc.relation)
		}
		if err := runDataTest(ctx, conn, rel, tc); err != nil {
			t.Errorf("%s.%s %s: %v", tc.relation, tc.column, tc.test, err)
		}
		ran[tc.test]++
	}
	// Per model: unique and not_null on the key, accepted_values on
	// is_spam; the same key tests on each view.
	if ran["unique"] < 6 || ran["not_null"] < 6 || ran["accepted_values"] < 3 {
		t.Errorf("data tests run: %v", ran)
	}
}

// dataTest is one generic test of a column in the property files.
type dataTest struct {
	source   bool   // of a source table, else of a model
	relation string // the table or model
	column   string
	test     string   // unique, not_null or accepted_values
	values   []string // accepted_values, unquoted
}

func dataTests(t *testing.T, files map[string][]byte) []dataTest {
	t.Helper()
	type column struct {
		Name      string `yaml:"name"`
		DataTests []any  `yaml:"data_tests"`
	}
	var props struct {
		Sources []struct {
			Tables []struct {
				Name    string   `yaml:"name"`
				Columns []column `yaml:"columns"`
			} `yaml:"tables"`
		} `yaml:"sources"`
		Models []struct {
			Name    string   `yaml:"name"`
			Columns []column `yaml:"columns"`
		} `yaml:"models"`
	}
	var out []dataTest
	add := func(source bool, rel string, cols []column) {
		for _, c := range cols {
			for _, dt := range c.DataTests {
				tc := dataTest{source: source, relation: rel, column: c.Name}
				switch v := dt.(type) {
				case string:
					tc.test = v
				case map[string]any:
					av := v["accepted_values"].(map[string]any)["arguments"].(map[string]any)
					if av["quote"] != false {
						t.Errorf("%s.%s: accepted_values quoted", rel, c.Name)
					}
					tc.test = "accepted_values"
					for _, x := range av["values"].([]any) {
						tc.values = append(tc.values, x.(string))
					}
				}
				out = append(out, tc)
			}
		}
	}
	for name, b := range files {
		if !strings.HasPrefix(name, dbt.ModelDir+"/") || !strings.HasSuffix(name, ".yml") {
			continue
		}
		props.Sources, props.Models = nil, nil
		if err := yaml.Unmarshal(b, &props); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range props.Sources {
			for _, tb := range s.Tables {
				add(true, tb.Name, tb.Columns)
			}
		}
		for _, m := range props.Models {
			add(false, m.Name, m.Columns)
		}
	}
	if len(out) == 0 {
		t.Fatal("the property files hold no data tests")
	}
	return out
}

// runDataTest runs tc on relation rel as dbt's generic test of that name
// compiles it (dbt's default__test_* macros).
func runDataTest(ctx context.Context, conn *sql.DB, rel string, tc dataTest) error {
	col := `"` + tc.column + `"`
	var q string
	switch tc.test {
	case "not_null":
		q = "select " + col + " from " + rel + " where " + col + " is null"
	case "unique":
		q = "select " + col + " as unique_field, count(*) as n_records from " + rel + " where " + col + " is not null group by " + col + " having count(*) > 1"
	case "accepted_values":
		q = "with all_values as (select " + col + " as value_field, count(*) as n_records from " + rel + " group by " + col + ")" +
			" select * from all_values where value_field not in (" + strings.Join(tc.values, ", ") + ")"
	default:
		return fmt.Errorf("no such generic test")
	}
	var failures int
	if err := conn.QueryRowContext(ctx, "select count(*) from ("+q+")").Scan(&failures); err != nil {
		return fmt.Errorf("%w\n%s", err, q)
	}
	if failures > 0 {
		return fmt.Errorf("%d failing rows\n%s", failures, q)
	}
	return nil
}

// TestDBTRerun: after a form gains a field, a rerun rewrites its model
// and property files, keeps a file the user added and one the user took
// over, and removes the model of a form no longer configured.
func TestDBTRerun(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 12, Variant: apisim.Newer, Forms: []string{"contact", "signup"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "contact", "signup")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	dir := filepath.Join(t.TempDir(), "proj")
	if code, out, errOut := run(t, "dbt", "--dir", dir); code != exitOK {
		t.Fatalf("dbt: exit %d: %s%s", code, out, errOut)
	}
	mine := filepath.Join(dir, "models", "marts", "contacts.sql")
	if err := os.MkdirAll(filepath.Dir(mine), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, []byte("select * from {{ ref('stg_formsync__form_contact') }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(dir, "dbt_project.yml")
	if err := os.WriteFile(project, []byte("name: formsync\nprofile: formsync\nconfig-version: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	subs := sim.Submissions("contact")
	last := subs[len(subs)-1]
	sim.SetSubmissions("contact", append(subs, apisim.Submission{ID: last.ID + 1, CreatedAt: last.CreatedAt.Add(time.Minute),
		Fields: json.RawMessage(`{"name":"Ada","newsletter":true}`), Files: json.RawMessage(`[]`)})...)
	t.Setenv("FORMSYNC_FORMS", "contact")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("second sync: exit %d: %s", code, errOut)
	}
	code, out, errOut := run(t, "dbt", "--dir", dir, "--dry-run")
	if code != exitOK || !strings.Contains(out, "would be written: "+filepath.Join(dir, "models", "formsync", "stg_formsync__form_contact.sql")) {
		t.Errorf("dry run: exit %d: %s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(dbt.ModelPath("contact")))); strings.Contains(string(b), "newsletter") {
		t.Error("the dry run wrote the model")
	}
	code, out, errOut = run(t, "dbt", "--dir", dir)
	if code != exitOK {
		t.Fatalf("rerun: exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"written: " + filepath.Join(dir, "models", "formsync", "stg_formsync__form_contact.sql"),
		"removed: " + filepath.Join(dir, "models", "formsync", "stg_formsync__form_signup.sql"),
		"kept: " + project,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rerun output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(dbt.ModelPath("contact")))); !strings.Contains(string(b), `"newsletter"`) {
		t.Errorf("the model did not gain the new field:\n%s", b)
	}
	if b, _ := os.ReadFile(mine); !strings.Contains(string(b), "ref('stg_formsync__form_contact')") {
		t.Errorf("the user's model changed: %q", b)
	}
	if b, _ := os.ReadFile(project); string(b) != "name: formsync\nprofile: formsync\nconfig-version: 2\n" {
		t.Errorf("the user's dbt_project.yml changed: %q", b)
	}
}

func TestDBTUsageAndErrors(t *testing.T) {
	clearEnv(t)
	t.Setenv("FORMSYNC_SQLITE_PATH", filepath.Join(t.TempDir(), "typo.db"))
	if code, _, errOut := run(t, "dbt", "-h"); code != exitOK || !strings.Contains(errOut, "-dir") || !strings.Contains(errOut, "-dry-run") {
		t.Errorf("-h: exit %d, %s", code, errOut)
	}
	if code, _, _ := run(t, "dbt", "extra"); code != exitUsage {
		t.Errorf("an argument: exit %d, want %d", code, exitUsage)
	}
	if code, _, errOut := run(t, "dbt", "--dir", ""); code != exitUsage || !strings.Contains(errOut, "--dir is empty") {
		t.Errorf("--dir empty: exit %d, %s", code, errOut)
	}
	if code, _, errOut := run(t, "dbt"); code != exitFailed || !strings.Contains(errOut, "no database at FORMSYNC_SQLITE_PATH") {
		t.Errorf("missing database: exit %d, %s", code, errOut)
	}
	t.Setenv("FORMSYNC_SCHEDULE", "every now and then")
	if code, _, errOut := run(t, "dbt"); code != exitUsage || !strings.Contains(errOut, "FORMSYNC_SCHEDULE") {
		t.Errorf("bad schedule: exit %d, %s", code, errOut)
	}
	t.Setenv("FORMSYNC_SCHEDULE", "")
	t.Setenv("FORMSYNC_SINK", "bigquery")
	if code, _, errOut := run(t, "dbt"); code != exitUsage || !strings.Contains(errOut, "FORMSYNC_BQ_PROJECT") {
		t.Errorf("bigquery without a project: exit %d, %s", code, errOut)
	}
}

// TestDBTForBigQuery: with the BigQuery sink (the fake), the project's
// sources name the project and dataset, its profile is dbt-bigquery's,
// and its YAML holds to dbt's schemas. (The models' SQL is analyzed by
// ZetaSQL in package dbt.)
func TestDBTForBigQuery(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 13, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "contact")
	bigQueryEnv(t)
	t.Setenv("FORMSYNC_BQ_DATASET", "forms_eu")
	t.Setenv("FORMSYNC_BQ_LOCATION", "EU")
	t.Setenv("FORMSYNC_SCHEDULE", "@hourly")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	dir := filepath.Join(t.TempDir(), "proj")
	if code, out, errOut := run(t, "dbt", "--dir", dir); code != exitOK || !strings.Contains(out, "dbt project for bigquery with 1 staging model") {
		t.Fatalf("dbt: exit %d: %s%s", code, out, errOut)
	}
	files := readProject(t, dir)
	dbtcheck.Validate(t, files)
	for name, want := range map[string][]string{
		"profiles.yml": {"type: bigquery", "method: oauth", "database: p", "schema: forms_eu", "location: EU"},
		dbt.ModelDir + "/_formsync__sources.yml": {"database: p", "schema: forms_eu",
			"config:\n          loaded_at_field: synced_at\n          freshness:\n            warn_after:\n              count: 2\n              period: hour\n" +
				"            error_after:\n              count: 1\n              period: day\n"},
		dbt.ModelPath("contact"): {"from {{ source('formsync', 'form_contact') }}", "`submission_key`"},
	} {
		for _, w := range want {
			if !strings.Contains(string(files[name]), w) {
				t.Errorf("%s lacks %q:\n%s", name, w, files[name])
			}
		}
	}
}
