package sqlite

import (
	"testing"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestLastCommitSaysWhatTheCommitDid: sync_state.last_commit holds what
// the commit that wrote the state did to the form's rows (the sum, when
// the commit lists the form twice), as BigQuery's sink stores it.
func TestLastCommitSaysWhatTheCommitDid(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	lastCommit := func() string {
		t.Helper()
		var got string
		if err := s.db.QueryRow(`SELECT last_commit FROM sync_state WHERE form_id = 'f'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	commit(t, s, sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t,
		row(t, "f", ptr(1), t0, false, `{"a":1}`), row(t, "f", ptr(2), t0, false, `{"a":2}`))})
	if got, want := lastCommit(), `{"inserted":2,"updated":0,"restored":0,"deleted":0,"forgotten":0}`; got != want {
		t.Errorf("after inserting 2 rows: last_commit %s, want %s", got, want)
	}

	res := commit(t, s,
		sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t, row(t, "f", ptr(3), t0, false, `{"a":3}`))},
		sink.FormCommit{State: stateOf("f", "a"), Rows: sinktest.Spool(t, row(t, "f", ptr(1), t0, true, `{"a":1}`))})
	if got, want := lastCommit(), `{"inserted":1,"updated":1,"restored":0,"deleted":0,"forgotten":0}`; got != want {
		t.Errorf("a commit listing the form twice: last_commit %s, want %s", got, want)
	}
	if got, want := res["f"], (sink.Counts{Inserted: 1, Updated: 1}); got != want {
		t.Errorf("a commit listing the form twice: counts %+v, want %+v", got, want)
	}

	commit(t, s, sink.FormCommit{State: stateOf("f", "a")})
	if got, want := lastCommit(), `{"inserted":0,"updated":0,"restored":0,"deleted":0,"forgotten":0}`; got != want {
		t.Errorf("a state-only commit: last_commit %s, want %s", got, want)
	}
}
