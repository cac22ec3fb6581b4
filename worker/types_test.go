package worker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/state/fieldtype"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// typedHarness syncs form "contact", holding subs, into a SQLite file,
// and returns the harness with a second connection to the file that
// reads its views as an analyst would.
func typedHarness(t *testing.T, subs ...apisim.Submission) (*enginetest.Harness, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "types.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h := enginetest.NewHarness(t, apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 1}, s)
	h.Sim.SetSubmissions("contact", subs...)
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return h, db
}

func submission(id int64, fields string) apisim.Submission {
	return apisim.Submission{ID: id, CreatedAt: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Minute),
		Fields: json.RawMessage(fields), Files: json.RawMessage(`[]`)}
}

// columnTypes is typeof() of each column of the form's view, in the row
// of submission id.
func columnTypes(t *testing.T, db *sql.DB, id int64, cols ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range cols {
		var typ string
		if err := db.QueryRow(`SELECT typeof("`+c+`") FROM form_contact WHERE submission_id = ?`, id).Scan(&typ); err != nil {
			t.Fatalf("column %s: %v", c, err)
		}
		out[c] = typ
	}
	return out
}

func columnValues(t *testing.T, db *sql.DB, col string) []any {
	t.Helper()
	rows, err := db.Query(`SELECT "` + col + `" FROM form_contact ORDER BY submission_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []any
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		out = append(out, v)
	}
	return out
}

// TestViewColumnsTypedAndWidened: a form whose fields hold integers,
// decimals, booleans, dates, timestamps, checkboxes and free text gets
// view columns of those types; a later submission with "n/a" in the
// integer field is synced all the same, the column widens to text, every
// earlier value is still in it, and a query written before still runs.
func TestViewColumnsTypedAndWidened(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	first := []apisim.Submission{
		submission(1, `{"guests":"4","budget":"1250.50","newsletter":true,"arrival":"2026-04-01","sent":"2026-03-01T09:30:00Z","extras":["parking","breakfast"],"message":"Hello!"}`),
		submission(2, `{"guests":2,"budget":800,"newsletter":"false","arrival":"2026-04-12","sent":"2026-03-02 18:05:10.25","extras":["late checkout"],"message":"Quiet room, please"}`),
	}
	h, db := typedHarness(t, first...)
	h.MustSync(ctx)
	cols := []string{"guests", "budget", "newsletter", "arrival", "sent", "extras", "message"}
	want := map[string]string{"guests": "integer", "budget": "real", "newsletter": "integer", "arrival": "text", "sent": "text", "extras": "text", "message": "text"}
	for _, id := range []int64{1, 2} {
		if diff := cmp.Diff(want, columnTypes(t, db, id, cols...)); diff != "" {
			t.Errorf("submission %d: typeof each column (-want +got):\n%s", id, diff)
		}
	}
	st, err := h.Sink.ReadState(ctx, []string{"contact"})
	if err != nil {
		t.Fatal(err)
	}
	wantSeen := fieldtype.Set{"guests": fieldtype.Integer, "budget": fieldtype.Decimal, "newsletter": fieldtype.Boolean,
		"arrival": fieldtype.Date, "sent": fieldtype.Timestamp, "extras": fieldtype.Array, "message": fieldtype.String}
	if diff := cmp.Diff(wantSeen, st["contact"].FieldTypes.Seen); diff != "" {
		t.Errorf("stored types (-want +got):\n%s", diff)
	}
	if got := columnValues(t, db, "sent"); !cmp.Equal(got, []any{"2026-03-01T09:30:00.000000Z", "2026-03-02T18:05:10.250000Z"}) {
		t.Errorf("timestamps: %v", got)
	}
	query := `SELECT sum(guests), count(*) FROM form_contact WHERE guests >= 2 AND newsletter = 0 AND arrival < '2026-05-01'`
	var sum, n int
	if err := db.QueryRow(query).Scan(&sum, &n); err != nil || sum != 2 || n != 1 {
		t.Fatalf("a query of the typed view: sum %d of %d rows, %v", sum, n, err)
	}

	h.Sim.SetSubmissions("contact", append(first, submission(3, `{"guests":"n/a","budget":"1250.50","message":"?"}`))...)
	rep := h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "contact"); fr.Inserted != 1 {
		t.Fatalf("second sync inserted %d, want 1", fr.Inserted)
	}
	if got := columnTypes(t, db, 1, "guests", "budget"); got["guests"] != "text" || got["budget"] != "real" {
		t.Errorf("after n/a: %v, want guests text, budget still real", got)
	}
	if diff := cmp.Diff([]any{"4", "2", "n/a"}, columnValues(t, db, "guests")); diff != "" {
		t.Errorf("guests after it widened (-want +got):\n%s", diff)
	}
	if err := db.QueryRow(query).Scan(&sum, &n); err != nil {
		t.Errorf("the query written before: %v", err)
	}
}

// TestPinnedFieldTypes: Config.FieldTypes makes a column the type pinned
// (a ZIP code stays text, leading zero and all; a rating is an integer,
// "n/a" in it NULL), and the pin goes at the commit after it is removed.
func TestPinnedFieldTypes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, db := typedHarness(t,
		submission(1, `{"zip":"02134","rating":"5"}`),
		submission(2, `{"zip":"10001","rating":"n/a"}`),
	)
	h.Config.FieldTypes = map[string]fieldtype.Set{"contact": {"zip": fieldtype.String, "rating": fieldtype.Integer}}
	h.MustSync(ctx)
	if diff := cmp.Diff([]any{int64(5), nil}, columnValues(t, db, "rating")); diff != "" {
		t.Errorf("pinned rating (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"02134", "10001"}, columnValues(t, db, "zip")); diff != "" {
		t.Errorf("pinned zip (-want +got):\n%s", diff)
	}
	st, _ := h.Sink.ReadState(ctx, []string{"contact"})
	if st["contact"].FieldTypes.Pinned["rating"] != fieldtype.Integer {
		t.Errorf("stored pins: %v", st["contact"].FieldTypes)
	}

	h.Config.FieldTypes = nil
	h.MustSync(ctx)
	if diff := cmp.Diff([]any{"5", "n/a"}, columnValues(t, db, "rating")); diff != "" {
		t.Errorf("rating once unpinned (-want +got):\n%s", diff)
	}
}

// TestFieldTypesAfterThePolicy: a column is typed by what is stored: a
// hashed number is text, and a dropped field has neither column nor type.
func TestFieldTypesAfterThePolicy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, _ := typedHarness(t, submission(1, `{"phone":"5551234","pin":"1234","age":"40"}`))
	h.Config.FieldPolicy = mustPolicy(t, "phone=hash,pin=drop").WithKey([]byte("a test key of at least 16 bytes"))
	h.MustSync(ctx)
	st, err := h.Sink.ReadState(ctx, []string{"contact"})
	if err != nil {
		t.Fatal(err)
	}
	want := fieldtype.Set{"phone": fieldtype.String, "age": fieldtype.Integer}
	if diff := cmp.Diff(want, st["contact"].FieldTypes.Seen); diff != "" {
		t.Errorf("types under the policy (-want +got):\n%s", diff)
	}
	if slices.Contains(st["contact"].FieldNames, "pin") {
		t.Errorf("field names %v hold the dropped field", st["contact"].FieldNames)
	}
}

// TestSubmissionFilesSynced: every shape of files the API serves becomes
// one row per file in submission_files.
func TestSubmissionFilesSynced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	subs := []apisim.Submission{
		submission(1, `{}`), submission(2, `{}`), submission(3, `{}`),
	}
	subs[0].Files = json.RawMessage(`[{"name":"a.pdf","url":"https://f/a"},{"name":"b.pdf","url":"https://f/b"}]`)
	subs[1].Files = json.RawMessage(`{"cv":{"name":"cv.pdf","url":"https://f/cv"}}`)
	subs[2].Files = json.RawMessage(`{"photos":[{"name":"1.jpg","url":"https://f/1"},{"name":"2.jpg","url":"https://f/2"}]}`)
	h, db := typedHarness(t, subs...)
	h.MustSync(ctx)
	rows, err := db.Query(`SELECT submission_id, coalesce(input, '-'), position, name, url FROM submission_files
		WHERE form_id = 'contact' ORDER BY submission_id, input, position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][]any
	for rows.Next() {
		var id, pos int64
		var input, name, url string
		if err := rows.Scan(&id, &input, &pos, &name, &url); err != nil {
			t.Fatal(err)
		}
		got = append(got, []any{id, input, pos, name, url})
	}
	want := [][]any{
		{int64(1), "-", int64(0), "a.pdf", "https://f/a"}, {int64(1), "-", int64(1), "b.pdf", "https://f/b"},
		{int64(2), "cv", int64(0), "cv.pdf", "https://f/cv"},
		{int64(3), "photos", int64(0), "1.jpg", "https://f/1"}, {int64(3), "photos", int64(1), "2.jpg", "https://f/2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("submission_files (-want +got):\n%s", diff)
	}
}

// typesElsewhere is a sink whose first commit finds every form committed
// by another process since it was read, with wider types and a field of
// its own.
type typesElsewhere struct {
	*sqlite.Sink
	once sync.Once
}

func (s *typesElsewhere) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	s.once.Do(func() {
		states, _ := s.ReadState(ctx, nil)
		other := &sink.Commit{SyncedAt: c.SyncedAt}
		for _, st := range states {
			st.FieldNames = append(slices.Clone(st.FieldNames), "zz_elsewhere")
			st.FieldTypes.Seen = fieldtype.Set{"guests": fieldtype.Decimal, "zz_elsewhere": fieldtype.Date}
			other.Forms = append(other.Forms, sink.FormCommit{State: st})
		}
		if _, err := s.Sink.Commit(ctx, other); err != nil {
			panic(err)
		}
	})
	return s.Sink.Commit(ctx, c)
}

// TestFieldTypesMergedWithAConcurrentCommit: types only widen, across
// writers too: a sync whose commit meets another's merges the types of
// both, each field to the type that fits both.
func TestFieldTypesMergedWithAConcurrentCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	first := []apisim.Submission{submission(1, `{"guests":"4","note":"hi"}`)}
	h, db := typedHarness(t, first...)
	h.MustSync(ctx)
	h.Sim.SetSubmissions("contact", append(first, submission(2, `{"guests":5,"note":"2026-01-01"}`))...)
	e, err := worker.New(client(t, h, nil), &typesElsewhere{Sink: h.Sink.(*sqlite.Sink)}, h.Config)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.Sync(ctx)
	if err != nil || rep.Err() != nil || rep.Conflicts != 1 {
		t.Fatalf("sync: %v, %v, %d conflicts; want one", err, rep.Err(), rep.Conflicts)
	}
	st, _ := h.Sink.ReadState(ctx, []string{"contact"})
	want := fieldtype.Set{"guests": fieldtype.Decimal, "note": fieldtype.String, "zz_elsewhere": fieldtype.Date}
	if diff := cmp.Diff(want, st["contact"].FieldTypes.Seen); diff != "" {
		t.Errorf("merged types (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{4.0, 5.0}, columnValues(t, db, "guests")); diff != "" {
		t.Errorf("guests, widened to decimal by the other writer (-want +got):\n%s", diff)
	}
}

// TestFieldTypesOfASyncInParts: a sync that commits a form in parts types
// each part's rows, and the view of every part is typed by the rows
// committed so far: the last part's widening is the form's.
func TestFieldTypesOfASyncInParts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, db := typedHarness(t, submission(1, `{"guests":"4"}`), submission(2, `{"guests":3}`), submission(3, `{"guests":"n/a"}`))
	h.Config.PartRows = 1
	rec := &typesCommitted{Sink: h.Sink}
	h.Sink = rec
	rep := h.MustSync(ctx)
	// Newest first: each part's commit carries the type of the rows
	// committed so far, so from the first part ("n/a") on it is a string.
	if len(rec.types) < 3 || slices.ContainsFunc(rec.types, func(ty fieldtype.Type) bool { return ty != fieldtype.String }) {
		t.Errorf("guests' type in each commit with rows: %q, want string in each of 3 parts or more", rec.types)
	}
	if fr := enginetest.FormReport(t, rep, "contact"); fr.Parts == 0 {
		t.Fatalf("the sync committed no part: %+v", fr)
	}
	st, _ := h.Sink.ReadState(ctx, []string{"contact"})
	if got := st["contact"].FieldTypes.Seen["guests"]; got != fieldtype.String {
		t.Errorf("guests typed %q after the parts, want string", got)
	}
	if diff := cmp.Diff([]any{"4", "3", "n/a"}, columnValues(t, db, "guests")); diff != "" {
		t.Errorf("guests (-want +got):\n%s", diff)
	}
}

// typesCommitted records the type of field guests of form contact in
// each commit that carries rows.
type typesCommitted struct {
	enginetest.Sink
	mu    sync.Mutex
	types []fieldtype.Type
}

func (s *typesCommitted) Commit(ctx context.Context, c *sink.Commit) (sink.Result, error) {
	s.mu.Lock()
	for _, f := range c.Forms {
		if f.State.FormID == "contact" && f.Rows != nil {
			s.types = append(s.types, f.State.FieldTypes.Seen["guests"])
		}
	}
	s.mu.Unlock()
	return s.Sink.Commit(ctx, c)
}

// TestFieldTypesOfABackfill: a backfill that reads a submission edited
// upstream since it was stored widens its field's type with the row it
// updates.
func TestFieldTypesOfABackfill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, db := typedHarness(t, submission(1, `{"guests":"4"}`), submission(2, `{"guests":3}`))
	h.MustSync(ctx)
	h.Sim.SetSubmissions("contact", submission(1, `{"guests":"four"}`), submission(2, `{"guests":3}`))
	if _, err := h.Engine().Backfill(ctx, "contact", worker.BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Sink.ReadState(ctx, []string{"contact"})
	if got := st["contact"].FieldTypes.Seen["guests"]; got != fieldtype.String {
		t.Errorf("guests typed %q after the backfill, want string", got)
	}
	if diff := cmp.Diff([]any{"four", "3"}, columnValues(t, db, "guests")); diff != "" {
		t.Errorf("guests (-want +got):\n%s", diff)
	}
}
