package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestTableInTheViewsPlace: a table of the user's holding the name of a
// form's view does not hold up the commit of that form or of any other;
// the commit says so in the form's counts, makes the view once the name is
// free, and touches the table never.
func TestTableInTheViewsPlace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "formsync.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	view := quoteIdent(sqlname.ViewName("f"))
	first := row(t, "f", ptr(1), t0, false, `{"email":"a@example.com"}`)
	commit(t, s, sink.FormCommit{State: stateOf("f", "email"), Rows: sinktest.Spool(t, first)})
	// The user drops the view and makes a table of that name.
	for _, q := range []string{`DROP VIEW ` + view, `CREATE TABLE ` + view + ` (note TEXT)`, `INSERT INTO ` + view + ` VALUES ('mine')`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}

	// A new field name: the view would be made again.
	second := row(t, "f", ptr(2), t0, false, `{"email":"b@example.com","name":"B"}`)
	other := row(t, "g", ptr(1), t0, false, `{"email":"g@example.com"}`)
	res := commit(t, s, sink.FormCommit{State: stateOf("f", "email", "name"), Rows: sinktest.Spool(t, second)},
		sink.FormCommit{State: stateOf("g", "email"), Rows: sinktest.Spool(t, other)})
	if res["f"].Inserted != 1 || res["g"].Inserted != 1 {
		t.Errorf("counts %+v", res)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM submissions`).Scan(&n); err != nil || n != 3 {
		t.Errorf("submissions holds %d rows (%v), want 3", n, err)
	}
	if err := s.db.QueryRow(`SELECT count(*) FROM ` + quoteIdent(sqlname.ViewName("g"))).Scan(&n); err != nil || n != 1 {
		t.Errorf("the other form's view: %d rows, %v", n, err)
	}
	var note string
	if err := s.db.QueryRow(`SELECT note FROM ` + view).Scan(&note); err != nil || note != "mine" {
		t.Errorf("the user's table: %q, %v", note, err)
	}
	wantViewTaken(t, res["f"], path)
	if res["g"].View != nil {
		t.Errorf("the other form's view: %v", res["g"].View)
	}

	// The table stays: the next commit of the form says so again, its
	// field names unchanged.
	res = commit(t, s, sink.FormCommit{State: stateOf("f", "email", "name")})
	wantViewTaken(t, res["f"], path)

	if _, err := s.db.Exec(`DROP TABLE ` + view); err != nil {
		t.Fatal(err)
	}
	res = commit(t, s, sink.FormCommit{State: stateOf("f", "email", "name")})
	var name string
	if err := s.db.QueryRow(`SELECT name FROM ` + view + ` WHERE submission_id = 2`).Scan(&name); err != nil || name != "B" {
		t.Errorf("view after the table went: %q, %v", name, err)
	}
	if res["f"].View != nil {
		t.Errorf("view made, yet the commit says %v", res["f"].View)
	}
}

// wantViewTaken checks that a commit reported form f's view as held by a
// table, in words that name the view, the file and what to do.
func wantViewTaken(t *testing.T, c sink.Counts, path string) {
	t.Helper()
	var taken *viewTakenError
	if !errors.As(c.View, &taken) {
		t.Fatalf("the commit's View = %v, want the view reported as taken", c.View)
	}
	msg := c.View.Error()
	for _, want := range []string{sqlname.ViewName("f"), "table", path, "rename it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}

// TestViewMadeOnlyWhenItDiffers: a commit that changes nothing of a view
// leaves the schema alone (a schema change makes every connection to the
// file prepare its statements again), and one finding the view edited by
// hand makes it again.
func TestViewMadeOnlyWhenItDiffers(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	names := []string{`plain`, `it's`, `say "hi"`, "nul\x00byte", `日本語`, `order`}
	formID := "form'; --\x00"
	fc := func(id int64) sink.FormCommit {
		return sink.FormCommit{State: stateOf(formID, names...),
			Rows: sinktest.Spool(t, row(t, formID, ptr(id), t0, false, `{"plain":"p","order":"o"}`))}
	}
	commit(t, s, fc(1))
	schemaVersion := func() int {
		var v int
		if err := s.db.QueryRow(`PRAGMA schema_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := schemaVersion()
	commit(t, s, fc(2))
	if after := schemaVersion(); after != before {
		t.Errorf("schema version %d -> %d: the view was made again though nothing of it changed", before, after)
	}

	view := quoteIdent(sqlname.ViewName(formID))
	for _, q := range []string{`DROP VIEW ` + view, `CREATE VIEW ` + view + ` AS SELECT 1 AS x`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, s, fc(3))
	var n int
	if err := s.db.QueryRow(`SELECT count(plain) FROM ` + view).Scan(&n); err != nil || n != 3 {
		t.Errorf("view after a commit: %d rows with plain, %v; want 3", n, err)
	}
}

// TestMigrationLeavesATableInTheViewsPlace: the migration that makes every
// view again (schema version 4) opens a file in which a table of the
// user's holds a view's name; the form's next commit says so.
func TestMigrationLeavesATableInTheViewsPlace(t *testing.T) {
	t.Parallel()
	path := version1File(t,
		`INSERT INTO sync_state (form_id, field_names, updated_at) VALUES ('f', '["a"]', '2026-01-01T00:00:01.000000Z')`,
		`CREATE TABLE form_f (note TEXT)`,
	)

	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var version int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != SchemaVersion {
		t.Errorf("user_version = %d (%v), want %d", version, err, SchemaVersion)
	}
	wantViewTaken(t, commit(t, s, sink.FormCommit{State: stateOf("f", "a")})["f"], path)
}
