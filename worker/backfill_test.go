package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/testkit/apisim"
	"github.com/formsync/formsync/internal/testkit/enginetest"
	"github.com/formsync/formsync/worker"
)

// interruptedBackfill runs a backfill with opts that is stopped after its
// 15th page, once some checkpoints are in.
func interruptedBackfill(t *testing.T, e *worker.Engine, formID string, opts worker.BackfillOptions) {
	t.Helper()
	stop, cancel := context.WithCancel(t.Context())
	defer cancel()
	opts.Progress = func(p worker.Progress) {
		if p.Pages == 15 {
			cancel()
		}
	}
	if _, err := e.Backfill(stop, formID, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted backfill: %v", err)
	}
}

// TestBackfillOfAWindowEndingInAWholeSecondResumes: --until 2026-03-31
// (or a time in whole seconds) reaches to the last nanosecond of its unit;
// run again after an interruption, the same command resumes, whatever
// precision the sink keeps the progress in.
func TestBackfillOfAWindowEndingInAWholeSecondResumes(t *testing.T) {
	t.Parallel()
	for _, sk := range deletionSinks {
		t.Run(sk.name, func(t *testing.T) {
			ctx := t.Context()
			s := sk.open(t)
			h := enginetest.NewHarness(t, apisim.Options{Seed: 12, Variant: apisim.Newer, Forms: []string{"f"}, SubmissionsPerForm: 300}, s)
			subs := h.Sim.Submissions("f")
			// As the command takes --until in whole seconds.
			until := subs[280].CreatedAt.Truncate(time.Second).Add(time.Second - time.Nanosecond)
			opts := worker.BackfillOptions{Window: worker.Window{Since: subs[10].CreatedAt, Until: until}, CheckpointRows: 40}
			e := newEngine(t, h, client(t, h, nil))
			interruptedBackfill(t, e, "f", opts)
			rep, err := e.Backfill(ctx, "f", opts)
			if err != nil {
				t.Fatal(err)
			}
			if rep.ResumedFrom.IsZero() {
				t.Errorf("the same window, run again, started over (read %d rows) rather than resuming", rep.Staged)
			}
			if st, _ := s.ReadState(ctx, []string{"f"}); st["f"].Backfill != nil {
				t.Errorf("finished backfill left progress: %+v", st["f"].Backfill)
			}
		})
	}
}
