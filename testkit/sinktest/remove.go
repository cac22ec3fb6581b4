package sinktest

import (
	"errors"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
)

// runRemoval adds the checks of Remove and Recount to Run: every sink
// removes forms and recounts rows (sink.Sink).
func runRemoval(run func(string, func(*testing.T, Sink))) {
	run("RemoveDryRunChangesNothing", testRemoveDryRun)
	run("RemoveStateKeepsRows", testRemoveState)
	run("RemoveStateAndRows", testRemoveRows)
	run("RemoveKeepsTombstones", testRemoveTombstones)
	run("RemoveAtStaleRevisionRefused", testRemoveConflict)
	run("RecountAfterStateLost", testRecount)
}

// removeFixture stores two rows of form a, one marked deleted upstream,
// and one row of form b.
func removeFixture(t *testing.T, s Sink) (*fixture, []sink.Row) {
	f := newFixture(t, s)
	a1 := Row(t, "a", ID(1), t0, false, `{"x":"1"}`)
	a2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"x":"2"}`)
	b1 := Row(t, "b", ID(1), t0, false, `{"x":"1"}`)
	f.commit(map[string][]sink.Row{"a": {a1, a2}, "b": {b1}})
	_, at := f.mustCommitOne("a", []sink.Row{a1}, reconcile)
	return f, []sink.Row{a1, deleted(a2, at), b1}
}

func (f *fixture) remove(r sink.Removal) sink.Removed {
	f.t.Helper()
	got, err := f.s.Remove(f.t.Context(), r)
	if err != nil {
		f.t.Fatalf("remove %+v: %v", r, err)
	}
	return got
}

func (f *fixture) hasState(formID string) bool {
	f.t.Helper()
	got, err := f.s.ReadState(f.t.Context(), []string{formID})
	if err != nil {
		f.t.Fatal(err)
	}
	_, ok := got[formID]
	return ok
}

func testRemoveDryRun(t *testing.T, s Sink) {
	f, rows := removeFixture(t, s)
	before := f.state("a")
	got := f.remove(sink.Removal{FormID: "a", Revision: before.Revision, Rows: true, DryRun: true})
	if want := (sink.Removed{State: true, Rows: 1, Deleted: 1}); got != want {
		t.Errorf("dry run: %+v, want %+v", got, want)
	}
	if after := f.state("a"); after.Revision != before.Revision || after.LastSuccessAt != before.LastSuccessAt {
		t.Errorf("a dry run changed the state: revision %d, was %d", after.Revision, before.Revision)
	}
	f.checkRows("a", rows[0], rows[1])
	got = f.remove(sink.Removal{FormID: "never-synced", DryRun: true})
	if got != (sink.Removed{}) {
		t.Errorf("dry run of a form never synced: %+v, want nothing", got)
	}
}

func testRemoveState(t *testing.T, s Sink) {
	f, rows := removeFixture(t, s)
	got := f.remove(sink.Removal{FormID: "a", Revision: f.state("a").Revision})
	if want := (sink.Removed{State: true, Rows: 1, Deleted: 1}); got != want {
		t.Errorf("remove: %+v, want %+v", got, want)
	}
	if f.hasState("a") {
		t.Errorf("form a still has a state")
	}
	if n := len(f.rows("a")); n != 2 {
		t.Errorf("form a holds %d rows after a removal of its state alone, want 2", n)
	}
	f.checkRows("b", rows[2])
	// Again: nothing left to remove, and no error.
	if got := f.remove(sink.Removal{FormID: "a"}); got != (sink.Removed{Rows: 1, Deleted: 1}) {
		t.Errorf("second removal: %+v, want only the rows kept", got)
	}
}

func testRemoveRows(t *testing.T, s Sink) {
	f, rows := removeFixture(t, s)
	got := f.remove(sink.Removal{FormID: "a", Revision: f.state("a").Revision, Rows: true})
	if want := (sink.Removed{State: true, Rows: 1, Deleted: 1}); got != want {
		t.Errorf("remove --rows: %+v, want %+v", got, want)
	}
	if f.hasState("a") {
		t.Errorf("form a still has a state")
	}
	if n := len(f.rows("a")); n != 0 {
		t.Errorf("form a holds %d rows after a removal with its rows", n)
	}
	f.checkRows("b", rows[2])
	if st := f.state("b"); st.Rows != 1 {
		t.Errorf("form b's row_count is %d, want 1", st.Rows)
	}
	// The form synced again from nothing: a fresh state, its rows counted.
	f.commit(map[string][]sink.Row{"a": {rows[0]}})
	f.checkRows("a", rows[0])
}

func testRemoveTombstones(t *testing.T, s Sink) {
	f, rows := removeFixture(t, s)
	_, _ = f.mustCommitOne("a", nil, func(fc *sink.FormCommit) {
		fc.Forget = []string{rows[0].SubmissionKey}
		fc.State.Forgotten = forgotten(t, fc.State, rows[0])
		fc.State.LastError = "an error to be removed"
	})
	got := f.remove(sink.Removal{FormID: "a", Revision: f.state("a").Revision, Rows: true})
	if want := (sink.Removed{State: true, Tombstones: true, Forgotten: 1, Deleted: 1}); got != want {
		t.Errorf("remove --rows of a form with tombstones: %+v, want %+v", got, want)
	}
	st := f.state("a")
	if st.Forgotten == nil || st.Forgotten.Count != 1 || !st.Forgotten.Has(rows[0].SubmissionKey) {
		t.Fatalf("tombstones after the removal: %+v", st.Forgotten)
	}
	if !st.Watermark.IsZero() || st.LastError != "" || !st.LastSuccessAt.IsZero() || st.LastTotal != -1 || st.Rows != 0 || st.Deleted != 0 || st.Revision == 0 {
		t.Errorf("the state kept for the tombstones holds more than them: %+v", st)
	}
	if n := len(f.rows("a")); n != 0 {
		t.Errorf("form a holds %d rows after a removal with its rows", n)
	}
	// Configured again, the form syncs from nothing, and the forgotten
	// submission stays out.
	f.commit(map[string][]sink.Row{"a": {rows[0], Row(t, "a", ID(2), rows[1].CreatedAt, false, rows[1].Fields)}})
	f.checkRows("a", Row(t, "a", ID(2), rows[1].CreatedAt, false, rows[1].Fields))
}

func testRemoveConflict(t *testing.T, s Sink) {
	f, rows := removeFixture(t, s)
	stale := f.state("a").Revision - 1
	_, err := s.Remove(t.Context(), sink.Removal{FormID: "a", Revision: stale, Rows: true})
	if !errors.Is(err, sink.ErrStateConflict) {
		t.Fatalf("remove at a stale revision: %v, want ErrStateConflict", err)
	}
	if !f.hasState("a") {
		t.Errorf("a refused removal removed the state")
	}
	f.checkRows("a", rows[0], rows[1])
}

// testRecount loses a form's state while its rows stay (a removal of the
// state alone, as a person deleting the row by hand), commits the form
// again from a new state, and recounts: the counters count the rows.
func testRecount(t *testing.T, s Sink) {
	f, rows := removeFixture(t, s)
	f.remove(sink.Removal{FormID: "a", Revision: f.state("a").Revision})
	f.commit(map[string][]sink.Row{"a": {rows[0]}})
	if err := s.Recount(t.Context(), []string{"a", "b", "never-synced"}); err != nil {
		t.Fatalf("recount: %v", err)
	}
	f.checkRows("a", rows[0], rows[1])
	f.checkRows("b", rows[2])
	if f.hasState("never-synced") {
		t.Errorf("a recount made a state for a form that has none")
	}
}
