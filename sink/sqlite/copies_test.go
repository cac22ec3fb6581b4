package sqlite

import (
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/sinktest"
)

// filesViewColumns are the columns of submission_files, in order, as
// BigQuery's view has them.
var filesViewColumns = []string{"form_id", "submission_key", "submission_id", "input", "position", "name", "url", "size", "type",
	"object_uri", "sha256", "stored_size", "content_type", "stored_at", "not_stored_reason"}

func withFiles(t *testing.T, formID string, id *int64, at time.Time, files string) sink.Row {
	t.Helper()
	r, err := sink.NewRow(formID, id, at, false, json.RawMessage(`{}`), json.RawMessage(files))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func recordFiles(t *testing.T, s *Sink, copies ...sink.FileCopy) {
	t.Helper()
	if err := s.RecordFiles(t.Context(), copies); err != nil {
		t.Fatal(err)
	}
}

// copyView is the columns of submission_files a copy fills, with their
// SQLite types.
type copyView struct {
	URL                                      string
	ObjectURI, SHA256, ContentType, StoredAt *string
	StoredSize                               *int64
	Reason                                   *string
	TypeURI, TypeSize, TypeStoredAt, TypeWhy string
}

// readCopyView reads the copies' columns of submission_files by url.
func readCopyView(t *testing.T, db *sql.DB) []copyView {
	t.Helper()
	rows, err := db.Query(`SELECT * FROM submission_files ORDER BY url`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := rows.Columns()
	rows.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cols, filesViewColumns) {
		t.Errorf("submission_files has columns %q, want %q", cols, filesViewColumns)
	}
	rows, err = db.Query(`SELECT url, object_uri, sha256, content_type, stored_at, stored_size, not_stored_reason,
		typeof(object_uri), typeof(stored_size), typeof(stored_at), typeof(not_stored_reason)
		FROM submission_files ORDER BY url`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []copyView
	for rows.Next() {
		var v copyView
		if err := rows.Scan(&v.URL, &v.ObjectURI, &v.SHA256, &v.ContentType, &v.StoredAt, &v.StoredSize, &v.Reason,
			&v.TypeURI, &v.TypeSize, &v.TypeStoredAt, &v.TypeWhy); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSubmissionFilesCopies: submission_files shows where each file
// stands: stored (where, its digest, the bytes stored, its type, when),
// not stored and why, or pending (NULLs); a copy of a URL the row's files
// no longer name shows nowhere.
func TestSubmissionFilesCopies(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	r1 := withFiles(t, "f", ptr(1), t0, `[{"name":"a","url":"https://x/a","size":3},{"name":"b","url":"https://x/b"},{"name":"c","url":"https://x/c"}]`)
	r2 := withFiles(t, "f", ptr(2), t0, `{"photo":{"name":"e","url":"https://x/e"}}`)
	commit(t, s, sink.FormCommit{State: stateOf("f"), Rows: sinktest.Spool(t, r1, r2)})
	stored := t0.Add(time.Minute + 789*time.Nanosecond)
	recordFiles(t, s,
		sink.FileCopy{FormID: "f", SubmissionKey: "1", URL: "https://x/a", SHA256: "aa", ObjectURI: "file:///files/aa", Size: 5,
			ContentType: "text/plain", StoredAt: stored, RecordedAt: stored},
		sink.FileCopy{FormID: "f", SubmissionKey: "1", URL: "https://x/b", Reason: sink.FileExpired},
		sink.FileCopy{FormID: "f", SubmissionKey: "2", URL: "https://x/e", SHA256: "ee", ObjectURI: "gs://b/ee", StoredAt: stored},
		sink.FileCopy{FormID: "f", SubmissionKey: "2", URL: "https://x/gone", Reason: sink.FileFailed},
	)
	at := stored.UTC().Format(sink.TimeLayout)
	want := []copyView{
		{URL: "https://x/a", ObjectURI: str("file:///files/aa"), SHA256: str("aa"), ContentType: str("text/plain"), StoredAt: &at, StoredSize: ptr(5),
			TypeURI: "text", TypeSize: "integer", TypeStoredAt: "text", TypeWhy: "null"},
		{URL: "https://x/b", Reason: str("expired"), TypeURI: "null", TypeSize: "null", TypeStoredAt: "null", TypeWhy: "text"},
		{URL: "https://x/c", TypeURI: "null", TypeSize: "null", TypeStoredAt: "null", TypeWhy: "null"},
		// An empty file, of no type given: size 0.
		{URL: "https://x/e", ObjectURI: str("gs://b/ee"), SHA256: str("ee"), StoredAt: &at, StoredSize: ptr(0),
			TypeURI: "text", TypeSize: "integer", TypeStoredAt: "text", TypeWhy: "null"},
	}
	if diff := cmp.Diff(want, readCopyView(t, s.db)); diff != "" {
		t.Errorf("submission_files (-want +got):\n%s", diff)
	}
	if at != "2026-03-01T12:01:00.123456Z" {
		t.Errorf("stored_at reads %s, want the layout of created_at", at)
	}
}

// TestCopiesFollowTheirRow: the SQLite sink carries a re-keyed row's
// copies to its id key (the contract lets a sink drop them), and a row
// deleted by hand, outside formsync, takes its copies with it.
func TestCopiesFollowTheirRow(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	files := `[{"name":"a","url":"https://x/a"}]`
	old := withFiles(t, "f", nil, t0, files)
	other := withFiles(t, "f", ptr(9), t0, `[{"name":"z","url":"https://x/z"}]`)
	commit(t, s, sink.FormCommit{State: stateOf("f"), Rows: sinktest.Spool(t, old, other)})
	c := sink.FileCopy{FormID: "f", SubmissionKey: old.SubmissionKey, URL: "https://x/a", SHA256: "aa", ObjectURI: "gs://b/aa", Size: 1,
		StoredAt: t0, RecordedAt: t0}
	recordFiles(t, s, c, sink.FileCopy{FormID: "f", SubmissionKey: "9", URL: "https://x/z", Reason: sink.FileTooLarge, RecordedAt: t0})

	byID := withFiles(t, "f", ptr(101), t0.Truncate(time.Millisecond), files)
	if res := commit(t, s, sink.FormCommit{State: stateOf("f"), Rows: sinktest.Spool(t, byID)}); res["f"].Updated != 1 {
		t.Fatalf("re-key: %+v", res)
	}
	got, err := s.FileRows(t.Context(), []string{"f"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	c.SubmissionKey = "101"
	if len(got) != 2 || got[0].SubmissionKey != "101" || !cmp.Equal(got[0].Copies, []sink.FileCopy{c}) {
		t.Errorf("after the re-key: %+v, want row 101 with the copy %+v", got, c)
	}

	if _, err := s.db.Exec(`DELETE FROM submissions WHERE submission_key = '101'`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM submission_file_copies WHERE submission_key <> '9'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d copies (%v) of a row deleted by hand, want none", n, err)
	}
	if named, err := s.NamedDigests(t.Context(), []string{"aa"}); err != nil || len(named) != 0 {
		t.Errorf("NamedDigests after the row's deletion: %v, %v", named, err)
	}
}

// TestCopiesPlans: the statements on copies find them by key and by
// digest, reading no table whole but the submissions FileRows asks for.
func TestCopiesPlans(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	plan := func(query string, args ...any) string {
		rows, err := s.db.Query("EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, detail)
		}
		return strings.Join(lines, "\n")
	}
	for _, tc := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"NamedDigests", namedDigestsSQL, []any{`["x"]`}, []string{"INDEX submission_file_copies_sha256 (sha256=?)", "USING PRIMARY KEY (form_id=? AND submission_key=?)"}},
		{"submission_files", `SELECT * FROM submission_files`, nil, []string{"SEARCH c USING PRIMARY KEY (form_id=? AND submission_key=? AND url=?)"}},
		{"RecordFiles", recordCopySQL, []any{"f", "k", "u", nil, nil, nil, nil, nil, nil, ""}, []string{"SEARCH submissions EXISTS USING PRIMARY KEY (form_id=? AND submission_key=?)"}},
	} {
		got := plan(tc.query, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: plan\n%s\ndoes not say %q", tc.name, got, w)
			}
		}
		if strings.Contains(got, "SCAN c") {
			t.Errorf("%s: plan\n%s\nreads every copy", tc.name, got)
		}
	}
}

// TestMigrationKeepsCopies: a file of schema version 7 migrated to 8 has
// the copies' table, and submission_files made again with their columns;
// a table of the user's named submission_files is left alone. Opened
// read-only before, it reads the rows with files, without copies.
func TestMigrationKeepsCopies(t *testing.T) {
	t.Parallel()
	for _, userTable := range []bool{false, true} {
		s, path := open(t)
		r := withFiles(t, "f", ptr(1), t0, `[{"name":"a","url":"https://x/a"}]`)
		commit(t, s, sink.FormCommit{State: stateOf("f"), Rows: sinktest.Spool(t, r)})
		s.Close()
		undo := undoVersion8
		if userTable {
			undo = append(slices.Clone(undo), `DROP VIEW submission_files`, `CREATE TABLE submission_files (note TEXT)`)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range undo {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		db.Close()

		ro, err := OpenReadOnly(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := ro.FileRows(t.Context(), nil, time.Time{})
		named, nerr := ro.NamedDigests(t.Context(), []string{"aa"})
		ro.Close()
		if err != nil || len(rows) != 1 || rows[0].SubmissionKey != "1" || len(rows[0].Copies) != 0 || nerr != nil || len(named) != 0 {
			t.Fatalf("read-only, version 7: FileRows %+v, %v; NamedDigests %v, %v", rows, err, named, nerr)
		}

		s, err = Open(t.Context(), path)
		if err != nil {
			t.Fatalf("migrating from version 7: %v", err)
		}
		recordFiles(t, s, sink.FileCopy{FormID: "f", SubmissionKey: "1", URL: "https://x/a", SHA256: "aa", ObjectURI: "gs://b/aa", StoredAt: t0})
		if userTable {
			var note int
			if err := s.db.QueryRow(`SELECT count(*) FROM submission_files WHERE note IS NULL`).Scan(&note); err != nil {
				t.Errorf("the user's table submission_files after the migration: %v", err)
			}
		} else if got := readCopyView(t, s.db); len(got) != 1 || got[0].SHA256 == nil || *got[0].SHA256 != "aa" {
			t.Errorf("submission_files after the migration: %+v", got)
		}
		s.Close()
	}
}

// TestRecordFilesRefusesCopiesWithoutKey: a copy without its form,
// submission key or URL fails RecordFiles, which writes nothing.
func TestRecordFilesRefusesCopiesWithoutKey(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	r := withFiles(t, "f", ptr(1), t0, `[{"name":"a","url":"https://x/a"}]`)
	commit(t, s, sink.FormCommit{State: stateOf("f"), Rows: sinktest.Spool(t, r)})
	good := sink.FileCopy{FormID: "f", SubmissionKey: "1", URL: "https://x/a", Reason: sink.FileFailed}
	for _, bad := range []sink.FileCopy{{SubmissionKey: "1", URL: "u"}, {FormID: "f", URL: "u"}, {FormID: "f", SubmissionKey: "1"}} {
		if err := s.RecordFiles(t.Context(), []sink.FileCopy{good, bad}); err == nil {
			t.Errorf("RecordFiles of %+v succeeded", bad)
		}
	}
	got, err := s.FileRows(t.Context(), nil, time.Time{})
	if err != nil || len(got) != 1 || len(got[0].Copies) != 0 {
		t.Errorf("FileRows after refused records: %+v, %v", got, err)
	}
	if err := s.RecordFiles(t.Context(), nil); err != nil {
		t.Errorf("RecordFiles of nothing: %v", err)
	}
}
