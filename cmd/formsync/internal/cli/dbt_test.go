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

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/dbt"
	"github.com/formsync/formsync/testkit/dbtcheck"
)

// typedSubmissions are submissions whose fields have every type, under
// names a column cannot carry as they are, and a boolean named like a
// keyword (order), which dbt must quote in its tests.
func typedSubmissions() []apisim.Submission {
	at := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
	fields := []string{
		`{"order":true,"agree":true,"Age":"41","price":"12.50","born":"1990-05-17","when":"2026-03-01T10:00:00Z","tags":["a","b"],"How did you hear?":"Friend","{{ x }}":"y","select":"s","quote\"d":1}`,
		`{"order":false,"agree":"False","Age":7,"price":3,"born":"2001-01-01","when":"2026-03-01 11:00:00","tags":["c"],"How did you hear?":"","{{ x }}":"z","select":"t","quote\"d":2}`,
		`{"order":true,"agree":false,"Age":null,"price":null,"tags":[],"select":null}`,
	}
	var out []apisim.Submission
	for i, f := range fields {
		out = append(out, apisim.Submission{ID: int64(101 + i), CreatedAt: at.Add(time.Duration(i) * time.Minute), Fields: json.RawMessage(f), Files: json.RawMessage(`[]`)})
	}
	return out
}

// dottedForm is a form id with a dot and a quote, which the view's and
// the model's names must survive.
const dottedForm = "shop.o'rders"

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
	sim.SetSubmissions(dottedForm, typedSubmissions()...)
	db := syncEnv(t, sim, "contact", "feedback", "typed-form", dottedForm)
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	// Other databases beside formsync's, named as dbt-sqlite cannot
	// attach them, and more of them than SQLite attaches at once: none
	// of them is dbt's business.
	for _, name := range []string{"main.db", "temp.db", "a.db", "b.db", "c.db", "d.db", "e.db", "f2.db", "g.db", "h.db", "i.db", "j.db"} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(db), name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "proj")
	code, out, errOut := run(t, "dbt", "--dir", dir)
	if code != exitOK {
		t.Fatalf("dbt: exit %d: %s%s", code, out, errOut)
	}
	files := readProject(t, dir)
	if len(files) != 12 {
		t.Errorf("%d files, want 12 (4, a model per form, the schema directory's, 2 freshness tests and their properties): %s", len(files), out)
	}
	var profile map[string]struct {
		Target  string                    `yaml:"target"`
		Outputs map[string]map[string]any `yaml:"outputs"`
	}
	if err := yaml.Unmarshal(files["profiles.yml"], &profile); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(db)
	absDir, _ := filepath.Abs(dir)
	if got := profile["formsync"].Outputs["sqlite"]; profile["formsync"].Target != "sqlite" || got["type"] != "sqlite" || got["schema"] != "main" ||
		fmt.Sprint(got["schemas_and_paths"]) != fmt.Sprint(map[string]any{"main": abs}) ||
		got["schema_directory"] != filepath.Join(absDir, dbt.SchemaDir) {
		t.Errorf("profile %v, want dbt-sqlite's with main at %s and the schema directory in the project", got, abs)
	}
	if st, err := os.Stat(filepath.Join(dir, dbt.SchemaDir)); err != nil || !st.IsDir() {
		t.Errorf("the schema directory: %v", err)
	}
	// The connection dbt-sqlite opens with that profile.
	conn, err := dbtcheck.OpenSQLite(t, files["profiles.yml"])
	if err != nil {
		t.Fatalf("dbt-sqlite cannot connect: %v", err)
	}
	checkSQLiteProject(t, conn, files, 4)

	// Rows last written two days ago: both freshness tests name every
	// relation.
	if _, err := conn.ExecContext(t.Context(), `UPDATE submissions SET synced_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-2 days')`); err != nil {
		t.Fatal(err)
	}
	for name, stale := range singularTests(t, conn, files) {
		if len(stale) != 5 {
			t.Errorf("%s: %v on rows two days old, want submissions and the four views", name, stale)
		}
	}

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
	for col, want := range map[string]string{"order": "INTEGER", "agree": "INTEGER", "price": "REAL", "born": "TEXT", "when": "TEXT", "tags": "TEXT", "select": "TEXT"} {
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

// TestDBTProjectOnTheDemoFile: the project for the file formsync demo
// writes, with two more forms synced into it (a boolean field named
// order, a form id with a dot and a quote), holds to every dbt schema,
// connects as dbt-sqlite does and runs every model and test there.
func TestDBTProjectOnTheDemoFile(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 14, Variant: apisim.Newer})
	sim.SetSubmissions("typed-form", typedSubmissions()...)
	sim.SetSubmissions(dottedForm, typedSubmissions()...)
	syncEnv(t, sim, "typed-form", dottedForm)
	demo := filepath.Join(t.TempDir(), "formsync-demo.db")
	if code, out, errOut := run(t, "demo", "-db", demo, "-submissions", "20"); code != exitOK {
		t.Fatalf("demo: exit %d:\n%s%s", code, out, errOut)
	}
	t.Setenv("FORMSYNC_SQLITE_PATH", demo)
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync into the demo file: exit %d: %s", code, errOut)
	}
	t.Setenv("FORMSYNC_FORMS", "") // every form the file holds
	dir := filepath.Join(t.TempDir(), "demo_dbt")
	if code, out, errOut := run(t, "dbt", "--dir", dir); code != exitOK || !strings.Contains(out, "with 5 staging model(s)") {
		t.Fatalf("dbt: exit %d: %s%s", code, out, errOut)
	}
	files := readProject(t, dir)
	conn, err := dbtcheck.OpenSQLite(t, files["profiles.yml"])
	if err != nil {
		t.Fatalf("dbt-sqlite cannot connect: %v", err)
	}
	checkSQLiteProject(t, conn, files, 5)
	quoted := 0
	for _, dt := range dbtcheck.DataTests(t, files) {
		if dt.Column == "order" && dt.Quote {
			quoted++
		}
	}
	if quoted != 2 {
		t.Errorf("%d tests of the column order quote it, want one per form that has it", quoted)
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
func checkSQLiteProject(t *testing.T, conn *sql.DB, files map[string][]byte, wantModels int) {
	t.Helper()
	ctx := t.Context()
	dbtcheck.Validate(t, files)
	models := 0
	for name, b := range files {
		if !strings.HasPrefix(name, dbt.ModelDir+"/") || !strings.HasSuffix(name, ".sql") {
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
	if models != wantModels {
		t.Errorf("%d models, want %d", models, wantModels)
	}
	ref := resolveSQLite(t, files)
	ran := map[string]int{}
	for _, tc := range dbtcheck.DataTests(t, files) {
		var rel string
		if tc.Source != "" {
			if tc.Relation == "submission_files" {
				continue // not in every sink's schema yet
			}
			rel = sourceSQLite(tc.Source, tc.Relation)
		} else {
			rel = ref(tc.Relation)
		}
		if tc.Test == "accepted_values" && tc.QuoteValues {
			t.Errorf("%v: values quoted, so true and false would be strings", tc)
		}
		if err := runDataTest(ctx, conn, rel, tc); err != nil {
			t.Errorf("%v: %v", tc, err)
		}
		ran[tc.Test]++
	}
	// Per model: unique and not_null on the key, accepted_values on
	// is_spam; the same key tests on each view.
	if ran["unique"] < 2*models || ran["not_null"] < 2*models || ran["accepted_values"] < models {
		t.Errorf("data tests run: %v", ran)
	}

	// dbt source freshness, as dbt-adapters evaluates it: every value
	// must be a timestamp, which SQLite never returns.
	for _, f := range dbtcheck.FreshnessRules(t, files) {
		var maxLoaded, now any
		q := f.FreshnessSQL(sourceSQLite(f.Source, f.Table), "datetime()")
		if err := conn.QueryRowContext(ctx, q).Scan(&maxLoaded, &now); err != nil {
			t.Errorf("freshness of %s: %v\n%s", f.Table, err, q)
			continue
		}
		for _, v := range []any{maxLoaded, now} {
			if err := f.CheckFreshnessValue(v); err != nil {
				t.Errorf("dbt source freshness fails on dbt-sqlite: %v", err)
			}
		}
	}
	// The freshness tests that stand in for it pass on rows just synced.
	for name, stale := range singularTests(t, conn, files) {
		if len(stale) > 0 {
			t.Errorf("%s: %v on rows just synced", name, stale)
		}
	}
}

// singularTests runs every singular data test of files (tests/…) on conn
// and returns, by file, the rows each returns (a test fails or warns when
// it returns rows), and fails t for one without a severity.
func singularTests(t *testing.T, conn *sql.DB, files map[string][]byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, b := range files {
		if !strings.HasPrefix(name, "tests/") || !strings.HasSuffix(name, ".sql") {
			continue
		}
		if sev := dbtcheck.Config(string(b))["severity"]; sev != "warn" && sev != "error" {
			t.Errorf("%s: severity %q", name, sev)
		}
		q := dbtcheck.Resolve(t, string(b), sourceSQLite, resolveSQLite(t, files))
		rows, err := conn.QueryContext(t.Context(), "select relation from (\n"+q+"\n) dbt_internal_test order by 1")
		if err != nil {
			t.Errorf("%s does not run: %v\n%s", name, err, q)
			continue
		}
		out[name] = []string{}
		for rows.Next() {
			var rel string
			if err := rows.Scan(&rel); err != nil {
				t.Fatal(err)
			}
			out[name] = append(out[name], rel)
		}
		if err := rows.Err(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		rows.Close()
	}
	if len(out) == 0 {
		t.Error("no singular data test: no freshness check on SQLite")
	}
	return out
}

// runDataTest runs tc on relation rel as dbt compiles it: the column as
// the property file writes it, quoted only where it says quote: true.
func runDataTest(ctx context.Context, conn *sql.DB, rel string, tc dbtcheck.DataTest) error {
	q := tc.SQL(rel, dbtcheck.QuoteSQLite)
	var failures int
	if err := conn.QueryRowContext(ctx, "select count(*) as failures from (\n"+q+"\n) dbt_internal_test").Scan(&failures); err != nil {
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
	sim.SetSubmissions(dottedForm, typedSubmissions()...)
	syncEnv(t, sim, "contact", dottedForm)
	bigQueryEnv(t)
	t.Setenv("FORMSYNC_BQ_DATASET", "forms_eu")
	t.Setenv("FORMSYNC_BQ_LOCATION", "EU")
	t.Setenv("FORMSYNC_SCHEDULE", "@hourly")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d: %s", code, errOut)
	}
	dir := filepath.Join(t.TempDir(), "proj")
	if code, out, errOut := run(t, "dbt", "--dir", dir); code != exitOK || !strings.Contains(out, "dbt project for bigquery with 2 staging model") {
		t.Fatalf("dbt: exit %d: %s%s", code, out, errOut)
	}
	files := readProject(t, dir)
	dbtcheck.Validate(t, files)
	if len(files) != 6 {
		t.Errorf("%d files, want 6: 4 and a model per form, nothing of SQLite's", len(files))
	}
	if rules := dbtcheck.FreshnessRules(t, files); len(rules) != 3 {
		t.Errorf("source freshness on %v, want submissions and both views", rules)
	}
	quoted := 0
	for _, dt := range dbtcheck.DataTests(t, files) {
		if dt.Column == "order" && dt.Quote && dt.Test == "accepted_values" {
			quoted++
		}
	}
	if quoted != 1 {
		t.Errorf("%d quoted tests of the boolean column order, want 1", quoted)
	}
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
