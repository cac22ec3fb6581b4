package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsync/formsync/sink/internal/sqlname"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/sinktest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)

func open(t *testing.T) (*Sink, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "formsync.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func row(t testing.TB, formID string, id *int64, at time.Time, spam bool, fields string) sink.Row {
	t.Helper()
	r, err := sink.NewRow(formID, id, at, spam, json.RawMessage(fields), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ptr(v int64) *int64 { return &v }

// commit commits forms, each at the revision stored for it.
func commit(t *testing.T, s *Sink, forms ...sink.FormCommit) sink.Result {
	t.Helper()
	atRevision(t, s, forms)
	res, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0.Add(time.Hour), Forms: forms})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// atRevision sets each form's state to the revision stored for it.
func atRevision(t *testing.T, s *Sink, forms []sink.FormCommit) {
	t.Helper()
	for i, fc := range forms {
		st, err := s.ReadState(t.Context(), []string{fc.State.FormID})
		if err != nil {
			t.Fatal(err)
		}
		forms[i].State.Revision = st[fc.State.FormID].Revision
	}
}

func stateOf(formID string, names ...string) state.Form {
	f := state.New(formID)
	f.FieldNames = names
	return f
}

func TestOpenCreatesAndReopens(t *testing.T) {
	t.Parallel()
	if len(migrations) != SchemaVersion {
		t.Fatalf("SchemaVersion = %d, but there are %d migrations", SchemaVersion, len(migrations))
	}
	s, path := open(t)
	commit(t, s, sink.FormCommit{State: stateOf("f1"), Rows: sinktest.Spool(t, row(t, "f1", ptr(1), t0, false, `{"a":1}`))})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s2, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s2.ReadRows(t.Context(), "f1")
		if err != nil || len(rows) != 1 {
			t.Fatalf("rows after reopen: %v, %v", rows, err)
		}
		var mode string
		s2.db.QueryRow("PRAGMA journal_mode").Scan(&mode)
		if mode != "wal" {
			t.Errorf("journal_mode = %q, want wal", mode)
		}
		s2.Close()
	}
}

// TestOpenMigratesVersion1 opens a file written with the first schema:
// its rows and state survive the rename of sync_state's columns.
// version1File writes a formsync file of schema version 1 holding what
// stmts insert, and returns its path.
func version1File(t *testing.T, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range append([]string{migrations[0], fmt.Sprintf("PRAGMA application_id = %d", applicationID), "PRAGMA user_version = 1"}, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return path
}

func TestOpenMigratesVersion1(t *testing.T) {
	t.Parallel()
	path := version1File(t,
		`INSERT INTO submissions VALUES ('f', 7, '7', '2026-01-01T00:00:00.000000Z', 0, '{"a":1}', '[]', '2026-01-01T00:00:01.000000Z')`,
		`INSERT INTO sync_state (form_id, watermark_created_at, watermark_id, watermark_boundary, sort_order, last_total, "rows", field_names, updated_at)
		 VALUES ('f', '2026-01-01T00:00:00.000000Z', 7, '["7"]', 'newest', 1, 1, '["a"]', '2026-01-01T00:00:01.000000Z')`,
	)

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
	if f.Watermark.ID != 7 || f.Rows != 1 || len(f.Watermark.Boundary) != 1 || f.Watermark.Boundary[0] != "7" ||
		f.Watermark.CreatedAt.IsZero() || strings.Join(f.FieldNames, ",") != "a" {
		t.Errorf("state after migration: %+v", f)
	}
	rows, err := s.ReadRows(t.Context(), "f")
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows after migration: %v, %v", rows, err)
	}
	// And it goes on working: a commit adds to the migrated counter.
	commit(t, s, sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t, row(t, "f", ptr(8), t0, false, `{"a":2}`))})
	var n int64
	s.db.QueryRow(`SELECT row_count FROM sync_state WHERE form_id = 'f'`).Scan(&n)
	if n != 2 {
		t.Errorf("row_count = %d after one more row, want 2", n)
	}
}

func TestOpenRefusesForeignFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("this is not sqlite\n", 100)), 0o600)
	if _, err := Open(t.Context(), junk); !errors.Is(err, ErrNotFormsync) {
		t.Errorf("junk file: err = %v, want ErrNotFormsync", err)
	}

	other := filepath.Join(dir, "other.db")
	s, err := Open(t.Context(), other)
	if err != nil {
		t.Fatal(err)
	}
	s.db.Exec("PRAGMA application_id = 42")
	s.Close()
	if _, err := Open(t.Context(), other); !errors.Is(err, ErrNotFormsync) {
		t.Errorf("other application: err = %v, want ErrNotFormsync", err)
	}

	newer := filepath.Join(dir, "newer.db")
	s, err = Open(t.Context(), newer)
	if err != nil {
		t.Fatal(err)
	}
	s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1))
	s.Close()
	if _, err := Open(t.Context(), newer); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("newer schema: err = %v, want ErrNewerSchema", err)
	}
}

func assertRowCounter(t *testing.T, s *Sink, formID string) {
	t.Helper()
	var stored int64
	if err := s.db.QueryRow(`SELECT count(*) FROM submissions WHERE form_id = ?`, formID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	st, err := s.ReadState(t.Context(), []string{formID})
	if err != nil {
		t.Fatal(err)
	}
	if st[formID].Rows != stored {
		t.Errorf("form %s: state rows = %d, stored rows = %d", formID, st[formID].Rows, stored)
	}
}

func TestCommitAllOrNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	before := stateOf("a", "x")
	commit(t, s, sink.FormCommit{State: before, Rows: sinktest.Spool(t, row(t, "a", ptr(1), t0, false, `{"x":1}`))})

	bad := row(t, "b", ptr(7), t0, false, `{}`)
	bad.SubmissionKey = "" // violates a CHECK constraint
	changed := stateOf("a", "x", "y")
	changed.Watermark = state.Watermark{CreatedAt: t0.Add(time.Hour), ID: 9, Boundary: []string{"9"}}
	forms := []sink.FormCommit{
		{State: changed, Rows: sinktest.Spool(t, row(t, "a", ptr(9), t0.Add(time.Hour), false, `{"x":9}`))},
		{State: stateOf("b"), Rows: sinktest.Spool(t, row(t, "b", ptr(6), t0, false, `{}`), bad)},
	}
	atRevision(t, s, forms)
	_, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: forms})
	if errors.Is(err, sink.ErrStateConflict) {
		t.Fatalf("commit refused for its revision, not its bad row: %v", err)
	}
	if err == nil {
		t.Fatal("commit with a bad row succeeded")
	}
	assertUntouched(t, s)

	ctx, cancel := context.WithCancel(t.Context())
	big := make([]sink.Row, 2*ctxCheckEvery)
	for i := range big {
		big[i] = row(t, "b", ptr(int64(1000+i)), t0, false, `{}`)
	}
	sp := sinktest.Spool(t, big...)
	cancel()
	forms = []sink.FormCommit{{State: changed}, {State: stateOf("b"), Rows: sp}}
	atRevision(t, s, forms)
	_, err = s.Commit(ctx, &sink.Commit{SyncedAt: t0, Forms: forms})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled commit: err = %v, want context.Canceled", err)
	}
	assertUntouched(t, s)
}

// TestCommitRefusesFormIDNotUTF8: ReadState looks form ids up through
// JSON, which turns invalid UTF-8 into U+FFFD, so a state stored under such
// an id would never be read back and every later commit of the form would
// be refused as a conflict. The commit refuses it instead, writing nothing.
func TestCommitRefusesFormIDNotUTF8(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	id := "sign\xffup"
	_, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{
		{State: stateOf(id), Rows: sinktest.Spool(t, row(t, id, ptr(1), t0, false, `{}`))},
	}})
	if err == nil || errors.Is(err, sink.ErrStateConflict) || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("commit of form id %q: err = %v, want it refused as not UTF-8", id, err)
	}
	st, err := s.ReadState(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.ReadRows(t.Context(), id); len(st) != 0 || len(rows) != 0 {
		t.Errorf("a refused commit wrote %d states and %d rows", len(st), len(rows))
	}
}

// cancelAfter is a context that becomes cancelled at the n-th call of Err,
// i.e. deterministically in the middle of a commit's row loop.
type cancelAfter struct {
	context.Context
	mu     sync.Mutex
	n      int
	done   chan struct{}
	cancel bool
}

func (c *cancelAfter) Done() <-chan struct{} { return c.done }

func (c *cancelAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 && !c.cancel {
		c.cancel = true
		close(c.done)
	}
	if c.cancel {
		return context.Canceled
	}
	return nil
}

func TestCommitCancelledMidway(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	commit(t, s, sink.FormCommit{State: stateOf("a", "x"), Rows: sinktest.Spool(t, row(t, "a", ptr(1), t0, false, `{"x":1}`))})
	rows := make([]sink.Row, 4*ctxCheckEvery)
	for i := range rows {
		rows[i] = row(t, "b", ptr(int64(i)), t0, false, `{}`)
	}
	for _, calls := range []int{1, 2, 3, 4} {
		ctx := &cancelAfter{Context: t.Context(), n: calls, done: make(chan struct{})}
		forms := []sink.FormCommit{
			{State: stateOf("a", "x", "y"), Rows: sinktest.Spool(t, row(t, "a", ptr(2), t0, false, `{"x":2}`))},
			{State: stateOf("b"), Rows: sinktest.Spool(t, rows...)},
		}
		atRevision(t, s, forms)
		_, err := s.Commit(ctx, &sink.Commit{SyncedAt: t0, Forms: forms})
		if errors.Is(err, sink.ErrStateConflict) {
			t.Fatalf("commit refused for its revision: %v", err)
		}
		if err == nil {
			t.Fatalf("cancelled at Err call %d: commit succeeded", calls)
		}
		assertUntouched(t, s)
	}
}

func assertUntouched(t *testing.T, s *Sink) {
	t.Helper()
	st, err := s.ReadState(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || !reflect.DeepEqual(st["a"].FieldNames, []string{"x"}) || !st["a"].Watermark.IsZero() {
		t.Errorf("state changed by a failed commit: %+v", st)
	}
	for _, f := range []string{"a", "b"} {
		rows, _ := s.ReadRows(t.Context(), f)
		if want := map[string]int{"a": 1, "b": 0}[f]; len(rows) != want {
			t.Errorf("form %s: %d rows after a failed commit, want %d", f, len(rows), want)
		}
	}
}

func TestViewWithHostileNames(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	hostile := []string{
		`plain`, `Mixed Case`, `it's`, `say "hi"`, "back`tick", `semi; DROP TABLE submissions; --`,
		`-- comment`, `a.b[0]`, `$.x`, `back\slash`, `"`, `\"`, `'`, `')`, `日本語`, `emoji 🎉`,
		strings.Repeat("long", 75), `order`, `form_id`, "nul\x00byte", "tab\tnew\nline", "",
	}
	fields := map[string]any{}
	for i, n := range hostile {
		fields[n] = fmt.Sprintf("v%d", i)
	}
	fj, _ := json.Marshal(fields)
	formID := `form'; DROP VIEW x; --"`
	names := append([]string(nil), hostile...)
	r := row(t, formID, ptr(1), t0, false, string(fj))
	commit(t, s, sink.FormCommit{State: stateOf(formID, names...), Rows: sinktest.Spool(t, r)},
		sink.FormCommit{State: stateOf("other", "plain"), Rows: sinktest.Spool(t, row(t, "other", ptr(1), t0, false, `{"plain":"no"}`))})

	cols := sqlname.ColumnNames(names, sqlname.ViewFixedColumns())
	for i, n := range hostile {
		var got string
		q := fmt.Sprintf(`SELECT %s FROM %s`, quoteIdent(cols[n]), quoteIdent(sqlname.ViewName(formID)))
		if err := s.db.QueryRow(q).Scan(&got); err != nil {
			t.Errorf("field %q: %v", n, err)
			continue
		}
		if want := fmt.Sprintf("v%d", i); got != want {
			t.Errorf("field %q = %q, want %q", n, got, want)
		}
	}
	var n int
	s.db.QueryRow(`SELECT count(*) FROM ` + quoteIdent(sqlname.ViewName(formID))).Scan(&n)
	if n != 1 {
		t.Errorf("view holds %d rows, want 1 (its form only)", n)
	}
	s.db.QueryRow(`SELECT count(*) FROM submissions`).Scan(&n)
	if n != 2 {
		t.Errorf("submissions holds %d rows, want 2", n)
	}

	// A new field re-creates the view.
	commit(t, s, sink.FormCommit{State: stateOf("other", "new", "plain"),
		Rows: sinktest.Spool(t, row(t, "other", ptr(2), t0, false, `{"new":"yes","plain":"p"}`))})
	var got string
	if err := s.db.QueryRow(`SELECT new FROM form_other WHERE submission_id = 2`).Scan(&got); err != nil || got != "yes" {
		t.Errorf("re-created view: %q, %v", got, err)
	}
}

func TestConcurrentCommitsAndReads(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 4 {
		form := fmt.Sprintf("f%d", g)
		var rows []sink.Row
		for i := range 50 {
			rows = append(rows, row(t, form, ptr(int64(i)), t0.Add(time.Duration(i)*time.Second), false, `{}`))
		}
		sp := sinktest.Spool(t, rows...)
		wg.Go(func() {
			for range 3 {
				forms := []sink.FormCommit{{State: stateOf(form), Rows: sp}}
				atRevision(t, s, forms)
				if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: forms}); err != nil {
					errs <- err
				}
				if _, err := s.ReadState(t.Context(), nil); err != nil {
					errs <- err
				}
				if _, err := s.ReadRows(t.Context(), form); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for g := range 4 {
		assertRowCounter(t, s, fmt.Sprintf("f%d", g))
	}
}

// An in-memory database keeps nothing after the run: refused, not a sync
// that reports success and stores nothing.
func TestOpenRefusesInMemory(t *testing.T) {
	t.Parallel()
	for _, path := range []string{":memory:", ":memory:?cache=shared"} {
		if s, err := Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		} else if !strings.Contains(err.Error(), "in-memory") {
			t.Errorf("Open(%q): %v, want it to say in-memory", path, err)
		}
	}
}
