package bigquery

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state/fieldtype"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// viewSQL is viewDDL's DDL alone, of a view whose columns have the types
// given (every one a STRING without).
func viewSQL(project, dataset, formID string, fieldNames []string, types ...fieldtype.Columns) string {
	var cols fieldtype.Columns
	if len(types) > 0 {
		cols = types[0]
	}
	ddl, _ := viewDDL(project, dataset, formID, fieldNames, cols)
	return ddl
}

// goldenTables are the tables of the golden renderings.
func goldenTables() tables {
	return tables{
		Submissions: ref("my-project", "formsync", submissionsTable),
		State:       ref("my-project", "formsync", stateTable),
		Staging:     ref("my-project", "formsync_staging", "_formsync_staging_formsync_0123456789abcdef01234567"),
		Lock:        ref("my-project", "formsync", lockTable),
		Tombstones:  ref("my-project", "formsync", tombstonesTable),
		Copies:      ref("my-project", "formsync", sink.FilesTable),
	}
}

// goldenStatements is every statement shape the sink sends, rendered for a
// fixed configuration.
func goldenStatements() map[string]string {
	t := goldenTables()
	noStaging := t
	noStaging.Staging = ""
	return map[string]string{
		"read_state.sql":                       render("readState", stateRead{tables: t}),
		"read_state_unmigrated.sql":            render("readState", stateRead{tables: t, WithoutCopies: true}),
		"read_commits.sql":                     render("readCommits", t),
		"view_forms.sql":                       render("viewForms", t),
		"read_rows.sql":                        render("readRows", t),
		"find.sql":                             render("find", t),
		"find_field.sql":                       render("findField", t),
		"scrub_staging.sql":                    render("scrubStaging", t),
		"seed_lock.sql":                        render("seedLock", t),
		"write_state.sql":                      render("writeState", script{tables: t}),
		"commit.sql":                           render("commit", script{tables: t, Rows: true}),
		"commit_deletions.sql":                 render("commit", script{tables: t, Rows: true, Deletions: true}),
		"write_state_deletions.sql":            render("commit", script{tables: noStaging, Deletions: true}),
		"read_tombstones.sql":                  render("readTombstones", t),
		"move_tombstones.sql":                  render("moveTombstones", t),
		"write_state_tombstones.sql":           render("writeState", script{tables: t, TombstonesChanged: true}),
		"commit_tombstones.sql":                render("commit", script{tables: t, Rows: true, TombstonesChanged: true}),
		"commit_deletions_tombstones.sql":      render("commit", script{tables: t, Rows: true, Deletions: true, TombstonesChanged: true}),
		"write_state_deletions_tombstones.sql": render("commit", script{tables: noStaging, Deletions: true, TombstonesChanged: true}),
		"view.sql":                             viewSQL("my-project", "formsync", "contact-form", []string{"Email", "message", "order", "Email"}),
		"count_rows.sql":                       render("countRows", t),
		"recount.sql":                          render("recount", t),
		"remove.sql":                           render("remove", removal{tables: t}),
		"remove_rows.sql":                      render("remove", removal{tables: t, Rows: true}),
		"form_days.sql":                        render("formDays", t),
		"remove_days.sql":                      render("removeDays", t),
		"view_typed.sql":                       viewSQL("my-project", "formsync", "typed", typedFields, typedColumns),
		"view_files.sql":                       filesSQL("my-project", "formsync"),
		"stored_rows.sql":                      render("storedRows", t),
		"file_rows.sql":                        render("fileRows", copiesRead{tables: t}),
		"file_rows_unmigrated.sql":             render("fileRows", copiesRead{tables: t, WithoutCopies: true}),
		"named_digests.sql":                    render("namedDigests", t),
		"forget_copies.sql":                    render("forgetCopies", t),
	}
}

// typedFields are the fields of the golden typed view: one plain name and
// one that JSONPath cannot spell (a double quote or a backslash) per type,
// names that collide once sanitised, unicode, and a field of no type seen.
var typedFields = []string{
	"agreed", "age", "price", "born", "seen at", "colours", "notes",
	`say "yes"`, `back\slash`, `"quoted"`, `it's "a" date`, "tick`tock\\", `path\"`, `\`,
	"Email", "email", "ünïcødé ✓", "no value yet",
}

// typedColumns types typedFields: every type, one of them pinned over the
// type seen.
var typedColumns = fieldtype.Columns{
	Seen: fieldtype.Set{
		"agreed": fieldtype.Boolean, "age": fieldtype.String, "price": fieldtype.Decimal, "born": fieldtype.Date,
		"seen at": fieldtype.Timestamp, "colours": fieldtype.Array, "notes": fieldtype.String,
		`say "yes"`: fieldtype.Boolean, `back\slash`: fieldtype.Integer, `"quoted"`: fieldtype.Decimal,
		`it's "a" date`: fieldtype.Date, "tick`tock\\": fieldtype.Timestamp, `path\"`: fieldtype.Array, `\`: fieldtype.String,
		"Email": fieldtype.Date, "email": fieldtype.Array, "ünïcødé ✓": fieldtype.Timestamp,
	},
	Pinned: fieldtype.Set{"age": fieldtype.Integer},
}

// filesSQL is filesViewDDL's DDL alone.
func filesSQL(project, dataset string) string {
	ddl, _ := filesViewDDL(project, dataset)
	return ddl
}

func TestGoldenSQL(t *testing.T) {
	t.Parallel()
	for name, got := range goldenStatements() {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestGoldenSQL -update to create it)", err)
		}
		if string(want) != got {
			t.Errorf("%s changed; if that is intended, run go test -run TestGoldenSQL -update and update bqfake's shapes.\ngot:\n%s", name, got)
		}
	}
}

// fakeShapes renders testkit/bqfake/shapes.go from the golden statements: the fake
// accepts exactly the statements the sink sends.
func fakeShapes() string {
	g := goldenStatements()
	refRE := regexp.MustCompile("`my-project\\.formsync(_staging)?\\.[A-Za-z0-9_]+`")
	var b strings.Builder
	b.WriteString("// Code generated by TestGoldenSQL -update in sink/bigquery from its testdata/*.sql. DO NOT EDIT.\n\n")
	b.WriteString("package bqfake\n\n// The BigQuery text of each fixed statement shape the fake accepts, with\n// every table reference written as `?`.\nconst (\n")
	for _, s := range []struct{ name, file string }{
		{"shapeReadState", "read_state.sql"}, {"shapeReadStateUnmigrated", "read_state_unmigrated.sql"},
		{"shapeReadCommits", "read_commits.sql"}, {"shapeViewForms", "view_forms.sql"},
		{"shapeReadRows", "read_rows.sql"}, {"shapeFind", "find.sql"}, {"shapeFindField", "find_field.sql"}, {"shapeScrubStaging", "scrub_staging.sql"}, {"shapeSeedLock", "seed_lock.sql"},
		{"shapeWriteState", "write_state.sql"}, {"shapeCommit", "commit.sql"},
		{"shapeCommitDeletions", "commit_deletions.sql"}, {"shapeWriteStateDeletions", "write_state_deletions.sql"},
		{"shapeCountRows", "count_rows.sql"}, {"shapeRecount", "recount.sql"},
		{"shapeRemove", "remove.sql"}, {"shapeRemoveRows", "remove_rows.sql"},
		{"shapeFormDays", "form_days.sql"}, {"shapeRemoveDays", "remove_days.sql"},
		{"shapeReadTombstones", "read_tombstones.sql"}, {"shapeMoveTombstones", "move_tombstones.sql"},
		{"shapeWriteStateTombstones", "write_state_tombstones.sql"}, {"shapeCommitTombstones", "commit_tombstones.sql"},
		{"shapeCommitDeletionsTombstones", "commit_deletions_tombstones.sql"},
		{"shapeWriteStateDeletionsTombstones", "write_state_deletions_tombstones.sql"},
		{"shapeFilesView", "view_files.sql"},
		{"shapeStoredRows", "stored_rows.sql"}, {"shapeFileRows", "file_rows.sql"}, {"shapeFileRowsUnmigrated", "file_rows_unmigrated.sql"}, {"shapeNamedDigests", "named_digests.sql"}, {"shapeForgetCopies", "forget_copies.sql"},
	} {
		text := refRE.ReplaceAllString(g[s.file], "`?`")
		fmt.Fprintf(&b, "\t%s = `%s`\n", s.name, strings.ReplaceAll(text, "`?`", "` + \"`?`\" + `"))
	}
	b.WriteString(")\n")
	return b.String()
}

func TestFakeShapesMatchGolden(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "testkit", "bqfake", "shapes.go")
	got := fakeShapes()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("testkit/bqfake/shapes.go is out of date: run go test ./sink/bigquery -run 'Golden|Shapes' -update")
	}
}
