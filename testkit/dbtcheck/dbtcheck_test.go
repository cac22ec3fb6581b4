package dbtcheck

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestOpenSQLite: a schema_directory holding a main.db, a temp.db or more
// databases than SQLite attaches is refused, as dbt-sqlite's connection
// is; one holding formsync's file itself (as schemas_and_paths names it)
// and a few schemas is not.
func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		files []string
		fails string
	}{
		{"empty", nil, ""},
		{"own file and schemas", []string{"f.db", "staging.db", "marts.db"}, ""},
		{"main.db", []string{"main.db"}, "as 'main'"},
		{"temp.db", []string{"temp.db"}, "temp"},
		{"eleven", []string{"a.db", "b.db", "c.db", "d.db", "e.db", "g.db", "h.db", "i.db", "j.db", "k.db", "l.db"}, "too many attached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			main := filepath.Join(dir, "f.db")
			for _, f := range append([]string{"f.db"}, c.files...) {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			profile := fmt.Sprintf("formsync:\n  target: sqlite\n  outputs:\n    sqlite:\n      type: sqlite\n      threads: 1\n      database: database\n      schema: main\n"+
				"      schemas_and_paths:\n        main: %q\n      schema_directory: %q\n", main, dir)
			if err := CheckProfiles([]byte(profile)); err != nil {
				t.Fatal(err)
			}
			_, err := OpenSQLite(t, []byte(profile))
			switch {
			case c.fails == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
				t.Errorf("error %v, want one saying %q", err, c.fails)
			}
		})
	}
}

// TestDataTestSQL: a keyword column compiles to SQL SQLite refuses
// unless the file quotes it, as dbt's compilation does.
func TestDataTestSQL(t *testing.T) {
	t.Parallel()
	yml := "version: 2\nmodels:\n  - name: m\n    columns:\n" +
		"      - name: order\n        data_tests:\n          - accepted_values:\n              arguments: {values: ['true', 'false'], quote: false}\n" +
		"      - name: order\n        quote: true\n        data_tests: [not_null, unique]\n"
	tests := DataTests(t, map[string][]byte{"models/m.yml": []byte(yml)})
	if len(tests) != 3 {
		t.Fatalf("%d tests: %v", len(tests), tests)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`create table m ("order" integer)`); err != nil {
		t.Fatal(err)
	}
	for i, dt := range tests {
		q := dt.SQL(`"m"`, QuoteSQLite)
		_, err := db.Exec(q)
		if quoted := i > 0; quoted != (err == nil) {
			t.Errorf("%v (quote %v): %v\n%s", dt, dt.Quote, err, q)
		}
	}
	if got := tests[0]; got.QuoteValues || strings.Join(got.Values, ",") != "true,false" {
		t.Errorf("accepted_values read as %+v", got)
	}
}
