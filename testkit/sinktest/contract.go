package sinktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// Sink is what the contract needs of a sink: the sink itself, and a way to
// read back what it stored.
type Sink interface {
	sink.Sink
	RowReader
}

// RowReader reads back what a sink stored, for tests.
type RowReader interface {
	// ReadRows returns every stored row of a form, ordered by created_at
	// then submission_key, with ContentKey derived from the stored
	// created_at, fields and files.
	ReadRows(ctx context.Context, formID string) ([]sink.Row, error)
}

// Open returns a fresh, empty sink for one test; it closes it with
// t.Cleanup.
type Open func(t *testing.T) Sink

// t0 is the created_at of the first row of every test.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)

// Run checks every promise a sink makes, on sinks open returns. has names
// the optional abilities the sink has (Ability); it must have no other.
func Run(t *testing.T, open Open, has ...Ability) {
	// Each check opens a sink of its own: they run in parallel.
	run := func(name string, check func(*testing.T, Sink)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check(t, open(t))
		})
	}
	run("InsertThenIdenticalRecommit", testInsert)
	run("UpdateReplacesEveryColumn", testUpdate)
	run("MillisecondsAreNotAChange", testMilliseconds)
	run("RekeyOlderToNewer", testRekey)
	run("ContentKeyedTwinRemoved", testTwin)
	run("TwinStagedAgainAfterItsID", testTwinStagedAgain)
	run("RekeyWithinOneCommit", testRekeyWithinCommit)
	run("RekeyThenEditWithinOneCommit", testRekeyThenEdit)
	run("LaterVersionsTwinRemoved", testLaterVersionTwin)
	run("StateRoundTrip", testStateRoundTrip)
	run("StateOnlyCommit", testStateOnly)
	run("SameFormTwiceInOneCommit", testSameFormTwice)
	run("SameFormAtTwoRevisionsRefused", testSameFormTwoRevisions)
	run("FailureInsideCommitWritesNothing", testFailureInside)
	run("CancelledCommitWritesNothing", testCancelled)
	run("StaleRevisionIsRefused", testConflict)
	run("ExactNumbersAndRaw", testExact)
	run("ManyRowsKeyedByContent", testManyContentKeyed)
	run("ReconcileMarksRowsNoLongerServed", testReconcile)
	run("ReconcileKeepsReKeyedRows", testReconcileRekey)
	run("FailedReconcileMarksNothing", testReconcileFailure)
	run("ForgetRemovesAndTombstonesKeepOut", testForget)
	run("RefusedForgetRemovesNothing", testForgetConflict)
	run("Find", testFind)
	runRemoval(run)
	abilities := map[Ability]bool{}
	for _, a := range has {
		abilities[a] = true
	}
	runOptional(run, abilities)
}

// Row builds a row the way the engine does, failing the test on error.
func Row(t testing.TB, formID string, id *int64, at time.Time, spam bool, fields string) sink.Row {
	t.Helper()
	r, err := sink.NewRow(formID, id, at, spam, json.RawMessage(fields), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Raw = rawOf(r)
	return r
}

// rawOf is a plausible raw object for a row, so that the raw column is
// exercised by every test.
func rawOf(r sink.Row) string {
	id := "null"
	if r.SubmissionID != nil {
		id = strconv.FormatInt(*r.SubmissionID, 10)
	}
	return fmt.Sprintf(`{"id":%s,"data":%s,"created_at":%q}`, id, r.Fields, r.CreatedAt.Format(time.RFC3339Nano))
}

// ID returns a pointer to id.
func ID(id int64) *int64 { return &id }

// Spool stages rows in a finished spool, removed when the test ends.
func Spool(t testing.TB, rows ...sink.Row) *sink.Spool {
	t.Helper()
	return spoolIn(t, t.TempDir(), rows...)
}

func spoolIn(t testing.TB, dir string, rows ...sink.Row) *sink.Spool {
	t.Helper()
	sp, err := sink.NewSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	sp.SortContentKeys() // as the engine stages for SQLite; other sinks take either
	t.Cleanup(func() { sp.Remove() })
	for _, r := range rows {
		if err := sp.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.Finish(); err != nil {
		t.Fatal(err)
	}
	return sp
}

// fixture is one sink under test and the states it was last seen with.
type fixture struct {
	t     *testing.T
	s     Sink
	clock time.Time
}

func newFixture(t *testing.T, s Sink) *fixture {
	return &fixture{t: t, s: s, clock: t0.Add(time.Hour)}
}

// state is the stored state of formID, or a new one, with field names.
func (f *fixture) state(formID string) state.Form {
	f.t.Helper()
	got, err := f.s.ReadState(f.t.Context(), []string{formID})
	if err != nil {
		f.t.Fatal(err)
	}
	st, ok := got[formID]
	if !ok {
		st = state.New(formID)
	}
	return st
}

// commit commits rows of each form at its stored revision, with the
// field names of the rows, and returns the result.
func (f *fixture) commit(forms map[string][]sink.Row) sink.Result {
	f.t.Helper()
	res, err := f.try(f.t.Context(), forms)
	if err != nil {
		f.t.Fatalf("commit: %v", err)
	}
	return res
}

func (f *fixture) try(ctx context.Context, forms map[string][]sink.Row) (sink.Result, error) {
	f.t.Helper()
	f.clock = f.clock.Add(time.Minute)
	c := &sink.Commit{SyncedAt: f.clock}
	for id, rows := range forms {
		st := f.state(id)
		st.LastSuccessAt = f.clock
		for _, r := range rows {
			var fields map[string]json.RawMessage
			json.Unmarshal([]byte(r.Fields), &fields)
			for name := range fields {
				st.FieldNames = mergeName(st.FieldNames, name)
			}
		}
		c.Forms = append(c.Forms, sink.FormCommit{State: st, Rows: Spool(f.t, rows...)})
	}
	return f.s.Commit(ctx, c)
}

func mergeName(names []string, n string) []string {
	for i, x := range names {
		if x == n {
			return names
		}
		if x > n {
			return append(names[:i:i], append([]string{n}, names[i:]...)...)
		}
	}
	return append(names, n)
}

// rows reads a form's rows.
func (f *fixture) rows(formID string) []sink.Row {
	f.t.Helper()
	got, err := f.s.ReadRows(f.t.Context(), formID)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// checkRows asserts the stored rows of formID are want (any order), and
// that row_count counts them.
func (f *fixture) checkRows(formID string, want ...sink.Row) {
	f.t.Helper()
	got := f.rows(formID)
	byKey := map[string]sink.Row{}
	for _, r := range got {
		if _, dup := byKey[r.SubmissionKey]; dup {
			f.t.Errorf("form %s: key %s stored twice", formID, r.SubmissionKey)
		}
		byKey[r.SubmissionKey] = r
	}
	if len(got) != len(want) {
		f.t.Errorf("form %s: %d rows stored, want %d", formID, len(got), len(want))
	}
	for _, w := range want {
		g, ok := byKey[w.SubmissionKey]
		if !ok {
			f.t.Errorf("form %s: key %s missing", formID, w.SubmissionKey)
			continue
		}
		if d := RowDiff(w, g); d != "" {
			f.t.Errorf("form %s key %s (-want +got):\n%s", formID, w.SubmissionKey, d)
		}
	}
	var live, deleted int64
	for _, r := range got {
		if r.DeletedAt.IsZero() {
			live++
		} else {
			deleted++
		}
	}
	if st := f.state(formID); st.Rows != live || st.Deleted != deleted {
		f.t.Errorf("form %s: row_count %d and deleted_count %d, but %d rows stored, %d of them deleted", formID, st.Rows, st.Deleted, len(got), deleted)
	}
}

func wantCounts(t *testing.T, what string, res sink.Result, want sink.Result) {
	t.Helper()
	if !reflect.DeepEqual(res, want) {
		t.Errorf("%s: result %v, want %v", what, res, want)
	}
}

func testInsert(t *testing.T, s Sink) {
	f := newFixture(t, s)
	a1 := Row(t, "a", ID(1), t0, false, `{"name":"Ada"}`)
	a2 := Row(t, "a", ID(2), t0.Add(time.Second), true, `{"name":"Bob"}`)
	b1 := Row(t, "b", nil, t0, false, `{"q":"no id"}`)
	res := f.commit(map[string][]sink.Row{"a": {a1, a2, a1}, "b": {b1}, "idle": nil})
	wantCounts(t, "first commit", res, sink.Result{"a": {Inserted: 2}, "b": {Inserted: 1}, "idle": {}})
	f.checkRows("a", a1, a2)
	f.checkRows("b", b1)
	f.checkRows("idle")

	res = f.commit(map[string][]sink.Row{"a": {a2, a1}, "b": {b1}})
	wantCounts(t, "identical re-commit", res, sink.Result{"a": {}, "b": {}})
	f.checkRows("a", a1, a2)
	f.checkRows("b", b1)
}

func testUpdate(t *testing.T, s Sink) {
	f := newFixture(t, s)
	v1 := Row(t, "a", ID(7), t0, false, `{"x":"1"}`)
	other := Row(t, "a", ID(8), t0, false, `{"x":"8"}`)
	f.commit(map[string][]sink.Row{"a": {v1, other}})

	// A later version: every column changes, created_at included.
	v2 := Row(t, "a", ID(7), t0.Add(36*time.Hour), true, `{"x":"2","y":"new"}`)
	res := f.commit(map[string][]sink.Row{"a": {v2}})
	wantCounts(t, "later version", res, sink.Result{"a": {Updated: 1}})
	f.checkRows("a", v2, other)

	spamOnly := v2
	spamOnly.IsSpam = false
	spamOnly.Raw = rawOf(spamOnly) + " "
	res = f.commit(map[string][]sink.Row{"a": {spamOnly}})
	wantCounts(t, "is_spam changed", res, sink.Result{"a": {Updated: 1}})
	f.checkRows("a", spamOnly, other)
}

func testMilliseconds(t *testing.T, s Sink) {
	f := newFixture(t, s)
	six := Row(t, "a", ID(1), t0, false, `{"x":"1"}`) // microseconds, as the older form gives them
	f.commit(map[string][]sink.Row{"a": {six}})
	three := six
	three.CreatedAt = t0.Truncate(time.Millisecond) // the newer form prints milliseconds
	res := f.commit(map[string][]sink.Row{"a": {three}})
	wantCounts(t, "same submission, three digits", res, sink.Result{"a": {}})
	f.checkRows("a", six)
}

func testRekey(t *testing.T, s Sink) {
	f := newFixture(t, s)
	old1 := Row(t, "f", nil, t0, false, `{"a":"1"}`)
	old2 := Row(t, "f", nil, t0.Add(time.Second), false, `{"a":"2"}`)
	f.commit(map[string][]sink.Row{"f": {old1, old2}})

	// The form now answers with ids and three fractional digits.
	at3 := t0.Truncate(time.Millisecond)
	new1 := Row(t, "f", ID(101), at3, true, `{"a":"1"}`)
	new2 := Row(t, "f", ID(102), at3.Add(time.Second), false, `{"a":"2"}`)
	new3 := Row(t, "f", ID(103), at3.Add(2*time.Second), false, `{"a":"3"}`)
	if new1.ContentKey != old1.ContentKey {
		t.Fatalf("content keys differ across response forms: %s vs %s", new1.ContentKey, old1.ContentKey)
	}
	res := f.commit(map[string][]sink.Row{"f": {new1, new2, new3, new1}})
	wantCounts(t, "re-key", res, sink.Result{"f": {Inserted: 1, Updated: 2}})
	// Re-keyed rows keep the six digits they were loaded with.
	k1, k2 := new1, new2
	k1.CreatedAt, k2.CreatedAt = old1.CreatedAt, old2.CreatedAt
	k1.ContentKey, k2.ContentKey = old1.ContentKey, old2.ContentKey
	f.checkRows("f", k1, k2, new3)
}

// testRekeyWithinCommit stages one submission both without its id and,
// later in the same commit, with it (the form changed response form while it
// was read): it ends up stored once, under its id, as if the two had come in
// two commits. Staged the other way round, the content-keyed copy stays a
// twin until the id is read again (testTwin).
func testRekeyWithinCommit(t *testing.T, s Sink) {
	f := newFixture(t, s)
	at3 := t0.Truncate(time.Millisecond)
	byContent := Row(t, "new", nil, t0, false, `{"a":"1"}`)
	byID := Row(t, "new", ID(101), at3, false, `{"a":"1"}`)
	res := f.commit(map[string][]sink.Row{"new": {byContent, byID}})
	wantCounts(t, "inserted and re-keyed", res, sink.Result{"new": {Inserted: 1, Updated: 1}})
	// Re-keyed, it keeps the six digits it was first staged with.
	want := byID
	want.CreatedAt, want.ContentKey = byContent.CreatedAt, byContent.ContentKey
	f.checkRows("new", want)

	// Stored by content before; staged again by content, then by id.
	old := Row(t, "stored", nil, t0, false, `{"a":"2"}`)
	f.commit(map[string][]sink.Row{"stored": {old}})
	oldByID := Row(t, "stored", ID(102), at3, false, `{"a":"2"}`)
	res = f.commit(map[string][]sink.Row{"stored": {old, oldByID}})
	wantCounts(t, "stored, re-keyed", res, sink.Result{"stored": {Updated: 1}})
	want = oldByID
	want.CreatedAt, want.ContentKey = old.CreatedAt, old.ContentKey
	f.checkRows("stored", want)

	// By id first, then by content: two rows.
	first := Row(t, "twin", ID(103), at3, false, `{"a":"3"}`)
	then := Row(t, "twin", nil, at3, false, `{"a":"3"}`)
	res = f.commit(map[string][]sink.Row{"twin": {first, then}})
	wantCounts(t, "id, then content", res, sink.Result{"twin": {Inserted: 2}})
	f.checkRows("twin", first, then)
}

// testRekeyThenEdit stages, in one commit, a submission stored by content
// with its id, and then the same id edited (read twice as pages moved):
// the content-keyed row is re-keyed and then updated, never left as a
// twin beside the id.
func testRekeyThenEdit(t *testing.T, s Sink) {
	f := newFixture(t, s)
	at3 := t0.Truncate(time.Millisecond)
	old := Row(t, "f", nil, t0, false, `{"a":"5"}`)
	f.commit(map[string][]sink.Row{"f": {old}})
	byID := Row(t, "f", ID(105), at3, false, `{"a":"5"}`)
	edited := Row(t, "f", ID(105), at3, false, `{"a":"6"}`)
	res := f.commit(map[string][]sink.Row{"f": {byID, edited}})
	wantCounts(t, "re-keyed, then edited", res, sink.Result{"f": {Updated: 2}})
	want := edited
	want.CreatedAt = old.CreatedAt
	f.checkRows("f", want)

	// Another submission with the same content as the first version, a
	// lower id, staged after: the twin went to the first, it is new.
	old = Row(t, "g", nil, t0, false, `{"a":"7"}`)
	f.commit(map[string][]sink.Row{"g": {old}})
	byID = Row(t, "g", ID(108), at3, false, `{"a":"7"}`)
	edited = Row(t, "g", ID(108), at3, false, `{"a":"8"}`)
	other := Row(t, "g", ID(107), at3, false, `{"a":"7"}`)
	res = f.commit(map[string][]sink.Row{"g": {byID, edited, other}})
	wantCounts(t, "re-keyed, edited, and one like it", res, sink.Result{"g": {Inserted: 1, Updated: 2}})
	want = edited
	want.CreatedAt = old.CreatedAt
	f.checkRows("g", other, want)
}

func testTwin(t *testing.T, s Sink) {
	f := newFixture(t, s)
	at3 := t0.Truncate(time.Millisecond)
	byID := Row(t, "f", ID(104), at3, false, `{"a":"4"}`)
	f.commit(map[string][]sink.Row{"f": {byID}})
	// The same submission arrives without its id (the form went back to
	// the older response form for a while): stored under its content key.
	byContent := Row(t, "f", nil, at3, false, `{"a":"4"}`)
	res := f.commit(map[string][]sink.Row{"f": {byContent}})
	wantCounts(t, "content-keyed copy", res, sink.Result{"f": {Inserted: 1}})
	f.checkRows("f", byID, byContent)
	// Read with its id again: the content-keyed twin goes.
	res = f.commit(map[string][]sink.Row{"f": {byID}})
	wantCounts(t, "twin removed", res, sink.Result{"f": {}})
	f.checkRows("f", byID)
}

func testStateRoundTrip(t *testing.T, s Sink) {
	ctx := t.Context()
	at := t0
	full := state.Form{
		FormID:          "full",
		Watermark:       state.Watermark{CreatedAt: at, ID: 42, Boundary: []string{"41", "42"}},
		Order:           state.OrderNewestFirst,
		LastTotal:       1234,
		FieldNames:      []string{"a", "b", "c"},
		LastSuccessAt:   at.Add(time.Minute),
		LastErrorAt:     at.Add(-time.Minute),
		LastError:       `form deleted (404) "quoted" ünïcode`,
		Backfill:        &state.Backfill{Since: at.Add(-time.Hour), Until: at, Cursor: at.Add(-time.Minute), StartedAt: at, FieldPolicy: "0123456789abcdef0123456789abcdef"},
		LastReconcileAt: at.Add(-2 * time.Hour),
		FieldPolicy:     "0123456789abcdef0123456789abcdef",
		Forgotten:       &state.Forgotten{Salt: "00112233445566778899aabbccddeeff", Keys: []string{"0a", "1b"}, Count: 1, Pending: []string{"1b"}},
		Copies:          map[string]int64{"c0ffee": 1, "5eed": 3},
	}
	empty := state.Form{FormID: "empty", LastTotal: 0, Watermark: state.Watermark{Boundary: []string{}}, FieldNames: []string{}, Backfill: &state.Backfill{},
		Forgotten: &state.Forgotten{Salt: "00112233445566778899aabbccddeeff", Keys: []string{}}}
	zero := state.Form{FormID: "zero", LastTotal: -1}
	c := &sink.Commit{SyncedAt: at, Forms: []sink.FormCommit{{State: full}, {State: empty}, {State: zero}}}
	if _, err := s.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadState(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []state.Form{full, empty, zero} {
		want.Revision = 1
		if g := got[want.FormID]; !reflect.DeepEqual(g, want) {
			t.Errorf("state %s:\n got  %+v\n want %+v", want.FormID, g, want)
		}
	}
	got, err = s.ReadState(ctx, []string{"zero", "never-synced"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["zero"].FormID != "zero" {
		t.Errorf("ReadState(zero, never-synced) = %+v, want only zero", got)
	}
}

func testStateOnly(t *testing.T, s Sink) {
	f := newFixture(t, s)
	r := Row(t, "a", ID(1), t0, false, `{"x":"1"}`)
	f.commit(map[string][]sink.Row{"a": {r}})
	st := f.state("a")
	st.LastError, st.LastErrorAt = "form not found (HTTP 404)", t0
	res, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: st}}})
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "state-only commit", res, sink.Result{"a": {}})
	f.checkRows("a", r)
	if got := f.state("a"); got.LastError != st.LastError || got.Revision != st.Revision+1 {
		t.Errorf("state after a state-only commit: error %q revision %d, want %q and %d", got.LastError, got.Revision, st.LastError, st.Revision+1)
	}
}

func testSameFormTwice(t *testing.T, s Sink) {
	f := newFixture(t, s)
	r1 := Row(t, "a", ID(1), t0, false, `{"x":"1"}`)
	r2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"x":"2"}`)
	r2b := Row(t, "a", ID(2), t0.Add(time.Second), true, `{"x":"2"}`)
	first, last := state.New("a"), state.New("a")
	first.LastError = "first"
	last.LastSuccessAt = t0
	last.FieldNames = []string{"x"}
	c := &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{
		{State: first, Rows: Spool(t, r1, r2)},
		{State: last, Rows: Spool(t, r2b)},
	}}
	res, err := s.Commit(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "one form twice", res, sink.Result{"a": {Inserted: 2, Updated: 1}})
	f.checkRows("a", r1, r2b)
	if st := f.state("a"); st.LastError != "" || !st.LastSuccessAt.Equal(t0) || st.Revision != 1 {
		t.Errorf("state = %+v, want the last one at revision 1", st)
	}
}

// testSameFormTwoRevisions: a commit whose entries of one form carry
// different revisions says nothing of which one to check the stored
// revision against, so every sink refuses it and writes nothing.
func testSameFormTwoRevisions(t *testing.T, s Sink) {
	f := newFixture(t, s)
	f.commit(map[string][]sink.Row{"a": {Row(t, "a", ID(1), t0, false, `{"x":"1"}`)}})
	stored := f.state("a")
	older := stored
	older.Revision--
	r2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"x":"2"}`)
	for _, forms := range [][]sink.FormCommit{
		{{State: stored, Rows: Spool(t, r2)}, {State: older}},
		{{State: older}, {State: stored, Rows: Spool(t, r2)}},
	} {
		_, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: forms})
		if err == nil || !strings.Contains(err.Error(), "revisions") {
			t.Errorf("commit of form a at revisions %d and %d: %v, want it refused", forms[0].State.Revision, forms[1].State.Revision, err)
		}
	}
	f.checkRows("a", Row(t, "a", ID(1), t0, false, `{"x":"1"}`))
	if st := f.state("a"); st.Revision != stored.Revision {
		t.Errorf("revision %d after refused commits, want %d", st.Revision, stored.Revision)
	}
}

// corruptSpool is a spool whose last line is not a row: reading it fails
// after the good rows, in the middle of the sink's own commit.
func corruptSpool(t *testing.T, rows ...sink.Row) *sink.Spool {
	t.Helper()
	dir := t.TempDir()
	sp := spoolIn(t, dir, rows...)
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("spool file: %v %v", files, err)
	}
	fh, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString("{\"form_id\": 17, this is not a row\n"); err != nil {
		t.Fatal(err)
	}
	return sp
}

func testFailureInside(t *testing.T, s Sink) {
	f := newFixture(t, s)
	a1 := Row(t, "a", ID(1), t0, false, `{"x":"1"}`)
	f.commit(map[string][]sink.Row{"a": {a1}})
	before := f.state("a")

	a1b := Row(t, "a", ID(1), t0, true, `{"x":"changed"}`)
	a2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"x":"2"}`)
	var many []sink.Row
	for i := range 600 {
		many = append(many, Row(t, "b", ID(int64(i+1)), t0.Add(time.Duration(i)*time.Second), false, `{"y":"b"}`))
	}
	next := before
	next.Watermark = state.Watermark{CreatedAt: a2.CreatedAt, ID: 2, Boundary: []string{"2"}}
	c := &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{
		{State: next, Rows: Spool(t, a1b, a2)},
		{State: state.New("b"), Rows: corruptSpool(t, many...)},
	}}
	if _, err := s.Commit(t.Context(), c); err == nil {
		t.Fatal("a commit whose spool cannot be read succeeded")
	}
	f.checkRows("a", a1)
	f.checkRows("b")
	if after := f.state("a"); !reflect.DeepEqual(after, before) {
		t.Errorf("a failed commit changed the state:\n got  %+v\n want %+v", after, before)
	}
	if got, _ := s.ReadState(t.Context(), []string{"b"}); len(got) != 0 {
		t.Errorf("a failed commit stored state %+v", got)
	}
}

func testCancelled(t *testing.T, s Sink) {
	f := newFixture(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.try(ctx, map[string][]sink.Row{"a": {Row(t, "a", ID(1), t0, false, `{}`)}}); err == nil {
		t.Fatal("a cancelled commit succeeded")
	}
	f.checkRows("a")
	if got, _ := s.ReadState(t.Context(), nil); len(got) != 0 {
		t.Errorf("a cancelled commit stored state %+v", got)
	}
}

func testConflict(t *testing.T, s Sink) {
	f := newFixture(t, s)
	r1 := Row(t, "a", ID(1), t0, false, `{"x":"1"}`)
	f.commit(map[string][]sink.Row{"a": {r1}})
	read := f.state("a") // what a second process read
	if read.Revision != 1 {
		t.Fatalf("revision after one commit = %d, want 1", read.Revision)
	}
	f.commit(map[string][]sink.Row{"a": {Row(t, "a", ID(2), t0.Add(time.Second), false, `{"x":"2"}`)}})
	committed := f.state("a")

	stale := read
	stale.Watermark = state.Watermark{CreatedAt: t0.Add(time.Hour), ID: 3}
	r3 := Row(t, "a", ID(3), t0.Add(time.Hour), false, `{"x":"3"}`)
	_, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{
		{State: stale, Rows: Spool(t, r3)},
		{State: state.New("fresh"), Rows: Spool(t, Row(t, "fresh", ID(1), t0, false, `{}`))},
	}})
	var ce *sink.ConflictError
	if !errors.Is(err, sink.ErrStateConflict) || !errors.As(err, &ce) || len(ce.Forms) != 1 || ce.Forms[0] != "a" {
		t.Fatalf("commit at a stale revision: %v, want a ConflictError naming form a", err)
	}
	if got := f.state("a"); !reflect.DeepEqual(got, committed) {
		t.Errorf("a refused commit changed the state:\n got  %+v\n want %+v", got, committed)
	}
	if len(f.rows("a")) != 2 || len(f.rows("fresh")) != 0 {
		t.Errorf("a refused commit wrote rows")
	}
	// A form never stored is at revision 0: a commit that read it before
	// another process created it is refused too.
	ghost := state.New("b")
	f.commit(map[string][]sink.Row{"b": {Row(t, "b", ID(1), t0, false, `{}`)}})
	if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{{State: ghost}}}); !errors.Is(err, sink.ErrStateConflict) {
		t.Errorf("commit of a form created meanwhile: %v, want ErrStateConflict", err)
	}
}

func testExact(t *testing.T, s Sink) {
	f := newFixture(t, s)
	maxID := int64(math.MaxInt64)
	wide := `{"amount":123456789012345678901234567890,"ratio":0.1000000000000000055511151231257827,"tiny":1e-400,"text":"ü \u2028 \"q\""}`
	r := Row(t, "a", &maxID, t0, false, wide)
	r.Raw = `{"id":9223372036854775807,"data":` + wide + `,"unknown_member":{"kept":[1,2.50,"x"]},"created_at":"2026-03-01T12:00:00.123Z"}`
	f.commit(map[string][]sink.Row{"a": {r}})
	f.checkRows("a", r)
	if got := f.rows("a"); len(got) == 1 && got[0].SubmissionKey != strconv.FormatInt(maxID, 10) {
		t.Errorf("key %s, want %d", got[0].SubmissionKey, maxID)
	}
}

// testManyContentKeyed commits a form of the older response form larger
// than a sink holds in memory at once (SQLite sorts such rows by key in
// runs of a few MiB), some submissions staged again at the end with
// is_spam changed: every row is stored once, as staged last.
func testManyContentKeyed(t *testing.T, s Sink) {
	f := newFixture(t, s)
	const n = 3000
	pad := strings.Repeat("x", 1000)
	var staged, again, want []sink.Row
	for i := range n {
		r := Row(t, "old", nil, t0.Add(-time.Duration(i)*time.Second), false, fmt.Sprintf(`{"n":%d,"pad":%q}`, i, pad))
		staged = append(staged, r)
		if i%100 == 7 {
			r.IsSpam = true
			again = append(again, r)
		}
		want = append(want, r)
	}
	res := f.commit(map[string][]sink.Row{"old": append(staged, again...)})
	if got := res["old"].Inserted; got != n {
		t.Errorf("inserted %d, want %d", got, n)
	}
	f.checkRows("old", want...)
	res = f.commit(map[string][]sink.Row{"old": want})
	wantCounts(t, "identical re-commit", res, sink.Result{"old": {}})
	f.checkRows("old", want...)
}

// testTwinStagedAgain stages, for a submission stored both under its id
// and as a content-keyed twin, the id and then the twin again, each as
// stored: the commit changes nothing and counts nothing.
func testTwinStagedAgain(t *testing.T, s Sink) {
	f := newFixture(t, s)
	at3 := t0.Truncate(time.Millisecond)
	byID := Row(t, "f", ID(104), at3, false, `{"a":"4"}`)
	byContent := Row(t, "f", nil, t0, false, `{"a":"4"}`)
	f.commit(map[string][]sink.Row{"f": {byID}})
	f.commit(map[string][]sink.Row{"f": {byContent}})
	f.checkRows("f", byID, byContent)
	res := f.commit(map[string][]sink.Row{"f": {byID, byContent}})
	wantCounts(t, "id and twin staged again", res, sink.Result{"f": {}})
	f.checkRows("f", byID, byContent)

	// Marked deleted upstream, then served again: restored, not new.
	_, at := f.mustCommitOne("f", nil, reconcile)
	f.checkRows("f", deleted(byID, at), deleted(byContent, at))
	res = f.commit(map[string][]sink.Row{"f": {byID, byContent}})
	wantCounts(t, "id and twin staged again, both marked", res, sink.Result{"f": {Restored: 2}})
	f.checkRows("f", byID, byContent)

	// Changed: updated, not new.
	spam := byContent
	spam.IsSpam = true
	res = f.commit(map[string][]sink.Row{"f": {byID, spam}})
	wantCounts(t, "id and changed twin staged again", res, sink.Result{"f": {Updated: 1}})
	f.checkRows("f", byID, spam)
}

// testLaterVersionTwin stages a submission in two versions (edited while
// its pages were read) of which only the later one is stored by content:
// the first version is new, and the twin of the later one is removed, as
// for a submission whose id is stored.
func testLaterVersionTwin(t *testing.T, s Sink) {
	f := newFixture(t, s)
	at3 := t0.Truncate(time.Millisecond)
	old := Row(t, "f", nil, t0, false, `{"a":"2"}`)
	f.commit(map[string][]sink.Row{"f": {old}})
	first := Row(t, "f", ID(106), at3, false, `{"a":"1"}`)
	later := Row(t, "f", ID(106), at3, false, `{"a":"2"}`)
	res := f.commit(map[string][]sink.Row{"f": {first, later}})
	wantCounts(t, "new, then edited into a stored twin", res, sink.Result{"f": {Inserted: 1, Updated: 1}})
	f.checkRows("f", later)
}
