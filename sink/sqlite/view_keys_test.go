package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/testkit/sinktest"
)

// viewKeys are field names a path reads differently in older SQLite.
var viewKeys = []string{`plain`, `dot.name[0]`, `say "hi"`, `"`, `back\slash`, "line\nbreak", "tab\tin", `email `, `café`, "sep\u2028arator", `it's`, "a\x00b", "\x00", "true", "false"}

// readView reads every field column of form f's view, by column name, as
// text ("NULL" for NULL).
func readView(t *testing.T, db *sql.DB, formID string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, c := range sqlname.ViewColumns(viewKeys) {
		var v sql.NullString
		if err := db.QueryRow(`SELECT ` + quoteIdent(c.Name) + ` FROM ` + quoteIdent(sqlname.ViewName(formID))).Scan(&v); err != nil {
			t.Fatal(err)
		}
		got[c.Name] = v.String
		if !v.Valid {
			got[c.Name] = "NULL"
		}
	}
	return got
}

// TestViewReadsEveryKeyInOlderSQLite: a view's columns read the same
// values in formsync's SQLite and in the older one Python (or the sqlite3
// shell) carries, whatever the field name holds: '"', '\', control
// characters and the rest, and whatever type the column has.
func TestViewReadsEveryKeyInOlderSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "formsync.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]any{}
	want := map[string]string{}
	for i, c := range sqlname.ViewColumns(viewKeys) {
		switch i % 3 {
		case 0:
			v := "value " + string(rune('a'+i))
			fields[c.Field], want[c.Name] = v, v
		case 1:
			fields[c.Field], want[c.Name] = fmt.Sprint(i*7), fmt.Sprint(i*7) // an integer column
		case 2:
			fields[c.Field], want[c.Name] = "2026-03-01 10:00:0"+fmt.Sprint(i%10), "2026-03-01T10:00:0"+fmt.Sprint(i%10)+".000000Z"
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		t.Fatal(err)
	}
	r := row(t, "f", ptr(1), t0, false, string(bytes.TrimSpace(buf.Bytes())))
	st := stateOf("f", viewKeys...)
	st.FieldTypes.Seen = st.FieldTypes.Seen.Observe([]byte(r.Fields))
	commit(t, s, sink.FormCommit{State: st, Rows: sinktest.Spool(t, r)})
	if diff := cmp.Diff(want, readView(t, s.db, "f")); diff != "" {
		t.Errorf("formsync's SQLite reads the view (-want +got):\n%s", diff)
	}
	s.Close()

	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: no other SQLite to read the view with")
	}
	cols := []string{}
	for _, c := range sqlname.ViewColumns(viewKeys) {
		cols = append(cols, c.Name)
	}
	colsJSON, _ := json.Marshal(cols)
	script := `
import json, sqlite3, sys
path, view, cols = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
db = sqlite3.connect("file:" + path + "?mode=ro", uri=True)
out = {"version": sqlite3.sqlite_version, "values": {}}
for c in cols:
    v = db.execute('SELECT "%s" FROM "%s"' % (c.replace('"', '""'), view.replace('"', '""'))).fetchone()[0]
    out["values"][c] = "NULL" if v is None else str(v)
print(json.dumps(out))
`
	out, err := exec.CommandContext(t.Context(), py, "-c", script, path, sqlname.ViewName("f"), string(colsJSON)).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	var got struct {
		Version string
		Values  map[string]string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("python3 said %s: %v", out, err)
	}
	if diff := cmp.Diff(want, got.Values); diff != "" {
		t.Errorf("Python's SQLite %s reads the view (-want +got):\n%s", got.Version, diff)
	}
}
