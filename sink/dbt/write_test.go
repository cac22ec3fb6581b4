package dbt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yaml "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/state/fieldtype"
)

// TestRerun writes a project, then again after the forms' fields changed
// and a form left: the generated files follow, the user's stay as they
// are, and only the departed form's marked model goes.
func TestRerun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := Project{Adapter: SQLite, SQLitePath: "/data/formsync.db", Dir: dir, Forms: []state.Form{
		{FormID: "contact", FieldNames: []string{"email"}},
		{FormID: "gone", FieldNames: []string{"a"}},
		{FormID: "owned", FieldNames: []string{"a"}},
	}}
	write := func(p Project, dry bool) Result {
		t.Helper()
		files, err := p.Files()
		if err != nil {
			t.Fatal(err)
		}
		res, err := Write(dir, files, dry)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := write(p, false)
	if len(first.Written) != 8 || len(first.Kept)+len(first.Removed)+len(first.Unchanged) != 0 {
		t.Fatalf("first run: %+v", first)
	}
	if again := write(p, false); len(again.Unchanged) != 8 || len(again.Written) != 0 {
		t.Errorf("a second run with nothing changed: %+v", again)
	}

	// The user's own files, and a generated model taken over by
	// deleting its marker line.
	mine := map[string]string{
		"models/marts/contacts.sql":          "select * from {{ ref('stg_formsync__form_contact') }}\n",
		ModelDir + "/stg_formsync__mine.sql": "select 1\n",
		"packages.yml":                       "packages: []\n",
	}
	for p, c := range mine {
		writeFile(t, filepath.Join(dir, p), c)
	}
	owned := filepath.Join(dir, filepath.FromSlash(ModelPath("owned")))
	b, _ := os.ReadFile(owned)
	_, rest, _ := strings.Cut(string(b), "\n")
	writeFile(t, owned, rest)
	// dbt_project.yml the user edited after removing its marker.
	writeFile(t, filepath.Join(dir, "dbt_project.yml"), "name: formsync\nprofile: mine\n")

	p.Forms = []state.Form{
		{FormID: "contact", FieldNames: []string{"email", "age"}, FieldTypes: fieldtype.Columns{Seen: fieldtype.Set{"age": fieldtype.Integer}}},
	}
	dry := write(p, true)
	got := write(p, false)
	if diff := cmp.Diff(dry, got); diff != "" {
		t.Errorf("the dry run said otherwise (-dry +real):\n%s", diff)
	}
	want := Result{
		Written:   []string{ModelDir + "/_formsync__models.yml", ModelDir + "/_formsync__sources.yml", ModelPath("contact")},
		Unchanged: []string{"profiles.yml", schemaDirIgnore},
		Kept:      []string{"dbt_project.yml"},
		Removed:   []string{ModelPath("gone")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rerun (-want +got):\n%s", diff)
	}
	for p, c := range mine {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != c {
			t.Errorf("%s: %q, %v; want it untouched", p, b, err)
		}
	}
	if b, err := os.ReadFile(owned); err != nil || string(b) != rest {
		t.Errorf("the model taken over was changed: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ModelPath("contact")))); !strings.Contains(string(b), `"age"`) {
		t.Errorf("the model did not follow the new field:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(ModelPath("gone")))); !os.IsNotExist(err) {
		t.Errorf("the departed form's model is still there: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*", "*", ".*tmp-*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGenerated(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"-- " + Marker + "\nselect 1": true,
		"# " + Marker + "\r\nname: x": true,
		"--" + Marker:                 true,
		"select 1\n-- " + Marker:      false,
		"-- " + Marker + " (mine)\n":  false,
		"":                            false,
	} {
		if got := generated([]byte(in)); got != want {
			t.Errorf("generated(%q) = %v", in, got)
		}
	}
}

// TestSchemaDirectory: the SQLite profile's schema_directory is a folder
// of the project's own, never the database's, which Write creates; a
// project rewritten for BigQuery drops its file and leaves what dbt put
// there.
func TestSchemaDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := Project{Adapter: SQLite, SQLitePath: "/data/formsync.db", Dir: dir}
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	var profiles map[string]profile
	if err := yaml.Unmarshal(files["profiles.yml"], &profiles); err != nil {
		t.Fatal(err)
	}
	out := profiles[ProjectName].Outputs[string(SQLite)].(map[string]any)
	if got, want := out["schema_directory"], filepath.Join(dir, SchemaDir); got != want {
		t.Errorf("schema_directory %v, want %s", got, want)
	}
	if _, err := Write(dir, files, false); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, SchemaDir))
	if err != nil || len(entries) != 1 || entries[0].Name() != ".gitignore" {
		t.Fatalf("the schema directory holds %v, %v; want only its .gitignore", entries, err)
	}
	writeFile(t, filepath.Join(dir, SchemaDir, "staging.db"), "")

	p = Project{Adapter: BigQuery, BQProject: "p", BQDataset: "d"}
	if files, err = p.Files(); err != nil {
		t.Fatal(err)
	}
	res, err := Write(dir, files, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{schemaDirIgnore}, res.Removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, SchemaDir, "staging.db")); err != nil {
		t.Errorf("dbt's file went: %v", err)
	}
}
