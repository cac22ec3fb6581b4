package bigquery

import (
	"fmt"
	"sync"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/testkit/bqfake"
	"github.com/formsync/formsync/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// TestFourShardsAndABackfillWithTheEarlierTransactionAbortedMidScript:
// the four shards of a sharded run (worker.Shard) start on one tick, each
// with its own Sink, while a backfill re-reads every form and checkpoints
// as it goes, on a fake where BigQuery aborts the earlier of two
// overlapping transactions when it finishes, after its earlier statements
// ran and were billed (bqfake.Options.AbortEarlier). Every run finishes,
// and every form holds each submission once, with exact counts.
func TestFourShardsAndABackfillWithTheEarlierTransactionAbortedMidScript(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, bqfake.Options{PendingPolls: 2, AbortEarlier: true})
	var forms []string
	for i := range 8 {
		forms = append(forms, fmt.Sprintf("form%d", i))
	}
	h := enginetest.NewHarness(t, apisim.Options{Seed: 21, Variant: apisim.Newer, Forms: forms, SubmissionsPerForm: 60}, b.sink)

	// A harness per run, sharing the simulator, each on a Sink of its
	// own, as the pods of an Indexed Job and a backfill Job would be.
	run := func(forms []string) *enginetest.Harness {
		s := b.second(t)
		r := *h
		r.Sink, r.Config.Forms, r.Config.TmpDir = s, forms, t.TempDir()
		return &r
	}
	tick := make(chan struct{})
	var wg sync.WaitGroup
	covered := 0
	for i := range 4 {
		shard := worker.Shard(forms, i, 4)
		covered += len(shard)
		r := run(shard)
		wg.Go(func() {
			<-tick
			rep := r.Sync(ctx)
			if err := rep.Err(); err != nil {
				t.Errorf("shard %d: %v", i, err)
			}
		})
	}
	if covered != len(forms) {
		t.Fatalf("the shards cover %d forms of %d", covered, len(forms))
	}
	bf := run(forms)
	wg.Go(func() {
		<-tick
		e := bf.Engine()
		for _, f := range forms {
			if _, err := e.Backfill(ctx, f, worker.BackfillOptions{CheckpointRows: 20}); err != nil {
				t.Errorf("backfill of %s: %v", f, err)
			}
		}
	})
	close(tick)
	wg.Wait()

	st := readState(t, b.sink)
	for _, f := range forms {
		want := enginetest.Expected(t, h.Sim, f, apisim.Newer)
		h.CheckTable(ctx, f, want)
		if st[f].Rows != int64(len(want)) {
			t.Errorf("form %s: state counts %d rows, %d stored", f, st[f].Rows, len(want))
		}
	}
	stats := b.fake.Stats()
	t.Logf("%d transactions aborted, %d query jobs", stats.Aborted, stats.QueryJobs)
	if stats.Aborted == 0 {
		t.Errorf("no transaction was aborted: the runs did not overlap")
	}
}
