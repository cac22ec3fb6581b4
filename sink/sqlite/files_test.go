package sqlite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/sinktest"
)

// fileRow is one row of submission_files.
type fileRow struct {
	Form, Key string
	ID        *int64
	Input     *string
	Position  int64
	Name, URL *string
	Size      *int64
	Type      *string
}

func readFiles(t *testing.T, s *Sink) []fileRow {
	t.Helper()
	rows, err := s.db.Query(`SELECT form_id, submission_key, submission_id, input, position, name, url, size, type
		FROM submission_files ORDER BY form_id, submission_key, input, position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fileRow
	for rows.Next() {
		var r fileRow
		if err := rows.Scan(&r.Form, &r.Key, &r.ID, &r.Input, &r.Position, &r.Name, &r.URL, &r.Size, &r.Type); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func str(s string) *string { return &s }

// TestSubmissionFiles: submission_files has one row per file, whatever
// shape the submission's files came in: an array of files, an object
// keyed by input name whose values are one file or an array of files;
// none for a submission without files, and none for a row marked
// deleted upstream.
func TestSubmissionFiles(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	withFiles := func(id int64, files string) sink.Row {
		t.Helper()
		r, err := sink.NewRow("f", ptr(id), t0, false, json.RawMessage(`{}`), json.RawMessage(files))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rows := []sink.Row{
		withFiles(1, `[{"name":"a.pdf","url":"https://x/a","size":1200,"type":"application/pdf"},{"name":"b.png","url":"https://x/b"}]`),
		withFiles(2, `{"photo":{"name":"p.jpg","url":"https://x/p","size":"12"},"docs":[{"name":"d1","url":"https://x/d1"},{"name":"d2","url":"https://x/d2","size":1.5}],"empty":[],"none":null}`),
		withFiles(3, `{"we\"ird: input":{"name":"w","url":"https://x/w"},"name":{"name":"n","url":"https://x/n","meta":{"url":"nested"}}}`),
		withFiles(4, `[]`),
		withFiles(5, `[{"name":"gone","url":"https://x/gone"}]`),
		withFiles(6, `["https://x/not-an-object",{"name":7,"url":{"href":"x"}}]`),
	}
	commit(t, s, sink.FormCommit{State: stateOf("f"), Rows: sinktest.Spool(t, rows...)})
	// A reconcile that does not serve 5 marks it deleted.
	if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0.Add(2 * time.Hour), Forms: []sink.FormCommit{
		{State: revisionOf(t, s, "f"), Rows: sinktest.Spool(t, append(rows[:4:4], rows[5])...), Reconcile: true},
	}}); err != nil {
		t.Fatal(err)
	}

	// The same rows as BigQuery's view gives (TestSubmissionFiles in
	// sink/bigquery), and a file whose members are not all strings.
	want := []fileRow{
		{"f", "1", ptr(1), nil, 0, str("a.pdf"), str("https://x/a"), ptr(1200), str("application/pdf")},
		{"f", "1", ptr(1), nil, 1, str("b.png"), str("https://x/b"), nil, nil},
		{"f", "2", ptr(2), str("docs"), 0, str("d1"), str("https://x/d1"), nil, nil},
		{"f", "2", ptr(2), str("docs"), 1, str("d2"), str("https://x/d2"), nil, nil},
		{"f", "2", ptr(2), str("photo"), 0, str("p.jpg"), str("https://x/p"), ptr(12), nil},
		{"f", "3", ptr(3), str("name"), 0, str("n"), str("https://x/n"), nil, nil},
		{"f", "3", ptr(3), str(`we"ird: input`), 0, str("w"), str("https://x/w"), nil, nil},
		{"f", "6", ptr(6), nil, 1, str("7"), nil, nil, nil},
	}
	if diff := cmp.Diff(want, readFiles(t, s)); diff != "" {
		t.Errorf("submission_files (-want +got):\n%s", diff)
	}

	// The older SQLite Python carries reads it alike.
	script := `
import json, sqlite3, sys
db = sqlite3.connect("file:" + json.load(sys.stdin) + "?mode=ro", uri=True)
rows = db.execute("SELECT input, position, name FROM submission_files ORDER BY submission_key, input, position").fetchall()
print(json.dumps([[r[0] or "", r[1], r[2]] for r in rows]))
`
	var got [][]any
	if err := json.Unmarshal(runPython(t, script, path), &got); err != nil {
		t.Fatal(err)
	}
	var wantPy [][]any
	for _, w := range want {
		input := ""
		if w.Input != nil {
			input = *w.Input
		}
		wantPy = append(wantPy, []any{input, float64(w.Position), *w.Name})
	}
	if diff := cmp.Diff(wantPy, got); diff != "" {
		t.Errorf("submission_files in Python's SQLite (-want +got):\n%s", diff)
	}
}

// revisionOf is the stored state of a form, to commit over.
func revisionOf(t *testing.T, s *Sink, formID string) state.Form {
	t.Helper()
	st, err := s.ReadState(t.Context(), []string{formID})
	if err != nil {
		t.Fatal(err)
	}
	return st[formID]
}

// undoVersion8 turns a file of schema version 8 into one of version 7 as
// it was written: no copies of files, and submission_files as migration
// 7 made it.
var undoVersion8 = []string{
	`DROP TRIGGER submission_file_copies_follow_delete`,
	`DROP TRIGGER submission_file_copies_follow_rekey`,
	`DROP TABLE submission_file_copies`,
	`DROP VIEW submission_files`,
	`CREATE VIEW submission_files AS ` + filesViewBase,
	`PRAGMA user_version = 7`,
}
