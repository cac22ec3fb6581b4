package sinktest

import (
	"errors"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/state"
)

// Ability is an optional ability of a sink (sink.Optional) that Run is
// told the sink has. Run checks that each ability it is told of works, and
// that the sink answers errors.ErrUnsupported for each other one: the
// flags a sink's contract test passes say what it does.
type Ability int

const (
	// Tunes: the sink says how it is best written to (sink.Tuner).
	Tunes Ability = iota + 1
	// Purges: the sink erases the copies it keeps of removed rows
	// (sink.Purger).
	Purges
	// ChecksViews: the sink tells from a form's state why its view could
	// not be made (sink.ViewChecker).
	ChecksViews
	// KeepsFiles: the sink keeps where each file of its stored rows
	// stands in the user's files store (sink.FileKeeper).
	KeepsFiles
)

// runOptional adds the checks of the optional abilities to Run.
func runOptional(run func(string, func(*testing.T, Sink)), has map[Ability]bool) {
	run("OptionalTuning", func(t *testing.T, s Sink) { testTuning(t, s, has[Tunes]) })
	run("OptionalPurge", func(t *testing.T, s Sink) { testPurge(t, s, has[Purges]) })
	run("OptionalViewProblem", func(t *testing.T, s Sink) { testViewProblem(t, s, has[ChecksViews]) })
	runFiles(run, has[KeepsFiles])
}

// testViewProblem asks about a form of a few fields: a sink that checks
// views finds nothing wrong with it.
func testViewProblem(t *testing.T, s Sink, has bool) {
	st := state.Form{FormID: "a", FieldNames: []string{"email", "name"}}
	problem, err := sink.Optional{Sink: s}.ViewProblem(st)
	switch {
	case !has && !errors.Is(err, errors.ErrUnsupported):
		t.Fatalf("a sink not said to check views (sinktest.ChecksViews) says %q, %v; want errors.ErrUnsupported", problem, err)
	case has && (err != nil || problem != ""):
		t.Fatalf("a sink said to check views (sinktest.ChecksViews) finds a problem with a two-field form: %q, %v", problem, err)
	}
}

func testTuning(t *testing.T, s Sink, has bool) {
	tn, err := sink.Optional{Sink: s}.Tuning()
	switch {
	case !has && !errors.Is(err, errors.ErrUnsupported):
		t.Fatalf("a sink not said to tune (sinktest.Tunes) says %+v, %v; want errors.ErrUnsupported", tn, err)
	case has && err != nil:
		t.Fatalf("a sink said to tune (sinktest.Tunes) says: %v", err)
	case has && tn.PartRows < 0:
		t.Errorf("tuning asks for parts of %d rows", tn.PartRows)
	}
}

// testPurge forgets a row and purges: the purge succeeds and the rows
// stay as the forget left them.
func testPurge(t *testing.T, s Sink, has bool) {
	f := newFixture(t, s)
	r1 := Row(t, "a", ID(1), t0, false, `{"email":"ada@example.com"}`)
	r2 := Row(t, "a", ID(2), t0.Add(time.Second), false, `{"email":"bob@example.com"}`)
	f.commit(map[string][]sink.Row{"a": {r1, r2}})
	f.mustCommitOne("a", nil, func(fc *sink.FormCommit) {
		fc.Forget = []string{r2.SubmissionKey}
		fc.State.Forgotten = forgotten(t, fc.State, r2)
	})
	err := sink.Optional{Sink: s}.Purge(t.Context())
	switch {
	case !has && !errors.Is(err, errors.ErrUnsupported):
		t.Fatalf("a sink not said to purge (sinktest.Purges) purged: %v; want errors.ErrUnsupported", err)
	case has && err != nil:
		t.Fatalf("a sink said to purge (sinktest.Purges): purge after a forget: %v", err)
	}
	f.checkRows("a", r1)
}
