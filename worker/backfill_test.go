package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/sink/memory"
	"github.com/formsync/formsync/testkit/enginetest"
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

// TestCountWindow: a dry run's window is counted on the pages it located,
// in either order, as many submissions as the window holds.
func TestCountWindow(t *testing.T) {
	t.Parallel()
	for _, order := range []apisim.Order{apisim.NewestFirst, apisim.OldestFirst} {
		sim := apisim.New(apisim.Options{Seed: 4, Variant: apisim.Newer, Order: order, Forms: []string{"a"}, SubmissionsPerForm: 60})
		subs := sim.Submissions("a")
		at := func(i int) time.Time { return subs[i].CreatedAt.Truncate(time.Millisecond) }
		early := func(i, j int) time.Time { return slices.MinFunc([]time.Time{at(i), at(j)}, time.Time.Compare) }
		late := func(i, j int) time.Time { return slices.MaxFunc([]time.Time{at(i), at(j)}, time.Time.Compare) }
		for name, win := range map[string]worker.Window{
			"whole form":   {},
			"since":        {Since: early(10, 49)},
			"until":        {Until: late(10, 49)},
			"both":         {Since: early(12, 47), Until: late(12, 47)},
			"one page":     {Since: early(30, 32), Until: late(30, 32)},
			"after it all": {Since: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)},
		} {
			t.Run(fmt.Sprint(order, "/", name), func(t *testing.T) {
				t.Parallel()
				want := 0
				for _, s := range subs {
					c := s.CreatedAt.Truncate(time.Millisecond)
					if (win.Since.IsZero() || !c.Before(win.Since)) && (win.Until.IsZero() || !c.After(win.Until)) {
						want++
					}
				}
				e := fakeEngine(t, sim, memory.New(), worker.Config{Forms: []string{"a"}, PageSize: 10})
				rep, err := e.Backfill(t.Context(), "a", worker.BackfillOptions{Window: win, DryRun: true})
				if err != nil {
					t.Fatal(err)
				}
				if rep.PagesToRead() == 0 {
					if want != 0 {
						t.Fatalf("the dry run located no page for a window of %d submissions", want)
					}
					return
				}
				got, ok := e.CountWindow(t.Context(), rep, win)
				if !ok || got != want {
					t.Errorf("CountWindow = %d, %v; want %d, true (pages %d to %d)", got, ok, want, rep.FirstPage, rep.LastPage)
				}
			})
		}
	}
}
