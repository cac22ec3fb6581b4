package worker_test

import (
	"cmp"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/bigquery"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
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

// TestFirstSyncOfAFormSpreadOverYearsIntoBigQuery: a low-volume form
// whose submissions fall on more distinct days than BigQuery lets one job
// write (4,000 daily partitions), though its rows are far fewer than a
// part. In one commit the fake refuses it ("Too many partitions produced
// by query"), as BigQuery does, on every run; tuned for BigQuery, the
// sync cuts parts by the days they span as well as by their rows, and
// the form is stored whole in one run.
func TestFirstSyncOfAFormSpreadOverYearsIntoBigQuery(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		// Thousands of days' partitions in the fake's SQLite, CPU bound:
		// under the race detector on a busy machine it outlasts the
		// sink's 2-minute timeout. The run without it checks the same.
		t.Skip("CPU-bound against the BigQuery fake: run without -race")
	}
	ctx := t.Context()
	s, _, fake := bqSinkOnFake(t)
	h := enginetest.NewHarness(t, apisim.Options{Seed: 11, Variant: apisim.Newer, Forms: []string{"old"}, SubmissionsPerForm: 5_000,
		Start: time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC), Spacing: 30 * time.Hour}, s)
	h.Config.PageSize = 100
	want := enginetest.Expected(t, h.Sim, "old", apisim.Newer)
	days := map[string]bool{}
	for _, r := range want {
		days[r.CreatedAt.UTC().Format(time.DateOnly)] = true
	}
	if len(days) <= 4_000 {
		t.Fatalf("setup: the form's rows fall on %d days, want more than 4,000", len(days))
	}

	h.Config = h.Config.TunedFor(s)
	if h.Config.PartDays != bigquery.PartDays {
		t.Fatalf("tuned for BigQuery: PartDays %d, want %d", h.Config.PartDays, bigquery.PartDays)
	}
	rep := h.MustSync(ctx)
	fr := enginetest.FormReport(t, rep, "old")
	if fr.Inserted != int64(len(want)) {
		t.Errorf("inserted %d, want %d", fr.Inserted, len(want))
	}
	if min := (len(days)+bigquery.PartDays-1)/bigquery.PartDays - 1; fr.Parts < min {
		t.Errorf("%d parts for rows on %d days, want at least %d", fr.Parts, len(days), min)
	}
	if st := fake.Stats(); st.LoadJobs < 5 {
		t.Errorf("%d load jobs, want one per part and the final commit (at least 5)", st.LoadJobs)
	}
	h.CheckTable(ctx, "old", want)

	// Unsplit by days (parts by rows only, as before), the one commit
	// writes every partition at once and BigQuery refuses it.
	s2, _, _ := bqSinkOnFake(t)
	h2 := enginetest.NewHarness(t, apisim.Options{Seed: 11, Variant: apisim.Newer, Forms: []string{"old"}, SubmissionsPerForm: 5_000,
		Start: time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC), Spacing: 30 * time.Hour}, s2)
	h2.Config.PageSize = 100
	h2.Config = h2.Config.TunedFor(s2)
	h2.Config.PartDays, h2.Config.CommitDays = 0, 0
	if rep := h2.Sync(ctx); rep.CommitErr == nil || !strings.Contains(rep.CommitErr.Error(), "Too many partitions") {
		t.Errorf("one commit of rows on %d days: %v; want BigQuery's refusal", len(days), rep.CommitErr)
	}
}

// TestFormsSpreadOverYearsOfTheirOwnCommitTogether: five forms whose rows
// each fall on 900 days of years of their own, under the 1,000 days a part
// may span, read in one run: their rows together span 4,500 days, past the
// 4,000 partitions one BigQuery job may write. The forms past the bound
// commit their rows as parts first; the final commit moves every
// watermark, and every table is exact. Without that, BigQuery refuses the
// final commit.
func TestFormsSpreadOverYearsOfTheirOwnCommitTogether(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		// Thousands of days' partitions in the fake's SQLite, CPU bound:
		// under the race detector on a busy machine it outlasts the
		// sink's 2-minute timeout. The run without it checks the same.
		t.Skip("CPU-bound against the BigQuery fake: run without -race")
	}
	ctx := t.Context()
	forms := []string{"f0", "f1", "f2", "f3", "f4"}
	setup := func(t *testing.T, commitDays bool) (*enginetest.Harness, *worker.Report) {
		s, _, _ := bqSinkOnFake(t)
		h := enginetest.NewHarness(t, apisim.Options{Seed: 21, Variant: apisim.Newer, Forms: forms, SubmissionsPerForm: 1}, s)
		h.Config.PageSize = 100
		for i, f := range forms {
			start := time.Date(2000+3*i, 1, 1, 12, 0, 0, 0, time.UTC)
			var subs []apisim.Submission
			for d := range 900 {
				subs = append(subs, apisim.Submission{ID: int64(i*1000 + d + 1), CreatedAt: start.AddDate(0, 0, d),
					Fields: json.RawMessage(`{"n":"` + strconv.Itoa(d) + `"}`), Files: json.RawMessage(`[]`)})
			}
			h.Sim.SetSubmissions(f, subs...)
		}
		h.Config = h.Config.TunedFor(s)
		if !commitDays {
			h.Config.CommitDays = 0
		}
		return h, h.Sync(ctx)
	}

	h, rep := setup(t, true)
	if rep.Err() != nil {
		t.Fatalf("sync: %v", rep.Err())
	}
	parts := 0
	for _, f := range forms {
		fr := enginetest.FormReport(t, rep, f)
		parts += fr.Parts
		if fr.Inserted != 900 || fr.Watermark.IsZero() {
			t.Errorf("form %s: %d inserted, watermark %v; want 900 and a watermark", f, fr.Inserted, fr.Watermark)
		}
		h.CheckTable(ctx, f, enginetest.Expected(t, h.Sim, f, apisim.Newer))
	}
	if parts == 0 {
		t.Error("no form committed its rows as a part first")
	}

	if _, rep := setup(t, false); rep.CommitErr == nil || !strings.Contains(rep.CommitErr.Error(), "Too many partitions") {
		t.Errorf("one final commit of rows on 4,500 days: %v; want BigQuery's refusal", rep.CommitErr)
	}
}
