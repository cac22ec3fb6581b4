package bigquery

import (
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
)

// TestUnknownBoundStaysUnknown: a form whose largest stored id is not
// known (max_submission_id NULL, as in a dataset of a formsync before it)
// keeps it unknown through a commit that does not scan all of its rows,
// here one that carries only its state beside another form's rows. Taken
// from the batch's range (0), the bound would later spare a submission
// whose created_at moved the search outside the range, and store it twice.
func TestUnknownBoundStaysUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	bRows := []sink.Row{b.row(t, "b", 1, 1, false), b.row(t, "b", 2, 2, false), b.row(t, "b", 3, 3, false)}
	aRows := []sink.Row{b.row(t, "a", 10, 10, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("a", aRows), aRows}, formRows{formState("b", bRows), bRows})
	if _, err := b.fake.EditByHand(`UPDATE "test-project.formsync_test.sync_state" SET max_submission_id = NULL WHERE form_id = 'b'`); err != nil {
		t.Fatal(err)
	}

	// A new row of form a (above a's known bound: no scan outside the
	// batch), ten days on, commits with form b's state alone.
	aNew := []sink.Row{b.row(t, "a", 11, 10*24*3600, false)}
	b.mustCommit(t, b.t0.Add(241*time.Hour), formRows{formState("a", append(aRows, aNew...)), aNew}, formRows{state: readState(t, b.sink, "b")["b"]})

	// Submission 2 of form b is served again with a created_at ten days
	// later (an edit upstream): the same submission, updated in place.
	moved := b.row(t, "b", 2, 10*24*3600+2, false)
	st := readState(t, b.sink, "b")["b"]
	b.mustCommit(t, b.t0.Add(242*time.Hour), formRows{st, []sink.Row{moved}})
	checkRows(t, b.sink, "b", []sink.Row{bRows[0], moved, bRows[2]})
}
