package bigquery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/internal/sqlname"
	"github.com/formsync/formsync/state"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/testkit/sinktest"
)

// TestCancelledTransactionIsRunAgain: BigQuery cancels the commit's
// transaction for a concurrent update; the sink waits, re-reads the
// revisions (unchanged) and runs it again under a new job id.
func TestCancelledTransactionIsRunAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PendingPolls: 1})
	rows := []sink.Row{b.row(t, "f", 1, 1, false), b.row(t, "f", 2, 2, false)}
	b.fake.FailNext(bqfake.OpConcurrent, 0, "")
	b.fake.FailNext(bqfake.OpConcurrent, 0, "")
	res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	if res["f"] != (sink.Counts{Inserted: 2}) {
		t.Errorf("counts %+v", res["f"])
	}
	if a, r := b.sink.aborted.Load(), b.sink.rerun.Load(); a != 2 || r != 2 {
		t.Errorf("%d cancelled, %d rerun; want 2 and 2", a, r)
	}
	checkRows(t, b.sink, "f", rows)
	if got := readState(t, b.sink, "f")["f"]; got.Revision != 1 || got.Rows != 2 {
		t.Errorf("state %+v", got)
	}
}

// TestLongTransactionIsNotGivenUpOn: a transaction that loses to
// concurrent ones 40 times in a row (a backfill's long checkpoint among
// short commits) is run again while its time budget lasts, however many
// runs that takes; once the budget is spent, the commit fails saying so.
func TestLongTransactionIsNotGivenUpOn(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{}, func(c *Config) { c.RetryMaxInterval = 2 * time.Millisecond })
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	for range 40 {
		b.fake.FailNext(bqfake.OpConcurrent, 0, "")
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	if a := b.sink.aborted.Load(); a != 40 {
		t.Errorf("%d cancelled, want 40", a)
	}
	checkRows(t, b.sink, "f", rows)

	// A clock that moves a minute at each look: the default 30 minutes
	// are spent after about 15 runs.
	var mu sync.Mutex
	at := b.t0
	slow := setup(t, bqfake.Options{}, func(c *Config) {
		c.RetryMaxInterval = 2 * time.Millisecond
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); at = at.Add(time.Minute); return at }
	})
	for range 40 {
		slow.fake.FailNext(bqfake.OpConcurrent, 0, "")
	}
	_, err := slow.commit(t, slow.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	if !errors.Is(err, ErrConcurrentUpdate) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("commit past its retry time: %v, want ErrConcurrentUpdate", err)
	}
	if n := slow.fake.Pending(bqfake.OpConcurrent); n == 0 || n > 30 {
		t.Errorf("%d cancellations left, want the runs bounded by time (about 15 used)", n)
	}
}

// TestSerializationFailureIsRunAgain: BigQuery also reports a conflict
// between concurrent mutating DML on one table as "Could not serialize
// access to table ... due to concurrent update" (reason invalidQuery, like
// a genuinely invalid query); the transaction is rolled back, so the sink
// treats it as the other wording: it waits, re-reads the revisions and
// runs the transaction again.
func TestSerializationFailureIsRunAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PendingPolls: 1})
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	b.fake.FailNext(bqfake.OpSerialize, 0, "")
	res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	if res["f"] != (sink.Counts{Inserted: 1}) {
		t.Errorf("counts %+v", res["f"])
	}
	if a, r := b.sink.aborted.Load(), b.sink.rerun.Load(); a != 1 || r != 1 {
		t.Errorf("%d cancelled, %d rerun; want 1 and 1", a, r)
	}
	checkRows(t, b.sink, "f", rows)
	if got := readState(t, b.sink, "f")["f"]; got.Revision != 1 || got.Rows != 1 {
		t.Errorf("state %+v", got)
	}
}

// TestCancelledTransactionThenConflict: after the cancellation another
// process commits the form; the sink's re-read sees the moved revision and
// gives up with a ConflictError rather than run its stale state.
func TestCancelledTransactionThenConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{})
	other := b.second(t)
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	b.fake.FailNext(bqfake.OpConcurrent, 0, "")
	var once atomic.Bool
	remove := b.fake.OnStatement(func(kind string) {
		if kind == "SCRIPT" && once.CompareAndSwap(false, true) {
			if _, err := other.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0, Forms: []sink.FormCommit{{State: formState("f", nil)}}}); err != nil {
				t.Errorf("other commit: %v", err)
			}
		}
	})
	_, err := b.sink.Commit(t.Context(), &sink.Commit{SyncedAt: b.t0.Add(time.Hour), Forms: []sink.FormCommit{{State: formState("f", rows), Rows: sinktest.Spool(t, rows...)}}})
	remove()
	if !errors.Is(err, sink.ErrStateConflict) {
		t.Fatalf("err = %v, want a state conflict", err)
	}
	checkRows(t, b.sink, "f", nil)
}

// TestLostInsertResponseAttaches: the transaction's jobs.insert creates the
// job but its response is lost (503); the client retries the insert with
// the same id and gets 409; the sink attaches to the job instead of
// starting a second transaction.
func TestLostInsertResponseAttaches(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PendingPolls: 2})
	first := []sink.Row{b.row(t, "f", 0, 0, false)}
	// The first commit creates the form's view: the lost response is
	// that DDL job's.
	b.fake.FailNext(bqfake.OpQueryLost, http.StatusServiceUnavailable, "backendError")
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", first, "email"), first})
	if got := b.fake.Stats().DDL["formsync_test."+sqlname.ViewName("f")]; got != 1 {
		t.Errorf("view created %d times, want 1", got)
	}
	// The second one's is the transaction's.
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	b.fake.ResetStats()
	b.fake.FailNext(bqfake.OpQueryLost, http.StatusServiceUnavailable, "backendError")
	res := b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows, "email"), rows})
	if res["f"] != (sink.Counts{Inserted: 1}) {
		t.Errorf("counts %+v", res["f"])
	}
	rows = append(rows, first...)
	st := b.fake.Stats()
	if st.DML["formsync_test.submissions"] != 1 || st.DML["formsync_test.sync_state"] != 1 {
		t.Errorf("DML %v: the transaction ran more than once", st.DML)
	}
	checkRows(t, b.sink, "f", rows)
}

// TestPollingErrorsKeepTheSameJob: jobs.get failing while the transaction
// runs never starts a second transaction: the sink keeps polling the same
// job, and when polling keeps failing it gives up saying the job may still
// be running.
func TestPollingErrorsKeepTheSameJob(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PendingPolls: 2})
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	b.fake.ResetStats()
	for range 2 {
		// 429 without a reason: not retried by the client itself, so
		// the sink's own polling loop sees it.
		b.fake.FailNext(bqfake.OpJobsGet, http.StatusTooManyRequests, "")
	}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	st := b.fake.Stats()
	if st.DML["formsync_test.submissions"] != 1 {
		t.Errorf("DML %v", st.DML)
	}

	more := []sink.Row{b.row(t, "f", 2, 2, false)}
	b.fake.ResetStats()
	// The load job polls first; then every poll of the transaction fails.
	ok := false
	remove := b.fake.OnStatement(func(kind string) {
		if kind == "SCRIPT" && !ok {
			ok = true
			for range b.cfg.MaxRetries + 1 {
				b.fake.FailNext(bqfake.OpJobsGet, http.StatusTooManyRequests, "")
			}
		}
	})
	_, err := b.commit(t, b.t0.Add(2*time.Hour), formRows{formState("f", more), more})
	remove()
	if err == nil || !strings.Contains(err.Error(), "may still be running") {
		t.Fatalf("err = %v, want one saying the job may still be running", err)
	}
	// The helper's ReadState, Commit's, one transaction, and the read of
	// the states' last_commit (whether the transaction is in after all).
	if got := b.fake.Stats().QueryJobs; got != 4 {
		t.Errorf("%d query jobs, want 4: no second transaction", got)
	}
}

// TestShardsAndBackfillCommitConcurrently: four shards and a backfill, each
// with its own Sink on one dataset, commit at the same time, each in a loop
// of ReadState, commit with the revision read, retry on ConflictError.
// BigQuery (the fake) cancels overlapping transactions; the sinks run them
// again. The backfill re-reads rows the shards also commit. At the end
// every row is stored once and every form's row count is exact. Two shards
// of three rounds by default (four of six, 77 s with -race on two busy
// cores, with FORMSYNC_SLOW_TESTS=1).
func TestShardsAndBackfillCommitConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PendingPolls: 2})
	shards, rounds, perRound := 2, 3, 5
	if enginetest.SlowTests() {
		shards, rounds = 4, 6
	}
	formsOf := func(shard int) []string { return []string{fmt.Sprintf("s%d_a", shard), fmt.Sprintf("s%d_b", shard)} }
	var all []string
	for i := range shards {
		all = append(all, formsOf(i)...)
	}
	rowOf := func(form string, n int) sink.Row {
		// The same submission whoever reads it: ids by form and n.
		var f int
		fmt.Sscanf(form, "s%d", &f)
		return b.row(t, form, int64(f*1000+n), n, false)
	}
	type tally struct{ conflicts, spent int }
	var mu sync.Mutex
	var total tally
	want := map[string]map[string]sink.Row{}
	for _, f := range all {
		want[f] = map[string]sink.Row{}
	}

	worker := func(name string, forms []string, batch func(round int) map[string][]sink.Row) {
		cfg := b.cfg
		cfg.StagingTable = "_formsync_staging_" + name
		s, err := Open(t.Context(), cfg)
		if err != nil {
			t.Error(err)
			return
		}
		defer s.Close()
		var mine tally
		for round := range rounds {
			rows := batch(round)
			for attempt := 0; ; attempt++ {
				if attempt > 200 {
					t.Errorf("%s: round %d never committed", name, round)
					return
				}
				stored, err := s.ReadState(t.Context(), forms)
				if err != nil {
					t.Error(err)
					return
				}
				c := &sink.Commit{SyncedAt: b.t0.Add(time.Hour)}
				for _, f := range forms {
					st, ok := stored[f]
					if !ok {
						st = state.New(f)
					}
					for _, r := range rows[f] {
						st.Watermark = st.Watermark.Advance(r.CreatedAt, *r.SubmissionID, r.SubmissionKey)
					}
					c.Forms = append(c.Forms, sink.FormCommit{State: st, Rows: sinktest.Spool(t, rows[f]...)})
				}
				_, err = s.Commit(t.Context(), c)
				switch {
				case err == nil:
				case errors.Is(err, sink.ErrStateConflict):
					mine.conflicts++
					continue
				case errors.Is(err, ErrConcurrentUpdate):
					mine.spent++
					continue
				default:
					t.Errorf("%s: %v", name, err)
					return
				}
				break
			}
		}
		mu.Lock()
		total.conflicts += mine.conflicts
		total.spent += mine.spent
		mu.Unlock()
		t.Logf("%s: %d transactions cancelled (and run again: %d), %d state conflicts, %d commits whose retries ran out",
			name, s.aborted.Load(), s.rerun.Load(), mine.conflicts, mine.spent)
	}

	var wg sync.WaitGroup
	for i := range shards {
		batch := func(round int) map[string][]sink.Row {
			out := map[string][]sink.Row{}
			for _, f := range formsOf(i) {
				for n := range perRound {
					out[f] = append(out[f], rowOf(f, round*perRound+n))
				}
			}
			return out
		}
		for round := range rounds {
			for f, rs := range batch(round) {
				for _, r := range rs {
					want[f][r.SubmissionKey] = r
				}
			}
		}
		wg.Go(func() { worker(fmt.Sprintf("shard%d", i), formsOf(i), batch) })
	}
	// The backfill re-reads every form: rows the shards commit too, and
	// older ones only it finds.
	backfill := func(round int) map[string][]sink.Row {
		out := map[string][]sink.Row{}
		for _, f := range all {
			out[f] = []sink.Row{rowOf(f, round*perRound), rowOf(f, 500+round)}
		}
		return out
	}
	for round := range rounds {
		for f, rs := range backfill(round) {
			for _, r := range rs {
				want[f][r.SubmissionKey] = r
			}
		}
	}
	wg.Go(func() { worker("backfill", all, backfill) })
	wg.Wait()

	st := readState(t, b.sink)
	for _, f := range all {
		var rows []sink.Row
		for _, r := range want[f] {
			rows = append(rows, r)
		}
		checkRows(t, b.sink, f, rows)
		if st[f].Rows != int64(len(rows)) {
			t.Errorf("form %s: state counts %d rows, %d stored", f, st[f].Rows, len(rows))
		}
	}
	t.Logf("tally: %d transactions cancelled by BigQuery (fake), %d state conflicts re-read and retried, %d commits that spent their retries",
		b.fake.Stats().Aborted, total.conflicts, total.spent)
}

// TestJobTimeoutSaysSo: a job still running when Config.JobTimeout is up
// (queued behind other jobs, short of slots) is reported as a job that did
// not finish in time and may still commit: a classified, retryable *Error,
// not the bare "context deadline exceeded" of a caller that gave up, nor a
// status that could not be read (every poll read it: RUNNING).
func TestJobTimeoutSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PendingPolls: 1 << 30}, func(c *Config) { c.JobTimeout = 50 * time.Millisecond })
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	_, err := b.commit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})
	var be *Error
	if !errors.As(err, &be) || !Retryable(err) {
		t.Fatalf("err = %v, want a retryable *Error", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v: a job's timeout must not look like the caller's own deadline", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "did not finish within 50ms") || strings.Contains(msg, "could not be read") {
		t.Errorf("err = %v, want one saying the job did not finish within 50ms", err)
	}
}

// TestTimedOutJobIsCancelled: a transaction still running when
// Config.JobTimeout is up is cancelled, not left to run on. Left running,
// it would go on holding its tables, and BigQuery would cancel every later
// commit of the forms in it for a concurrent update until it ended.
func TestTimedOutJobIsCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{}, func(c *Config) { c.JobTimeout = 300 * time.Millisecond })
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	b.mustCommit(t, b.t0.Add(time.Hour), formRows{formState("f", rows), rows})

	// A commit of the state alone is one transaction, which never finishes
	// by itself.
	b.fake.SetPendingPolls(1 << 30)
	st := formState("f", rows)
	st.LastTotal = 5
	_, err := b.commit(t, b.t0.Add(2*time.Hour), formRows{state: st})
	if !Retryable(err) || !strings.Contains(fmt.Sprint(err), "did not finish within 300ms") {
		t.Fatalf("err = %v, want a retryable timeout", err)
	}
	if !strings.Contains(err.Error(), "asked BigQuery to cancel it") {
		t.Errorf("err = %v, want it to say the job was asked to stop", err)
	}
	if n := b.fake.Stats().Cancelled; n != 1 {
		t.Errorf("%d jobs cancelled, want 1", n)
	}
	if got := readState(t, b.sink, "f")["f"]; got.Revision != 1 || got.LastTotal != 1 {
		t.Errorf("state %+v: the cancelled transaction must not have applied", got)
	}

	// The next run's commit is not cancelled by the one that timed out.
	b.fake.SetPendingPolls(0)
	more := append(rows, b.row(t, "f", 2, 2, false))
	res := b.mustCommit(t, b.t0.Add(3*time.Hour), formRows{formState("f", more), more[1:]})
	if res["f"] != (sink.Counts{Inserted: 1}) {
		t.Errorf("counts %+v", res["f"])
	}
	if a := b.sink.aborted.Load(); a != 0 {
		t.Errorf("%d transactions cancelled for a concurrent update, want 0", a)
	}
	checkRows(t, b.sink, "f", more)
}

// TestStoppedRunLeavesItsJobBe: a run stopped (SIGTERM past the shutdown
// timeout) while its commit's job runs does not cancel the job, which may
// yet commit what the run read.
func TestStoppedRunLeavesItsJobBe(t *testing.T) {
	t.Parallel()
	b := setup(t, bqfake.Options{PendingPolls: 1 << 30})
	rows := []sink.Row{b.row(t, "f", 1, 1, false)}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := b.sink.Commit(ctx, &sink.Commit{SyncedAt: b.t0, Forms: []sink.FormCommit{{State: formState("f", rows)}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	if n := b.fake.Stats().Cancelled; n != 0 {
		t.Errorf("%d jobs cancelled, want 0: the run was stopped, the job was not late", n)
	}
}
