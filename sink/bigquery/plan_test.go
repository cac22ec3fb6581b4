package bigquery

import (
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
)

// TestMergeJoinsOnEquality commits a 50,000-row checkpoint (a backfill's)
// over 50,000 stored rows and checks the plan SQLite makes of the fake's
// translation of the submissions MERGE: its ON clause (form_id and one
// match key per source row) is an equality join, run as an index search,
// not a scan of the table for every source row (what the former
// "key = k OR key = legacy_key" condition needed: BigQuery could only join
// that on form_id). The plan's shape does not depend on the size: 5,000
// rows by default, 50,000 with FORMSYNC_SLOW_TESTS=1 and without the race
// detector (30 s then, 90 s with it).
func TestMergeJoinsOnEquality(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000-row commits: skipped with -short")
	}
	t.Parallel()
	b := setup(t, bqfake.Options{})
	n := 5_000
	if enginetest.SlowTests() && !raceEnabled {
		n = 50_000
	}
	rows := make([]sink.Row, 0, n)
	for i := range n {
		r := b.row(t, "big", int64(i), i, false)
		rows = append(rows, r)
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("big", rows), rows})
	// The checkpoint again, every tenth row changed, so that the MERGE
	// has work to do.
	for i := 0; i < n; i += 10 {
		rows[i].IsSpam = true
	}
	res := b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("big", rows), rows})
	if res["big"] != (sink.Counts{Updated: int64(n / 10)}) {
		t.Errorf("counts %+v, want %d updated", res["big"], n/10)
	}
	plan := b.fake.Stats().MergePlan
	t.Logf("EXPLAIN QUERY PLAN of the MERGE join (%d source rows, %d stored):\n%s", n/10, n, plan)
	var search bool
	for _, line := range strings.Split(strings.TrimSpace(plan), "\n") {
		if strings.HasPrefix(line, "SEARCH") && strings.Contains(line, "INDEX") &&
			(strings.Contains(line, "submission_key=?") || strings.Contains(line, "match_key=?")) {
			search = true
		}
	}
	if !search {
		t.Errorf("the MERGE join is not an equality (index) join:\n%s", plan)
	}
	if got := readState(t, b.sink, "big")["big"].Rows; got != int64(n) {
		t.Errorf("rows = %d, want %d", got, n)
	}
}
