package bigquery

import (
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestExactNumbersRoundTrip sends an id of 2^63-1 and a field value no
// INT64, UINT64 or FLOAT64 holds through the whole BigQuery path (spool
// NDJSON, load job, transaction) and reads them back exactly as the SQLite
// sink holds them. The JSON column itself holds the rounded number (what
// PARSE_JSON can store); the exact text is in fields_text.
func TestExactNumbersRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	lite, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()

	id := int64(math.MaxInt64)
	const wide = "123456789012345678901234567890"
	at := b.t0.Truncate(time.Millisecond)
	exact, err := sink.NewRow("wide", &id, at, false, json.RawMessage(`{"amount":`+wide+`,"n":1,"x":0.1}`), json.RawMessage(`{"upload":[{"size":`+wide+`}]}`))
	if err != nil {
		t.Fatal(err)
	}
	exact.Raw = `{"id":9223372036854775807,"created_at":"2026-03-04 05:06:07.123","data":{"amount":` + wide + `}}`
	plainID := int64(42)
	plain, err := sink.NewRow("wide", &plainID, at.Add(time.Second), false, json.RawMessage(`{"n":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := []sink.Row{exact, plain}
	st := formState("wide", rows, "amount", "n", "x")
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{st, rows})
	if _, err := lite.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sinktest.Spool(t, rows...)}}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.sink.ReadRows(t.Context(), "wide")
	if err != nil {
		t.Fatal(err)
	}
	want, err := lite.ReadRows(t.Context(), "wide")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(want) != 2 {
		t.Fatalf("got %d rows from BigQuery, %d from SQLite", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		g.Raw, w.Raw = "", ""
		if *g.SubmissionID != *w.SubmissionID || g.SubmissionKey != w.SubmissionKey || g.Fields != w.Fields || g.Files != w.Files ||
			!g.CreatedAt.Equal(w.CreatedAt) || g.ContentKey != w.ContentKey {
			t.Errorf("row %d:\nBigQuery %+v\nSQLite   %+v", i, g, w)
		}
	}
	if *got[0].SubmissionID != math.MaxInt64 || !strings.Contains(got[0].Fields, wide) || !strings.Contains(got[0].Files, wide) {
		t.Errorf("wide values changed: id %d fields %s files %s", *got[0].SubmissionID, got[0].Fields, got[0].Files)
	}
	if got[0].Raw != exact.Raw || got[1].Raw != "" {
		t.Errorf("raw read back %q and %q, want %q and empty", got[0].Raw, got[1].Raw, exact.Raw)
	}

	// What is stored: the JSON column rounds (it cannot do otherwise),
	// fields_text keeps the exact text, and only where needed.
	stored := selectAll(t, b, "submissions")
	for _, r := range stored {
		switch r["submission_key"] {
		case "9223372036854775807":
			if r["fields_text"] != exact.Fields || r["files_text"] != exact.Files || strings.Contains(r["fields"].(string), wide) {
				t.Errorf("stored wide row: %v", r)
			}
		case "42":
			if r["fields_text"] != nil || r["files_text"] != nil {
				t.Errorf("a row with exact numbers has text copies: %v", r)
			}
		}
	}

	// The same rows again: nothing changes, nothing counted.
	res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{st, rows})
	if res["wide"] != (sink.Counts{}) {
		t.Errorf("re-commit of exact rows counted %+v", res["wide"])
	}
}

// TestLaterVersionReplacesEveryColumn: a submission read again with other
// values replaces is_spam, fields, files, raw and created_at (a created_at
// in another millisecond, here outside the rest of the batch's range; the
// same millisecond keeps the stored microseconds, which the newer response
// form cannot print).
func TestLaterVersionReplacesEveryColumn(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	first := b.row(t, "v", 7, 1, false)
	first.Raw = `{"id":7,"v":1}`
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("v", nil), []sink.Row{first}})

	later := first
	later.CreatedAt = first.CreatedAt.Add(3 * time.Second)
	later.IsSpam = true
	later.Fields = `{"email":"changed@example.com"}`
	later.Files = `[{"name":"a.pdf"}]`
	later.Raw = `{"id":7,"v":2}`
	later.ContentKey = sink.ContentKey(later.CreatedAt, later.Fields, later.Files)
	other := b.row(t, "v", 8, 9, false)
	later.CreatedAt = first.CreatedAt.Add(-48 * time.Hour)
	later.ContentKey = sink.ContentKey(later.CreatedAt, later.Fields, later.Files)
	res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("v", nil), []sink.Row{later, other}})
	if res["v"] != (sink.Counts{Inserted: 1, Updated: 1}) {
		t.Errorf("counts %+v, want 1 inserted, 1 updated", res["v"])
	}
	checkRows(t, b.sink, "v", []sink.Row{later, other})
	got, err := b.sink.ReadRows(t.Context(), "v")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if r.SubmissionKey == "7" && (r.Raw != later.Raw || !r.CreatedAt.Equal(later.CreatedAt)) {
			t.Errorf("later version stored as %+v", r)
		}
	}

	// Only raw differs: a later version all the same (as in the SQLite
	// sink).
	again := later
	again.Raw = `{"id":7,"v":2,"new_member":true}`
	res = b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("v", nil), []sink.Row{again}})
	if res["v"] != (sink.Counts{Updated: 1}) {
		t.Errorf("raw-only change counted %+v, want 1 updated", res["v"])
	}
	got, _ = b.sink.ReadRows(t.Context(), "v")
	for _, r := range got {
		if r.SubmissionKey == "7" && r.Raw != again.Raw {
			t.Errorf("raw not refreshed: %q", r.Raw)
		}
	}
}

// selectAll reads a table of the sink's dataset through the fake's
// SELECT * shape, one map per row.
func selectAll(t *testing.T, b *bundle, table string) []map[string]bq.Value {
	t.Helper()
	it, err := b.sink.query("SELECT * FROM " + ref(b.cfg.Project, b.cfg.Dataset, table)).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]bq.Value
	for {
		row := map[string]bq.Value{}
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
}

// TestMigrateAddsColumnsInPlace opens the sink on tables made by the
// release before raw, fields_text, files_text and revision: Open appends
// them and the columns added since (old rows read NULL: raw "", revision
// 0, deleted_count 0), recreates the forms' views, and, once they exist,
// does no DDL again.
func TestMigrateAddsColumnsInPlace(t *testing.T) {
	t.Parallel()
	oldSubs := submissionsSchema()[:8]
	oldState := stateSchema()[:13]
	fake, cfg, ds := olderDataset(t, map[string]bq.Schema{"submissions": oldSubs, "sync_state": oldState})
	loadNDJSON(t, ds.Table("submissions"), oldSubs, `{"form_id":"old","submission_id":"5","submission_key":"5","created_at":"2026-03-04T05:06:07.123000Z","is_spam":false,"fields":{"a":1},"files":[],"synced_at":"2026-03-04T06:00:00Z"}`)
	loadNDJSON(t, ds.Table("sync_state"), oldState, `{"form_id":"old","wm_created_at":"2026-03-04T05:06:07.123000Z","wm_id":"5","boundary":["5"],"sort_order":"newest_first","last_total":"1","row_count":"1","field_names":["a"],"updated_at":"2026-03-04T06:00:00Z"}`)

	if _, err := OpenReadOnly(t.Context(), cfg); !errors.Is(err, ErrOlderSchema) {
		t.Fatalf("read-only open of tables before the migration: %v, want ErrOlderSchema", err)
	}
	fake.ResetStats()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := fake.Stats(); st.DDL["formsync_test.submissions"] != 1 || st.DDL["formsync_test.sync_state"] != 1 || st.DDL["formsync_test."+sqlname.ViewName("old")] != 1 {
		t.Errorf("migration DDL: %v, want one schema update per table and the view", st.DDL)
	}
	rows, err := s.ReadRows(t.Context(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Raw != "" || rows[0].Fields != `{"a":1}` {
		t.Fatalf("old rows after migration: %+v", rows)
	}
	st, err := s.ReadState(t.Context(), []string{"old"})
	if err != nil {
		t.Fatal(err)
	}
	if st["old"].Revision != 0 || st["old"].Rows != 1 || st["old"].Deleted != 0 {
		t.Fatalf("old state after migration: %+v", st["old"])
	}
	next := st["old"]
	id := int64(6)
	r, _ := sink.NewRow("old", &id, time.Date(2026, 3, 4, 5, 7, 0, 0, time.UTC), false, json.RawMessage(`{"a":2}`), nil)
	next.Watermark = next.Watermark.Advance(r.CreatedAt, id, r.SubmissionKey)
	if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: time.Date(2026, 3, 4, 7, 0, 0, 0, time.UTC), Forms: []sink.FormCommit{{State: next, Rows: sinktest.Spool(t, r)}}}); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, s, "old")["old"]; got.Revision != 1 || got.Rows != 2 {
		t.Errorf("after a commit on migrated tables: %+v", got)
	}

	fake.ResetStats()
	s2, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if st := fake.Stats(); len(st.DDL) != 0 {
		t.Errorf("second Open after migration did DDL: %v", st.DDL)
	}
	ro, err := OpenReadOnly(t.Context(), cfg)
	if err != nil {
		t.Fatalf("read-only open after the migration: %v", err)
	}
	ro.Close()
}

func loadNDJSON(t *testing.T, tbl *bq.Table, schema bq.Schema, lines ...string) {
	t.Helper()
	src := bq.NewReaderSource(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	src.SourceFormat = bq.JSON
	src.Schema = schema
	job, err := tbl.LoaderFrom(src).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, err := job.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyReadsStateWithoutCopies: status right after an upgrade, before
// a sync has migrated the tables, reads a sync_state table the formsync
// before this one wrote (no copies column): every other column as stored,
// copies as none, and nothing is created or altered.
func TestReadOnlyReadsStateWithoutCopies(t *testing.T) {
	t.Parallel()
	var prevState bq.Schema
	for _, f := range stateSchema() {
		if f.Name != "copies" {
			prevState = append(prevState, f)
		}
	}
	fake, cfg, ds := olderDataset(t, map[string]bq.Schema{"submissions": submissionsSchema(), "sync_state": prevState})
	loadNDJSON(t, ds.Table("sync_state"), prevState, `{"form_id":"old","wm_created_at":"2026-03-04T05:06:07.123000Z","wm_id":"5","boundary":["5"],"sort_order":"newest_first","last_total":"3","row_count":"2","field_names":["a"],"updated_at":"2026-03-04T06:00:00Z","revision":"4","deleted_count":"1","field_policy":"p1","forgotten":{"salt":"00","keys":[],"count":0}}`)
	fake.ResetStats()

	s, err := OpenReadOnly(t.Context(), cfg)
	if err != nil {
		t.Fatalf("read-only open of the previous formsync's tables: %v", err)
	}
	defer s.Close()
	got, err := s.ReadState(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := got["old"]
	if !ok || st.Rows != 2 || st.Deleted != 1 || st.Revision != 4 || st.LastTotal != 3 || st.FieldPolicy != "p1" ||
		st.Watermark.ID != 5 || st.Forgotten == nil || st.Copies != nil {
		t.Errorf("state read from a table without copies: %+v", st)
	}
	if ddl := fake.Stats().DDL; len(ddl) != 0 {
		t.Errorf("a read-only open did DDL: %v", ddl)
	}
}

// TestNumberBeyondFloat64Commits: PARSE_JSON(..., 'round') fails on a
// number no FLOAT64 can round to (1e400), which failed the whole commit,
// every run: one such value in one submission stopped every form of the
// run. The JSON column of that row is NULL (SAFE.PARSE_JSON); fields_text
// and files_text keep the exact text, and ReadRows reads it.
func TestNumberBeyondFloat64Commits(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	id := int64(5)
	huge, err := sink.NewRow("huge", &id, b.t0.Truncate(time.Millisecond), false, json.RawMessage(`{"big":1e400,"n":1}`), json.RawMessage(`[{"size":-1e400}]`))
	if err != nil {
		t.Fatal(err)
	}
	plain := b.row(t, "plain", 6, 2, false)
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("huge", []sink.Row{huge}, "big", "n"), []sink.Row{huge}},
		formRows{formState("plain", []sink.Row{plain}), []sink.Row{plain}})
	got, err := b.sink.ReadRows(t.Context(), "huge")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Fields != huge.Fields || got[0].Files != huge.Files {
		t.Fatalf("read back %+v, want the exact fields %s and files %s", got, huge.Fields, huge.Files)
	}
	for _, r := range selectAll(t, b, "submissions") {
		if r["submission_key"] == "5" && (r["fields"] != nil || r["fields_text"] != huge.Fields || r["files_text"] != huge.Files) {
			t.Errorf("stored row: %v; want fields NULL and the exact texts", r)
		}
	}
	// The view reads fields_text where the JSON column could not hold the
	// row: its values are there, exactly.
	v := readView(t, b, "huge")
	if len(v) != 1 {
		t.Fatalf("view of the form: %v; want its one row", v)
	}
	for col, want := range map[string]string{"big": "1e400", "n": "1"} {
		if val := v[0][col]; val != want {
			t.Errorf("view column %s: %v; want %s", col, val, want)
		}
	}
	// Read again, unchanged: nothing to update.
	res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("huge", []sink.Row{huge}, "big", "n"), []sink.Row{huge}})
	if res["huge"] != (sink.Counts{}) {
		t.Errorf("re-commit counted %+v", res["huge"])
	}
}
