package worker_test

import (
	"cmp"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/testkit/apisim"
	"github.com/formsync/formsync/internal/testkit/bqfake"
	"github.com/formsync/formsync/internal/testkit/enginetest"
	"github.com/formsync/formsync/sink/bigquery"
)

// TestSyncThroughACommitJobFailingAfterItsCommit: BigQuery reports the
// commit's job as failed after its transaction committed. The run counts
// the rows it stored, once, with no conflict and no second commit of them,
// and the next run has nothing to do.
func TestSyncThroughACommitJobFailingAfterItsCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _, fake := bqSinkOnFake(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 120}, s)
	fake.FailNext(bqfake.OpScriptCommitted, http.StatusInternalServerError, "backendError")
	fake.ResetStats()
	rep := h.MustSync(ctx)
	if n := fake.Pending(bqfake.OpScriptCommitted); n != 0 {
		t.Fatal("the fault did not fire")
	}
	if fr := enginetest.FormReport(t, rep, "contact"); fr.Inserted != 120 || rep.Conflicts != 0 {
		t.Errorf("run report: inserted %d, conflicts %d; want 120, 0", fr.Inserted, rep.Conflicts)
	}
	if st := fake.Stats(); st.LoadJobs != 1 {
		t.Errorf("%d load jobs, want 1: the rows were loaded again", st.LoadJobs)
	}
	h.CheckTable(ctx, "contact", enginetest.Expected(t, h.Sim, "contact", apisim.Newer))

	rep = h.MustSync(ctx)
	if fr := enginetest.FormReport(t, rep, "contact"); fr.Inserted != 0 || fr.Updated != 0 {
		t.Errorf("next run: inserted %d, updated %d; want nothing", fr.Inserted, fr.Updated)
	}
}

// scaledClock runs time `scale` times faster than the wall clock, from
// the moment it is made: a fake BigQuery and a sink sharing it see jobs of
// tens of seconds run in a fraction of one.
func scaledClock(scale time.Duration) func() time.Time {
	start := time.Now()
	return func() time.Time { return start.Add(time.Since(start) * scale) }
}

// TestLargeFirstSyncIntoBigQueryCommitsInParts: a first sync larger than
// what one transaction reads within the job timeout. The reservation reads
// the whole form's staged rows in 30 s, the job timeout is 20 s: in one
// commit, the transaction is cancelled and nothing is stored, as it would
// be on every run; in parts of a third (the sink's tuning) each part's
// transaction ends in 10 s, and the sync completes in one run. The default
// run syncs 6,000 rows in parts of 2,000; with FORMSYNC_SLOW_TESTS=1,
// 300,000 in parts of bigquery.DefaultPartRows.
func TestLargeFirstSyncIntoBigQueryCommitsInParts(t *testing.T) {
	n, partRows := 6_000, 2_000
	if os.Getenv(enginetest.SlowTestsVar) == "1" {
		n, partRows = 300_000, 0
	}
	ctx := t.Context()
	now := scaledClock(100) // 20 s of job timeout: 200 ms
	fake := bqfake.Start(t, bqfake.Options{Now: now, RowsPerSecond: float64(n) / 30})
	s, err := bigquery.Open(ctx, bigquery.Config{
		Project: "test-project", Dataset: "formsync_test", Endpoint: fake.URL(),
		Now: now, JobTimeout: 20 * time.Second, PartRows: partRows,
		PollInterval: time.Millisecond, RetryInitial: time.Millisecond, MaxRetries: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h := enginetest.NewHarness(t, apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"big"}, SubmissionsPerForm: n}, s)
	h.Config.PageSize = 100
	started := time.Now()

	// Unsplit, the rows outlast the job timeout: the commit is cancelled
	// and nothing is stored.
	rep := h.Sync(ctx)
	if rep.CommitErr == nil || !strings.Contains(rep.CommitErr.Error(), "FORMSYNC_BQ_JOB_TIMEOUT") {
		t.Errorf("one commit of %d rows: %v; want it cancelled past the job timeout, naming FORMSYNC_BQ_JOB_TIMEOUT", n, rep.CommitErr)
	}
	if st := fake.Stats(); st.Cancelled != 1 {
		t.Errorf("%d jobs cancelled, want 1", st.Cancelled)
	}
	fake.ResetStats()

	h.Config = h.Config.TunedFor(s)
	if want := cmp.Or(partRows, bigquery.DefaultPartRows); h.Config.PartRows != want {
		t.Fatalf("tuned for BigQuery: PartRows %d, want %d", h.Config.PartRows, want)
	}
	rep = h.MustSync(ctx)
	fr := enginetest.FormReport(t, rep, "big")
	if fr.Parts != 3 || fr.Inserted != int64(n) {
		t.Errorf("in parts: %d parts, %d inserted; want 3 parts (the watermark after them), %d inserted", fr.Parts, fr.Inserted, n)
	}
	if st := fake.Stats(); st.Cancelled != 0 || st.LoadJobs != 3 {
		t.Errorf("in parts: %d jobs cancelled, %d load jobs; want 0 and 3", st.Cancelled, st.LoadJobs)
	}
	h.CheckTable(ctx, "big", enginetest.Expected(t, h.Sim, "big", apisim.Newer))
	if rep = h.MustSync(ctx); enginetest.FormReport(t, rep, "big").Staged != 0 {
		t.Errorf("the run after: staged %d rows, want none (the watermark moved)", enginetest.FormReport(t, rep, "big").Staged)
	}
	t.Logf("%d rows, twice, in %v", n, time.Since(started).Round(time.Millisecond))
}
