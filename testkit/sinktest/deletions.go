package sinktest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// commitOne commits one form's rows at its stored revision after edit has
// shaped the form's part of the commit, and returns the result and the
// commit's time.
func (f *fixture) commitOne(formID string, rows []sink.Row, edit func(*sink.FormCommit)) (sink.Result, time.Time, error) {
	f.t.Helper()
	f.clock = f.clock.Add(time.Minute)
	fc := sink.FormCommit{State: f.state(formID), Rows: Spool(f.t, rows...)}
	fc.State.LastSuccessAt = f.clock
	if edit != nil {
		edit(&fc)
	}
	res, err := f.s.Commit(f.t.Context(), &sink.Commit{SyncedAt: f.clock, Forms: []sink.FormCommit{fc}})
	return res, f.clock, err
}

func (f *fixture) mustCommitOne(formID string, rows []sink.Row, edit func(*sink.FormCommit)) (sink.Result, time.Time) {
	f.t.Helper()
	res, at, err := f.commitOne(formID, rows, edit)
	if err != nil {
		f.t.Fatalf("commit: %v", err)
	}
	return res, at
}

func reconcile(fc *sink.FormCommit) { fc.Reconcile = true }

func deleted(r sink.Row, at time.Time) sink.Row {
	r.DeletedAt = at
	return r
}

func testReconcile(t *testing.T, s Sink) {
	f := newFixture(t, s)
	var rows []sink.Row
	for i := range 5 {
		rows = append(rows, Row(t, "a", ID(int64(i+1)), t0.Add(time.Duration(i)*time.Second), false, `{"x":"v"}`))
	}
	other := Row(t, "b", ID(1), t0, false, `{"y":"b"}`)
	f.commit(map[string][]sink.Row{"a": rows, "b": {other}})

	// Submissions 3 and 5 are no longer served; 2 changed meanwhile.
	r2 := Row(t, "a", ID(2), rows[1].CreatedAt, true, `{"x":"changed"}`)
	res, at := f.mustCommitOne("a", []sink.Row{rows[0], r2, rows[3]}, reconcile)
	wantCounts(t, "reconcile", res, sink.Result{"a": {Updated: 1, Deleted: 2}})
	f.checkRows("a", rows[0], r2, deleted(rows[2], at), rows[3], deleted(rows[4], at))
	f.checkRows("b", other)

	// Again: the marks stand, with the time they were first made.
	res, _ = f.mustCommitOne("a", []sink.Row{rows[0], r2, rows[3]}, reconcile)
	wantCounts(t, "second reconcile", res, sink.Result{"a": {}})
	f.checkRows("a", rows[0], r2, deleted(rows[2], at), rows[3], deleted(rows[4], at))

	// A plain commit that stages submission 3 again (it came back):
	// deleted_at is cleared, nothing else changes.
	res, _ = f.mustCommitOne("a", []sink.Row{rows[2]}, nil)
	wantCounts(t, "served again", res, sink.Result{"a": {Restored: 1}})
	f.checkRows("a", rows[0], r2, rows[2], rows[3], deleted(rows[4], at))

	// Back, and changed: restored and updated.
	r5 := Row(t, "a", ID(5), rows[4].CreatedAt, false, `{"x":"five"}`)
	res, _ = f.mustCommitOne("a", []sink.Row{r5}, nil)
	wantCounts(t, "served again, changed", res, sink.Result{"a": {Updated: 1, Restored: 1}})
	f.checkRows("a", rows[0], r2, rows[2], rows[3], r5)

	// Nothing served any more.
	res, at = f.mustCommitOne("a", nil, reconcile)
	wantCounts(t, "everything deleted", res, sink.Result{"a": {Deleted: 5}})
	f.checkRows("a", deleted(rows[0], at), deleted(r2, at), deleted(rows[2], at), deleted(rows[3], at), deleted(r5, at))
	f.checkRows("b", other)
}

func testReconcileRekey(t *testing.T, s Sink) {
	f := newFixture(t, s)
	old := Row(t, "f", nil, t0, false, `{"a":"1"}`)
	gone := Row(t, "f", nil, t0.Add(time.Second), false, `{"a":"2"}`)
	f.commit(map[string][]sink.Row{"f": {old, gone}})
	// The form now answers with ids: the content-keyed row is the one
	// served with id 101 and must not be marked deleted.
	byID := Row(t, "f", ID(101), t0.Truncate(time.Millisecond), false, `{"a":"1"}`)
	res, at := f.mustCommitOne("f", []sink.Row{byID}, reconcile)
	wantCounts(t, "reconcile with re-key", res, sink.Result{"f": {Updated: 1, Deleted: 1}})
	k := byID
	k.CreatedAt, k.ContentKey = old.CreatedAt, old.ContentKey
	f.checkRows("f", k, deleted(gone, at))
}

func testReconcileFailure(t *testing.T, s Sink) {
	f := newFixture(t, s)
	r1 := Row(t, "a", ID(1), t0, false, `{"x":"1"}`)
	r2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"x":"2"}`)
	f.commit(map[string][]sink.Row{"a": {r1, r2}})
	before := f.state("a")
	var many []sink.Row
	for i := range 600 {
		many = append(many, Row(t, "a", ID(int64(1000+i)), t0.Add(time.Duration(i)*time.Minute), false, `{"x":"n"}`))
	}
	fc := sink.FormCommit{State: before, Rows: corruptSpool(t, many...), Reconcile: true}
	if _, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0.Add(time.Hour), Forms: []sink.FormCommit{fc}}); err == nil {
		t.Fatal("a reconcile whose spool cannot be read succeeded")
	}
	f.checkRows("a", r1, r2)
	if after := f.state("a"); !reflect.DeepEqual(after, before) {
		t.Errorf("a failed reconcile changed the state:\n got  %+v\n want %+v", after, before)
	}
}

// forgotten returns st's tombstones with r's keys added.
func forgotten(t *testing.T, st state.Form, rows ...sink.Row) *state.Forgotten {
	t.Helper()
	fg := st.Forgotten
	if fg == nil {
		var err error
		if fg, err = state.NewForgotten(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rows {
		fg = fg.With(1, r.SubmissionKey, r.ContentKey)
	}
	return fg
}

func testForget(t *testing.T, s Sink) {
	f := newFixture(t, s)
	r1 := Row(t, "a", ID(1), t0, false, `{"email":"ada@example.com"}`)
	r2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"email":"bob@example.com"}`)
	r3 := Row(t, "a", ID(3), t0.Add(2*time.Second), false, `{"email":"cy@example.com"}`)
	f.commit(map[string][]sink.Row{"a": {r1, r2, r3}})
	// 3 is deleted upstream before it is forgotten.
	_, at := f.mustCommitOne("a", []sink.Row{r1, r2}, reconcile)
	f.checkRows("a", r1, r2, deleted(r3, at))

	res, _ := f.mustCommitOne("a", nil, func(fc *sink.FormCommit) {
		fc.Forget = []string{r2.SubmissionKey, r3.SubmissionKey, "no-such-key"}
		fc.State.Forgotten = forgotten(t, fc.State, r2, r3)
	})
	wantCounts(t, "forget", res, sink.Result{"a": {Forgotten: 2}})
	f.checkRows("a", r1)
	st := f.state("a")
	if st.Forgotten == nil || st.Forgotten.Count != 2 || !st.Forgotten.Has(r2.SubmissionKey) || !st.Forgotten.Has(r2.ContentKey) {
		t.Fatalf("tombstones after forget: %+v", st.Forgotten)
	}

	// A commit staged before the forget (its state merged with the
	// stored one, as a retried commit's is) brings nothing back: not by
	// id, not by content key, not by a reconcile.
	byContent := Row(t, "a", nil, r2.CreatedAt, false, r2.Fields)
	res, _ = f.mustCommitOne("a", []sink.Row{r1, r2, r3, byContent}, nil)
	wantCounts(t, "forgotten rows staged again", res, sink.Result{"a": {}})
	f.checkRows("a", r1)
	res, _ = f.mustCommitOne("a", []sink.Row{r1, r2, r3}, reconcile)
	wantCounts(t, "reconcile after forget", res, sink.Result{"a": {}})
	f.checkRows("a", r1)
}

func testForgetConflict(t *testing.T, s Sink) {
	f := newFixture(t, s)
	r1 := Row(t, "a", ID(1), t0, false, `{"x":"1"}`)
	f.commit(map[string][]sink.Row{"a": {r1}})
	read := f.state("a")
	f.commit(map[string][]sink.Row{"a": {Row(t, "a", ID(2), t0.Add(time.Second), false, `{"x":"2"}`)}})
	fc := sink.FormCommit{State: read, Forget: []string{r1.SubmissionKey}}
	fc.State.Forgotten = forgotten(t, read, r1)
	_, err := s.Commit(t.Context(), &sink.Commit{SyncedAt: t0, Forms: []sink.FormCommit{fc}})
	if !errors.Is(err, sink.ErrStateConflict) {
		t.Fatalf("forget at a stale revision: %v, want ErrStateConflict", err)
	}
	if len(f.rows("a")) != 2 || f.state("a").Forgotten != nil {
		t.Errorf("a refused forget removed rows or stored tombstones")
	}
}

func testFind(t *testing.T, s Sink) {
	f := newFixture(t, s)
	r1 := Row(t, "a", ID(1), t0, false, `{"email":"x@example.com","n":1}`)
	r2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"email":"y@example.com","n":2}`)
	r3 := Row(t, "a", ID(3), t0.Add(2*time.Second), false, `{"Email":"x@example.com","other":"x@example.com"}`)
	r4 := Row(t, "a", nil, t0.Add(3*time.Second), false, `{"email":"x@example.com","it's":"q\"uote"}`)
	b1 := Row(t, "b", ID(1), t0, false, `{"email":"x@example.com"}`)
	f.commit(map[string][]sink.Row{"a": {r1, r2, r3, r4}, "b": {b1}})
	_, at := f.mustCommitOne("a", []sink.Row{r2, r3, r4}, reconcile) // 1 deleted upstream
	for _, tc := range []struct {
		name string
		m    sink.Match
		want []sink.Row
	}{
		{"by field", sink.Match{Field: "email", Value: "x@example.com"}, []sink.Row{deleted(r1, at), r4}},
		{"name is exact", sink.Match{Field: "Email", Value: "x@example.com"}, []sink.Row{r3}},
		{"value is exact", sink.Match{Field: "email", Value: "X@example.com"}, nil},
		{"numbers are not strings", sink.Match{Field: "n", Value: "1"}, nil},
		{"quotes in names and values", sink.Match{Field: "it's", Value: `q"uote`}, []sink.Row{r4}},
		{"by key", sink.Match{Keys: []string{"2", r4.SubmissionKey, "404"}}, []sink.Row{r2, r4}},
		{"by key or field", sink.Match{Keys: []string{"3"}, Field: "email", Value: "y@example.com"}, []sink.Row{r2, r3}},
		{"nothing", sink.Match{}, nil},
	} {
		got, err := s.Find(t.Context(), "a", tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: found %d rows, want %d", tc.name, len(got), len(tc.want))
			continue
		}
		for i := range got {
			if got[i].SubmissionKey != tc.want[i].SubmissionKey {
				t.Errorf("%s: row %d is %s, want %s", tc.name, i, got[i].SubmissionKey, tc.want[i].SubmissionKey)
			} else if d := RowDiff(tc.want[i], got[i]); d != "" {
				t.Errorf("%s: row %s (-want +got):\n%s", tc.name, got[i].SubmissionKey, d)
			}
		}
	}
}
