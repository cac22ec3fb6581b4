package bigquery

import (
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/testkit/bqfake"
)

// TestEveryJobCarriesItsTimeout: every job the sink starts under a job id
// of its own (the views' DDL, the load, the commit's scripts, a recount
// and a removal) carries Config.JobTimeout as its jobTimeoutMs, so that
// BigQuery ends a transaction whose client died instead of letting it
// hold its tables against every later commit. Only the client's fast
// path (jobs.query: the reads, which hold no table) cannot carry one.
func TestEveryJobCarriesItsTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 7 * time.Minute
	b := setup(t, bqfake.Options{}, func(c *Config) { c.JobTimeout = timeout })
	f := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", f, "email"), f})
	b.mustCommit(t, b.t0.Add(2*time.Hour), formRows{formState("f", f, "email"), nil})
	if _, err := b.sink.Find(t.Context(), "f", sink.Match{Field: "email", Value: "user1@example.com"}); err != nil {
		t.Fatalf("Find: %v", err)
	}
	if err := b.sink.Recount(t.Context(), []string{"f"}); err != nil {
		t.Fatalf("Recount: %v", err)
	}
	rev := readState(t, b.sink, "f")["f"].Revision
	if _, err := b.sink.Remove(t.Context(), sink.Removal{FormID: "f", Revision: rev, Rows: true}); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	kinds := map[string]int{}
	for _, j := range b.fake.Jobs() {
		if j.Fast {
			kinds["fast"]++
			continue
		}
		kinds[j.Kind]++
		if j.Timeout != timeout {
			t.Errorf("%s job %s: jobTimeoutMs %v, want %v\n%s", j.Kind, j.ID, j.Timeout, timeout, j.Query)
		}
	}
	if kinds["load"] != 1 || kinds["query"] < 5 {
		t.Errorf("jobs seen: %v; want a load and the scripts", kinds)
	}
}
