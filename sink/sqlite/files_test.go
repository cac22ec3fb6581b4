package sqlite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/internal/testkit/sinktest"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// fileRow is one row of submission_files.
type fileRow struct {
	Form, Key string
	ID        *int64
	Input     *string
	Position  int64
	Name, URL *string
	Size      *int64
	File      string
}

func readFiles(t *testing.T, s *Sink) []fileRow {
	t.Helper()
	rows, err := s.db.Query(`SELECT form_id, submission_key, submission_id, input, position, name, url, size, file
		FROM submission_files ORDER BY form_id, submission_key, input, position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fileRow
	for rows.Next() {
		var r fileRow
		if err := rows.Scan(&r.Form, &r.Key, &r.ID, &r.Input, &r.Position, &r.Name, &r.URL, &r.Size, &r.File); err != nil {
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
		withFiles(1, `[{"name":"cv.pdf","url":"https://x/cv.pdf","size":12},{"name":"photo.jpg","url":"https://x/p.jpg"}]`),
		withFiles(2, `{"resume":{"name":"r.pdf","url":"https://x/r.pdf"},"it's \"odd\"":{"name":"o.txt","url":"https://x/o"}}`),
		withFiles(3, `{"photos":[{"name":"a.png","url":"https://x/a"},{"name":"b.png","url":"https://x/b"}],"empty":[]}`),
		withFiles(4, `[]`),
		withFiles(5, `[{"name":"gone.pdf","url":"https://x/gone"}]`),
	}
	commit(t, s, sink.FormCommit{State: stateOf("f"), Rows: sinktest.Spool(t, rows...)})
	// A reconcile that does not serve 5 marks it deleted.
	if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0.Add(2 * time.Hour), Forms: []sink.FormCommit{
		{State: revisionOf(t, s, "f"), Rows: sinktest.Spool(t, rows[:4]...), Reconcile: true},
	}}); err != nil {
		t.Fatal(err)
	}

	want := []fileRow{
		{"f", "1", ptr(1), nil, 0, str("cv.pdf"), str("https://x/cv.pdf"), ptr(12), `{"name":"cv.pdf","size":12,"url":"https://x/cv.pdf"}`},
		{"f", "1", ptr(1), nil, 1, str("photo.jpg"), str("https://x/p.jpg"), nil, `{"name":"photo.jpg","url":"https://x/p.jpg"}`},
		{"f", "2", ptr(2), str(`it's "odd"`), 0, str("o.txt"), str("https://x/o"), nil, `{"name":"o.txt","url":"https://x/o"}`},
		{"f", "2", ptr(2), str("resume"), 0, str("r.pdf"), str("https://x/r.pdf"), nil, `{"name":"r.pdf","url":"https://x/r.pdf"}`},
		{"f", "3", ptr(3), str("photos"), 0, str("a.png"), str("https://x/a"), nil, `{"name":"a.png","url":"https://x/a"}`},
		{"f", "3", ptr(3), str("photos"), 1, str("b.png"), str("https://x/b"), nil, `{"name":"b.png","url":"https://x/b"}`},
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
