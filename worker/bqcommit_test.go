package worker_test

import (
	"net/http"
	"testing"

	"github.com/formsync/formsync/internal/testkit/apisim"
	"github.com/formsync/formsync/internal/testkit/bqfake"
	"github.com/formsync/formsync/internal/testkit/enginetest"
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
