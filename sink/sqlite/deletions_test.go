package sqlite

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/sinktest"
)

// assertCounters checks a form's row_count and deleted_count against its
// stored rows.
func assertCounters(t *testing.T, s *Sink, formID string) {
	t.Helper()
	var live, deleted int64
	if err := s.db.QueryRow(`SELECT count(*) - count(deleted_at), count(deleted_at) FROM submissions WHERE form_id = ?`, formID).Scan(&live, &deleted); err != nil {
		t.Fatal(err)
	}
	st, err := s.ReadState(t.Context(), []string{formID})
	if err != nil {
		t.Fatal(err)
	}
	if got := st[formID]; got.Rows != live || got.Deleted != deleted {
		t.Errorf("form %s: row_count %d, deleted_count %d; stored %d live and %d deleted rows", formID, got.Rows, got.Deleted, live, deleted)
	}
}

// commitAt commits one form at its stored revision and time at.
func commitAt(t *testing.T, s *Sink, at time.Time, fc sink.FormCommit) sink.Counts {
	t.Helper()
	forms := []sink.FormCommit{fc}
	atRevision(t, s, forms)
	res, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: at, Forms: forms})
	if err != nil {
		t.Fatal(err)
	}
	return res[fc.State.FormID]
}

func viewCount(t *testing.T, s *Sink, formID string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM ` + quoteIdent(sqlname.ViewName(formID))).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Rows keyed by content that a reconcile marked, then re-keyed or removed
// as twins by a plain commit: the counters follow each of them.
func TestMarkedLegacyRowsKeepCountersExact(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	at := t0.Truncate(time.Millisecond)
	a := row(t, "f", nil, at, false, `{"a":"1"}`)
	b := row(t, "f", nil, at.Add(time.Second), false, `{"a":"2"}`)
	c := row(t, "f", nil, at.Add(2*time.Second), false, `{"a":"3"}`)
	bID := row(t, "f", ptr(102), b.CreatedAt, false, b.Fields)
	commitAt(t, s, t0.Add(time.Hour), sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t, a, b, c, bID)})
	// bID re-keyed b; b comes back without its id, a twin of it.
	commitAt(t, s, t0.Add(2*time.Hour), sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t, b)})
	assertCounters(t, s, "f")

	// Nothing is served: all four rows are marked.
	got := commitAt(t, s, t0.Add(3*time.Hour), sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t), Reconcile: true})
	if got != (sink.Counts{Deleted: 4}) {
		t.Fatalf("reconcile: %+v, want 4 deleted", got)
	}
	assertCounters(t, s, "f")
	if n := viewCount(t, s, "f"); n != 0 {
		t.Errorf("view holds %d rows after everything was marked, want 0", n)
	}

	// A plain commit serves them again with ids: a is re-keyed and
	// restored, b's twin goes (it was marked) and 102 is restored; c stays
	// marked.
	aID := row(t, "f", ptr(101), a.CreatedAt, false, a.Fields)
	got = commitAt(t, s, t0.Add(4*time.Hour), sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t, aID, bID)})
	if got != (sink.Counts{Updated: 1, Restored: 2}) {
		t.Errorf("served again: %+v, want 1 updated (re-keyed), 2 restored", got)
	}
	assertCounters(t, s, "f")
	rows, err := s.ReadRows(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rows {
		keys = append(keys, fmt.Sprintf("%s:%v", r.SubmissionKey, !r.DeletedAt.IsZero()))
	}
	if want := "101:false 102:false " + c.SubmissionKey + ":true"; strings.Join(keys, " ") != want {
		t.Errorf("rows %s, want %s", strings.Join(keys, " "), want)
	}
	if n := viewCount(t, s, "f"); n != 2 {
		t.Errorf("view holds %d rows, want the 2 served", n)
	}
}

// A form listed twice in one commit: the first part's reconcile marks, the
// second part's rows are restored by the plain path.
func TestReconcileThenPlainInOneCommit(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	r1 := row(t, "f", ptr(1), t0, false, `{"a":"1"}`)
	r2 := row(t, "f", ptr(2), t0.Add(time.Second), false, `{"a":"2"}`)
	commitAt(t, s, t0.Add(time.Hour), sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t, r1, r2)})
	forms := []sink.FormCommit{
		{State: stateOf("f", "a"), Rows: sinktest.Spool(t, r1), Reconcile: true},
		{State: stateOf("f", "a"), Rows: sinktest.Spool(t, r2)},
	}
	atRevision(t, s, forms)
	res, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0.Add(2 * time.Hour), Forms: forms})
	if err != nil {
		t.Fatal(err)
	}
	if got := res["f"]; got != (sink.Counts{Deleted: 1, Restored: 1}) {
		t.Errorf("counts %+v, want 1 deleted, 1 restored", got)
	}
	assertCounters(t, s, "f")
}

// TestOpenMigratesVersion3 opens a file written with the third schema: its
// rows and state survive, its view is created again to leave out the rows
// deleted upstream, and the new state reads as nothing deleted, reconciled
// or forgotten. A read-only open refuses it until then.
func TestOpenMigratesVersion3(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v3.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := append([]string(nil), migrations[:3]...)
	stmts = append(stmts,
		fmt.Sprintf("PRAGMA application_id = %d", applicationID),
		"PRAGMA user_version = 3",
		`INSERT INTO submissions (form_id, submission_id, submission_key, created_at, is_spam, fields, files, raw, synced_at) VALUES
		 ('f', 7, '7', '2026-01-01T00:00:00.000000Z', 0, '{"a":"x"}', '[]', '{"id":7}', '2026-01-01T00:00:01.000000Z'),
		 ('f', 8, '8', '2026-01-01T00:00:02.000000Z', 1, '{"a":"y"}', '[]', NULL, '2026-01-01T00:00:03.000000Z')`,
		`INSERT INTO sync_state (form_id, wm_created_at, wm_id, boundary, sort_order, last_total, row_count, field_names, revision, updated_at)
		 VALUES ('f', '2026-01-01T00:00:02.000000Z', 8, '["8"]', 'newest_first', 2, 2, '["a"]', 5, '2026-01-01T00:00:03.000000Z')`,
		// The view as version 3 created it.
		`CREATE VIEW form_f AS SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
		 json_extract(fields, '$."a"') AS a FROM submissions WHERE form_id = 'f'`,
	)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	if _, err := OpenReadOnly(t.Context(), path); !errors.Is(err, ErrOlderSchema) {
		t.Fatalf("read-only open of a version 3 file: %v, want ErrOlderSchema", err)
	}

	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var version int
	s.db.QueryRow("PRAGMA user_version").Scan(&version)
	if version != SchemaVersion {
		t.Errorf("user_version = %d after opening, want %d", version, SchemaVersion)
	}
	st, err := s.ReadState(t.Context(), []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	f := st["f"]
	if f.Watermark.ID != 8 || f.Rows != 2 || f.Deleted != 0 || f.Revision != 5 || f.LastTotal != 2 ||
		f.Order != state.OrderNewestFirst || strings.Join(f.FieldNames, ",") != "a" ||
		!f.LastReconcileAt.IsZero() || f.FieldPolicy != "" || f.Forgotten != nil {
		t.Errorf("state after migration: %+v", f)
	}
	rows, err := s.ReadRows(t.Context(), "f")
	if err != nil || len(rows) != 2 || rows[0].Raw != `{"id":7}` || !rows[1].IsSpam || !rows[0].DeletedAt.IsZero() || !rows[1].DeletedAt.IsZero() {
		t.Fatalf("rows after migration: %+v, %v", rows, err)
	}
	var view string
	s.db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'form_f'`).Scan(&view)
	if !strings.Contains(view, "deleted_at IS NULL") {
		t.Errorf("view not created again:\n%s", view)
	}

	// A reconcile that is served only 8 marks 7: the table keeps it, the
	// view leaves it out.
	r8 := row(t, "f", ptr(8), time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC), true, `{"a":"y"}`)
	at := t0.Add(time.Hour)
	if got := commitAt(t, s, at, sink.FormCommit{State: f, Rows: sinktest.Spool(t, r8), Reconcile: true}); got != (sink.Counts{Deleted: 1}) {
		t.Errorf("reconcile after migration: %+v, want 1 deleted", got)
	}
	assertCounters(t, s, "f")
	if n := viewCount(t, s, "f"); n != 1 {
		t.Errorf("view holds %d rows, want 1", n)
	}
	var deletedAt string
	if err := s.db.QueryRow(`SELECT deleted_at FROM submissions WHERE form_id = 'f' AND submission_key = '7'`).Scan(&deletedAt); err != nil || deletedAt != at.Format(sink.TimeLayout) {
		t.Errorf("deleted_at of 7: %q, %v; want %s", deletedAt, err, at.Format(sink.TimeLayout))
	}
	s.Close()

	ro, err := OpenReadOnly(t.Context(), path)
	if err != nil {
		t.Fatalf("read-only open after the migration: %v", err)
	}
	defer ro.Close()
	if st, err := ro.ReadState(t.Context(), nil); err != nil || st["f"].Rows != 1 || st["f"].Deleted != 1 {
		t.Errorf("state read only: %+v, %v", st, err)
	}
}

// Tombstones and forgetting through the SQLite paths that the contract
// reaches only in part: a tombstoned row in a large reversed spool, and a
// forget of rows marked and not.
func TestForgetAndTombstonesKeepCountersExact(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	var rows []sink.Row
	for id := int64(600); id >= 1; id-- { // newest first: read backwards
		rows = append(rows, row(t, "f", ptr(id), t0.Add(time.Duration(id)*time.Second), false, fmt.Sprintf(`{"n":"%d"}`, id)))
	}
	commitAt(t, s, t0.Add(time.Hour), sink.FormCommit{State: stateOf("f", "n"), Rows: sinktest.Spool(t, rows[100:]...)})
	// 1..200 no longer served.
	commitAt(t, s, t0.Add(2*time.Hour), sink.FormCommit{State: stateOf("f", "n"), Rows: sinktest.Spool(t, rows[100:400]...), Reconcile: true})
	assertCounters(t, s, "f")

	fg, err := state.NewForgotten()
	if err != nil {
		t.Fatal(err)
	}
	// 50 (marked) and 550 (not stored yet) and 300 (stored, live).
	keys := []string{"50", "550", "300"}
	fg = fg.With(3, keys...)
	st := stateOf("f", "n")
	st.Forgotten = fg
	got := commitAt(t, s, t0.Add(3*time.Hour), sink.FormCommit{State: st, Forget: keys, Rows: sinktest.Spool(t, rows...)})
	if got != (sink.Counts{Inserted: 99, Restored: 199, Forgotten: 2}) {
		t.Errorf("forget and stage everything: %+v", got)
	}
	assertCounters(t, s, "f")
	found, err := s.Find(t.Context(), "f", sink.Match{Keys: keys})
	if err != nil || len(found) != 0 {
		t.Errorf("forgotten rows found: %v, %v", found, err)
	}
	if n := viewCount(t, s, "f"); n != 597 {
		t.Errorf("view holds %d rows, want 597", n)
	}
}

// forgetRow117 commits 200 rows of form a into s, each with its own
// e-mail, calls between (when not nil), then forgets the 118th
// (person-117). Every tenth row, that one among them, carries a message of
// some 20 KB: longer than a page, so that it spills into overflow pages.
func forgetRow117(t *testing.T, s *Sink, between func()) {
	t.Helper()
	var rows []sink.Row
	for i := range 200 {
		msg := fmt.Sprint(i)
		if i%10 == 7 {
			msg = strings.Repeat(fmt.Sprintf("secret-%03d ", i), 2000)
		}
		rows = append(rows, sinktest.Row(t, "a", sinktest.ID(int64(i+1)), t0.Add(time.Duration(i)*time.Second), false,
			fmt.Sprintf(`{"email":"person-%03d@forget.example","n":%q}`, i, msg)))
	}
	st := state.New("a")
	commitAt(t, s, t0, sink.FormCommit{State: st, Rows: sinktest.Spool(t, rows...)})
	if between != nil {
		between()
	}
	gone := rows[117]
	fg, err := state.NewForgotten()
	if err != nil {
		t.Fatal(err)
	}
	st.Forgotten = fg.With(1, gone.SubmissionKey, gone.ContentKey)
	if c := commitAt(t, s, t0.Add(time.Hour), sink.FormCommit{State: st, Forget: []string{gone.SubmissionKey}}); c.Forgotten != 1 {
		t.Fatalf("forgot %d rows, want 1", c.Forgotten)
	}
}

// holdingRow117 names the files of the database at path (the file and its
// write-ahead log) that hold the e-mail or the message of forgetRow117's
// forgotten row.
func holdingRow117(t *testing.T, path string) []string {
	t.Helper()
	var holding []string
	kept := false
	for _, f := range []string{path, path + "-wal"} {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("person-117@forget.example")) || bytes.Contains(data, []byte("secret-117 ")) {
			holding = append(holding, filepath.Base(f))
		}
		kept = kept || bytes.Contains(data, []byte("person-116@forget.example")) && bytes.Contains(data, []byte("secret-107 "))
	}
	if !kept {
		t.Error("no file holds a row that was kept: the search looks in the wrong place")
	}
	return holding
}

// A forgotten row, once purged, leaves no byte of itself in the database
// file or its write-ahead log.
func TestForgetLeavesNoBytesBehind(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	forgetRow117(t, s, nil)
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if files := holdingRow117(t, path); len(files) > 0 {
		t.Errorf("%v still hold the forgotten row's e-mail or message", files)
	}
}

// TestPurgeSaysAReaderHoldsTheOldPages: while another connection reads an
// older snapshot, the pages from before a forget stay in the file; Purge
// says so rather than succeed, and once the reader ends it erases them.
func TestPurgeSaysAReaderHoldsTheOldPages(t *testing.T) {
	defer setPurgeWait(100 * time.Millisecond)()
	s, path := open(t)
	reader, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var tx *sql.Tx
	// The reader's snapshot holds the rows as committed, before the forget.
	forgetRow117(t, s, func() {
		if tx, err = reader.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM submissions").Scan(&n); err != nil || n != 200 {
			t.Fatalf("the reader sees %d rows (%v), want 200", n, err)
		}
	})
	err = s.Purge(t.Context())
	if !errors.Is(err, ErrPurgeBlocked) {
		t.Fatalf("purge under a reader: %v, want ErrPurgeBlocked", err)
	}
	if files := holdingRow117(t, path); len(files) == 0 {
		t.Error("no file holds the forgotten row while a reader keeps the old pages: the test shows nothing")
	}
	tx.Rollback()
	if err := s.Purge(t.Context()); err != nil {
		t.Fatalf("purge once the reader ended: %v", err)
	}
	if files := holdingRow117(t, path); len(files) > 0 {
		t.Errorf("%v still hold the forgotten row's e-mail or message", files)
	}
}
