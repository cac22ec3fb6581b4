package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestRemoveRowsDropsTheView: a form removed with its rows loses its view,
// which would show nothing; removed without them, it keeps it. A table of
// the user's holding a view's name stays.
func TestRemoveRowsDropsTheView(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "formsync.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"f", "g", "h"} {
		r := row(t, id, ptr(1), t0, false, `{"email":"a@example.com"}`)
		commit(t, s, sink.FormCommit{State: stateOf(id, "email"), Rows: sinktest.Spool(t, r)})
	}
	hView := quoteIdent(sqlname.ViewName("h"))
	for _, q := range []string{`DROP VIEW ` + hView, `CREATE TABLE ` + hView + ` (note TEXT)`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(id string) (kind string) {
		t.Helper()
		s.db.QueryRow(`SELECT type FROM sqlite_schema WHERE name = ?`, sqlname.ViewName(id)).Scan(&kind)
		return kind
	}
	for _, r := range []sink.Removal{{FormID: "f", Revision: 1, Rows: true}, {FormID: "g", Revision: 1}, {FormID: "h", Revision: 1, Rows: true}} {
		if _, err := s.Remove(t.Context(), r); err != nil {
			t.Fatalf("remove %+v: %v", r, err)
		}
	}
	if k := exists("f"); k != "" {
		t.Errorf("the view of a form removed with its rows is still there (%s)", k)
	}
	if k := exists("g"); k != "view" {
		t.Errorf("the view of a form whose rows stay is gone (%q)", k)
	}
	if k := exists("h"); k != "table" {
		t.Errorf("the user's table holding a view's name: %q, want it kept", k)
	}
}
